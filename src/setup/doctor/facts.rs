//! What the doctor gathers about a target, as plain data: the daemon, the container and
//! its configuration, the probe every capture makes, the perf_event_open trial, the
//! process's environment and maps, and its binary.

use crate::docker::probe::ContainerFacts;
use crate::docker::target::{ContainerInfo, ProcInfo};
use crate::docker::wire::{records, Once};
use crate::docker::{ContainerConfig, EndpointVersion};
use crate::engines::diagnosis::PerfTool;
use crate::runtime::facts::{process_script, ProcessFacts};
use crate::symbols::elf::ElfReport;

/// How the 100 ms perf_event_open trial went.
#[derive(Debug, Clone, PartialEq)]
pub enum Trial {
    /// Counted this many milliseconds of cpu-clock.
    Allowed(f64),
    Denied(String),
    Failed(String),
}

/// What the doctor learned about the process: the facts every capture reads, plus where
/// tracefs is and whether kernel addresses show.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessExtras {
    pub process: ProcessFacts,
    /// Where tracefs is visible, if anywhere.
    pub tracefs: Option<String>,
    /// The first address /proc/kallsyms shows (all zeros when hidden).
    pub kallsyms_address: String,
}

impl ProcessExtras {
    pub fn parse(text: &str) -> Self {
        let mut extras = ProcessExtras {
            process: ProcessFacts::parse(text),
            ..Default::default()
        };
        let mut once = Once::default();
        for record in records(text) {
            let value = record.raw(0).unwrap_or("");
            match record.key {
                "tracefs" if once.first("tracefs") => {
                    extras.tracefs = TRACEFS.iter().find(|t| **t == value).map(|t| t.to_string())
                }
                "kallsyms"
                    if once.first("kallsyms")
                        && value.len() <= 16
                        && value.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    extras.kallsyms_address = value.to_string();
                }
                _ => {}
            }
        }
        extras
    }
}

/// Where tracefs may be mounted.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The extra exec the doctor runs, with the pid as `$1` (argv[0] as `$2`): the process
/// script every capture runs, then tracefs and kallsyms.
pub fn extras_script() -> String {
    process_script()
        + r#"
if [ -d /sys/kernel/tracing/events ]; then printf 'tracefs\t/sys/kernel/tracing\n'
elif [ -d /sys/kernel/debug/tracing/events ]; then printf 'tracefs\t/sys/kernel/debug/tracing\n'; fi
read -r addr rest < /proc/kallsyms 2>/dev/null; printf 'kallsyms\t%s\n' "$addr"
"#
}

/// Everything gathered; None where the step was not reached.
#[derive(Debug, Clone, Default)]
pub struct DoctorFacts {
    pub target: String,
    /// The daemon's address, or why it cannot be reached.
    pub daemon: Option<Result<String, String>>,
    pub endpoint: Option<EndpointVersion>,
    /// Whether the endpoint runs its containers rootless (in a user namespace).
    pub rootless: bool,
    pub container: Option<Result<ContainerInfo, String>>,
    pub config: Option<ContainerConfig>,
    /// Whether the engine accepts CAP_PERFMON (a container created with it, never started).
    pub perfmon_known: Option<Result<(), String>>,
    pub probe: Option<ContainerFacts>,
    pub process: Option<Result<ProcInfo, String>>,
    pub perf: Option<Result<PerfTool, String>>,
    pub trial: Option<Trial>,
    pub extras: Option<ProcessExtras>,
    /// For a JVM: async-profiler's release directory in the container (None inside: not
    /// found).
    pub asprof: Option<Option<String>>,
    /// The binary's path and what its ELF sections say.
    pub binary: Option<(String, Result<ElfReport, String>)>,
    /// The path `devprof cpu --mode` takes (auto: exec when it works, else the sidecar).
    pub mode: Option<crate::settings::CaptureMode>,
    /// The profiler image a sidecar would start from: `Ok` when the engine has it and
    /// devprof trusts it there, else why not.
    pub sidecar_image: Option<Result<String, ImageUnusable>>,
}

/// Why the profiler image cannot serve a sidecar, and what fixes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageUnusable {
    pub why: String,
    pub fix: String,
}
