//! Arguments of the set-up commands: build, compose, doctor.

use super::capture::ProcessArgs;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct BuildArgs {
    #[command(subcommand)]
    pub kind: BuildKindArgs,

    /// The settings of this build that `.env` gave (filled after parsing).
    #[arg(skip)]
    pub from_dotenv: Vec<String>,
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

    /// Node services: add --perf-basic-prof-only-functions to NODE_OPTIONS, so V8 writes
    /// the perf map that names JavaScript functions.
    #[arg(long)]
    pub node: bool,
    /// Also give the services the JVM profile: -XX:+PreserveFramePointer in
    /// JAVA_TOOL_OPTIONS (whole Java stacks for perf), added to what is there.
    #[arg(long)]
    pub jvm: bool,

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

    /// The path to judge: exec (perf inside the container), sidecar, or auto (exec when
    /// it works, else the sidecar), as `devprof cpu --mode` would take it.
    #[command(flatten)]
    pub placement: super::capture::PlacementArgs,

    /// Print the checklist as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The images to trust (a name or an ID), as the endpoint has them now.
    #[arg(required_unless_present = "list")]
    pub images: Vec<String>,

    /// Stop trusting the images named (their IDs as the endpoint has them, or IDs given).
    #[arg(long, conflicts_with = "list")]
    pub forget: bool,

    /// List the images trusted on every endpoint.
    #[arg(long)]
    pub list: bool,
}
