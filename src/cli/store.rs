//! Arguments of the commands over the profile store: fold, summarize, ls, clean, render,
//! top, diff, export.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FoldArgs {
    /// `perf script` output (`-` for standard input), or a perf.data file with
    /// frame-pointer callchains, read and symbolized by devprof itself (no perf needed).
    pub input: PathBuf,

    /// perf.data input: where the recorded process's files are found (a copy of its
    /// container's files; `/` for a capture of this host). Kernel frames are named from
    /// this host's /proc/kallsyms, or for a capture in the store from the copy its
    /// symbol cache keeps for this boot.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub symfs: PathBuf,

    /// Write folded stacks here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,

    /// Also render a flamegraph SVG.
    #[arg(long)]
    pub svg: Option<PathBuf>,

    /// Title of the SVG.
    #[arg(long, default_value = "Flame Graph")]
    pub title: String,

    /// Also write the timeline (every sample's time, thread and stack) here.
    #[arg(long)]
    pub timeline: Option<PathBuf>,

    /// With --timeline: also write its time heatmap page (HTML) here.
    #[arg(long, requires = "timeline")]
    pub heatmap: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only this container's captures (its directory name in the store).
    pub target: Option<String>,

    /// List the multi-container sessions (`devprof profile`) instead of the captures.
    #[arg(long, conflicts_with = "target")]
    pub sessions: bool,

    /// Print the captures as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CleanArgs {
    /// Only this container's captures (its directory name in the store).
    pub target: Option<String>,

    /// Remove captures older than this: 7d, 12h, 30m, 1d12h.
    #[arg(long, value_name = "AGE", required_unless_present = "containers")]
    pub older: Option<String>,

    /// Remove leftover profiler sidecar containers (label devprof.sidecar) instead of
    /// captures.
    #[arg(long, conflicts_with_all = ["older", "keep_last", "target"])]
    pub containers: bool,

    /// Keep the newest N captures of each container and kind, however old.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_last: usize,

    /// Show what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Print what was (or would be) removed as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Which stacks and frames to look at (render, top, diff).
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Keep only stacks in which REGEX matches (on `frame;frame;...`).
    #[arg(long, value_name = "REGEX")]
    pub include: Option<String>,

    /// Drop stacks in which REGEX matches (on `frame;frame;...`).
    #[arg(long, value_name = "REGEX")]
    pub exclude: Option<String>,

    /// Drop the runtime frames a language's users filter out (node: libc/libuv/V8/node
    /// internals, stubs, [unknown]; strips LazyCompile:* and LazyCompile:~ prefixes).
    #[arg(long, value_enum)]
    pub preset: Option<PresetArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PresetArg {
    Node,
}

/// How a flamegraph is drawn (render, diff).
#[derive(Debug, Args)]
pub struct LayoutArgs {
    /// Title of the SVG (default: the file's name).
    #[arg(long)]
    pub title: Option<String>,

    /// Width of the SVG in pixels (default: fluid, fills the browser window).
    #[arg(long, value_name = "PIXELS")]
    pub width: Option<usize>,

    /// Omit frames narrower than this, in percent of the graph's width.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.1)]
    pub min_width: f64,

    /// Write the SVG here (`-` for standard output).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// A .folded file (folded stacks), or a .data file (read with this host's perf). With
    /// --heatmap: a capture (a file of it, or a container directory in the store).
    pub file: PathBuf,

    /// Write the capture's time heatmap page (HTML) instead of a flamegraph SVG.
    #[arg(long)]
    pub heatmap: bool,

    #[command(flatten)]
    pub layout: LayoutArgs,

    /// Colour palette: hot, mem, io, red, green, blue, aqua, yellow, purple, orange,
    /// rust, java, js, perl, python, wakeup.
    #[arg(long, value_name = "PALETTE", default_value = "rust")]
    pub colors: String,

    /// Icicle graph: roots at the top, growing down.
    #[arg(long)]
    pub inverted: bool,

    /// Reverse every stack (leaves become roots): who calls the hottest functions.
    #[arg(long)]
    pub reverse: bool,

    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// A .folded (or .data) file, or a container directory in the store (its newest capture).
    #[arg(value_name = "FILE|TARGET")]
    pub profile: String,

    /// How many rows per table.
    #[arg(long, short = 'n', default_value_t = 15)]
    pub limit: usize,

    /// Who calls the frames matching PATTERN: for each stack, the nearest caller frame
    /// (matching --module when given) above the innermost matching frame, summed.
    #[arg(long, value_name = "PATTERN")]
    pub callers: Option<String>,

    /// With --callers: only frames matching REGEX count as callers (e.g. '^reth_').
    #[arg(long, value_name = "REGEX", requires = "callers")]
    pub module: Option<String>,

    /// The share of each module: every sample goes to the innermost frame matching REGEX,
    /// named by its first capture group (e.g. '(reth_\w+)::'); the rest is <other>.
    #[arg(long, value_name = "REGEX")]
    pub modules: Option<String>,

    /// Print the tables as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline: a .folded (or .data) file, or a container directory in the store.
    #[arg(value_name = "BEFORE")]
    pub before: String,

    /// The profile compared with it, as BEFORE.
    #[arg(value_name = "AFTER")]
    pub after: String,

    /// How many gains and how many losses to list.
    #[arg(long, short = 'n', default_value_t = 15)]
    pub limit: usize,

    /// Compare functions by self samples (leaf) or inclusive samples (anywhere on the stack).
    #[arg(long, value_enum, default_value_t = MeasureArg::SelfTime)]
    pub by: MeasureArg,

    #[command(flatten)]
    pub layout: LayoutArgs,

    /// Print the comparison as JSON on stdout (the SVG is still written).
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MeasureArg {
    #[value(name = "self")]
    SelfTime,
    Inclusive,
}

#[derive(Debug, Args)]
pub struct SummarizeArgs {
    /// A perf.data file (`offcpu-….data`).
    pub input: PathBuf,

    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// A capture: a file of it (its .folded, .timeline or .json manifest), or a container
    /// directory in the store (its newest capture).
    #[arg(value_name = "CAPTURE")]
    pub capture: String,

    /// The format: pprof (gzipped profile.proto), speedscope (JSON), firefox (the Firefox
    /// Profiler's processed JSON), collapsed (folded stacks).
    #[arg(long, short = 'f', value_enum)]
    pub format: ExportFormatArg,

    /// Where to write it (`-`: standard output); default `<capture>.<format extension>`
    /// in the current directory.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormatArg {
    Pprof,
    Speedscope,
    Firefox,
    Collapsed,
}
