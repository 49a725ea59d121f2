//! The doctor's checklist as data: every fact gathered about the target goes in, a list of
//! checks (✓, ✗ with the fix, ! for what only degrades the profile, - when not
//! applicable or not checked) comes out. Pure, so every rule is unit-tested.

use crate::docker::{ContainerConfig, EngineVersion};
use crate::elf::{ElfReport, FpVerdict, Jemalloc};
use crate::perf::{self, ContainerFacts, PerfTool};
use crate::target::{ContainerInfo, ProcInfo};
use serde::Serialize;

const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_SYSLOG: u32 = 34;
const CAP_PERFMON: u32 = 38;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// ✓
    Pass,
    /// ✗: the profile would be denied, empty or hex-only.
    Fail,
    /// !: the profile works but loses something (kernel frames, inlined frames, ...).
    Warn,
    /// -: not applicable, or not checked because an earlier check failed.
    Skip,
}

impl Status {
    pub fn mark(self) -> &'static str {
        match self {
            Status::Pass => "✓",
            Status::Fail => "✗",
            Status::Warn => "!",
            Status::Skip => "-",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// How the 100 ms perf_event_open trial went.
#[derive(Debug, Clone, PartialEq)]
pub enum Trial {
    /// Counted this many milliseconds of cpu-clock.
    Allowed(f64),
    Denied(String),
    Failed(String),
}

/// What the doctor learned about the process, beyond the probe every capture makes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessExtras {
    /// /proc/<pid>/exe as the container sees it.
    pub exe: String,
    /// `_RJEM_MALLOC_CONF`, `MALLOC_CONF`, `PYTHONPERFSUPPORT` from its environment.
    pub env: Vec<(String, String)>,
    /// Runtime libraries mapped (libjemalloc, libjvm, libnode, libpython).
    pub libraries: Vec<String>,
    /// /tmp/perf-<pid>.map exists (JIT symbols for perf).
    pub perf_map: bool,
    /// Where tracefs is visible, if anywhere.
    pub tracefs: Option<String>,
    /// The first address /proc/kallsyms shows (all zeros when hidden).
    pub kallsyms_address: String,
}

impl ProcessExtras {
    pub fn parse(text: &str) -> Self {
        let mut extras = ProcessExtras::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('\t') else {
                continue;
            };
            match key {
                "exe" => extras.exe = value.trim().to_string(),
                "env" => {
                    if let Some((k, v)) = value.split_once('=') {
                        extras.env.push((k.to_string(), v.to_string()));
                    }
                }
                "lib" => {
                    let lib = value.trim().to_string();
                    if !extras.libraries.contains(&lib) {
                        extras.libraries.push(lib);
                    }
                }
                "perfmap" => extras.perf_map = true,
                "tracefs" => extras.tracefs = Some(value.trim().to_string()),
                "kallsyms" => extras.kallsyms_address = value.trim().to_string(),
                _ => {}
            }
        }
        extras
    }

    fn env(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn maps(&self, needle: &str) -> bool {
        self.libraries.iter().any(|l| l.contains(needle))
    }
}

/// The extra exec the doctor runs, with the pid as `$1`.
pub const EXTRAS_SCRIPT: &str = r#"
p=$1
printf 'exe\t%s\n' "$(readlink /proc/$p/exe 2>/dev/null)"
tr '\0' '\n' < /proc/$p/environ 2>/dev/null | while IFS= read -r l; do
  case "$l" in _RJEM_MALLOC_CONF=*|MALLOC_CONF=*|PYTHONPERFSUPPORT=*) printf 'env\t%s\n' "$l";; esac
done
while read -r a b c d e f; do
  case "$f" in *libjemalloc*|*libjvm*|*libnode*|*libpython*) printf 'lib\t%s\n' "$f";; esac
done < /proc/$p/maps 2>/dev/null
[ -e /tmp/perf-$p.map ] && printf 'perfmap\t1\n'
if [ -d /sys/kernel/tracing/events ]; then printf 'tracefs\t/sys/kernel/tracing\n'
elif [ -d /sys/kernel/debug/tracing/events ]; then printf 'tracefs\t/sys/kernel/debug/tracing\n'; fi
read -r addr rest < /proc/kallsyms 2>/dev/null; printf 'kallsyms\t%s\n' "$addr"
"#;

/// Everything gathered; None where the step was not reached.
#[derive(Debug, Clone, Default)]
pub struct DoctorFacts {
    pub target: String,
    /// The daemon's address, or why it cannot be reached.
    pub daemon: Option<Result<String, String>>,
    pub engine: Option<EngineVersion>,
    pub container: Option<Result<ContainerInfo, String>>,
    pub config: Option<ContainerConfig>,
    /// Whether the engine accepts CAP_PERFMON (a container created with it, never started).
    pub perfmon_known: Option<Result<(), String>>,
    pub probe: Option<ContainerFacts>,
    pub process: Option<Result<ProcInfo, String>>,
    pub perf: Option<Result<PerfTool, String>>,
    pub trial: Option<Trial>,
    pub extras: Option<ProcessExtras>,
    /// The binary's path and what its ELF sections say.
    pub binary: Option<(String, Result<ElfReport, String>)>,
}

