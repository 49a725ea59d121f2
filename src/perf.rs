//! What perf can do in a container: the facts probe, choosing the perf binary, whether
//! perf_event_open is allowed (and if not, exactly what is missing), which sampling event
//! the CPU offers, and perf's own reports. Parsers are pure and unit-tested; the async
//! functions run them through a `ContainerShell`.

use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::target::{parse_processes, ProcInfo};

/// One exec that reports everything the capture needs to decide before recording.
/// Prints tab-separated `key<TAB>value` lines; its own processes are excluded.
pub const PROBE_SCRIPT: &str = r#"
echo "kernel	$(uname -r)"
seen=" "
IFS=:
for d in $PATH /usr/bin /usr/sbin /usr/local/bin; do
  for f in "$d"/perf "$d"/perf_[0-9]*; do
    case "$seen" in *" $f "*) continue;; esac
    seen="$seen$f "
    [ -f "$f" ] && [ -x "$f" ] && echo "perf	$f"
  done
done
unset IFS
echo "paranoid	$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
echo "kptr_restrict	$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null)"
[ -w /proc/sys/kernel/perf_event_paranoid ] && echo "sysctl_writable	1"
while read -r k v _; do
  case "$k" in CapEff:) echo "cap_eff	$v";; Seccomp:) echo "seccomp	$v";; esac
done < /proc/self/status
self=$$
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  [ "$pid" = "$self" ] && continue
  ppid=
  while read -r k v _; do
    [ "$k" = "PPid:" ] && { ppid=$v; break; }
  done < "$d/status" 2>/dev/null
  [ "$ppid" = "$self" ] && continue
  printf 'proc\t%s\t%s\t%s\n' "$pid" "$ppid" "$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
done
"#;

/// Linux capability numbers that matter to perf.
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerFacts {
    pub kernel: String,
    pub perf_candidates: Vec<String>,
    pub paranoid: Option<i32>,
    pub kptr_restrict: Option<i32>,
    pub sysctl_writable: bool,
    pub cap_eff: Option<u64>,
    /// 0 none, 1 strict, 2 filter (Docker's default profile).
    pub seccomp: Option<u8>,
    pub processes: Vec<ProcInfo>,
}

impl ContainerFacts {
    pub fn parse(text: &str) -> Self {
        let mut facts = ContainerFacts {
            processes: parse_processes(text),
            ..Default::default()
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once('\t') else {
                continue;
            };
            let value = value.trim();
            match key {
                "kernel" => facts.kernel = value.to_string(),
                "perf" => facts.perf_candidates.push(value.to_string()),
                "paranoid" => facts.paranoid = value.parse().ok(),
                "kptr_restrict" => facts.kptr_restrict = value.parse().ok(),
                "sysctl_writable" => facts.sysctl_writable = value == "1",
                "cap_eff" => facts.cap_eff = u64::from_str_radix(value, 16).ok(),
                "seccomp" => facts.seccomp = value.parse().ok(),
                _ => {}
            }
        }
        facts
    }

    pub fn has_cap(&self, cap: u32) -> bool {
        self.cap_eff.is_some_and(|bits| bits & (1u64 << cap) != 0)
    }

    /// CAP_PERFMON, or CAP_SYS_ADMIN which implies it on older kernels.
    pub fn may_monitor(&self) -> bool {
        self.has_cap(CAP_PERFMON) || self.has_cap(CAP_SYS_ADMIN)
    }

    pub async fn probe<S: ContainerShell>(shell: &S) -> Result<Self> {
        let out = shell.sh(PROBE_SCRIPT).await?;
        if !out.success() && out.stdout.is_empty() {
            return Err(Error::ProcessNotFound {
                container: shell.container().to_string(),
                what: "cannot inspect processes".to_string(),
                hint: format!(
                    "devprof needs `sh` in the container to find the process ({})",
                    out.stderr.trim()
                ),
            });
        }
        Ok(ContainerFacts::parse(&out.stdout))
    }
}

/// Orders perf binaries by preference: the versioned one matching the kernel
/// (`perf_6.1` on 6.1.x), other versioned ones newest first, then plain `perf`.
pub fn order_perf_candidates(candidates: &[String], kernel: &str) -> Vec<String> {
    let kernel_mm: Option<(u32, u32)> = major_minor(kernel);
    let version_of = |path: &str| -> Option<(u32, u32)> {
        let name = path.rsplit('/').next()?;
        major_minor(name.strip_prefix("perf_")?)
    };
    let mut ordered: Vec<(u8, (u32, u32), String)> = candidates
        .iter()
        .map(|c| match version_of(c) {
            Some(v) if Some(v) == kernel_mm => (0, v, c.clone()),
            Some(v) => (1, v, c.clone()),
            None => (2, (0, 0), c.clone()),
        })
        .collect();
    ordered.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    ordered.dedup_by(|a, b| a.2 == b.2);
    ordered.into_iter().map(|(_, _, c)| c).collect()
}

