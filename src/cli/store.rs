//! Arguments of the commands over the profile store: fold, summarize, ls, clean, render,
//! top, diff, export, view.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct FoldArgs {
    /// `perf script` output (`-` for standard input), or a perf.data file: frame-pointer
    /// callchains are read and symbolized by devprof itself (no perf needed); DWARF and LBR
    /// call graphs go through this host's `perf script`, which unwinds them.
    pub input: PathBuf,

    /// `perf script` text: what a sample adds to its stack's count: 1 (`samples`, as
    /// devprof's captures count), or the period perf printed with it (`period`:
    /// nanoseconds for cpu-clock, events for a hardware counter; as inferno and
    /// stackcollapse-perf.pl count when the text has periods).
    #[arg(long, value_enum, default_value_t = WeightArg::Samples)]
    pub weight: WeightArg,

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

    /// With --timeline: also write its time heatmap page (HTML) here. (Formerly --heatmap,
    /// which `render` keeps as a switch.)
    #[arg(long = "heatmap-file", alias = "heatmap", requires = "timeline")]
    pub heatmap: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only these captures: a TARGET's (container, id prefix, SERVICE, PROJECT/SERVICE), a
    /// session's (`session-…`, `session` for the newest), or one capture by its name.
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
pub enum WeightArg {
    Samples,
    Period,
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
    /// A .folded file (folded stacks), a .data file (read with this host's perf), or a name
    /// in the store: a capture (`perf-20261207-051036`, `demo-seq/perf-…`), a TARGET (its
    /// newest capture, cpu unless --kind says), a session. With --heatmap: a capture (a
    /// file of it, or a name). Default: DEVPROF_TARGET.
    #[arg(env = "DEVPROF_TARGET")]
    pub file: PathBuf,

    /// Which kind of capture a TARGET or a session stands for (default: cpu when it has
    /// one, else its one kind with stacks).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

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

    #[command(flatten)]
    pub slices: SliceArgs,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// A .folded (or .data) file, or a name in the store: a capture (`perf-20261207-051036`,
    /// `demo-seq/perf-…`), a TARGET (a container, id prefix, SERVICE or PROJECT/SERVICE: its
    /// newest capture, cpu unless --kind says), a session. Default: DEVPROF_TARGET.
    #[arg(value_name = "FILE|CAPTURE|TARGET", env = "DEVPROF_TARGET")]
    pub profile: String,

    /// Which kind of capture a TARGET or a session stands for (default: cpu when it has
    /// one, else its one kind with stacks).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

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

    /// Confidence of the intervals shown for a capture set (`--repeat`): 95, 95% or 0.95.
    #[arg(long, value_name = "LEVEL", default_value = "95")]
    pub confidence: String,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub slices: SliceArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The baseline: a .folded (or .data) file, or a name in the store (a capture, a
    /// TARGET, a session).
    #[arg(value_name = "BEFORE")]
    pub before: String,

    /// The profile compared with it, as BEFORE (not with --slice: BEFORE is then the
    /// capture). Default: DEVPROF_TARGET.
    #[arg(
        value_name = "AFTER",
        required_unless_present = "slice",
        env = "DEVPROF_TARGET"
    )]
    pub after: Option<String>,

    /// Which kind of capture a TARGET or a session stands for, on both sides (default: the
    /// kind of a capture named on the other side, else cpu when it has one).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

    /// Compare profiles that measure different things (CPU samples against off-CPU events
    /// or time, heap bytes), which diff otherwise refuses.
    #[arg(long)]
    pub mixed: bool,

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

    /// Fail (exit 10) when EXPR holds: `self(FUNC) > +2pp`, `incl(FUNC) > +3pp`,
    /// `any > +3pp` (points of share), `self(FUNC) > +20%` (percent of its samples per
    /// second), `total_cpu > +5%` (repeatable; any one fails). Compares per function with
    /// intervals and verdicts, as for capture sets.
    #[arg(long, value_name = "EXPR")]
    pub fail_if: Vec<String>,

    /// Confidence of the intervals and verdicts over capture sets: 95, 95% or 0.95.
    #[arg(long, value_name = "LEVEL", default_value = "95")]
    pub confidence: String,

    #[command(flatten)]
    pub filter: FilterArgs,

    #[command(flatten)]
    pub slices: SliceArgs,
}

/// A kind of capture, as `--kind` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Cpu,
    Offcpu,
    Heap,
    Stat,
}

impl KindArg {
    /// The kind as manifests name it.
    pub fn name(self) -> &'static str {
        match self {
            KindArg::Cpu => "cpu",
            KindArg::Offcpu => "offcpu",
            KindArg::Heap => "heap",
            KindArg::Stat => "stat",
        }
    }
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
    /// A capture: a file of it (its .folded, .timeline or .json manifest), its name
    /// (`perf-20261207-051036`, `demo-seq/perf-…`), or a TARGET in the store (its newest
    /// capture, cpu unless --kind says). Or a session of `devprof profile` (its manifest, its
    /// name `session-…`, or `session` for the newest): every container in one file on the
    /// session's clock (firefox, speedscope). Default: DEVPROF_TARGET.
    #[arg(value_name = "CAPTURE|TARGET|SESSION", env = "DEVPROF_TARGET")]
    pub capture: String,

    /// Which kind of capture a TARGET stands for (default: cpu when it has one, else its one
    /// kind with stacks); for a session, the kind each container contributes (default cpu,
    /// else offcpu).
    #[arg(long, value_enum)]
    pub kind: Option<KindArg>,

    /// The format: pprof (gzipped profile.proto), speedscope (JSON), firefox (the Firefox
    /// Profiler's processed JSON), collapsed (folded stacks).
    #[arg(long, short = 'f', value_enum)]
    pub format: ExportFormatArg,

    /// Where to write it (`-`: standard output); default beside the capture in the store
    /// (`<capture>.firefox.json`, `.speedscope.json`, `.collapsed`, `.pprof.pb.gz`), or
    /// `<name>.<format extension>` in the current directory for a file outside the store
    /// and for a session.
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

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// The page to start on: a capture (its name, or a file of it), a container's captures,
    /// or a session. Default: every capture.
    #[arg(value_name = "CAPTURE|TARGET|SESSION")]
    pub start: Option<String>,

    /// The port on 127.0.0.1 (default: a free one, chosen at start).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Open the viewer in a browser: $BROWSER, or xdg-open where there is a display.
    #[arg(long)]
    pub open: bool,
}

/// Cutting a capture at its markers (top, render, diff).
#[derive(Debug, Args, Clone, Default)]
pub struct SliceArgs {
    /// Cut the capture's timeline into one interval per marker named MARK (its .markers
    /// file): the line's elapsed time when it reports one, else back to the previous marker.
    #[arg(long, value_name = "MARK")]
    pub slice: Option<String>,

    /// With --slice: only the N slowest intervals (diff: the N slowest against the median
    /// interval; default 3).
    #[arg(long, value_name = "N", requires = "slice")]
    pub slowest: Option<usize>,
}
