//! Whether perf may open events on the target process (a trial before the window),
//! which sampling event the CPU offers, and — when perf is denied — exactly what is missing
//! and how to grant it, from the container's facts. Parsers are pure and unit-tested; the
//! trial runs through a `ContainerShell`.

use super::tool::PerfTool;
use crate::docker::probe::{ContainerFacts, CAP_SYS_PTRACE};
use crate::docker::{ContainerShell, ExecOutput};
use crate::error::{Error, Result};

/// How `perf stat -x,` reported one event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventStatus {
    Counted(f64),
    NotSupported,
    NotCounted,
}

/// Parses the CSV lines of `perf stat -x,` (value,unit,event,...).
pub fn parse_stat_csv(text: &str) -> Vec<(String, EventStatus)> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() < 3 || fields[2].is_empty() {
                return None;
            }
            let status = match fields[0] {
                "<not supported>" => EventStatus::NotSupported,
                "<not counted>" => EventStatus::NotCounted,
                v => EventStatus::Counted(v.parse().ok()?),
            };
            Some((fields[2].to_string(), status))
        })
        .collect()
}

use crate::text::first_error_line;
pub use crate::text::is_permission_error;

/// perf could not lock memory for its ring buffer (`Permission error mapping pages`).
pub fn is_mlock_error(stderr: &str) -> bool {
    stderr.contains("mapping pages") || stderr.contains("perf_event_mlock_kb")
}

/// What is missing for perf_event_open, and how to grant each piece.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub missing: Vec<String>,
    pub fixes: Vec<String>,
}

/// Explains a denied perf_event_open from the container's capabilities, seccomp mode and
/// the kernel's paranoid level.
pub fn diagnose_denial(facts: &ContainerFacts) -> Denial {
    let mut missing = Vec::new();
    let mut fixes = Vec::new();
    if !facts.may_monitor() {
        missing.push("capability CAP_PERFMON (or CAP_SYS_ADMIN)".to_string());
        fixes.push(
            "add the capability: compose `cap_add: [PERFMON, SYS_PTRACE]`, or `docker run --cap-add PERFMON --cap-add SYS_PTRACE`; \
             an engine that rejects PERFMON as unknown (Docker 20.10 builds without it) needs SYS_ADMIN in its place"
                .to_string(),
        );
    }
    if facts.seccomp == Some(2) {
        missing.push(
            "a seccomp profile that allows perf_event_open (the default one blocks it)".to_string(),
        );
        fixes.push(
            "relax seccomp: compose `security_opt: [seccomp=unconfined]`, or `docker run --security-opt seccomp=unconfined`"
                .to_string(),
        );
    }
    if let Some(level) = facts.paranoid.filter(|l| *l > 1) {
        if !facts.may_monitor() {
            missing.push(format!(
                "kernel.perf_event_paranoid is {level} (profiling needs <= 1 without CAP_PERFMON)"
            ));
            fixes.push("on the Docker host: `sudo sysctl kernel.perf_event_paranoid=1` (or grant CAP_PERFMON)".to_string());
        }
    }
    if missing.is_empty() {
        if facts.has_cap(CAP_SYS_PTRACE) {
            missing.push(
                "a permission no capability grants here (LSM policy or user namespace)".to_string(),
            );
            fixes.push("as a last resort run the container `privileged: true` (this grants every capability)".to_string());
        } else {
            missing.push(
                "capability CAP_SYS_PTRACE (to inspect a process of another user)".to_string(),
            );
            fixes.push(
                "add it: compose `cap_add: [SYS_PTRACE]`, or `docker run --cap-add SYS_PTRACE`"
                    .to_string(),
            );
        }
    }
    Denial { missing, fixes }
}

/// The error for a perf command that failed: a denial explained from the container's
/// facts when perf says it was not permitted, else perf's own words.
pub fn failure(container: &str, step: &str, stderr: &str, facts: &ContainerFacts) -> Error {
    let detail = first_error_line(stderr);
    if is_permission_error(stderr) {
        let denial = diagnose_denial(facts);
        Error::PerfDenied {
            container: container.to_string(),
            detail,
            missing: denial.missing,
            fixes: denial.fixes,
        }
    } else {
        Error::PerfFailed {
            container: container.to_string(),
            step: step.to_string(),
            detail,
        }
    }
}

