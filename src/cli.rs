//! The command line as typed. `settings` turns it into validated settings; nothing past
//! that point sees these raw strings.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "devprof",
    version,
    about = "Profile the containers of a docker-compose devnet",
    long_about = "Profile the containers of a docker-compose devnet: CPU flamegraphs from perf \
                  running inside the container, with every artifact saved under \
                  profiling/<container>/.\n\nSettings come from flags, then the environment, \
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