pub fn major_minor(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A perf binary that runs in the container.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfTool {
    pub path: String,
    /// As perf reports it, e.g. `6.1.187`.
    pub version: String,
    pub supports_zstd: bool,
}

/// Finds a working perf: the first candidate, in preference order, whose `--version` runs.
/// Debian's old `perf` wrapper, for one, fails when no perf matches the kernel.
pub async fn find_perf<S: ContainerShell>(shell: &S, facts: &ContainerFacts) -> Result<PerfTool> {
    for path in order_perf_candidates(&facts.perf_candidates, &facts.kernel) {
        let out = shell.run(&[&path, "--version"]).await?;
        if !out.success() {
            continue;
        }
        let Some(version) = out.stdout.trim().strip_prefix("perf version ") else {
            continue;
        };
        let options = shell.run(&[&path, "version", "--build-options"]).await?;
        return Ok(PerfTool {
            path,
            version: version.trim().to_string(),
            supports_zstd: build_option_on(&options.stdout, "zstd"),
        });
    }
    Err(Error::PerfMissing {
        container: shell.container().to_string(),
    })
}

/// Reads `perf version --build-options` lines like `zstd: [ on  ]  # HAVE_ZSTD_SUPPORT`.
pub fn build_option_on(text: &str, option: &str) -> bool {
    text.lines().any(|line| {
        let mut parts = line.trim().splitn(2, ':');
        parts.next().map(str::trim) == Some(option)
            && parts.next().is_some_and(|rest| rest.contains("[ on"))
    })
}

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

/// Whether perf's error text is about being denied the syscall.
pub fn is_permission_error(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    s.contains("no permission")
        || s.contains("permission denied")
        || s.contains("operation not permitted")
        || s.contains("access to performance monitoring")
        || s.contains("perf_event_paranoid")
}

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

/// Checks, before the capture window, that perf may open events on `pid`, and picks the
/// event. Where the container may write the sysctls, lowers perf_event_paranoid and
/// kptr_restrict first (and says so).
pub async fn check_access<S: ContainerShell>(
    shell: &S,
    perf: &PerfTool,
    facts: &ContainerFacts,
    pid: u32,
) -> Result<Access> {
    let mut notes = Vec::new();
    let pid_text = pid.to_string();
    let trial_argv = [
        perf.path.as_str(),
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
        "0.1",
    ];
    let mut out = shell.run(&trial_argv).await?;
    if !out.success() && is_permission_error(&out.stderr) && facts.sysctl_writable {
        let lowered = shell
            .sh("echo -1 > /proc/sys/kernel/perf_event_paranoid && echo 0 > /proc/sys/kernel/kptr_restrict")
            .await?;
        if lowered.success() {
            notes.push("lowered kernel.perf_event_paranoid to -1 and kptr_restrict to 0 (this container may write them)".to_string());
            out = shell.run(&trial_argv).await?;
        }
    }
    if !out.success() {
        return Err(failure(
            shell.container(),
            &format!("trial `perf stat -p {pid}`"),
            &out.stderr,
            facts,
        ));
    }
    let stats = parse_stat_csv(&out.stderr);
    let cycles_ok = stats.iter().any(|(name, status)| {
        name.starts_with("cycles") && matches!(status, EventStatus::Counted(_))
    });
    let event = if cycles_ok {
        "cycles".to_string()
    } else {
        notes.push(
            "the CPU's PMU does not count cycles here; sampling with cpu-clock instead".to_string(),
        );
        "cpu-clock".to_string()
    };
    if facts.kptr_restrict.is_some_and(|k| k > 0) && !facts.sysctl_writable {
        notes.push(format!(
            "kernel.kptr_restrict is {}: kernel frames will show as [unknown] (on the host: `sudo sysctl kernel.kptr_restrict=0`)",
            facts.kptr_restrict.unwrap_or_default()
        ));
    }
    Ok(Access { event, notes })
}

/// The most telling line of perf's error output.
pub fn first_error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .find(|l| l.to_ascii_lowercase().starts_with("error"))
        .or_else(|| lines.iter().find(|l| is_permission_error(l)))
        .or(lines.first())
        .map(|l| l.to_string())
        .unwrap_or_else(|| "no error output".to_string())
}

