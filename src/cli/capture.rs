//! Arguments of the capture commands: cpu, offcpu, heap.

use clap::{Args, ValueEnum};

/// How long a capture records when neither DURATION nor DEVPROF_DURATION says.
pub const DEFAULT_DURATION: &str = "30s";

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// How long to record: 60, 45s, 2m, 1m30s (default DEVPROF_DURATION, else 30 s). Not
    /// with a command after `--`: its run is the window.
    pub duration: Option<String>,

    /// The window when DURATION is not given. Not a flag users type: clap fills it from
    /// DEVPROF_DURATION, so that a duration in .env does not collide with a command run.
    #[arg(long, hide = true, env = "DEVPROF_DURATION", default_value = DEFAULT_DURATION)]
    pub default_duration: String,

    /// Sampling frequency in Hz (default 999; 997 for a command run).
    #[arg(long, short = 'F', env = "DEVPROF_FREQUENCY")]
    pub frequency: Option<u32>,

    /// How perf walks the stack: frame pointers (cheap, needs -C force-frame-pointers=yes)
    /// or DWARF (works without frame pointers, much larger perf.data).
    #[arg(long, value_enum, env = "DEVPROF_CALL_GRAPH", default_value_t = CallGraphArg::Fp)]
    pub call_graph: CallGraphArg,

    #[command(flatten)]
    pub placement: PlacementArgs,

    /// The profiler: chosen for the process's runtime (auto), or named.
    #[arg(long, value_enum, env = "DEVPROF_ENGINE", default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,

    /// py-spy (Python targets): also native frames (C extensions, libraries) under the
    /// Python ones; py-spy then pauses the process for each sample. (Formerly --native.)
    #[arg(long = "native-frames", alias = "native")]
    pub native: bool,

    /// py-spy: also sample threads that are idle (waiting on a lock, I/O or sleep).
    #[arg(long, conflicts_with = "gil")]
    pub idle: bool,

    /// py-spy: only samples of the thread holding the GIL (drops threads waiting for it).
    #[arg(long)]
    pub gil: bool,
    /// An async-profiler release directory on this host (bin/asprof,
    /// lib/libasyncProfiler.so), copied into the container when it has none.
    #[arg(long, value_name = "DIR", env = "DEVPROF_ASPROF")]
    pub asprof: Option<std::path::PathBuf>,

    /// Wall-clock profile (async-profiler's `wall` event: running, sleeping and waiting
    /// threads alike) instead of on-CPU time. JVM targets, asprof engine.
    #[arg(long)]
    pub wall: bool,

    /// Also keep async-profiler's own HTML flamegraph of the capture as `<capture>.html`.
    #[arg(long)]
    pub asprof_html: bool,

    /// Go targets: the net/http/pprof endpoint as the container itself reaches it
    /// (http://127.0.0.1:6060); found from the listening sockets when not given.
    #[arg(long, value_name = "URL", env = "DEVPROF_PPROF_URL")]
    pub pprof_url: Option<String>,

    #[command(flatten)]
    pub process: ProcessArgs,

    #[command(flatten)]
    pub marks: MarkArgs,

    /// Also save the `perf script` text next to the other artifacts.
    #[arg(long)]
    pub keep_script: bool,

    /// How perf's samples become folded stacks: read perf.data and name frames in devprof
    /// (native: frame-pointer and DWARF captures, much faster), through `perf script`, or
    /// auto (native, `perf script` when the native path cannot name what perf would: JIT
    /// code, binaries it cannot fetch).
    #[arg(long, value_enum, env = "DEVPROF_FOLD", default_value_t = FoldArg::Auto)]
    pub fold: FoldArg,

    /// Resolve inlined frames with addr2line (much slower on large captures).
    #[arg(long, overrides_with = "no_inline")]
    pub inline: bool,

    /// Skip inline resolution (the default).
    #[arg(long, overrides_with = "inline")]
    pub no_inline: bool,

    /// A capture set: cut the window into K back-to-back parts by sample time, each with
    /// its own folded stacks and timeline, for `top` and `diff` to measure noise by.
    #[arg(long, value_name = "K")]
    pub repeat: Option<u32>,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// When done, open the result (its flamegraph) in a browser: $BROWSER, or xdg-open
    /// where there is a display; says so when there is neither.
    #[arg(long)]
    pub open: bool,

    /// A command (after `--`) to run in the target container, as the target process's
    /// user, in its working directory and environment, recorded from its start to its end.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ProcessArgs {
    /// Profile the process whose program name, else whose full command line, matches
    /// REGEX (like pgrep, then pgrep -f); the busiest one when several do.
    #[arg(long, value_name = "REGEX", conflicts_with = "pid")]
    pub process: Option<String>,

    /// Profile this pid (as seen inside the container).
    #[arg(long)]
    pub pid: Option<u32>,
}