/// The sampling event to record: cycles where the CPU's PMU counts it, cpu-clock otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub event: String,
    /// Notes for the summary (fallbacks, sysctl changes).
    pub notes: Vec<String>,
}

/// How long the trial counts. A denial comes when perf opens its events, before any
/// time; the time is for cycles to count where a PMU may count them (an idle target counts
/// none, and then cpu-clock is sampled). Where no PMU in sysfs names a cycles event (no PMU
/// at all, as on this project's CI VM) the trial only opens its events: a PMU that names
/// cycles otherwise and counts them then has a 10 ms trial, which an idle target may pass
/// with cpu-clock.
fn trial_seconds(facts: &ContainerFacts) -> &'static str {
    if facts.pmu_cycles {
        "0.1"
    } else {
        "0.01"
    }
}

/// `perf stat` counting cpu-clock and cycles on `pid` for a moment: the access trial.
fn trial_argv(perf_path: &str, facts: &ContainerFacts, pid: u32) -> Vec<String> {
    let pid_text = pid.to_string();
    [
        perf_path,
        "stat",
        "-x,",
        "-e",
        "cpu-clock",
        "-e",
        "cycles",
        "-p",
        &pid_text,
        "--",
        "sleep",
        trial_seconds(facts),
    ]
    .map(str::to_string)
    .to_vec()
}

/// Checks, before the capture window, that perf may open events on `pid`, and picks the
/// event.
pub async fn check_access<S: ContainerShell>(
    shell: &S,
    perf_path: &str,
    facts: &ContainerFacts,
    pid: u32,
) -> Result<Access> {
    let argv = trial_argv(perf_path, facts, pid);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    // Host-wide sysctls are never changed here: the capture lowers them only when asked
    // (--allow-sysctl), and restores them.
    let out = shell.run(&argv).await?;
    judge_trial(shell.container(), &out, facts, pid)
}

/// Ends perf's answer to its version query in `version_and_trial`'s output, where the
/// query succeeded.
const VERSION_ANSWERED: &str = "@@devprof-version-answered";

/// Ends the version query's part of `version_and_trial`'s output: the trial's follows.
const TRIAL_FOLLOWS: &str = "@@devprof-trial-follows";

/// perf's version query and its access trial in one exec (on a loaded host an exec costs
/// its CPU more than its wait), for the perf tried first. Ok(None) when that perf does not
/// answer its version: the caller then asks each candidate (`find_perf`) and tries the one
/// that answers (`check_access`).
pub async fn version_and_trial<S: ContainerShell>(
    shell: &S,
    perf_path: &str,
    facts: &ContainerFacts,
    pid: u32,
) -> Result<Option<(PerfTool, Access)>> {
    let script = format!(
        "\"$1\" version --build-options 2>/dev/null && echo {VERSION_ANSWERED}; \
         echo {TRIAL_FOLLOWS}; exec \"$@\""
    );
    let trial = trial_argv(perf_path, facts, pid);
    let mut argv = vec!["sh", "-c", &script, "sh"];
    argv.extend(trial.iter().map(String::as_str));
    let out = shell.run(&argv).await?;
    let Some((answer, _)) = out.stdout.split_once(&format!("{TRIAL_FOLLOWS}\n")) else {
        return Ok(None);
    };
    let Some(answer) = answer.strip_suffix(&format!("{VERSION_ANSWERED}\n")) else {
        return Ok(None);
    };
    let Some(perf) = PerfTool::from_build_options(perf_path, answer) else {
        return Ok(None);
    };
    Ok(Some((
        perf,
        judge_trial(shell.container(), &out, facts, pid)?,
    )))
}

/// The trial's outcome: a denial or failure explained, else the event to sample and notes.
fn judge_trial(
    container: &str,
    out: &ExecOutput,
    facts: &ContainerFacts,
    pid: u32,
) -> Result<Access> {
    if !out.success() {
        return Err(failure(
            container,
            &format!("trial `perf stat -p {pid}`"),
            &out.stderr,
            facts,
        ));
    }
    let stats = parse_stat_csv(&out.stderr);
    let cycles_ok = stats.iter().any(|(name, status)| {
        name.starts_with("cycles") && matches!(status, EventStatus::Counted(_))
    });
    Ok(access_with(cycles_ok, facts))
}