/// What `perf record` said when it finished.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordReport {
    pub samples: Option<u64>,
    pub megabytes: Option<f64>,
    pub lost_chunks: Option<u64>,
}

/// Parses `[ perf record: Captured and wrote 0.123 MB perf.data (4567 samples) ]` and
/// `Processed N events and lost M chunks!`.
pub fn parse_record_report(stderr: &str) -> RecordReport {
    let mut report = RecordReport::default();
    for line in stderr.lines() {
        if let Some(rest) = line.split("Captured and wrote ").nth(1) {
            report.megabytes = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            if let Some(inner) = rest.rsplit_once('(').map(|(_, r)| r) {
                report.samples = inner.split_whitespace().next().and_then(|v| v.parse().ok());
            }
        }
        if let Some(rest) = line.split(" and lost ").nth(1) {
            report.lost_chunks = rest.split_whitespace().next().and_then(|v| v.parse().ok());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::ExecOutput;
    use std::collections::HashMap;
    use std::future::Future;
    use std::sync::Mutex;

    #[test]
    fn prefers_the_perf_matching_the_kernel() {
        let c: Vec<String> = [
            "/usr/bin/perf",
            "/usr/bin/perf_5.10",
            "/usr/bin/perf_6.1",
            "/usr/bin/perf_5.19",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            order_perf_candidates(&c, "6.1.0-18-amd64"),
            vec![
                "/usr/bin/perf_6.1",
                "/usr/bin/perf_5.19",
                "/usr/bin/perf_5.10",
                "/usr/bin/perf"
            ]
        );
        assert_eq!(
            order_perf_candidates(&c[..1], "6.18.44"),
            vec!["/usr/bin/perf"]
        );
    }

    #[test]
    fn parses_facts_and_capabilities() {
        let text = "kernel\t6.18.44-fc\nperf\t/usr/bin/perf\nparanoid\t2\nkptr_restrict\t0\n\
                    cap_eff\t00000040a80c25fb\nseccomp\t0\nproc\t1\t0\tdemo-node \n";
        let f = ContainerFacts::parse(text);
        assert_eq!(f.kernel, "6.18.44-fc");
        assert_eq!(f.perf_candidates, vec!["/usr/bin/perf"]);
        assert_eq!(f.paranoid, Some(2));
        assert!(f.has_cap(CAP_PERFMON) && f.has_cap(CAP_SYS_PTRACE) && !f.has_cap(CAP_SYS_ADMIN));
        assert_eq!(f.processes.len(), 1);
    }

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

    #[test]
    fn parses_perf_record_report() {
        let r = parse_record_report(
            "[ perf record: Woken up 3 times to write data ]\n\
             [ perf record: Captured and wrote 0.469 MB /tmp/d/perf.data (4958 samples) ]\n",
        );
        assert_eq!((r.samples, r.megabytes), (Some(4958), Some(0.469)));
        let z = parse_record_report(
            "[ perf record: Captured and wrote 0.001 MB /tmp/z.data, compressed (original 0.001 MB, ratio is 1.948) ]",
        );
        assert_eq!(z.samples, None);
        let lost = parse_record_report("Processed 51234 events and lost 7 chunks!");
        assert_eq!(lost.lost_chunks, Some(7));
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
        let access = check_access(&shell, &perf_tool(), &ContainerFacts::default(), 7)
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
        let access = check_access(&counted, &perf_tool(), &ContainerFacts::default(), 7)
            .await
            .unwrap();
        assert_eq!(access.event, "cycles");
    }

    #[tokio::test]
    async fn lowers_paranoid_only_where_writable_with_scripted_shell_mock() {
        let denied = "Error:\nNo permission to enable cpu-clock event.\n";
        let shell = ScriptedShellMock {
            answers: HashMap::from([
                (
                    "stat",
                    vec![out(255, denied), out(0, "1,msec,cpu-clock,1,100.00,,\n")],
                ),
                ("perf_event_paranoid", vec![out(0, "")]),
            ]),
            calls: Mutex::new(vec![]),
        };
        let writable = ContainerFacts {
            sysctl_writable: true,
            ..Default::default()
        };
        let access = check_access(&shell, &perf_tool(), &writable, 7)
            .await
            .unwrap();
        assert!(access.notes.iter().any(|n| n.contains("lowered")));

        let read_only = ScriptedShellMock {
            answers: HashMap::from([("stat", vec![out(255, denied)])]),
            calls: Mutex::new(vec![]),
        };
        let facts = ContainerFacts {
            seccomp: Some(2),
            cap_eff: Some(0),
            ..Default::default()
        };
        match check_access(&read_only, &perf_tool(), &facts, 7).await {
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
}