/// Which profiler records a CPU capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The best engine for the process's runtime.
    Auto,
    /// perf record (native code, and JIT code through perf maps).
    Perf,
    /// py-spy record (Python: the interpreter's own frames, from outside the process).
    #[value(name = "py-spy")]
    PySpy,
    /// async-profiler (JVM targets: Java frames named by the JVM itself).
    Asprof,
    /// Go's own CPU profile from the service's net/http/pprof endpoint (Go targets).
    Pprof,
}

/// Where the recorder runs.
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// Where perf runs: inside the container (exec), in a profiler container beside it
    /// (sidecar), or exec when the container has a perf that may record, else sidecar.
    #[arg(long, value_enum, env = "DEVPROF_MODE", default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,

    /// The image sidecars are started from (perf, procps, binutils).
    #[arg(
        long,
        value_name = "IMAGE",
        env = "DEVPROF_PROFILER_IMAGE",
        default_value = "devprof-profiler:latest"
    )]
    pub profiler_image: String,

    /// Let a sidecar run `privileged` when no smaller set of rights lets perf record.
    #[arg(long, env = "DEVPROF_ALLOW_PRIVILEGED")]
    pub allow_privileged: bool,

    /// Let devprof lower the host-wide kernel.perf_event_paranoid and kptr_restrict for
    /// the capture when the container may write them; they are restored afterwards. This
    /// also grants a short-lived helper container (CAP_SYS_ADMIN, unconfined /proc, not
    /// privileged; from the profiler image) that restores them should the
    /// target be gone; where that helper cannot run, nothing is lowered.
    #[arg(long, env = "DEVPROF_ALLOW_SYSCTL")]
    pub allow_sysctl: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Auto,
    Exec,
    Sidecar,
}

/// How a perf capture is folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FoldArg {
    /// native for frame-pointer and DWARF captures (JIT code named from the runtime's perf map), perf script with --keep-script or when native falls short.
    Auto,
    /// perf.data read and symbolized by devprof.
    Native,
    /// `perf script` in the container, its text folded by devprof.
    #[value(name = "perf-script")]
    PerfScript,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CallGraphArg {
    Fp,
    Dwarf,
}

