//! Validated settings, made once from the command line (which clap has already merged with
//! the environment and .env).

use crate::cli::{CallGraphArg, CpuArgs};
use crate::duration::parse_duration;
use crate::error::{Error, Result};
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

#[derive(Debug, Clone)]
pub struct CpuSettings {
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
        let target = args
            .target
            .filter(|t| !t.trim().is_empty())
            .ok_or(Error::NoTarget)?;
        let duration = parse_duration(&args.duration)
            .map_err(|e| Error::Usage(format!("invalid DURATION {e}")))?;
        if duration.is_zero() {
            return Err(Error::Usage("DURATION must be at least 1 s".into()));
        }
        if duration > MAX_DURATION {
            return Err(Error::Usage(format!(
                "DURATION {} is longer than the 6 h limit",
                args.duration
            )));
        }
        if !(1..=100_000).contains(&args.frequency) {
            return Err(Error::Usage(format!(
                "--frequency {} is out of range (1..=100000 Hz)",
                args.frequency
            )));
        }
        let process = match (args.process.process, args.process.pid) {
            (_, Some(pid)) => ProcessSelector::Pid(pid),
            (Some(re), None) => ProcessSelector::Matching(
                Regex::new(&re)
                    .map_err(|e| Error::Usage(format!("--process: invalid regex: {e}")))?,
            ),
            (None, None) => ProcessSelector::Main,
        };
        Ok(CpuSettings {
            target,
            duration,
            frequency: args.frequency,
            call_graph: match args.call_graph {
                CallGraphArg::Fp => CallGraph::FramePointer,
                CallGraphArg::Dwarf => CallGraph::Dwarf,
            },
            process,
            keep_script: args.keep_script,
            inline: args.inline && !args.no_inline,
            output_dir,
            json: args.json,
        })
    }
}