fn check(
    id: &'static str,
    title: &'static str,
    status: Status,
    detail: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        detail: detail.into(),
        fix,
    }
}

fn skipped(id: &'static str, title: &'static str, why: &str) -> Check {
    check(id, title, Status::Skip, format!("not checked: {why}"), None)
}

fn caps_named(bits: u64) -> Vec<&'static str> {
    [
        (CAP_PERFMON, "PERFMON"),
        (CAP_SYS_ADMIN, "SYS_ADMIN"),
        (CAP_SYS_PTRACE, "SYS_PTRACE"),
        (CAP_SYSLOG, "SYSLOG"),
    ]
    .iter()
    .filter(|(bit, _)| bits & (1u64 << bit) != 0)
    .map(|(_, name)| *name)
    .collect()
}

/// The compose lines that grant monitoring on this engine.
fn monitor_fix(perfmon_known: Option<&Result<(), String>>) -> String {
    match perfmon_known {
        Some(Err(_)) => "add capabilities: compose `cap_add: [SYS_ADMIN, SYS_PTRACE]` (this engine does not know PERFMON, \
                         so SYS_ADMIN stands in for it), or `docker run --cap-add SYS_ADMIN --cap-add SYS_PTRACE`; \
                         `devprof compose --services SERVICE` writes the override"
            .to_string(),
        _ => "add capabilities: compose `cap_add: [PERFMON, SYS_PTRACE]`, or `docker run --cap-add PERFMON --cap-add SYS_PTRACE`; \
              `devprof compose --services SERVICE` writes the override"
            .to_string(),
    }
}

