//! The command line as typed. `settings` turns it into validated settings; nothing past
//! that point sees these raw strings.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "devprof",
    version,
    about = "Profile the containers of a docker-compose devnet",
    long_about = "Profile the containers of a docker-compose devnet: CPU and off-CPU flamegraphs \
                  from perf (inside the container, or in a sidecar beside it), jemalloc heap \
                  profiles, profiling images and a diagnosis of what is missing, with every \
                  artifact saved under profiling/<container>/.\n\nSettings come from flags, then the environment, \
                  then .env in the current directory, then defaults (see .env.example).",
    after_help = "Examples:\n  devprof cpu op-reth-seq 60\n  devprof cpu demo-seq 1m30s --call-graph dwarf\n  \
                  devprof cpu --process 'reth node' op-reth-seq 30s"
)]
pub struct Cli {
    /// Where captures are stored (one directory per container).
    #[arg(
        long,
        global = true,
        env = "DEVPROF_OUTPUT_DIR",
        default_value = "profiling"
    )]
    pub output_dir: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// On-CPU sampling with perf: an interactive flamegraph of what the process runs.
    #[command(
        after_help = "Examples:\n  devprof cpu op-reth-seq 60       # 60 s, 999 Hz, frame pointers\n  \
                            devprof cpu demo-seq 45s --frequency 499\n  \
                            devprof cpu op-reth-seq 2m --call-graph dwarf   # no frame pointers in the binary\n  \
                            devprof cpu 3f2a9c 30 --pid 42                    # id prefix, explicit pid\n  \
                            DEVPROF_TARGET=demo-seq devprof cpu               # target from the environment or .env\n\n\
                            Ctrl-C ends the capture early and still writes every artifact."
    )]
    Cpu(CpuArgs),

    /// Fold `perf script` text into folded stacks (and optionally an SVG), streaming.
    /// Reads standard input when FILE is `-`.
    #[command(
        after_help = "Examples:\n  perf script | devprof fold - --svg out.svg > out.folded\n  \
                            devprof fold perf.script -o perf.folded"
    )]
    Fold(FoldArgs),

    /// Off-CPU profiling from an event config: what the node waits on (locks, fsync,
    /// block I/O, context switches, page faults), with exact counts, off-CPU time and I/O
    /// bandwidth.
    #[command(
        after_help = "Examples:\n  devprof offcpu demo-seq 10                          # default config (futex, fsync, block I/O)\n  \
                            devprof offcpu demo-seq 10 --config contextswitches # off-CPU time flamegraph\n  \
                            devprof offcpu --config pagefaults.conf             # target and duration from .env\n  \
                            devprof offcpu op-reth-seq 30 --config iobandwidth --fast\n  \
                            devprof offcpu demo-seq 5 --config ./my-events.conf\n\n\
                            Configs: a path, a file in DEVPROF_CONFIG_DIR or ./profiling-configs, or a short name \
                            (default, contextswitches, iobandwidth, pagefaults; built in)."
    )]
    Offcpu(OffcpuArgs),

    /// Re-summarize a recorded off-CPU perf.data in fast mode, locally: exact event counts,
    /// off-CPU time per thread and I/O bandwidth, no stacks. Writes nothing.
    #[command(
        after_help = "Examples:\n  devprof summarize profiling/demo-seq/offcpu-20261122-101500.data\n  \
                            devprof summarize --json profiling/demo-seq/offcpu-20261122-101500.data | jq .counts"
    )]
    Summarize(SummarizeArgs),

    /// List the captures in the store: time, kind, container, duration, samples, files, size.
    #[command(
        after_help = "Reads only the manifests (profiling/<container>/*.json); no Docker needed.\n\n\
                      Examples:\n  devprof ls\n  devprof ls demo-seq\n  \
                      devprof ls --json | jq '.[].files'\n  \
                      devprof --output-dir /srv/profiles ls op-reth-seq"
    )]
    Ls(LsArgs),

    /// Delete captures older than AGE: only the files their manifests list, never anything else.
    #[command(
        after_help = "Removes only files a manifest says devprof wrote, inside the capture's \
                      directory; never follows a symbolic link; removes each manifest last. \
                      --keep-last N keeps the newest N captures of each container and kind, \
                      however old.\n\n\
                      Examples:\n  devprof clean --older 7d --dry-run   # show what would go\n  \
                      devprof clean --older 7d\n  \
                      devprof clean demo-seq --older 12h --keep-last 3\n  \
                      devprof clean --older 30m --json"
    )]
    Clean(CleanArgs),

    /// Re-render a flamegraph from a .folded file (or a .data file, with perf on this host).
    #[command(after_help = "Writes ./<name>.svg unless --output says otherwise.\n\n\
                      Examples:\n  devprof render profiling/demo-seq/perf-20261122-101500.folded\n  \
                      devprof render perf.folded --inverted --title 'demo-seq, icicle' -o icicle.svg\n  \
                      devprof render perf.folded --reverse --min-width 0.5 --colors hot\n  \
                      devprof render perf.folded --include 'hash_chain|state_lookup' --exclude '\\[unknown\\]'\n  \
                      devprof render node.folded --preset node\n  \
                      devprof render perf.data    # needs perf on this host; prefer the .folded")]
    Render(RenderArgs),

    /// The heaviest functions of a profile (self and inclusive), callers, module shares.
    #[command(
        after_help = "FILE|TARGET is a .folded (or .data) file, or a container directory in the store, \
                      meaning its newest capture. The root frame (process/thread name) is not a \
                      function and is never ranked.\n\n\
                      Examples:\n  devprof top demo-seq\n  \
                      devprof top profiling/demo-seq/perf-20261122-101500.folded -n 20\n  \
                      devprof top op-reth-seq --callers 'malloc|free' --module '^reth_'\n  \
                      devprof top op-reth-seq --modules '(reth_\\w+)::'\n  \
                      devprof top demo-seq --json | jq '.self[0]'"
    )]
    Top(TopArgs),

    /// Compare two profiles: a differential flamegraph and the largest gains and losses.
    #[command(
        after_help = "BEFORE and AFTER are .folded (or .data) files or container directories in \
                      the store (their newest capture). Shares are normalized by each profile's \
                      total; in the flamegraph, widths are the after profile, red grew, blue \
                      shrank. Writes ./diff-<before>-<after>.svg unless --output says otherwise.\n\n\
                      Examples:\n  devprof diff before.folded after.folded\n  \
                      devprof diff demo-rpc demo-seq -n 5\n  \
                      devprof diff old.folded new.folded --by inclusive --json\n  \
                      devprof diff old.folded new.folded -o regression.svg --preset node"
    )]
    Diff(DiffArgs),

    /// Where the node's memory goes: jemalloc heap dumps collected from the container,
    /// symbolized, as a memory flamegraph and a text report of the top allocation sites.
    #[command(
        after_help = "Examples:\n  devprof heap demo-seq 10                 # ask for fresh dumps over 10 s, render the newest\n  \
                            devprof heap demo-seq --latest           # the newest dump the process already wrote\n  \
                            devprof heap demo-seq --last 2           # merge the newest two\n  \
                            devprof heap demo-seq --all --alloc      # every dump, accumulated (prof_accum) bytes\n  \
                            devprof heap demo-seq --files jeprof.demo-seq.6.0.m0.heap,jeprof.demo-seq.6.1.m1.heap\n  \
                            devprof heap --json op-reth-seq 30 | jq .top_self\n\n\
                            The process must run with jemalloc profiling on from its start: _RJEM_MALLOC_CONF \
                            (tikv-jemallocator) or MALLOC_CONF (unprefixed jemalloc) containing prof:true. With \
                            DURATION, devprof sends DEVPROF_HEAP_DUMP_SIGNAL (USR2) at the start and the end of the \
                            window when the process catches it (the program calls jemalloc's prof.dump on it), and \
                            collects interval dumps (lg_prof_interval) written meanwhile."
    )]
    Heap(HeapArgs),

    /// Build a profiling image through the Docker API: a Rust program from source (full
    /// debuginfo, frame pointers, perf in the image), or perf added to any existing image.
    #[command(after_help = "Examples:\n  \
                      devprof build source . --package op-reth --tag op-reth:profiling\n  \
                      devprof build source . -p demo-node -t devprof-demo-node:latest   # the demo node\n  \
                      devprof build source ~/src/reth -p reth --features asm-keccak   # + jemalloc-prof\n  \
                      devprof build tools ghcr.io/paradigmxyz/op-reth:latest          # tagged op-reth-profiling:latest\n  \
                      devprof build tools debian:bookworm-slim -t devprof-profiler:latest\n\n\
                      After building, devprof starts the image once and checks it: perf runs, and the \
                      program has symbols, debug info and frame pointers.")]
    Build(BuildArgs),

    /// Write a compose override file that gives chosen services what profiling needs
    /// (capabilities, seccomp, tracefs, a profiling volume, jemalloc variables), never
    /// editing the compose file itself.
    #[command(after_help = "Examples:\n  \
                      devprof compose            # ./docker-compose.yml; services running a profiling image\n  \
                      devprof compose -f devnet.yml --services op-reth-seq,op-reth-rpc --heap\n  \
                      devprof compose -f devnet.yml --services op-reth-seq --image op-reth-seq=op-reth:profiling\n  \
                      devprof compose -f compose/demo.yml -o /tmp/demo.devprof.yml\n\n\
                      It prints the docker-compose command that uses both files. Capabilities: PERFMON and \
                      SYS_PTRACE; SYS_ADMIN instead of PERFMON only with --sys-admin or where the engine does \
                      not know PERFMON (Docker 20.10 as Debian packages it), which it says.")]
    Compose(ComposeArgs),

    /// Check why a profile of TARGET would come out empty, hex-only or denied: a checklist
    /// with the fix for each problem.
    #[command(after_help = "Examples:\n  \
                      devprof doctor op-reth-seq\n  \
                      devprof doctor demo-seq --json | jq '.checks[] | select(.status != \"pass\")'\n  \
                      devprof doctor 3f2a9c --process 'reth node'\n\n\
                      Exit status 0 when nothing blocks profiling, 8 when a check that blocks it fails \
                      (3 and 4 when the daemon or the target cannot be reached).")]
    Doctor(DoctorArgs),
}

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// How long to record: 60, 45s, 2m, 1m30s.
    #[arg(env = "DEVPROF_DURATION", default_value = "30s")]
    pub duration: String,

    /// Sampling frequency in Hz.
    #[arg(long, short = 'F', env = "DEVPROF_FREQUENCY", default_value_t = 999)]
    pub frequency: u32,

    /// How perf walks the stack: frame pointers (cheap, needs -C force-frame-pointers=yes)
    /// or DWARF (works without frame pointers, much larger perf.data).
    #[arg(long, value_enum, env = "DEVPROF_CALL_GRAPH", default_value_t = CallGraphArg::Fp)]
    pub call_graph: CallGraphArg,

    /// Where perf runs: inside the container (exec), in a profiler container beside it
    /// (sidecar), or exec when the container has a perf that may record, else sidecar.
    #[arg(long, value_enum, env = "DEVPROF_MODE", default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Also save the `perf script` text next to the other artifacts.
    #[arg(long)]
    pub keep_script: bool,

    /// Resolve inlined frames with addr2line (much slower on large captures).
    #[arg(long, overrides_with = "no_inline")]
    pub inline: bool,

    /// Skip inline resolution (the default).
    #[arg(long, overrides_with = "inline")]
    pub no_inline: bool,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ProcessArgs {
    /// Profile the oldest process whose full command line matches REGEX (like pgrep -f).
    #[arg(long, value_name = "REGEX", conflicts_with = "pid")]
    pub process: Option<String>,

    /// Profile this pid (as seen inside the container).
    #[arg(long)]
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Auto,
    Exec,
    Sidecar,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CallGraphArg {
    Fp,
    Dwarf,
}

#[derive(Debug, Args)]
pub struct FoldArgs {
    /// `perf script` output; `-` for standard input.
    pub input: PathBuf,

    /// Write folded stacks here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,

    /// Also render a flamegraph SVG.
    #[arg(long)]
    pub svg: Option<PathBuf>,

    /// Title of the SVG.
    #[arg(long, default_value = "Flame Graph")]
    pub title: String,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only this container's captures (its directory name in the store).
    pub target: Option<String>,

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
    /// A .folded file (folded stacks), or a .data file (read with this host's perf).
    pub file: PathBuf,

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
pub struct OffcpuArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// How long to record: 60, 45s, 2m, 1m30s.
    #[arg(env = "DEVPROF_DURATION", default_value = "30s")]
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

    /// Where perf runs: inside the container (exec), in a profiler container beside it
    /// (sidecar), or exec when the container has a perf that may record, else sidecar.
    #[arg(long, value_enum, env = "DEVPROF_MODE", default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Also save the `perf script` text next to the other artifacts.
    #[arg(long)]
    pub keep_script: bool,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct HeapArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    /// Ask for fresh dumps over this window: 60, 45s, 2m, 1m30s (default DEVPROF_DURATION,
    /// else 30 s, when no selection flag is given).
    pub duration: Option<String>,

    /// Render the newest dump the process has written; no waiting.
    #[arg(long, conflicts_with_all = ["all", "last", "files"])]
    pub latest: bool,

    /// Merge every dump the process has written.
    #[arg(long, conflicts_with_all = ["last", "files"])]
    pub all: bool,

    /// Merge exactly the newest N dumps of the process.
    #[arg(long, value_name = "N", conflicts_with = "files")]
    pub last: Option<usize>,

    /// Merge exactly these dump files (names in the process's dump directory).
    #[arg(long, value_name = "A,B", value_delimiter = ',', num_args = 1..)]
    pub files: Vec<String>,

    /// Accumulated bytes (everything allocated since start, freed or not; needs
    /// prof_accum:true) instead of in-use bytes.
    #[arg(long)]
    pub alloc: bool,

    /// The signal that makes the program call jemalloc's prof.dump.
    #[arg(long, env = "DEVPROF_HEAP_DUMP_SIGNAL", default_value = "USR2")]
    pub signal: String,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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
pub struct BuildArgs {
    #[command(subcommand)]
    pub kind: BuildKindArgs,
}

#[derive(Debug, Subcommand)]
pub enum BuildKindArgs {
    /// A Rust program from source: release build with full debuginfo, no stripping and
    /// frame pointers; runtime image with perf, procps, binutils and jemalloc's tools.
    Source(BuildSourceArgs),
    /// perf, procps and binutils added to an existing image (a node you do not build).
    Tools(BuildToolsArgs),
}

#[derive(Debug, Args)]
pub struct BuildSourceArgs {
    /// The Cargo project or workspace root (the build context; target/, profiling/, .git
    /// and what .dockerignore lists stay out).
    #[arg(env = "DEVPROF_BUILD_SOURCE", default_value = ".")]
    pub source: PathBuf,

    /// The package to build (default: the only one with a binary).
    #[arg(long, short = 'p', env = "DEVPROF_BUILD_PACKAGE")]
    pub package: Option<String>,

    /// The binary to build (default: the package's only binary).
    #[arg(long, env = "DEVPROF_BUILD_BIN")]
    pub bin: Option<String>,

    /// Cargo features, comma or space separated.
    #[arg(long, env = "DEVPROF_BUILD_FEATURES", value_delimiter = ',')]
    pub features: Vec<String>,

    /// Do not turn on the project's jemalloc profiling feature (e.g. jemalloc-prof).
    #[arg(long)]
    pub no_jemalloc_feature: bool,

    /// The runtime image the program runs in.
    #[arg(
        long,
        env = "DEVPROF_BASE_IMAGE",
        default_value = "debian:bookworm-slim"
    )]
    pub base: String,

    /// The image with the Rust toolchain to compile in (scripts/rust-image.sh makes one
    /// locally where none can be pulled).
    #[arg(
        long,
        env = "DEVPROF_RUST_IMAGE",
        default_value = "rust:1-slim-bookworm"
    )]
    pub rust_image: String,

    /// Debian packages the build needs besides make and a C compiler (e.g.
    /// "libclang-dev pkg-config").
    #[arg(long, env = "DEVPROF_BUILD_PACKAGES", default_value = "")]
    pub build_packages: String,

    #[command(flatten)]
    pub common: BuildCommonArgs,
}

