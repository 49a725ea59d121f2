//! Validated settings, made once from the command line (which clap has already merged with
//! the environment and .env). Nothing past this point sees raw argument strings. One file
//! per command group: `capture` (cpu, offcpu, heap), `store` (ls, clean, render, top, diff),
//! `setup` (build, compose, doctor); the rules they share are here.

pub mod capture;
pub mod marks;
pub mod profile;
pub mod setup;
pub mod store;

pub use capture::{
    CpuSettings, HeapSettings, HeapSource, OffcpuSettings, StatSettings, StatSource, SummaryMode,
};

use crate::cli::{CallGraphArg, ModeArg, PlacementArgs, ProcessArgs};
use crate::docker::target::ProcessSelector;
use crate::error::{Error, Result};
use crate::units::parse_duration;
use regex::Regex;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallGraph {
    #[default]
    FramePointer,
    Dwarf,
}

impl CallGraph {
    pub fn perf_arg(self) -> &'static str {
        match self {
            CallGraph::FramePointer => "fp",
            CallGraph::Dwarf => "dwarf",
        }
    }
}

/// How a perf capture's samples become folded stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FoldPath {
    /// Native for frame-pointer captures, `perf script` when native falls short.
    #[default]
    Auto,
    /// perf.data read and symbolized by devprof (frame-pointer captures).
    Native,
    /// `perf script` in the container.
    PerfScript,
}

/// The engine a CPU capture records with, and that engine's own options: an option travels
/// only with the engine that reads it, and the pairing is checked once, here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineSpec {
    /// The best engine for the process's runtime, with the options of each candidate.
    Auto {
        python: PythonOptions,
        jvm: AsprofOptions,
    },
    Perf,
    PySpy(PythonOptions),
    Asprof(AsprofOptions),
    /// Go's own profile from the service's net/http/pprof endpoint (`http://host:port`;
    /// None: found from the process's listening sockets).
    Pprof {
        url: Option<String>,
    },
}

impl EngineSpec {
    /// Whether the capture records with perf whatever the target (Some(true)), never
    /// (Some(false)), or as the target's runtime decides (None: auto).
    pub fn records_with_perf(&self) -> Option<bool> {
        match self {
            EngineSpec::Auto { .. } => None,
            EngineSpec::Perf => Some(true),
            EngineSpec::PySpy(_) | EngineSpec::Asprof(_) | EngineSpec::Pprof { .. } => Some(false),
        }
    }
}

/// What py-spy records besides Python frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PythonOptions {
    pub native: bool,
    pub idle: bool,
    pub gil: bool,
}

/// async-profiler's options (JVM targets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsprofOptions {
    /// A validated async-profiler release directory on this host.
    pub dir: Option<PathBuf>,
    /// Wall-clock instead of on-CPU.
    pub wall: bool,
    /// Also keep async-profiler's own HTML flamegraph.
    pub html: bool,
}

impl AsprofOptions {
    /// The flag given that only async-profiler can honour, if any.
    pub fn needs_asprof(&self) -> Option<&'static str> {
        if self.wall {
            Some("--wall")
        } else if self.html {
            Some("--asprof-html")
        } else {
            None
        }
    }
}

/// Where perf runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    /// Exec when the container has a perf that may record, else a sidecar.
    Auto,
    Exec,
    Sidecar,
}

/// Where the recorder runs, and the image a sidecar is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub mode: CaptureMode,
    pub profiler_image: String,
    /// The capture window (a sidecar lives this long plus a margin).
    pub window: Duration,
    /// A sidecar may be started `privileged` when nothing less lets perf record.
    pub allow_privileged: bool,
    /// Host-wide perf sysctls may be lowered for the capture (and are restored after).
    pub allow_sysctl: bool,
}

pub(crate) fn placement_of(args: PlacementArgs, window: Duration) -> Result<Placement> {
    let profiler_image = args.profiler_image.trim().to_string();
    if profiler_image.is_empty() {
        return Err(Error::Usage(
            "--profiler-image / DEVPROF_PROFILER_IMAGE is empty".into(),
        ));
    }
    Ok(Placement {
        mode: args.mode.into(),
        profiler_image,
        window,
        allow_privileged: args.allow_privileged,
        allow_sysctl: args.allow_sysctl,
    })
}

impl From<ModeArg> for CaptureMode {
    fn from(arg: ModeArg) -> Self {
        match arg {
            ModeArg::Auto => CaptureMode::Auto,
            ModeArg::Exec => CaptureMode::Exec,
            ModeArg::Sidecar => CaptureMode::Sidecar,
        }
    }
}

/// The longest capture accepted; perf.data grows with it and a typo like `600m` should
/// not silently record for ten hours.
const MAX_DURATION: Duration = Duration::from_secs(6 * 3600);

/// Where event configs are looked up: DEVPROF_CONFIG_DIR, then ./profiling-configs.
pub fn config_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = crate::cli::dotenv::var("DEVPROF_CONFIG_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    }
    dirs.push(PathBuf::from("profiling-configs"));
    dirs
}

pub(crate) fn target_of(target: Option<String>) -> Result<String> {
    target
        .filter(|t| !t.trim().is_empty())
        .ok_or(Error::NoTarget)
}

pub(crate) fn window_of(text: &str) -> Result<Duration> {
    let duration =
        parse_duration(text).map_err(|e| Error::Usage(format!("invalid DURATION {e}")))?;
    if duration.is_zero() {
        return Err(Error::Usage("DURATION must be at least 1 s".into()));
    }
    if duration > MAX_DURATION {
        return Err(Error::Usage(format!(
            "DURATION {text} is longer than the 6 h limit"
        )));
    }
    Ok(duration)
}

pub(crate) fn fold_path_of(arg: crate::cli::FoldArg, call_graph: CallGraph) -> Result<FoldPath> {
    use crate::cli::FoldArg;
    // Both call graphs fold natively (DWARF stacks unwound with the binaries).
    let _ = call_graph;
    Ok(match arg {
        FoldArg::Native => FoldPath::Native,
        FoldArg::PerfScript => FoldPath::PerfScript,
        FoldArg::Auto => FoldPath::Auto,
    })
}

pub(crate) fn call_graph_of(arg: CallGraphArg) -> CallGraph {
    match arg {
        CallGraphArg::Fp => CallGraph::FramePointer,
        CallGraphArg::Dwarf => CallGraph::Dwarf,
    }
}

pub(crate) fn selector_of(args: ProcessArgs) -> Result<ProcessSelector> {
    Ok(match (args.process, args.pid) {
        (_, Some(pid)) => ProcessSelector::Pid(pid),
        (Some(re), None) => ProcessSelector::Matching(
            Regex::new(&re).map_err(|e| Error::Usage(format!("--process: invalid regex: {e}")))?,
        ),
        (None, None) => ProcessSelector::Main,
    })
}
