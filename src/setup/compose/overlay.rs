//! The override file that gives chosen services what profiling needs (capabilities,
//! seccomp, tracefs, a profiling volume, jemalloc variables), leaving out what a service
//! already has. Pure: the engine lookups (which images are profiling images, whether the
//! engine knows CAP_PERFMON) are made by the caller.

use super::read::ComposeFile;
use serde_yaml::{Mapping, Value};

/// The capabilities to add, and why (said to the user when it escalates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityChoice {
    pub caps: Vec<String>,
    pub reasons: Vec<String>,
}

/// Least privilege: PERFMON and SYS_PTRACE; SYS_ADMIN in PERFMON's place only when asked,
/// when the engine rejects PERFMON (`perfmon` is its answer to a trial), or when the
/// kernel predates PERFMON (5.8).
pub fn choose_capabilities(
    sys_admin_asked: bool,
    perfmon: &Result<(), String>,
    kernel: &str,
    kernel_symbols: bool,
) -> CapabilityChoice {
    let mut reasons = Vec::new();
    let old_kernel = crate::engines::diagnosis::major_minor(kernel).is_some_and(|v| v < (5, 8));
    let monitor = if sys_admin_asked {
        reasons.push("SYS_ADMIN instead of PERFMON, as asked (--sys-admin); it grants much more than profiling needs".to_string());
        "SYS_ADMIN"
    } else if let Err(why) = perfmon {
        reasons.push(format!(
            "SYS_ADMIN instead of PERFMON: this engine does not know CAP_PERFMON ({}); SYS_ADMIN includes what PERFMON grants",
            why.trim()
        ));
        "SYS_ADMIN"
    } else if old_kernel {
        reasons.push(format!(
            "SYS_ADMIN instead of PERFMON: kernel {kernel} predates CAP_PERFMON (5.8), so only SYS_ADMIN opens perf events"
        ));
        "SYS_ADMIN"
    } else {
        "PERFMON"
    };
    let mut caps = vec![monitor.to_string(), "SYS_PTRACE".to_string()];
    if kernel_symbols {
        caps.push("SYSLOG".to_string());
        reasons.push("SYSLOG, as asked (--kernel-symbols): kernel symbol addresses while kptr_restrict hides them".to_string());
    }
    CapabilityChoice { caps, reasons }
}

/// What the override gives the chosen services.
#[derive(Debug, Clone, PartialEq)]
pub struct OverrideOptions {
    pub services: Vec<String>,
    pub caps: Vec<String>,
    pub privileged: bool,
    /// jemalloc heap profiling: `lg_prof_sample`.
    pub heap: Option<u32>,
    /// Node: NODE_OPTIONS gains the flag that makes V8 write its perf map.
    pub node: bool,
    /// The JVM profile: -XX:+PreserveFramePointer in JAVA_TOOL_OPTIONS.
    pub jvm: bool,
    /// (service or None for all chosen ones, image)
    pub images: Vec<(Option<String>, String)>,
    /// The named volume mounted at `PROFILING_DIR`.
    pub volume: String,
    /// A comment at the top (how it was made).
    pub header: String,
}

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const PROFILING_DIR: &str = "/profiling";

/// The jemalloc options for a service's dumps in the profiling volume.
pub fn jemalloc_conf(service: &str, lg_prof_sample: u32) -> String {
    format!(
        "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:{lg_prof_sample},lg_prof_interval:-1,prof_prefix:{PROFILING_DIR}/jeprof.{service}"
    )
}

/// JAVA_TOOL_OPTIONS with -XX:+PreserveFramePointer added to `old` (the JVM takes the last
/// setting of a flag); None when it is already on.
pub fn with_frame_pointers(old: Option<&str>) -> Option<String> {
    let old = old.unwrap_or("").trim();
    let last = old
        .split_whitespace()
        .rfind(|w| w.ends_with("PreserveFramePointer"));
    if last == Some("-XX:+PreserveFramePointer") {
        return None;
    }
    Some(
        format!("{old} -XX:+PreserveFramePointer")
            .trim_start()
            .to_string(),
    )
}