/// What a trial that passed answers: cycles where they counted, else cpu-clock; and the
/// notes.
fn access_with(cycles_ok: bool, facts: &ContainerFacts) -> Access {
    let mut notes = Vec::new();
    let event = if cycles_ok {
        "cycles".to_string()
    } else {
        notes.push(
            "the CPU's PMU does not count cycles here; sampling with cpu-clock instead".to_string(),
        );
        "cpu-clock".to_string()
    };
    if facts.kptr_restrict.is_some_and(|k| k > 0) {
        notes.push(format!(
            "kernel.kptr_restrict is {}: kernel frames will show as [unknown] (on the host: `sudo sysctl kernel.kptr_restrict=0`)",
            facts.kptr_restrict.unwrap_or_default()
        ));
    }
    Access { event, notes }
}

/// What the trial will most likely answer when it passes, from the facts alone: cycles
/// where a PMU in sysfs names them, else cpu-clock. A recorder started before the trial
/// answers samples this; it is used only if the trial then answers the same.
pub fn likely_access(facts: &ContainerFacts) -> Access {
    access_with(facts.pmu_cycles, facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::perf::tool::build_option_on;
    use std::collections::HashMap;
    use std::future::Future;
    use std::sync::Mutex;

    #[test]
    fn diagnoses_docker_defaults_as_three_missing_pieces() {
        // Docker's default capability set (no PERFMON/SYS_ADMIN) and seccomp filter.
        let facts = ContainerFacts {
            cap_eff: Some(0x00000000a80425fb),
            seccomp: Some(2),
            paranoid: Some(2),
            ..Default::default()
        };
        let d = diagnose_denial(&facts);
        assert_eq!(d.missing.len(), 3, "{d:?}");
        assert!(d.fixes.iter().any(|f| f.contains("cap_add")));
        assert!(d.fixes.iter().any(|f| f.contains("seccomp=unconfined")));
        assert!(d.fixes.iter().any(|f| f.contains("perf_event_paranoid")));
    }

    #[test]
    fn reads_perf_stat_csv_and_build_options() {
        let csv = "0.94,msec,cpu-clock,939014,100.00,0.009,CPUs utilized\n<not supported>,,cycles,0,100.00,,\n";
        let stats = parse_stat_csv(csv);
        assert_eq!(stats[0].0, "cpu-clock");
        assert_eq!(stats[1], ("cycles".to_string(), EventStatus::NotSupported));
        assert!(build_option_on(
            "                  zstd: [ on  ]  # HAVE_ZSTD_SUPPORT",
            "zstd"
        ));
        assert!(!build_option_on(
            "                libbfd: [ OFF ]  # HAVE_LIBBFD_SUPPORT",
            "libbfd"
        ));
    }

    /// A mock shell: this container does not exist; scripted answers stand in for perf so
    /// the decision logic (fallbacks, sysctl lowering) is exercised without Docker.
    struct ScriptedShellMock {
        answers: HashMap<&'static str, Vec<ExecOutput>>,
        calls: Mutex<Vec<String>>,
    }

    impl ContainerShell for ScriptedShellMock {
        fn container(&self) -> &str {
            "scripted"
        }
        fn run(&self, argv: &[&str]) -> impl Future<Output = Result<ExecOutput>> + Send {
            let line = argv.join(" ");
            self.calls.lock().unwrap().push(line.clone());
            let key = self
                .answers
                .keys()
                .find(|k| line.contains(**k))
                .copied()
                .unwrap_or("");
            let mut answers = self.answers.get(key).cloned().unwrap_or_default();
            let calls_so_far = self
                .calls
                .lock()
                .unwrap()
                .iter()
                .filter(|c| c.contains(key))
                .count();
            let out = if answers.is_empty() {
                ExecOutput::default()
            } else {
                answers.remove((calls_so_far - 1).min(answers.len() - 1))
            };
            async move { Ok(out) }
        }
    }

    fn out(code: i64, stderr: &str) -> ExecOutput {
        ExecOutput {
            stdout: String::new(),
            stderr: stderr.to_string(),
            exit_code: Some(code),
        }
    }

    fn perf_tool() -> PerfTool {
        PerfTool {
            path: "perf".into(),
            version: "6.1".into(),
            supports_zstd: true,
        }
    }

    #[tokio::test]
    async fn falls_back_to_cpu_clock_with_scripted_shell_mock() {
        let shell = ScriptedShellMock {
            answers: HashMap::from([(
                "stat",
                vec![out(
                    0,
                    "1.0,msec,cpu-clock,1,100.00,,\n<not supported>,,cycles,0,100.00,,\n",
                )],
            )]),
            calls: Mutex::new(vec![]),
        };
        let access = check_access(&shell, &perf_tool().path, &ContainerFacts::default(), 7)
            .await
            .unwrap();
        assert_eq!(access.event, "cpu-clock");
        let counted = ScriptedShellMock {
            answers: HashMap::from([(
                "stat",
                vec![out(
                    0,
                    "1.0,msec,cpu-clock,1,100.00,,\n1234,,cycles,1,100.00,,\n",
                )],
            )]),
            calls: Mutex::new(vec![]),
        };
        let access = check_access(&counted, &perf_tool().path, &ContainerFacts::default(), 7)
            .await
            .unwrap();
        assert_eq!(access.event, "cycles");
    }

    #[tokio::test]
    async fn never_writes_sysctls_with_scripted_shell_mock() {
        let denied = "Error:\nNo permission to enable cpu-clock event.\n";
        let writable = ScriptedShellMock {
            answers: HashMap::from([("stat", vec![out(255, denied)])]),
            calls: Mutex::new(vec![]),
        };
        let facts = ContainerFacts {
            sysctl_writable: true,
            ..Default::default()
        };
        assert!(matches!(
            check_access(&writable, &perf_tool().path, &facts, 7).await,
            Err(Error::PerfDenied { .. })
        ));
        assert!(!writable
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.contains("/proc/sys")));

        let read_only = ScriptedShellMock {
            answers: HashMap::from([("stat", vec![out(255, denied)])]),
            calls: Mutex::new(vec![]),
        };
        let facts = ContainerFacts {
            seccomp: Some(2),
            cap_eff: Some(0),
            ..Default::default()
        };
        match check_access(&read_only, &perf_tool().path, &facts, 7).await {
            Err(Error::PerfDenied { missing, .. }) => assert_eq!(missing.len(), 2),
            other => panic!("expected denial, got {other:?}"),
        }
        assert!(!read_only
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.contains("echo -1")));
    }

    /// The version query and the trial in one exec: perf's answer before the trial's
    /// marker, the trial's words on stderr; a perf that does not answer leaves the choice
    /// to the caller, and a denied trial is a denial as `check_access` says it.
    #[tokio::test]
    async fn one_exec_answers_the_version_and_the_trial_with_scripted_shell_mock() {
        let answered =
            "perf version 6.1.187\n                  zstd: [ on  ]  # HAVE_ZSTD_SUPPORT\n\
                        @@devprof-version-answered\n@@devprof-trial-follows\n";
        let shell = |stdout: &str, code: i64, stderr: &str| ScriptedShellMock {
            answers: HashMap::from([(
                "stat",
                vec![ExecOutput {
                    stdout: stdout.to_string(),
                    stderr: stderr.to_string(),
                    exit_code: Some(code),
                }],
            )]),
            calls: Mutex::new(vec![]),
        };
        let facts = ContainerFacts::default();
        let counted = "1.0,msec,cpu-clock,1,100.00,,\n<not supported>,,cycles,0,100.00,,\n";
        let one = shell(answered, 0, counted);
        let (perf, access) = version_and_trial(&one, "/usr/bin/perf_6.1", &facts, 7)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                perf.path.as_str(),
                perf.version.as_str(),
                perf.supports_zstd
            ),
            ("/usr/bin/perf_6.1", "6.1.187", true)
        );
        assert_eq!(access.event, "cpu-clock");
        let calls = one.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert!(calls[0].starts_with("sh -c "), "{calls:?}");
        assert!(
            calls[0].ends_with(
                "sh /usr/bin/perf_6.1 stat -x, -e cpu-clock -e cycles -p 7 -- sleep 0.01"
            ),
            "{calls:?}"
        );
        // No answer to the version query: nothing decided here.
        let silent = shell("@@devprof-trial-follows\n", 0, counted);
        assert!(version_and_trial(&silent, "/usr/bin/perf", &facts, 7)
            .await
            .unwrap()
            .is_none());
        let denied = shell(
            answered,
            255,
            "Error:\nNo permission to enable cpu-clock event.\n",
        );
        assert!(matches!(
            version_and_trial(&denied, "/usr/bin/perf", &facts, 7).await,
            Err(Error::PerfDenied { .. })
        ));
    }
}