/// The checklist.
pub fn evaluate(facts: &DoctorFacts) -> Vec<Check> {
    let mut checks = Vec::new();

    // The daemon.
    match &facts.daemon {
        Some(Ok(address)) => {
            let engine = facts
                .engine
                .as_ref()
                .map(|e| {
                    format!(
                        " (Docker {}, API {}, kernel {})",
                        e.version, e.api_version, e.kernel
                    )
                })
                .unwrap_or_default();
            checks.push(check(
                "daemon",
                "Docker daemon",
                Status::Pass,
                format!("reachable at {address}{engine}"),
                None,
            ));
        }
        Some(Err(why)) => {
            checks.push(check(
                "daemon",
                "Docker daemon",
                Status::Fail,
                why.clone(),
                Some("start it (`systemctl start docker`), point DOCKER_HOST at it, and use its socket as root or a member of the `docker` group".into()),
            ));
            return checks;
        }
        None => return checks,
    }

    // The container.
    let container = match &facts.container {
        Some(Ok(c)) => {
            checks.push(check(
                "container",
                "container running",
                Status::Pass,
                format!(
                    "{} ({}, image {}) is running",
                    c.name,
                    c.short_id(),
                    c.image
                ),
                None,
            ));
            c
        }
        Some(Err(why)) => {
            let (first, rest) = why.split_once('\n').unwrap_or((why.as_str(), ""));
            checks.push(check(
                "container",
                "container running",
                Status::Fail,
                first.to_string(),
                Some(if rest.trim().is_empty() {
                    "start it, or name a running container".to_string()
                } else {
                    rest.trim().to_string()
                }),
            ));
            return checks;
        }
        None => return checks,
    };

    // The process.
    let process = match &facts.process {
        Some(Ok(p)) => {
            checks.push(check(
                "process",
                "target process",
                Status::Pass,
                format!("pid {} in the container: {}", p.pid, p.cmdline),
                None,
            ));
            Some(p)
        }
        Some(Err(why)) => {
            checks.push(check(
                "process",
                "target process",
                Status::Fail,
                why.clone(),
                Some("pick it with --process REGEX (its command line) or --pid N (as seen in the container)".into()),
            ));
            None
        }
        None => {
            checks.push(skipped(
                "process",
                "target process",
                "the container could not be inspected",
            ));
            None
        }
    };
    let probe = facts.probe.clone().unwrap_or_default();
    let kernel = facts
        .engine
        .as_ref()
        .map(|e| e.kernel.clone())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| probe.kernel.clone());

    // perf.
    match &facts.perf {
        Some(Ok(tool)) => {
            let versions = match (perf::major_minor(&tool.version), perf::major_minor(&kernel)) {
                (Some(p), Some(k)) if p == k => format!(", made for this kernel ({kernel})"),
                (Some(p), Some(k)) if p < k => format!(
                    ", older than the kernel {kernel}: it records the usual events; features of kernels after {}.{} are not offered",
                    p.0, p.1
                ),
                (Some(_), Some(_)) => format!(", newer than the kernel {kernel}: it asks only for what the kernel offers"),
                _ => format!(" (kernel {kernel})"),
            };
            checks.push(check("perf", "perf", Status::Pass, format!("{}, version {}{versions}", tool.path, tool.version), None));
        }
        Some(Err(why)) => checks.push(check(
            "perf",
            "perf",
            Status::Fail,
            why.clone(),
            Some(format!(
                "use an image with perf: `devprof build tools {}` adds perf, procps and binutils to it (or `apt-get install linux-perf` \
                 in a Debian image); or record it from a profiler container beside it, unchanged: `devprof cpu --mode sidecar {}`",
                container.image, container.name
            )),
        )),
        None => checks.push(skipped("perf", "perf", "the container could not be inspected")),
    }

    // perf_event_open: the trial, or the prediction from the configuration without one.
    let denial = perf::diagnose_denial(&probe);
    let may_monitor = probe.may_monitor();
    let paranoid_blocks = probe.paranoid.is_some_and(|l| l > 1) && !may_monitor;
    // Docker's default profile allows perf_event_open only with CAP_SYS_ADMIN (and, on
    // engines that know it, CAP_PERFMON).
    let seccomp_blocks = probe.seccomp == Some(2) && !may_monitor;
    let predicted_denied = paranoid_blocks || seccomp_blocks;
    let trial_ok = matches!(facts.trial, Some(Trial::Allowed(_)));
    match &facts.trial {
        Some(Trial::Allowed(ms)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Pass,
            format!(
                "allowed: a 100 ms trial (`perf stat -e cpu-clock -p {}`) counted {ms:.1} ms",
                process.map(|p| p.pid).unwrap_or_default()
            ),
            None,
        )),
        Some(Trial::Denied(detail)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!("denied in a 100 ms trial: {detail}; missing: {}", denial.missing.join(", ")),
            Some(denial.fixes.join("; ")),
        )),
        Some(Trial::Failed(detail)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!("the 100 ms trial failed: {detail}"),
            Some("run `perf stat -e cpu-clock -p PID -- sleep 0.1` in the container to see perf's whole message".into()),
        )),
        None if predicted_denied => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!(
                "not tried ({}); this configuration denies it: {}",
                if matches!(facts.perf, Some(Err(_))) { "no perf" } else { "no process" },
                denial.missing.join(", ")
            ),
            Some(denial.fixes.join("; ")),
        )),
        None => checks.push(skipped("perf_event_open", "perf_event_open", "no perf or no process to try it with")),
    }

    // Kernel settings.
    match probe.paranoid {
        Some(level) if level <= 1 => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Pass,
            format!("{level}: perf may profile processes and the kernel without a capability"),
            None,
        )),
        Some(level) if may_monitor => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Pass,
            format!(
                "{level}, and the container's CAP_{} lets perf past it",
                if probe.has_cap(CAP_PERFMON) {
                    "PERFMON"
                } else {
                    "SYS_ADMIN"
                }
            ),
            None,
        )),
        Some(level) => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            if trial_ok { Status::Pass } else { Status::Fail },
            format!(
                "{level}: without CAP_PERFMON perf may not sample the kernel or other processes"
            ),
            (!trial_ok).then(|| {
                format!(
                    "{}; or on the Docker host: `sudo sysctl kernel.perf_event_paranoid=1`",
                    monitor_fix(facts.perfmon_known.as_ref())
                )
            }),
        )),
        None => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Warn,
            "cannot be read in the container",
            None,
        )),
    }
    let extras = facts.extras.clone().unwrap_or_default();
    let kptr = probe
        .kptr_restrict
        .map(|k| k.to_string())
        .unwrap_or_else(|| "?".into());
    let kernel_visible =
        !extras.kallsyms_address.is_empty() && extras.kallsyms_address.chars().any(|c| c != '0');
    if facts.extras.is_none() {
        checks.push(skipped("kptr_restrict", "kernel symbols", "no process"));
    } else if kernel_visible {
        checks.push(check(
            "kptr_restrict",
            "kernel symbols",
            Status::Pass,
            format!(
                "kernel.kptr_restrict is {kptr}; /proc/kallsyms shows addresses here{}: kernel frames get names",
                if probe.has_cap(CAP_SYSLOG) { " (CAP_SYSLOG)" } else { "" }
            ),
            None,
        ));
    } else {
        checks.push(check(
            "kptr_restrict",
            "kernel symbols",
            Status::Warn,
            format!("kernel.kptr_restrict is {kptr} and /proc/kallsyms shows zeros here: kernel frames will be [unknown]"),
            Some(match probe.kptr_restrict {
                Some(2) => "kptr_restrict 2 hides kernel addresses from everyone: on the Docker host \
                            `sudo sysctl kernel.kptr_restrict=1`, then grant SYSLOG (`devprof compose --kernel-symbols`)"
                    .to_string(),
                Some(0) => "grant SYSLOG: compose `cap_add: [SYSLOG]` (`devprof compose --kernel-symbols`); or on the \
                            Docker host `sudo sysctl kernel.perf_event_paranoid=1` (with kptr_restrict 0, addresses are \
                            then shown to every process)"
                    .to_string(),
                _ => "grant SYSLOG: compose `cap_add: [SYSLOG]` (`devprof compose --kernel-symbols`); or on the Docker \
                      host `sudo sysctl kernel.kptr_restrict=0 kernel.perf_event_paranoid=1`"
                    .to_string(),
            }),
        ));
    }
    match (&facts.extras, &extras.tracefs) {
        (None, _) => checks.push(skipped("tracefs", "tracefs", "no process")),
        (Some(_), Some(dir)) => checks.push(check("tracefs", "tracefs", Status::Pass, format!("tracepoints visible at {dir} (devprof offcpu)"), None)),
        (Some(_), None) => checks.push(check(
            "tracefs",
            "tracefs",
            Status::Warn,
            "not visible in the container: devprof offcpu cannot record tracepoints (cpu works)",
            Some("mount it into the container: compose `volumes: [/sys/kernel/tracing:/sys/kernel/tracing]` (in `devprof compose`'s override), after `sudo mount -t tracefs nodev /sys/kernel/tracing` on the host".into()),
        )),
    }

    // The container's configuration.
    let config = facts.config.clone().unwrap_or_default();
    let added = if config.cap_add.is_empty() {
        "none".to_string()
    } else {
        config.cap_add.join(", ")
    };
    let effective = probe.cap_eff.map(caps_named).unwrap_or_default();
    let effective_text = if effective.is_empty() {
        "none of PERFMON, SYS_ADMIN, SYS_PTRACE, SYSLOG".to_string()
    } else {
        effective.join(", ")
    };
    let stand_in = if probe.has_cap(CAP_SYS_ADMIN)
        && !probe.has_cap(CAP_PERFMON)
        && matches!(facts.perfmon_known, Some(Err(_)))
    {
        "; SYS_ADMIN stands in for PERFMON, which this engine does not know"
    } else {
        ""
    };
    if probe.cap_eff.is_none() {
        checks.push(skipped(
            "capabilities",
            "capabilities",
            "the container's process status could not be read",
        ));
    } else if !trial_ok && paranoid_blocks {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Fail,
            format!("added: {added}; effective: {effective_text}: no CAP_PERFMON (or CAP_SYS_ADMIN) to open perf events"),
            Some(monitor_fix(facts.perfmon_known.as_ref())),
        ));
    } else if !probe.has_cap(CAP_SYS_PTRACE) && !trial_ok {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Fail,
            format!("added: {added}; effective: {effective_text}: no CAP_SYS_PTRACE (perf cannot inspect the process)"),
            Some("add it: compose `cap_add: [SYS_PTRACE]`, or `docker run --cap-add SYS_PTRACE`".into()),
        ));
    } else {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Pass,
            format!("added: {added}; effective: {effective_text}{stand_in}"),
            None,
        ));
    }
    let profile = config
        .security_opt
        .iter()
        .find(|o| o.starts_with("seccomp"))
        .cloned()
        .unwrap_or_else(|| "Docker's default profile".to_string());
    match probe.seccomp {
        None => checks.push(skipped("seccomp", "seccomp", "the container's process status could not be read")),
        Some(0) => checks.push(check("seccomp", "seccomp", Status::Pass, format!("unconfined ({profile})"), None)),
        Some(_) if trial_ok => checks.push(check("seccomp", "seccomp", Status::Pass, format!("filtered ({profile}), and it allows perf_event_open"), None)),
        Some(_) if !seccomp_blocks => checks.push(check(
            "seccomp",
            "seccomp",
            Status::Pass,
            format!("filtered ({profile}); Docker's default profile allows perf_event_open with CAP_SYS_ADMIN or CAP_PERFMON"),
            None,
        )),
        Some(_) => checks.push(check(
            "seccomp",
            "seccomp",
            Status::Fail,
            format!("filtered ({profile}), which blocks perf_event_open without CAP_SYS_ADMIN or CAP_PERFMON"),
            Some("compose `security_opt: [seccomp=unconfined]`, or `docker run --security-opt seccomp=unconfined`".into()),
        )),
    }
    checks.push(check(
        "privileged",
        "privileged",
        Status::Pass,
        if config.privileged {
            "privileged: every capability and device (more than profiling needs; PERFMON and SYS_PTRACE suffice)".to_string()
        } else {
            "not privileged (profiling does not need it)".to_string()
        },
        None,
    ));

    // The binary.
    let runtime = runtime_of(process, &extras);
    match &facts.binary {
        None => {
            for (id, title) in [
                ("symbols", "symbols"),
                ("debuginfo", "debug info"),
                ("frame_pointers", "frame pointers"),
            ] {
                checks.push(skipped(id, title, "no process binary"));
            }
        }
        Some((path, Err(why))) => {
            checks.push(check(
                "symbols",
                "symbols",
                Status::Warn,
                format!("{path} could not be read: {why}"),
                None,
            ));
            checks.push(skipped("debuginfo", "debug info", "binary not read"));
            checks.push(skipped(
                "frame_pointers",
                "frame pointers",
                "binary not read",
            ));
        }
        Some((path, Ok(elf))) => binary_checks(&mut checks, path, elf),
    }

    // jemalloc.
    let elf_jemalloc = match &facts.binary {
        Some((_, Ok(elf))) => elf.jemalloc,
        _ => Jemalloc::None,
    };
    let variable = match elf_jemalloc.variable() {
        Some(v) => Some(v),
        None if extras.maps("libjemalloc") => Some("MALLOC_CONF"),
        None => None,
    };
    match variable {
        None if facts.extras.is_none() => {
            checks.push(skipped("jemalloc", "jemalloc profiling", "no process"))
        }
        None => checks.push(check(
            "jemalloc",
            "jemalloc profiling",
            Status::Skip,
            "the program does not use jemalloc (devprof heap needs it)",
            None,
        )),
        Some(var) => {
            let conf = extras.env(var).unwrap_or("");
            let parsed = crate::heap::dumps::JemallocConf::parse(conf);
            if parsed.profiling() && parsed.active() {
                checks.push(check(
                    "jemalloc",
                    "jemalloc profiling",
                    Status::Pass,
                    format!("active: {var}={conf}"),
                    None,
                ));
            } else {
                checks.push(check(
                    "jemalloc",
                    "jemalloc profiling",
                    Status::Warn,
                    if conf.is_empty() {
                        format!("off: the program reads {var}, which is not set (devprof heap needs prof:true)")
                    } else {
                        format!("off: {var}={conf} (devprof heap needs prof:true and prof_active)")
                    },
                    Some(format!(
                        "set {var}=prof:true,prof_active:true,prof_prefix:/profiling/jeprof when the container starts \
                         (`devprof compose --heap` writes it), then recreate the container"
                    )),
                ));
            }
        }
    }

    // The runtime.
    checks.push(runtime_check(
        runtime,
        process,
        &extras,
        facts.extras.is_some(),
    ));
    checks
}