/// The override file's text, and notes for the user (what was left as it was and why).
pub fn make_override(
    file: &ComposeFile,
    options: &OverrideOptions,
) -> Result<(String, Vec<String>), String> {
    let mut notes = Vec::new();
    let mut services = Mapping::new();
    let mut volume_used = false;
    for name in &options.services {
        let service = file
            .services
            .iter()
            .find(|s| s.name == *name)
            .ok_or_else(|| {
                format!(
                    "no service '{name}' in the compose file (services: {})",
                    file.services
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
        let mut spec = Mapping::new();
        let image = options
            .images
            .iter()
            .find(|(s, _)| s.as_deref() == Some(name.as_str()))
            .or_else(|| options.images.iter().find(|(s, _)| s.is_none()));
        if let Some((_, image)) = image {
            spec.insert("image".into(), image.clone().into());
        }
        let caps: Vec<Value> = options
            .caps
            .iter()
            .filter(|c| {
                !service
                    .cap_add
                    .iter()
                    .any(|have| have.trim_start_matches("CAP_") == c.as_str())
            })
            .map(|c| Value::from(c.clone()))
            .collect();
        if !caps.is_empty() {
            spec.insert("cap_add".into(), Value::Sequence(caps));
        }
        if !service
            .security_opt
            .iter()
            .any(|o| o.replace(':', "=") == "seccomp=unconfined")
        {
            spec.insert(
                "security_opt".into(),
                Value::Sequence(vec!["seccomp=unconfined".into()]),
            );
        }
        if options.privileged {
            spec.insert("privileged".into(), true.into());
        }
        let mut volumes = Vec::new();
        if service.mount_targets.iter().any(|t| t == TRACEFS) {
            notes.push(format!(
                "{name}: {TRACEFS} is already mounted; left as it is"
            ));
        } else {
            // Read-only: perf only reads event ids and formats; a writable tracefs would
            // let the container's root turn tracing on and off for the whole host.
            volumes.push(Value::from(format!("{TRACEFS}:{TRACEFS}:ro")));
        }
        if service.mount_targets.iter().any(|t| t == PROFILING_DIR) {
            notes.push(format!(
                "{name}: something is already mounted at {PROFILING_DIR}; left as it is"
            ));
        } else {
            volumes.push(Value::from(format!("{}:{PROFILING_DIR}", options.volume)));
            volume_used = true;
        }
        if !volumes.is_empty() {
            spec.insert("volumes".into(), Value::Sequence(volumes));
        }
        let mut env = Mapping::new();
        if options.node {
            let flag = crate::runtime::NODE_PERF_MAP_FLAGS[1];
            match service.environment.get("NODE_OPTIONS") {
                Some(old)
                    if old.contains("--perf-basic-prof") || old.contains("--perf_basic_prof") =>
                {
                    notes.push(format!(
                        "{name}: NODE_OPTIONS already makes V8 write its perf map; left as it is"
                    ));
                }
                Some(old) if !old.trim().is_empty() => {
                    env.insert(
                        "NODE_OPTIONS".into(),
                        format!("{} {flag}", old.trim()).into(),
                    );
                }
                _ => {
                    env.insert("NODE_OPTIONS".into(), flag.into());
                }
            }
        }
        if options.jvm {
            let old = service
                .environment
                .get("JAVA_TOOL_OPTIONS")
                .map(String::as_str);
            match with_frame_pointers(old) {
                Some(value) => {
                    env.insert("JAVA_TOOL_OPTIONS".into(), value.into());
                }
                None => notes.push(format!(
                    "{name}: JAVA_TOOL_OPTIONS already has -XX:+PreserveFramePointer; left as it is"
                )),
            }
        }
        if let Some(lg) = options.heap {
            let conf = jemalloc_conf(name, lg);
            for var in ["_RJEM_MALLOC_CONF", "MALLOC_CONF"] {
                match service.environment.get(var) {
                    Some(old)
                        if crate::profile::heap::dumps::JemallocConf::parse(old).profiling() =>
                    {
                        notes.push(format!(
                            "{name}: {var} already turns jemalloc profiling on; left as it is"
                        ));
                    }
                    Some(old) => {
                        notes.push(format!("{name}: {var} replaced (it was \"{old}\")"));
                        env.insert(var.into(), conf.clone().into());
                    }
                    None => {
                        env.insert(var.into(), conf.clone().into());
                    }
                }
            }
        }
        if !env.is_empty() {
            spec.insert("environment".into(), Value::Mapping(env));
        }
        services.insert(name.clone().into(), Value::Mapping(spec));
    }
    let mut root = Mapping::new();
    if let Some(version) = &file.version {
        root.insert("version".into(), version.clone().into());
    }
    root.insert("services".into(), Value::Mapping(services));
    if volume_used {
        let mut volumes = Mapping::new();
        volumes.insert(
            options.volume.clone().into(),
            Value::Mapping(Mapping::new()),
        );
        root.insert("volumes".into(), Value::Mapping(volumes));
    }
    let body = serde_yaml::to_string(&Value::Mapping(root)).map_err(|e| e.to_string())?;
    let header: String = options.header.lines().map(|l| format!("# {l}\n")).collect();
    Ok((format!("{header}{body}"), notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::compose::read::tests::{vars, DEMO};
    use crate::setup::compose::read::{parse, parse_env_file};

    const EXAMPLE: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/compose/examples/devnet.yml"
    ));
    const EXAMPLE_ENV: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/compose/examples/.env"
    ));

    #[test]
    fn the_jvm_profile_adds_frame_pointers_to_what_is_there() {
        assert_eq!(
            with_frame_pointers(None).as_deref(),
            Some("-XX:+PreserveFramePointer")
        );
        assert_eq!(
            with_frame_pointers(Some("-Xmx2g -XX:-PreserveFramePointer")).as_deref(),
            Some("-Xmx2g -XX:-PreserveFramePointer -XX:+PreserveFramePointer")
        );
        assert_eq!(
            with_frame_pointers(Some("-XX:+PreserveFramePointer -Xss1m")),
            None
        );
    }

    #[test]
    fn override_for_the_demo_devnet_adds_only_what_is_missing() {
        let file = parse(DEMO, &vars(&[])).unwrap();
        let choice = choose_capabilities(
            false,
            &Err("invalid CapAdd: unknown capability: \"CAP_PERFMON\"".into()),
            "6.18.44",
            false,
        );
        assert_eq!(choice.caps, vec!["SYS_ADMIN", "SYS_PTRACE"]);
        assert!(choice.reasons[0].contains("does not know CAP_PERFMON"));
        let (text, notes) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["demo-seq".into(), "demo-rpc".into()],
                caps: choice.caps,
                privileged: false,
                heap: Some(19),
                node: false,
                jvm: false,
                images: vec![],
                volume: "devprof-profiling".into(),
                header: "made by devprof".into(),
            },
        )
        .unwrap();
        assert!(text.starts_with("# made by devprof\n"));
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let seq = &v["services"]["demo-seq"];
        // demo.yml already has both capabilities, seccomp, tracefs, /profiling and
        // jemalloc profiling on.
        assert_eq!(seq, &Value::Mapping(Mapping::new()), "{text}");
        assert!(
            v.get("volumes").is_none(),
            "no service needs the profiling volume"
        );
        assert!(notes.iter().any(|n| n == "demo-seq: _RJEM_MALLOC_CONF already turns jemalloc profiling on; left as it is"), "{notes:?}");
        assert!(notes
            .iter()
            .any(|n| n.contains("/sys/kernel/tracing is already mounted")));

        // With profiling turned off in the demo's settings, --heap turns it on.
        let off = parse(DEMO, &vars(&[("JEMALLOC_PROFILING", "false")])).unwrap();
        let (text, notes) = make_override(
            &off,
            &OverrideOptions {
                services: vec!["demo-rpc".into()],
                caps: vec!["SYS_ADMIN".into(), "SYS_PTRACE".into()],
                privileged: false,
                heap: Some(19),
                node: false,
                jvm: false,
                images: vec![],
                volume: "devprof-profiling".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let rpc = &v["services"]["demo-rpc"];
        assert_eq!(
            rpc["environment"]["_RJEM_MALLOC_CONF"].as_str().unwrap(),
            "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:19,lg_prof_interval:-1,prof_prefix:/profiling/jeprof.demo-rpc"
        );
        assert_eq!(
            rpc["environment"]["MALLOC_CONF"],
            rpc["environment"]["_RJEM_MALLOC_CONF"]
        );
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("demo-rpc: MALLOC_CONF replaced (it was \"prof:false,")),
            "{notes:?}"
        );
    }

    #[test]
    fn node_profile_adds_the_perf_map_flag_to_node_options_once() {
        // demo-js already has the flag (left alone); a service without NODE_OPTIONS (here
        // demo-py, standing in for any) gets it.
        let file = parse(DEMO, &vars(&[])).unwrap();
        let (text, notes) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["demo-js".into(), "demo-py".into()],
                caps: vec!["PERFMON".into()],
                privileged: false,
                heap: None,
                node: true,
                jvm: false,
                images: vec![],
                volume: "devprof-profiling".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        assert!(v["services"]["demo-js"].get("environment").is_none());
        assert!(notes.iter().any(
            |n| n == "demo-js: NODE_OPTIONS already makes V8 write its perf map; left as it is"
        ));
        assert_eq!(
            v["services"]["demo-py"]["environment"]["NODE_OPTIONS"],
            "--perf-basic-prof-only-functions"
        );
    }

    #[test]
    fn override_for_the_interpolated_example() {
        let env = parse_env_file(EXAMPLE_ENV);
        let lookup = |k: &str| env.get(k).cloned();
        let file = parse(EXAMPLE, &lookup).unwrap();
        let node = file.services.iter().find(|s| s.name == "node").unwrap();
        assert_eq!(
            node.image.as_deref(),
            Some("devprof-demo-node:latest"),
            "${{NODE_IMAGE:-...}} default"
        );
        assert_eq!(
            node.environment["DEMO_WORKLOADS"], env["NODE_WORKLOADS"],
            "${{NODE_WORKLOADS}} from .env"
        );
        let metrics = file.services.iter().find(|s| s.name == "metrics").unwrap();
        assert_eq!(
            metrics.image.as_deref(),
            Some(env["METRICS_IMAGE"].as_str())
        );
        assert!(
            parse(EXAMPLE, &|_| None)
                .unwrap_err()
                .contains("METRICS_IMAGE"),
            "required variable"
        );

        let choice = choose_capabilities(false, &Ok(()), "6.1.0", true);
        assert_eq!(choice.caps, vec!["PERFMON", "SYS_PTRACE", "SYSLOG"]);
        let (text, _) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["node".into()],
                caps: choice.caps,
                privileged: false,
                heap: None,
                node: false,
                jvm: false,
                images: vec![
                    (Some("node".into()), "op-reth:profiling".into()),
                    (None, "other:1".into()),
                ],
                volume: "devprof-profiling".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        let node = &v["services"]["node"];
        assert_eq!(node["image"], "op-reth:profiling");
        assert_eq!(
            node["cap_add"],
            serde_yaml::from_str::<Value>("[PERFMON, SYS_PTRACE, SYSLOG]").unwrap()
        );
        assert_eq!(node["security_opt"][0], "seccomp=unconfined");
        // Regression: the host's tracefs was mounted read-write.
        assert_eq!(
            node["volumes"][0],
            "/sys/kernel/tracing:/sys/kernel/tracing:ro"
        );
        assert_eq!(node["volumes"][1], "devprof-profiling:/profiling");
        assert!(node.get("environment").is_none(), "no --heap");
        assert!(v["volumes"].get("devprof-profiling").is_some());
        assert!(v["services"].get("metrics").is_none());
        assert!(make_override(
            &file,
            &OverrideOptions {
                services: vec!["nope".into()],
                caps: vec![],
                privileged: false,
                heap: None,
                node: false,
                jvm: false,
                images: vec![],
                volume: "v".into(),
                header: String::new()
            }
        )
        .unwrap_err()
        .contains("services: node, metrics"));
    }

    #[test]
    fn version_is_carried_over_and_old_kernels_need_sys_admin() {
        let file = parse("version: '3.8'\nservices:\n  a:\n    image: x\n", &|_| None).unwrap();
        assert_eq!(file.version.as_deref(), Some("3.8"));
        let (text, _) = make_override(
            &file,
            &OverrideOptions {
                services: vec!["a".into()],
                caps: vec!["PERFMON".into()],
                privileged: true,
                heap: None,
                node: false,
                jvm: false,
                images: vec![],
                volume: "v".into(),
                header: String::new(),
            },
        )
        .unwrap();
        let v: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(v["version"], "3.8");
        assert_eq!(v["services"]["a"]["privileged"], true);
        let choice = choose_capabilities(false, &Ok(()), "5.4.0-150-generic", false);
        assert_eq!(choice.caps[0], "SYS_ADMIN");
        assert!(choice.reasons[0].contains("predates"));
        assert_eq!(
            choose_capabilities(true, &Ok(()), "6.1", false).caps[0],
            "SYS_ADMIN"
        );
        assert!(parse("a: 1\n", &|_| None).unwrap_err().contains("services"));
    }
}
