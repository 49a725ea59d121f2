//! Settings of the capture commands (cpu, offcpu, heap).

use super::{
    call_graph_of, config_dirs, placement_of, selector_of, target_of, window_of, CallGraph,
    EngineChoice, Placement,
};
use crate::cli::{CpuArgs, HeapArgs, OffcpuArgs};
use crate::docker::target::ProcessSelector;
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{Selection, Signal};
use crate::profile::heap::parse::Measure;
use crate::profile::offcpu::config::{self, EventConfig};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct CpuSettings {
    pub placement: Placement,
    pub engine: EngineChoice,
    /// py-spy's options (Python targets).
    pub python: PythonOptions,
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

/// What py-spy records besides Python frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PythonOptions {
    pub native: bool,
    pub idle: bool,
    pub gil: bool,
}

impl CpuSettings {
    pub fn from_args(args: CpuArgs, output_dir: PathBuf) -> Result<Self> {
        if !(1..=100_000).contains(&args.frequency) {
            return Err(Error::Usage(format!(
                "--frequency {} is out of range (1..=100000 Hz)",
                args.frequency
            )));
        }
        Ok(CpuSettings {
            placement: placement_of(args.placement, window_of(&args.duration)?)?,
            engine: args.engine.into(),
            python: PythonOptions {
                native: args.native,
                idle: args.idle,
                gil: args.gil,
            },
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
    pub placement: Placement,
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
            placement: placement_of(args.placement, window_of(&args.duration)?)?,
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

/// What `devprof heap` renders: fresh dumps asked for over a window, or dumps the process
/// already wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeapSource {
    Window(Duration),
    Existing(Selection),
}

#[derive(Debug, Clone)]
pub struct HeapSettings {
    pub target: String,
    pub source: HeapSource,
    pub measure: Measure,
    /// The signal that makes the program write a dump.
    pub signal: Signal,
    pub process: ProcessSelector,
    pub output_dir: PathBuf,
    pub json: bool,
}

impl HeapSettings {
    pub fn from_args(args: HeapArgs, output_dir: PathBuf) -> Result<Self> {
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
            (None, None) => HeapSource::Window(window_of(&args.default_duration)?),
        };
        let signal = Signal::parse(&args.signal)
            .map_err(|e| Error::Usage(format!("--signal / DEVPROF_HEAP_DUMP_SIGNAL: {e}")))?;
        Ok(HeapSettings {
            target: target_of(args.target)?,
            source,
            measure: if args.alloc {
                Measure::Allocated
            } else {
                Measure::InUse
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