fn binary_checks(checks: &mut Vec<Check>, path: &str, elf: &ElfReport) {
    if elf.has_symbols() {
        checks.push(check(
            "symbols",
            "symbols",
            Status::Pass,
            format!("{path}: {} functions in .symtab", elf.symtab_functions),
            None,
        ));
    } else {
        let fix = match &elf.debuglink {
            Some(link) => format!(
                "install its debug file ({link}, in the -dbgsym/-debuginfo package) into /usr/lib/debug in the container, \
                 or use a build that is not stripped"
            ),
            None => "build it without stripping (Cargo: `strip = \"none\"`; `devprof build source` does this), \
                     or keep the unstripped binary in the image"
                .to_string(),
        };
        checks.push(check(
            "symbols",
            "symbols",
            Status::Fail,
            format!(
                "{path} is stripped (no .symtab; {} exported functions in .dynsym): frames will show as hex addresses",
                elf.dynsym_functions
            ),
            Some(fix),
        ));
    }
    if elf.has_debug_info() {
        checks.push(check(
            "debuginfo",
            "debug info",
            Status::Pass,
            format!(
                "{path}: .debug_info {}{}",
                crate::units::human_bytes(elf.debug_info_bytes),
                if elf.has_debug_line {
                    ", .debug_line"
                } else {
                    ""
                }
            ),
            None,
        ));
    } else {
        checks.push(check(
            "debuginfo",
            "debug info",
            Status::Warn,
            format!("{path} has no .debug_info: no inlined frames or source lines (--inline)"),
            Some("build with full debuginfo (Cargo: `debug = \"full\"` in [profile.release]; `devprof build source` does this)".into()),
        ));
    }
    let fp = &elf.frame_pointers;
    let how = if fp.examined > 0 {
        format!(
            "{} of {} functions set up a frame pointer; judged on {}",
            fp.with_fp, fp.examined, fp.basis
        )
    } else {
        fp.basis.clone()
    };
    let dwarf = if elf.has_eh_frame || elf.has_debug_frame {
        "`devprof cpu --call-graph dwarf` unwinds with its .eh_frame instead"
    } else {
        "it has no .eh_frame either, so --call-graph dwarf cannot unwind it"
    };
    match fp.verdict {
        FpVerdict::Yes => checks.push(check("frame_pointers", "frame pointers", Status::Pass, format!("kept: {how}"), None)),
        FpVerdict::Partly | FpVerdict::No => checks.push(check(
            "frame_pointers",
            "frame pointers",
            Status::Warn,
            format!(
                "{}: {how}; --call-graph fp stacks will be cut short",
                if fp.verdict == FpVerdict::No { "omitted" } else { "partly omitted" }
            ),
            Some(format!("{dwarf}; or rebuild with -C force-frame-pointers=yes (`devprof build source` does this)")),
        )),
        FpVerdict::Unknown => checks.push(check("frame_pointers", "frame pointers", Status::Warn, format!("not judged: {how}"), None)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Native,
    Jvm,
    Node,
    Python,
}

pub fn runtime_of(process: Option<&ProcInfo>, extras: &ProcessExtras) -> Runtime {
    let program = process.map(|p| p.program().to_string()).unwrap_or_default();
    let exe = extras.exe.rsplit('/').next().unwrap_or("");
    let is = |names: &[&str]| names.iter().any(|n| program == *n || exe == *n);
    if extras.maps("libjvm") || is(&["java"]) {
        Runtime::Jvm
    } else if extras.maps("libnode") || is(&["node", "nodejs"]) {
        Runtime::Node
    } else if extras.maps("libpython") || program.starts_with("python") || exe.starts_with("python")
    {
        Runtime::Python
    } else {
        Runtime::Native
    }
}

fn runtime_check(
    runtime: Runtime,
    process: Option<&ProcInfo>,
    extras: &ProcessExtras,
    have_extras: bool,
) -> Check {
    if !have_extras {
        return skipped("runtime", "runtime", "no process");
    }
    let cmdline = process.map(|p| p.cmdline.as_str()).unwrap_or("");
    match runtime {
        Runtime::Native => check("runtime", "runtime", Status::Pass, "native code: perf names frames from the binary's symbols", None),
        Runtime::Jvm if extras.perf_map => check("runtime", "runtime", Status::Pass, "JVM, with a perf map for its JIT frames (/tmp/perf-<pid>.map)", None),
        Runtime::Jvm => check(
            "runtime",
            "runtime",
            Status::Warn,
            "JVM without a perf map: JIT-compiled Java frames will be [unknown]",
            Some("start it with -XX:+PreserveFramePointer and write /tmp/perf-<pid>.map with a perf map agent (perf-map-agent, async-profiler)".into()),
        ),
        Runtime::Node if extras.perf_map || cmdline.contains("--perf-basic-prof") => {
            check("runtime", "runtime", Status::Pass, "Node.js, with --perf-basic-prof (JIT frames named)", None)
        }
        Runtime::Node => check(
            "runtime",
            "runtime",
            Status::Warn,
            "Node.js without a perf map: JavaScript frames will be [unknown]",
            Some("start node with --perf-basic-prof (and --interpreted-frames-native-stack); render with --preset node".into()),
        ),
        Runtime::Python if extras.perf_map || cmdline.contains("-X perf") || extras.env("PYTHONPERFSUPPORT") == Some("1") => {
            check("runtime", "runtime", Status::Pass, "Python with perf support (-X perf / PYTHONPERFSUPPORT=1)", None)
        }
        Runtime::Python => check(
            "runtime",
            "runtime",
            Status::Warn,
            "Python without perf support: Python functions will show as _PyEval_EvalFrameDefault",
            Some("Python 3.12+: start it with -X perf or PYTHONPERFSUPPORT=1".into()),
        ),
    }
}

/// Checks that block profiling.
pub fn failures(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|c| c.status == Status::Fail).collect()
}

/// The checklist for a terminal.
pub fn render(target: &str, checks: &[Check]) -> String {
    let mut out = format!("devprof doctor {target}\n");
    let width = checks
        .iter()
        .map(|c| c.title.chars().count())
        .max()
        .unwrap_or(10);
    for c in checks {
        out.push_str(&format!(
            "  {} {:<width$}  {}\n",
            c.status.mark(),
            c.title,
            c.detail
        ));
        if let Some(fix) = &c.fix {
            if c.status != Status::Pass {
                out.push_str(&format!("    {:<width$}  fix: {fix}\n", ""));
            }
        }
    }
    let failed = failures(checks);
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    if failed.is_empty() {
        out.push_str(&format!(
            "nothing blocks profiling {target}{}\n",
            if warned > 0 {
                format!(" ({warned} warning(s): the profile loses something, see !)")
            } else {
                String::new()
            }
        ));
    } else {
        out.push_str(&format!(
            "{} check(s) block profiling: {}\n",
            failed.len(),
            failed
                .iter()
                .map(|c| c.title)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::{Arch, FramePointers};

    const PROBE_DEMO: &str = include_str!("../../tests/data/doctor/probe-demo-seq.txt");
    const EXTRAS_DEMO: &str = include_str!("../../tests/data/doctor/extras-demo-seq.txt");
    const PROBE_PLAIN: &str = include_str!("../../tests/data/doctor/probe-plain.txt");
    const EXTRAS_PLAIN: &str = include_str!("../../tests/data/doctor/extras-plain.txt");
    const PERFMON_REJECTED: &str = "invalid CapAdd: unknown capability: \"CAP_PERFMON\"";

    fn engine() -> EngineVersion {
        EngineVersion {
            version: "20.10.24+dfsg1".into(),
            api_version: "1.41".into(),
            kernel: "6.18.44-fc-v595".into(),
        }
    }

    fn container(name: &str) -> ContainerInfo {
        ContainerInfo {
            id: "1ed92c4ee5231234".into(),
            name: name.into(),
            image: "devprof-demo-node:latest".into(),
            state: "running".into(),
            service: None,
            project: None,
            labels: Default::default(),
        }
    }

    /// /usr/local/bin/demo-node as `devprof build source` makes it (numbers read from it).
    fn demo_node_elf() -> ElfReport {
        ElfReport {
            arch: Arch::X86_64,
            symtab_functions: 2021,
            dynsym_functions: 0,
            debug_info_bytes: 4_089_803,
            has_debug_line: true,
            debuglink: None,
            build_id: None,
            has_eh_frame: true,
            has_debug_frame: false,
            frame_pointers: FramePointers {
                verdict: FpVerdict::Yes,
                examined: 42,
                with_fp: 42,
                basis: "the prologues (push %rbp; mov %rsp,%rbp) of the program's own Rust functions in .symtab".into(),
            },
            jemalloc: Jemalloc::Prefixed,
        }
    }

    /// The same binary after `strip`.
    fn stripped_elf() -> ElfReport {
        ElfReport {
            symtab_functions: 0,
            debug_info_bytes: 0,
            has_debug_line: false,
            frame_pointers: FramePointers {
                verdict: FpVerdict::Yes,
                examined: 1527,
                with_fp: 999,
                basis: "the prologues (push %rbp; mov %rsp,%rbp) of the .eh_frame entries".into(),
            },
            ..demo_node_elf()
        }
    }

    fn demo_seq() -> DoctorFacts {
        let probe = ContainerFacts::parse(PROBE_DEMO);
        let process = probe
            .processes
            .iter()
            .find(|p| p.pid == 6)
            .cloned()
            .unwrap();
        DoctorFacts {
            target: "demo-seq".into(),
            daemon: Some(Ok("unix:///var/run/docker.sock".into())),
            engine: Some(engine()),
            container: Some(Ok(container("demo-seq"))),
            config: Some(ContainerConfig {
                cap_add: vec![
                    "SYS_ADMIN".into(),
                    "SYS_PTRACE".into(),
                    "SYSLOG".into(),
                    "IPC_LOCK".into(),
                ],
                security_opt: vec!["seccomp=unconfined".into()],
                ..Default::default()
            }),
            perfmon_known: Some(Err(PERFMON_REJECTED.into())),
            probe: Some(probe),
            process: Some(Ok(process)),
            perf: Some(Ok(PerfTool {
                path: "/usr/bin/perf".into(),
                version: "6.1.176".into(),
                supports_zstd: true,
            })),
            trial: Some(Trial::Allowed(75.8)),
            extras: Some(ProcessExtras::parse(EXTRAS_DEMO)),
            binary: Some(("/usr/local/bin/demo-node".into(), Ok(demo_node_elf()))),
        }
    }

    fn plain() -> DoctorFacts {
        let probe = ContainerFacts::parse(PROBE_PLAIN);
        let process = probe.processes[0].clone();
        DoctorFacts {
            target: "plain".into(),
            daemon: Some(Ok("unix:///var/run/docker.sock".into())),
            engine: Some(engine()),
            container: Some(Ok(container("plain"))),
            config: Some(ContainerConfig::default()),
            perfmon_known: Some(Err(PERFMON_REJECTED.into())),
            probe: Some(probe),
            process: Some(Ok(process)),
            perf: Some(Err("not installed in the container".into())),
            trial: None,
            extras: Some(ProcessExtras::parse(EXTRAS_PLAIN)),
            binary: Some(("/usr/local/bin/demo-node".into(), Ok(stripped_elf()))),
        }
    }

    fn by_id<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no check {id}"))
    }

    #[test]
    fn demo_seq_passes_every_check() {
        let checks = evaluate(&demo_seq());
        assert_eq!(checks.len(), 16);
        for c in &checks {
            assert_eq!(c.status, Status::Pass, "{c:?}");
        }
        assert!(by_id(&checks, "capabilities")
            .detail
            .contains("SYS_ADMIN stands in for PERFMON"));
        assert!(by_id(&checks, "perf")
            .detail
            .contains("older than the kernel 6.18.44-fc-v595"));
        assert!(by_id(&checks, "jemalloc")
            .detail
            .starts_with("active: _RJEM_MALLOC_CONF=prof:true"));
        assert!(failures(&checks).is_empty());
        assert!(render("demo-seq", &checks).ends_with("nothing blocks profiling demo-seq\n"));
    }

    #[test]
    fn plain_container_fails_each_blocking_check_with_its_fix() {
        let checks = evaluate(&plain());
        let failed: Vec<&str> = failures(&checks).iter().map(|c| c.id).collect();
        assert_eq!(
            failed,
            vec![
                "perf",
                "perf_event_open",
                "perf_event_paranoid",
                "capabilities",
                "seccomp",
                "symbols"
            ]
        );
        for c in failures(&checks) {
            assert!(
                c.fix.as_deref().is_some_and(|f| !f.is_empty()),
                "{c:?} has no fix"
            );
        }
        assert!(
            by_id(&checks, "capabilities")
                .fix
                .as_deref()
                .unwrap()
                .contains("cap_add: [SYS_ADMIN, SYS_PTRACE]"),
            "this engine rejects PERFMON"
        );
        assert!(by_id(&checks, "perf")
            .fix
            .as_deref()
            .unwrap()
            .contains("devprof build tools devprof-demo-node:latest"));
        assert!(by_id(&checks, "symbols").detail.contains("stripped"));
        assert!(by_id(&checks, "perf_event_open")
            .detail
            .starts_with("not tried (no perf)"));
        for warned in ["kptr_restrict", "tracefs", "debuginfo", "jemalloc"] {
            assert_eq!(by_id(&checks, warned).status, Status::Warn, "{warned}");
        }
        // Frame pointers are still judged without symbols, from .eh_frame.
        assert_eq!(by_id(&checks, "frame_pointers").status, Status::Pass);
        let text = render("plain", &checks);
        assert!(
            text.contains("✗ perf ") && text.contains("fix: use an image with perf"),
            "{text}"
        );
        assert!(text.ends_with("6 check(s) block profiling: perf, perf_event_open, kernel.perf_event_paranoid, capabilities, seccomp, symbols\n"));
    }

    #[test]
    fn a_successful_trial_outweighs_the_prediction() {
        let mut facts = plain();
        facts.perf = demo_seq().perf;
        facts.trial = Some(Trial::Allowed(80.0));
        facts.binary = Some(("/usr/local/bin/demo-node".into(), Ok(demo_node_elf())));
        let checks = evaluate(&facts);
        assert!(failures(&checks).is_empty(), "{:?}", failures(&checks));
        let denied = DoctorFacts {
            trial: Some(Trial::Denied(
                "No permission to enable cpu-clock event.".into(),
            )),
            ..facts
        };
        let checks = evaluate(&denied);
        let open = by_id(&checks, "perf_event_open");
        assert_eq!(open.status, Status::Fail);
        assert!(open.detail.contains("No permission"));
        assert!(open.fix.as_deref().unwrap().contains("seccomp=unconfined"));
    }

    #[test]
    fn unreachable_daemon_and_missing_container_stop_the_list() {
        let checks = evaluate(&DoctorFacts {
            daemon: Some(Err("cannot reach the Docker daemon at unix:///nope".into())),
            ..Default::default()
        });
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].status, Status::Fail);
        let checks = evaluate(&DoctorFacts {
            daemon: Some(Ok("unix:///var/run/docker.sock".into())),
            container: Some(Err(
                "no container matches 'x'\n  running containers:\n    - demo-seq".into(),
            )),
            ..Default::default()
        });
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[1].detail, "no container matches 'x'");
        assert!(checks[1].fix.as_deref().unwrap().contains("demo-seq"));
    }

    #[test]
    fn runtimes() {
        let proc_of = |cmd: &str| ProcInfo {
            pid: 7,
            ppid: 1,
            cmdline: cmd.into(),
        };
        let extras = |libs: &[&str]| ProcessExtras {
            libraries: libs.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        };
        assert_eq!(
            runtime_of(Some(&proc_of("/usr/bin/java -jar x.jar")), &extras(&[])),
            Runtime::Jvm
        );
        assert_eq!(
            runtime_of(
                Some(&proc_of("besu")),
                &extras(&["/opt/java/lib/server/libjvm.so"])
            ),
            Runtime::Jvm
        );
        assert_eq!(
            runtime_of(Some(&proc_of("node dist/main.js")), &extras(&[])),
            Runtime::Node
        );
        assert_eq!(
            runtime_of(Some(&proc_of("python3.12 -m app")), &extras(&[])),
            Runtime::Python
        );
        assert_eq!(
            runtime_of(Some(&proc_of("demo-node")), &extras(&[])),
            Runtime::Native
        );
        let node = runtime_check(
            Runtime::Node,
            Some(&proc_of("node --perf-basic-prof app.js")),
            &extras(&[]),
            true,
        );
        assert_eq!(node.status, Status::Pass);
        let jvm = runtime_check(Runtime::Jvm, Some(&proc_of("java")), &extras(&[]), true);
        assert_eq!(jvm.status, Status::Warn);
        assert!(jvm.fix.unwrap().contains("PreserveFramePointer"));
    }

    #[test]
    fn extras_parse_real_output() {
        let e = ProcessExtras::parse(EXTRAS_DEMO);
        assert_eq!(e.exe, "/usr/local/bin/demo-node");
        assert_eq!(e.env.len(), 2);
        assert_eq!(e.tracefs.as_deref(), Some("/sys/kernel/tracing"));
        assert_eq!(e.kallsyms_address, "ffffffff81000000");
        let p = ProcessExtras::parse(EXTRAS_PLAIN);
        assert_eq!(
            (p.tracefs, p.kallsyms_address.as_str()),
            (None, "0000000000000000")
        );
    }
}
