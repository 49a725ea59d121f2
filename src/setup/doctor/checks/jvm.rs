//! A JVM target: who it runs as, whether tools may attach to it, whether async-profiler
//! is there and which event it would get, frame pointers for perf, and its perf map.

use super::{check, Check, Status};
use crate::engines::diagnosis::{cpu_event, ignored_home_note};
use crate::runtime::jvm::{self, JvmOptions};
use crate::setup::doctor::facts::ProcessExtras;

/// What the JVM checks read.
pub(super) struct JvmFacts<'a> {
    pub pid: u32,
    pub cmdline: &'a str,
    pub extras: &'a ProcessExtras,
    /// async-profiler's release directory in the container, when found.
    pub asprof: Option<&'a str>,
    pub paranoid: Option<i32>,
    pub kptr_restrict: Option<i32>,
}

pub(super) fn jvm_checks(f: &JvmFacts<'_>) -> Vec<Check> {
    let process = &f.extras.process;
    let options: JvmOptions = jvm::options(process, f.cmdline);
    let mut checks = Vec::new();

    checks.push(match process.uid {
        Some(_) => check(
            "jvm_user",
            "JVM user",
            Status::Pass,
            format!(
                "{}: async-profiler and jcmd run as this user (the JVM accepts attach from no other)",
                process.user_text()
            ),
            None,
        ),
        None => check(
            "jvm_user",
            "JVM user",
            Status::Warn,
            "unknown (/proc/<pid>/status unreadable): tools cannot attach as the JVM's user",
            Some("run the doctor with a process devprof can inspect (--pid N)".into()),
        ),
    });

    checks.push(if options.attach_disabled {
        check(
            "jvm_attach",
            "attach allowed",
            Status::Fail,
            format!(
                "the JVM runs with -XX:+DisableAttachMechanism (from {}): neither async-profiler nor \
                 jcmd Compiler.perfmap can reach it, so Java frames stay unnamed",
                options.attach_flag_source.as_deref().unwrap_or("its options")
            ),
            Some("remove -XX:+DisableAttachMechanism from its options and recreate the container".into()),
        )
    } else {
        check(
            "jvm_attach",
            "attach allowed",
            Status::Pass,
            "no -XX:+DisableAttachMechanism: async-profiler and jcmd can attach",
            None,
        )
    });

    let ignored = ignored_home_note(process.env("ASYNC_PROFILER_HOME"), f.asprof);
    checks.push(match f.asprof {
        Some(home) => {
            let (event, note) = cpu_event(f.paranoid, process.cap_eff);
            let kernel_names = event == "cpu-clock" && f.kptr_restrict.is_some_and(|k| k > 0);
            check(
                "asprof",
                "async-profiler",
                if event == "cpu-clock" && !kernel_names {
                    Status::Pass
                } else {
                    Status::Warn
                },
                format!(
                    "found at {home} (devprof cpu uses it for this JVM): {note}{}{}",
                    if kernel_names {
                        "; kernel.kptr_restrict hides kernel symbol names"
                    } else {
                        ""
                    },
                    ignored.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
                ),
                (event != "cpu-clock" || kernel_names).then(|| {
                    "on the host: `sysctl kernel.perf_event_paranoid=1 kernel.kptr_restrict=0` (async-profiler's \
                     perf_events with kernel frames); --wall profiles need neither"
                        .to_string()
                }),
            )
        }
        None => check(
            "asprof",
            "async-profiler",
            Status::Warn,
            format!(
                "not in the container where only root may change it (asprof on PATH, /opt/*async-profiler*/): \
                 devprof cpu falls back to perf and the JVM's perf map, and --wall is not available{}",
                ignored.as_deref().map(|n| format!("; {n}")).unwrap_or_default()
            ),
            Some("unpack an async-profiler release on this host and pass --asprof DIR (DEVPROF_ASPROF), or add it to the image".into()),
        ),
    });

    checks.push(if options.preserve_frame_pointer {
        check(
            "jvm_frame_pointers",
            "PreserveFramePointer",
            Status::Pass,
            "on: perf walks whole Java stacks",
            None,
        )
    } else {
        check(
            "jvm_frame_pointers",
            "PreserveFramePointer",
            Status::Warn,
            "off: perf's Java stacks come out cut short (async-profiler does not need it)",
            Some("set JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer in the service's environment and recreate the container".into()),
        )
    });

    let map = format!("/tmp/perf-{}.map", f.pid);
    checks.push(match (process.perf_map, options.attach_disabled) {
        (true, _) => check(
            "jvm_perf_map",
            "perf map",
            Status::Pass,
            format!("{map} is present (perf names JIT frames from it; devprof refreshes it at the end of each perf window)"),
            None,
        ),
        (false, false) => check(
            "jvm_perf_map",
            "perf map",
            Status::Pass,
            format!("{map} not written yet: devprof cpu --engine perf asks the JVM for it (jcmd {} Compiler.perfmap) at the end of the window", f.pid),
            None,
        ),
        (false, true) => check(
            "jvm_perf_map",
            "perf map",
            Status::Warn,
            format!("{map} is absent and cannot be asked for (attach is disabled): perf leaves JIT frames unnamed"),
            Some("remove -XX:+DisableAttachMechanism".into()),
        ),
    });
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ProcessFacts;

    fn extras(env: &[(&str, &str)], perf_map: bool) -> ProcessExtras {
        ProcessExtras {
            process: ProcessFacts {
                uid: Some(1000),
                gid: Some(1000),
                user: Some("app".into()),
                cap_eff: Some(0),
                perf_map,
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn by_id<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).unwrap()
    }

    #[test]
    fn the_demo_jvm_as_it_runs() {
        let e = extras(&[("JAVA_TOOL_OPTIONS", "-XX:+PreserveFramePointer")], false);
        let checks = jvm_checks(&JvmFacts {
            pid: 7,
            cmdline: "java -Xmx64m -XX:+UseSerialGC -cp /app DemoJvm",
            extras: &e,
            asprof: Some("/opt/async-profiler"),
            paranoid: Some(2),
            kptr_restrict: Some(0),
        });
        assert_eq!(
            by_id(&checks, "jvm_user").detail.split(':').next(),
            Some("app (1000)")
        );
        assert_eq!(by_id(&checks, "jvm_attach").status, Status::Pass);
        let asprof = by_id(&checks, "asprof");
        assert_eq!(asprof.status, Status::Warn);
        assert!(
            asprof.detail.contains("ctimer")
                && asprof
                    .fix
                    .as_deref()
                    .unwrap()
                    .contains("perf_event_paranoid=1")
        );
        assert_eq!(by_id(&checks, "jvm_frame_pointers").status, Status::Pass);
        assert_eq!(by_id(&checks, "jvm_perf_map").status, Status::Pass);
    }

    #[test]
    fn attach_disabled_fails_and_frame_pointers_off_warns() {
        let e = extras(&[], false);
        let checks = jvm_checks(&JvmFacts {
            pid: 7,
            cmdline: "java -XX:+DisableAttachMechanism -jar besu.jar",
            extras: &e,
            asprof: None,
            paranoid: Some(1),
            kptr_restrict: Some(0),
        });
        let attach = by_id(&checks, "jvm_attach");
        assert_eq!(attach.status, Status::Fail);
        assert!(attach.detail.contains("from the command line"));
        assert_eq!(by_id(&checks, "asprof").status, Status::Warn);
        assert!(by_id(&checks, "asprof")
            .fix
            .as_deref()
            .unwrap()
            .contains("--asprof DIR"));
        assert_eq!(by_id(&checks, "jvm_frame_pointers").status, Status::Warn);
        assert_eq!(by_id(&checks, "jvm_perf_map").status, Status::Warn);
    }

    #[test]
    fn perf_events_open_to_the_jvm_pass() {
        let e = extras(&[], true);
        let checks = jvm_checks(&JvmFacts {
            pid: 7,
            cmdline: "java Main",
            extras: &e,
            asprof: Some("/opt/async-profiler"),
            paranoid: Some(1),
            kptr_restrict: Some(0),
        });
        assert_eq!(by_id(&checks, "asprof").status, Status::Pass);
        assert!(by_id(&checks, "jvm_perf_map").detail.contains("is present"));
    }
}