#[derive(Debug, Args)]
pub struct BuildToolsArgs {
    /// The image to add perf, procps and binutils to (Debian/Ubuntu, Alpine, Fedora/RHEL).
    #[arg(env = "DEVPROF_BUILD_FROM")]
    pub from: String,

    #[command(flatten)]
    pub common: BuildCommonArgs,
}

#[derive(Debug, Args)]
pub struct BuildCommonArgs {
    /// The image's tag (source default: <binary>-profiling:latest; tools default:
    /// <name>-profiling:<tag of the image>).
    #[arg(long, short = 't', env = "DEVPROF_BUILD_TAG")]
    pub tag: Option<String>,

    /// A label for the image (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,

    /// Use this Dockerfile instead of devprof's own (dockerfiles/ in the repository).
    #[arg(long)]
    pub dockerfile: Option<PathBuf>,

    /// Build every step again, ignoring the cache.
    #[arg(long)]
    pub no_cache: bool,

    /// Network of the RUN steps: host (as the host reaches the network), default (Docker's
    /// bridge), none, or a network's name.
    #[arg(long, env = "DEVPROF_BUILD_NETWORK", default_value = "host")]
    pub network: String,

    /// Print the whole build log, not only the steps.
    #[arg(long, short)]
    pub verbose: bool,

