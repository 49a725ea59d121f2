//! Validated settings, made once from the command line (which clap has already merged with
//! the environment and .env).

use crate::cli::{CallGraphArg, CpuArgs, ModeArg, OffcpuArgs, ProcessArgs};
use crate::duration::parse_duration;
use crate::error::{Error, Result};
use crate::offcpu::config::{self, EventConfig};
use crate::target::ProcessSelector;
use regex::Regex;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
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

/// Where perf runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    /// Exec when the container has a perf that may record, else a sidecar.
    Auto,
    Exec,
    Sidecar,
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

#[derive(Debug, Clone)]
pub struct CpuSettings {
    pub mode: CaptureMode,
    pub target: String,
    pub duration: Duration,
    pub frequency: u32,
    pub call_graph: CallGraph,
    pub process: ProcessSelector,
    pub keep_script: bool,
    pub inline: bool,
    pub output_dir: PathBuf,
    pub json: bool,
}

/// The longest capture accepted; perf.data grows with it and a typo like `600m` should
/// not silently record for ten hours.
const MAX_DURATION: Duration = Duration::from_secs(6 * 3600);

impl CpuSettings {
    pub fn from_args(args: CpuArgs, output_dir: PathBuf) -> Result<Self> {
        if !(1..=100_000).contains(&args.frequency) {
            return Err(Error::Usage(format!(
                "--frequency {} is out of range (1..=100000 Hz)",
                args.frequency
            )));
        }
        Ok(CpuSettings {
            mode: args.mode.into(),
            target: target_of(args.target)?,
            duration: window_of(&args.duration)?,
            frequency: args.frequency,
            call_graph: call_graph_of(args.call_graph),
            process: selector_of(args.process)?,
            keep_script: args.keep_script,
            inline: args.inline && !args.no_inline,
            output_dir,
            json: args.json,
        })
    }
}

/// Whether the summary symbolizes stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryMode {
    /// Fast above `threshold` recorded events, full below.
    Auto {
        threshold: u64,
    },
    Fast,
    Full,
}

#[derive(Debug, Clone)]
pub struct OffcpuSettings {
    pub capture_mode: CaptureMode,
    pub target: String,
    pub duration: Duration,
    pub config: EventConfig,
    pub mode: SummaryMode,
    pub call_graph: CallGraph,
    pub process: ProcessSelector,
    pub keep_script: bool,
    pub output_dir: PathBuf,
    pub json: bool,
}

impl OffcpuSettings {
    pub fn from_args(args: OffcpuArgs, output_dir: PathBuf) -> Result<Self> {
        let config = config::load(args.config.as_deref(), &config_dirs()).map_err(Error::Usage)?;
        if config.events.is_empty() {
            return Err(Error::Usage(format!(
                "event config {} lists no events",
                config.source
            )));
        }
        Ok(OffcpuSettings {
            capture_mode: args.mode.into(),
            target: target_of(args.target)?,
            duration: window_of(&args.duration)?,
            config,
            mode: match (args.fast, args.full) {
                (true, _) => SummaryMode::Fast,
                (_, true) => SummaryMode::Full,
                _ => SummaryMode::Auto {
                    threshold: args.fast_threshold,
                },
            },
            call_graph: call_graph_of(args.call_graph),
            process: selector_of(args.process)?,
            keep_script: args.keep_script,
            output_dir,
            json: args.json,
        })
    }
}

/// Where event configs are looked up: DEVPROF_CONFIG_DIR, then ./profiling-configs.
pub fn config_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("DEVPROF_CONFIG_DIR").filter(|d| !d.is_empty()) {
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

fn window_of(text: &str) -> Result<Duration> {
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

fn call_graph_of(arg: CallGraphArg) -> CallGraph {
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

/// What `devprof heap` renders: fresh dumps asked for over a window, or dumps the process
/// already wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeapSource {
    Window(Duration),
    Existing(crate::heap::dumps::Selection),
}

#[derive(Debug, Clone)]
pub struct HeapSettings {
    pub target: String,
    pub source: HeapSource,
    pub measure: crate::heap::parse::Measure,
    /// The dump signal: (name, number).
    pub signal: (String, u32),
    pub process: ProcessSelector,
    pub output_dir: PathBuf,
    pub json: bool,
}

impl HeapSettings {
    pub fn from_args(args: crate::cli::HeapArgs, output_dir: PathBuf) -> Result<Self> {
        use crate::heap::dumps::Selection;
        let selection = match (args.latest, args.all, args.last, args.files.is_empty()) {
            (true, ..) => Some(Selection::Latest),
            (_, true, ..) => Some(Selection::All),
            (_, _, Some(0), _) => {
                return Err(Error::Usage("--last N: N must be at least 1".into()))
            }
            (_, _, Some(n), _) => Some(Selection::Last(n)),
            (_, _, None, false) => Some(Selection::Files(heap_file_names(&args.files)?)),
            _ => None,
        };
        let source = match (selection, args.duration) {
            (Some(_), Some(d)) => {
                return Err(Error::Usage(format!(
                    "DURATION ({d}) asks for fresh dumps; --latest, --all, --last and --files render dumps \
                     already written: give one or the other"
                )))
            }
            (Some(s), None) => HeapSource::Existing(s),
            (None, Some(d)) => HeapSource::Window(window_of(&d)?),
            (None, None) => HeapSource::Window(window_of(
                &std::env::var("DEVPROF_DURATION").unwrap_or_else(|_| "30s".to_string()),
            )?),
        };
        let signal = crate::heap::dumps::parse_signal(&args.signal)
            .map_err(|e| Error::Usage(format!("--signal / DEVPROF_HEAP_DUMP_SIGNAL: {e}")))?;
        Ok(HeapSettings {
            target: target_of(args.target)?,
            source,
            measure: if args.alloc {
                crate::heap::parse::Measure::Allocated
            } else {
                crate::heap::parse::Measure::InUse
            },
            signal,
            process: selector_of(args.process)?,
            output_dir,
            json: args.json,
        })
    }
}

/// `--files` names: dump file names as jemalloc wrote them, without directories, each once.
fn heap_file_names(names: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() {
            return Err(Error::Usage("--files: empty name in the list".into()));
        }
        if name.contains('/') || name == "." || name == ".." {
            return Err(Error::Usage(format!(
                "--files: '{name}' is a path; give dump file names as the process wrote them \
                 (e.g. jeprof.demo-seq.6.0.m0.heap), which devprof looks up in the process's dump directory"
            )));
        }
        if !name.ends_with(".heap") {
            return Err(Error::Usage(format!(
                "--files: '{name}' is not a jemalloc dump name (<prefix>.<pid>.<seq>.<kind>.heap)"
            )));
        }
        if out.iter().any(|n| n == name) {
            return Err(Error::Usage(format!("--files: '{name}' is listed twice")));
        }
        out.push(name.to_string());
    }
    Ok(out)
}