#[derive(Debug, Args)]
pub struct OffcpuArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// How long to record: 60, 45s, 2m, 1m30s.
    #[arg(env = "DEVPROF_DURATION", default_value = DEFAULT_DURATION)]
    pub duration: String,

    /// Event config: a path, a file name in the config directory, or a short name.
    #[arg(long, short = 'c', env = "DEVPROF_OFFCPU_CONFIG")]
    pub config: Option<String>,

    /// Summarize without call chains or symbols (much faster on large captures).
    #[arg(long, conflicts_with = "full")]
    pub fast: bool,

    /// Always symbolize, even above the fast-mode threshold.
    #[arg(long)]
    pub full: bool,

    /// Events above which the summary switches to fast mode unless --full is given.
    #[arg(long, env = "DEVPROF_FAST_THRESHOLD", default_value_t = 2_000_000)]
    pub fast_threshold: u64,

    /// How perf walks the stack at each event.
    #[arg(long, value_enum, env = "DEVPROF_CALL_GRAPH", default_value_t = CallGraphArg::Fp)]
    pub call_graph: CallGraphArg,

    #[command(flatten)]
    pub placement: PlacementArgs,

    #[command(flatten)]
    pub process: ProcessArgs,

    #[command(flatten)]
    pub marks: MarkArgs,

    /// Also save the `perf script` text next to the other artifacts.
    #[arg(long)]
    pub keep_script: bool,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// When done, open the result (its flamegraph) in a browser: $BROWSER, or xdg-open
    /// where there is a display; says so when there is neither.
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct HeapArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// Ask for fresh dumps over this window: 60, 45s, 2m, 1m30s (default DEVPROF_DURATION,
    /// else 30 s, when no selection flag is given).
    pub duration: Option<String>,

    /// The window when neither DURATION nor a selection flag is given. Not a flag users
    /// type: clap fills it from DEVPROF_DURATION so that a DURATION in .env does not
    /// collide with --latest and the like.
    #[arg(long, hide = true, env = "DEVPROF_DURATION", default_value = DEFAULT_DURATION)]
    pub default_duration: String,

    /// Render the newest dump the process has written; no waiting.
    #[arg(long, conflicts_with_all = ["all", "last", "files"])]
    pub latest: bool,

    /// Merge every dump the process has written. (Formerly --all.)
    #[arg(long = "all-dumps", alias = "all", conflicts_with_all = ["last", "files"])]
    pub all: bool,

    /// Merge exactly the newest N dumps of the process.
    #[arg(long, value_name = "N", conflicts_with = "files")]
    pub last: Option<usize>,

    /// Merge exactly these dump files: names in the process's dump directory, or absolute
    /// paths in the container (any dump file, even when devprof cannot see profiling on).
    #[arg(long, value_name = "A,B", value_delimiter = ',', num_args = 1..)]
    pub files: Vec<String>,

    /// Accumulated bytes (everything allocated since start, freed or not; jemalloc needs
    /// prof_accum:true; Go: alloc_space) instead of in-use bytes.
    #[arg(long)]
    pub alloc: bool,

    /// The signal that makes the program call jemalloc's prof.dump.
    #[arg(long, env = "DEVPROF_HEAP_DUMP_SIGNAL", default_value = "USR2")]
    pub signal: String,

    /// Go targets: the net/http/pprof endpoint as the container itself reaches it
    /// (http://127.0.0.1:6060); found from the listening sockets when not given.
    #[arg(long, value_name = "URL", env = "DEVPROF_PPROF_URL")]
    pub pprof_url: Option<String>,

    /// Go targets: the image of the container that fetches the profile inside the
    /// target's network namespace (it needs curl).
    #[arg(
        long,
        value_name = "IMAGE",
        env = "DEVPROF_PROFILER_IMAGE",
        default_value = "devprof-profiler:latest"
    )]
    pub profiler_image: String,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// When done, open the result (its flamegraph) in a browser: $BROWSER, or xdg-open
    /// where there is a display; says so when there is neither.
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct StatArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// How long to count the target process: 60, 45s, 2m, 1m30s (default
    /// DEVPROF_DURATION, else 30 s; not with a command).
    pub duration: Option<String>,

    /// The window when DURATION is not given (filled from DEVPROF_DURATION).
    #[arg(long, hide = true, env = "DEVPROF_DURATION", default_value = DEFAULT_DURATION)]
    pub default_duration: String,

    /// Events to count, comma-separated (perf's names); default: cycles, instructions,
    /// cache and branch misses, L1-dcache-load-misses, task-clock, context-switches,
    /// cpu-migrations, page-faults.
    #[arg(long, short = 'e', value_name = "EVENTS")]
    pub events: Option<String>,

    /// Run the command after `--` this many times in the target container, each under
    /// perf stat, instead of counting the running process.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,

    #[command(flatten)]
    pub placement: PlacementArgs,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,

    /// The command to run (after `--`), with its arguments.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Containers (names, id prefixes, compose services), then optionally the window
    /// length (60, 45s, 2m, 1m30s). No container, no --project, no --all: every running
    /// container of the compose project in the current directory.
    #[arg(value_name = "TARGETS... [DURATION]")]
    pub items: Vec<String>,

    /// What to record on each container, together: cpu, heap, offcpu or offcpu:CONFIG
    /// (offcpu alone uses the contextswitches config, which gives off-CPU time).
    #[arg(long, short = 'k', value_delimiter = ',', default_value = "cpu")]
    pub kinds: Vec<String>,

    /// Every running container of this compose project (label com.docker.compose.project).
    #[arg(long, conflicts_with = "all")]
    pub project: Option<String>,

    /// Every running container of the engine (devprof's own sidecars excepted). (Formerly
    /// --all.)
    #[arg(long = "all-containers", alias = "all")]
    pub all: bool,

    /// CPU sampling frequency in Hz.
    #[arg(long, short = 'F', env = "DEVPROF_FREQUENCY", default_value_t = 999)]
    pub frequency: u32,

    /// CPU captures as capture sets: each window cut into K back-to-back parts (as `cpu
    /// --repeat K`).
    #[arg(long, value_name = "K")]
    pub repeat: Option<u32>,

    #[command(flatten)]
    pub marks: MarkArgs,

    /// Print the closing table as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Markers from the target's own log lines during the window.
#[derive(Debug, Args, Clone, Default)]
pub struct MarkArgs {
    /// Markers from the target's log lines, saved beside the capture (`.markers`):
    /// NAME=REGEX (repeatable; named groups number, elapsed|duration, hash, slot), @FILE (one
    /// NAME=REGEX per line), a built-in rule set (reth, geth, op-node, besu, lodestar), auto
    /// (default: chosen from the image and names), off, or help (lists the sets).
    #[arg(long = "mark", value_name = "RULE")]
    pub mark: Vec<String>,
}