    /// Do not start the image afterwards to check it.
    #[arg(long)]
    pub no_check: bool,
}

#[derive(Debug, Args)]
pub struct ComposeArgs {
    /// The compose file (default: docker-compose.yml, docker-compose.yaml, compose.yml or
    /// compose.yaml in this directory). It is read, never written.
    #[arg(long, short = 'f', env = "DEVPROF_COMPOSE_FILE")]
    pub file: Option<PathBuf>,

    /// The services to profile (default: those whose image is a profiling image, i.e. made
    /// by `devprof build`).
    #[arg(long, value_delimiter = ',')]
    pub services: Vec<String>,

    /// Also turn on jemalloc heap profiling (_RJEM_MALLOC_CONF and MALLOC_CONF, dumps in the
    /// profiling volume).
    #[arg(long)]
    pub heap: bool,

    /// With --heap: one jemalloc sample per 2^N allocated bytes (jemalloc's default 19).
    #[arg(long, value_name = "N", default_value_t = 19)]
    pub lg_prof_sample: u32,

    /// Run this image: IMAGE for every chosen service, or SERVICE=IMAGE (repeatable).
    #[arg(long = "image", value_name = "[SERVICE=]IMAGE")]
    pub images: Vec<String>,

    /// Grant SYS_ADMIN instead of PERFMON (it implies PERFMON and much more).
    #[arg(long)]
    pub sys_admin: bool,

    /// Also grant SYSLOG, so kernel frames get names while kptr_restrict hides them.
    #[arg(long)]
    pub kernel_symbols: bool,

    /// Run the services privileged: every capability and device (last resort).
    #[arg(long)]
    pub privileged: bool,

    /// Where to write the override (default: <file stem>.devprof.yml next to the file).
    #[arg(long, short)]
    pub output: Option<PathBuf>,

    /// Variables for ${VAR} interpolation (default: .env next to the compose file; the
    /// environment wins over it, as in docker-compose).
    #[arg(long)]
    pub env_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Container name, id prefix, or compose service name.
    #[arg(env = "DEVPROF_TARGET")]
    pub target: Option<String>,

    #[command(flatten)]
    pub process: ProcessArgs,

    /// Print the checklist as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
