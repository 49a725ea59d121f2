//! The command line as typed: the top-level parser here, one file per command group.
//! `settings` turns it into validated settings; nothing past that point sees these raw
//! strings.

mod capture;
pub mod dotenv;
mod setup;
mod store;

pub use capture::*;
pub use setup::*;
pub use store::*;

use clap::{Parser, Subcommand};
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
                  then .env in the current directory (DEVPROF_* settings only, never DEVPROF_ALLOW_*), then defaults \
                  (see .env.example).",
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

    /// Print results, warnings and errors only: no progress display, no notes.
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    pub quiet: bool,

    /// Print the details a command can give (`build`: the whole build log; `cpu`: the time
    /// each phase took, after the summary).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

/// What the process was asked to do.
pub enum Invocation {
    Run(Box<Cli>),
    /// `devprof __targets`, the completion scripts' call for TARGET names. It stays out of
    /// clap: clap_complete would offer even a hidden subcommand to the user.
    CompleteTargets,
}

/// The hidden subcommand the completion scripts call for TARGET names.
pub const TARGETS_COMMAND: &str = "__targets";

impl Cli {
    pub fn invocation() -> Invocation {
        match std::env::args_os().nth(1) {
            Some(first) if first == TARGETS_COMMAND => Invocation::CompleteTargets,
            _ => Invocation::Run(Box::new(Self::parse_args())),
        }
    }

    /// Parses the process's arguments. clap drops a `--` with nothing after it, which
    /// would turn `devprof cpu demo-seq --` into a plain window: it is kept as an empty
    /// command instead, which the settings refuse.
    pub fn parse_args() -> Self {
        let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
        Self::parse_with(raw, dotenv::load()).unwrap_or_else(|e| e.exit())
    }

    /// Parses `raw` with `env` (a `.env`'s settings) as the defaults below flags and the
    /// environment.
    pub fn parse_with(
        raw: Vec<std::ffi::OsString>,
        env: &dotenv::DotEnv,
    ) -> std::result::Result<Self, clap::Error> {
        let ends_with_separator = raw.len() > 2 && raw.last().is_some_and(|a| a == "--");
        let mut command = dotenv::with_defaults(<Cli as clap::CommandFactory>::command(), env);
        let matches = command.try_get_matches_from_mut(raw)?;
        let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
            .map_err(|e| e.format(&mut command))?;
        cli.note_dotenv(&command, &matches, env);
        if ends_with_separator {
            match &mut cli.command {
                Command::Cpu(args) if args.command.is_empty() => args.command.push(String::new()),
                Command::Stat(args) if args.command.is_empty() => args.command.push(String::new()),
                _ => {}
            }
        }
        Ok(cli)
    }
}

impl Cli {
    /// Tells a build which of its settings `.env` gave: such a build is not trusted as a
    /// profiler image (a cloned repository must not choose the image sidecars run).
    pub fn note_dotenv(
        &mut self,
        command: &clap::Command,
        matches: &clap::ArgMatches,
        env: &dotenv::DotEnv,
    ) {
        if let Command::Build(args) = &mut self.command {
            args.from_dotenv = dotenv::supplied(command, matches, env);
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// On-CPU sampling with perf: an interactive flamegraph of what the process runs.
    #[command(
        after_help = "Examples:\n  devprof cpu op-reth-seq 60       # 60 s, 999 Hz, frame pointers\n  \
                            devprof cpu demo-seq 45s --frequency 499\n  \
                            devprof cpu demo-seq 30s --fold perf-script     # fold through perf script, not natively\n  \
                            devprof cpu op-reth-seq 2m --call-graph dwarf   # no frame pointers in the binary\n  \
                            devprof cpu 3f2a9c 30 --pid 42                    # id prefix, explicit pid\n  \
                            DEVPROF_TARGET=demo-seq devprof cpu               # target from the environment or .env\n  \
                            devprof cpu op-node 30 --engine pprof             # Go: the service's own net/http/pprof CPU profile\n  \
                            devprof cpu demo-seq -- demo-node --help          # a command, start to end, 997 Hz\n\n\
                            With a command after `--`, it runs in the target container as the target process's user, \
                            in its working directory and environment; the capture ends when it ends.\n\
                            Ctrl-C ends the capture early and still writes every artifact."
    )]
    Cpu(CpuArgs),

    /// Several containers and kinds in one aligned window: every (container, kind) capture
    /// is prepared first, then all recorders start together; a table per container says
    /// what bounds it (CPU, memory, I/O).
    #[command(after_help = "Examples:\n  devprof profile demo-seq demo-rpc 30s\n  \
                            devprof profile --project devprof-demo 10 --kinds cpu,heap,offcpu\n  \
                            devprof profile demo-seq 20 --kinds cpu,offcpu:iobandwidth --json\n  \
                            devprof profile --all-containers 1m\n\n\
                            Each capture is written to profiling/<container>/ as the single-target commands write it; \
                            the session's manifest, listing them all, to profiling/sessions/. A container that fails \
                            does not stop the others: its row says why and the exit code is 9. Ctrl-C ends the window \
                            of every recorder and keeps what they recorded.")]
    Profile(ProfileArgs),

    /// Shell completion script on stdout: `devprof completions bash > /etc/bash_completion.d/devprof`.
    Completions(CompletionsArgs),

    /// Count hardware and software events with perf stat: the target process over a
    /// window, or a command run N times in the target container, with IPC, cache-miss
    /// and branch-miss rates in words and run-time statistics.
    #[command(after_help = "Examples:\n  devprof stat demo-seq 10\n  \
                            devprof stat demo-seq 5 -e task-clock,page-faults --json\n  \
                            devprof stat demo-seq --repeat 10 -- sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'\n\n\
                            Events the CPU or hypervisor cannot count show as `not supported`, with the reason; \
                            runs that exit non-zero are listed with their status and left out of the statistics.")]
    Stat(StatArgs),

    /// Fold `perf script` text into folded stacks (and optionally an SVG), streaming.
    /// Reads standard input when FILE is `-`; counts samples (`--weight period`: perf's
    /// periods). A perf.data file with frame pointers is read and symbolized natively,
    /// without perf; DWARF or LBR call graphs go through this host's perf script.
    #[command(
        after_help = "Examples:\n  perf script | devprof fold - --svg out.svg > out.folded\n  \
                            perf script | devprof fold - --weight period > out.folded\n  \
                            devprof fold perf.script -o perf.folded\n  \
                            devprof fold perf.data --symfs /tmp/container-root -o perf.folded"
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
        after_help = "FILE|TARGET is a .folded (or .data) file, a capture's name (perf-20261122-101500, or \
                      demo-seq/perf-20261122-101500), a session, or a TARGET in the store (container, id prefix, \
                      SERVICE or PROJECT/SERVICE), meaning its newest cpu capture (--kind offcpu|heap|stat for \
                      another); the capture taken is named on stderr. The root frame (process/thread name) is \
                      not a function and is never ranked. Without FILE|TARGET, DEVPROF_TARGET.\n\n\
                      Examples:\n  devprof top demo-seq\n  \
                      devprof top demo-seq --kind offcpu\n  \
                      devprof top profiling/demo-seq/perf-20261122-101500.folded -n 20\n  \
                      devprof top op-reth-seq --callers 'malloc|free' --module '^reth_'\n  \
                      devprof top op-reth-seq --modules '(reth_\\w+)::'\n  \
                      devprof top demo-seq --json | jq '.self[0]'"
    )]
    Top(TopArgs),

    /// Compare two profiles: a differential flamegraph and the largest gains and losses.
    #[command(
        after_help = "BEFORE and AFTER are .folded (or .data) files, captures' names, or targets in \
                      the store (their newest capture of the other side's kind, else cpu; --kind for another). \
                      Profiles of different measures (CPU samples, off-CPU time, heap bytes) are refused unless \
                      --mixed. Shares are normalized by each profile's total; in the flamegraph, widths are the \
                      after profile, red grew, blue shrank. Writes diff-<before>-<after>.svg beside AFTER's \
                      capture in the store (the current directory for files outside it) unless --output says \
                      otherwise. Without AFTER, DEVPROF_TARGET.\n\n\
                      Examples:\n  devprof diff before.folded after.folded\n  \
                      devprof diff demo-rpc demo-seq -n 5\n  \
                      devprof diff old.folded new.folded --by inclusive --json\n  \
                      devprof diff old.folded new.folded -o regression.svg --preset node"
    )]
    Diff(DiffArgs),

    /// A local web viewer over the store: captures, flamegraphs, heatmaps, top tables,
    /// plots, manifests, diffs of two captures, sessions. On 127.0.0.1 only; offline.
    #[command(
        after_help = "Prints the URL and serves until Ctrl-C. Every page and script is built into \
                      devprof (no network needed); only files a capture's manifest lists are served, and \
                      only to 127.0.0.1/localhost. Tick two captures and press the diff button for what \
                      `devprof diff` shows (the older is before).\n\n\
                      Examples:\n  devprof view\n  \
                      devprof view --open                              # in $BROWSER, or xdg-open\n  \
                      devprof view demo-seq                            # that container's captures\n  \
                      devprof view perf-20261122-101500                # one capture\n  \
                      devprof view session-20261123-101500             # a session's table\n  \
                      devprof --output-dir /srv/profiles view --port 8080\n  \
                      ssh -L 8080:127.0.0.1:8080 devbox devprof view --port 8080   # from another machine"
    )]
    View(ViewArgs),

    /// Write a capture in another tool's format: pprof, speedscope, the Firefox Profiler,
    /// or collapsed stacks.
    #[command(
        after_help = "CAPTURE is a file of a capture (.folded, .timeline or its .json manifest), a capture's \
                      name, or a TARGET in the store (container, id prefix, SERVICE or PROJECT/SERVICE), meaning \
                      its newest cpu capture (--kind for another; the capture taken is named on stderr). The export \
                      goes beside the capture in the store unless --output says otherwise. speedscope and \
                      firefox keep every sample's thread and time from the capture's .timeline; \
                      heap captures export with bytes as the unit. Without CAPTURE, DEVPROF_TARGET.\n\n\
                      Examples:\n  devprof export demo-seq --format pprof && go tool pprof -top profiling/demo-seq/perf-*.pprof.pb.gz\n  \
                      devprof export demo-seq -f speedscope -o demo.speedscope.json\n  \
                      devprof export profiling/demo-seq/perf-20261122-101500.folded -f firefox\n  \
                      devprof export demo-seq -f collapsed -o - | head"
    )]
    Export(ExportArgs),

    /// Where the node's memory goes: jemalloc heap dumps collected from the container,
    /// symbolized, as a memory flamegraph and a text report of the top allocation sites.
    #[command(
        after_help = "Examples:\n  devprof heap demo-seq 10                 # ask for fresh dumps over 10 s, render the newest\n  \
                            devprof heap demo-seq --latest           # the newest dump the process already wrote\n  \
                            devprof heap demo-seq --last 2           # merge the newest two\n  \
                            devprof heap demo-seq --all-dumps --alloc # every dump, accumulated (prof_accum) bytes\n  \
                            devprof heap demo-seq --files jeprof.demo-seq.6.0.m0.heap,jeprof.demo-seq.6.1.m1.heap\n  \
                            devprof heap --json op-reth-seq 30 | jq .top_self\n  \
                            devprof heap op-node                     # a Go service: its net/http/pprof heap profile (in-use bytes)\n  \
                            devprof heap op-node --alloc --pprof-url http://127.0.0.1:6060\n\n\
                            The process must run with jemalloc profiling on from its start: _RJEM_MALLOC_CONF \
                            (tikv-jemallocator) or MALLOC_CONF (unprefixed jemalloc) containing prof:true. With \
                            DURATION, devprof sends DEVPROF_HEAP_DUMP_SIGNAL (USR2) at the start and the end of the \
                            window when the process catches it (the program calls jemalloc's prof.dump on it), and \
                            collects interval dumps (lg_prof_interval) written meanwhile. A Go program's heap \
                            comes from its net/http/pprof endpoint instead (inuse_space, or alloc_space with \
                            --alloc), fetched inside the container's network namespace."
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

    /// Trust a profiler image made without devprof (e.g. with `docker build`): sidecars and
    /// the sysctl helper run only images devprof built or was told to trust, by image ID,
    /// on each endpoint.
    #[command(after_help = "Examples:\n  \
                      devprof trust devprof-profiler:latest        # built with docker build from dockerfiles/profiler.Dockerfile\n  \
                      DOCKER_HOST=unix:///run/podman/podman.sock devprof trust devprof-profiler:latest   # on another endpoint\n  \
                      devprof trust --list\n  \
                      devprof trust --forget devprof-profiler:latest\n\n\
                      `devprof build tools` trusts the image it builds, unless a setting of it came from .env. \
                      The list is kept in $XDG_CONFIG_HOME/devprof/trusted-images.json (~/.config by default), \
                      private to you; a project's .env cannot change it.")]
    Trust(TrustArgs),

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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// `devprof build ...` parsed with a `.env` holding `key=value`: the settings it gave.
    fn build_from_dotenv(args: &[&str], key: &str, value: &str) -> Vec<String> {
        let env = dotenv::DotEnv::from_entries([(key.to_string(), value.to_string())]);
        let raw = std::iter::once("devprof")
            .chain(args.iter().copied())
            .map(std::ffi::OsString::from)
            .collect();
        match Cli::parse_with(raw, &env).unwrap().command {
            Command::Build(b) => b.from_dotenv,
            other => panic!("{other:?}"),
        }
    }

    /// Regression (security finding 1 of round two): `.env` set DEVPROF_BUILD_TAG to the
    /// profiler image's tag with its own image to extend, and the next sidecar ran it.
    /// Every build setting `.env` may give is named, so such a build is not trusted.
    #[test]
    fn every_build_setting_from_dotenv_is_named_and_a_flag_or_the_environment_is_not() {
        let tools = ["build", "tools", "debian:bookworm-slim"];
        let source = ["build", "source", "."];
        for (args, key, value) in [
            (&tools[..], "DEVPROF_BUILD_TAG", "devprof-profiler:latest"),
            (&tools[..], "DEVPROF_BUILD_NETWORK", "attacker-net"),
            (&source[..], "DEVPROF_BUILD_TAG", "devprof-profiler:latest"),
            (&source[..], "DEVPROF_BASE_IMAGE", "attacker/base:1"),
            (&source[..], "DEVPROF_RUST_IMAGE", "attacker/rust:1"),
            (&source[..], "DEVPROF_BUILD_PACKAGES", "evil-package"),
            (&source[..], "DEVPROF_BUILD_NETWORK", "attacker-net"),
            (&source[..], "DEVPROF_BUILD_PACKAGE", "demo-node"),
            (&source[..], "DEVPROF_BUILD_BIN", "demo-node"),
            (&source[..], "DEVPROF_BUILD_FEATURES", "x"),
            (&source[..2], "DEVPROF_BUILD_SOURCE", "/tmp"),
        ] {
            assert_eq!(
                build_from_dotenv(args, key, value),
                [key],
                "{key} in {args:?}"
            );
        }
        // The image to extend is a required argument: clap does not take it from a default,
        // so `.env` cannot give it at all.
        let env = dotenv::DotEnv::from_entries([(
            "DEVPROF_BUILD_FROM".to_string(),
            "attacker/base:1".to_string(),
        )]);
        let raw = ["devprof", "build", "tools"]
            .map(std::ffi::OsString::from)
            .to_vec();
        assert!(Cli::parse_with(raw, &env).is_err());
        // A flag given on the command line is the user's, whatever .env says.
        assert!(build_from_dotenv(
            &["build", "tools", "debian:bookworm-slim", "-t", "mine:1"],
            "DEVPROF_BUILD_TAG",
            "devprof-profiler:latest"
        )
        .is_empty());
        assert!(build_from_dotenv(&tools, "DEVPROF_TARGET", "demo-seq").is_empty());
    }

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("devprof").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The long flag of `arg` in `command`, and whether `old` is among its hidden aliases.
    fn renamed(command: &str, arg: &str, new: &str, old: &str) {
        let cli = Cli::command();
        let sub = cli.find_subcommand(command).unwrap();
        let a = sub.get_arguments().find(|a| a.get_id() == arg).unwrap();
        assert_eq!(a.get_long(), Some(new), "{command} {arg}");
        assert!(
            a.get_all_aliases().unwrap_or_default().contains(&old),
            "{command} --{old}"
        );
        assert!(
            a.get_visible_aliases().unwrap_or_default().is_empty(),
            "{command} --{old} must stay hidden"
        );
    }

    #[test]
    fn renamed_flags_keep_their_old_spelling_as_a_hidden_alias() {
        renamed("cpu", "native", "native-frames", "native");
        renamed("heap", "all", "all-dumps", "all");
        renamed("profile", "all", "all-containers", "all");
        renamed("fold", "heatmap", "heatmap-file", "heatmap");
        let (Command::Cpu(a), Command::Cpu(b)) = (
            parse(&["cpu", "x", "--native-frames"]).command,
            parse(&["cpu", "x", "--native"]).command,
        ) else {
            panic!("cpu");
        };
        assert!(a.native && b.native);
        for args in [
            &["heap", "x", "--all-dumps"][..],
            &["heap", "x", "--all"][..],
        ] {
            assert!(matches!(parse(args).command, Command::Heap(h) if h.all));
        }
        for args in [
            &["profile", "--all-containers"][..],
            &["profile", "--all"][..],
        ] {
            assert!(matches!(parse(args).command, Command::Profile(p) if p.all));
        }
        for args in [
            &["fold", "-", "--timeline", "t", "--heatmap-file", "h.html"][..],
            &["fold", "-", "--timeline", "t", "--heatmap", "h.html"][..],
        ] {
            assert!(matches!(parse(args).command, Command::Fold(f) if f.heatmap.is_some()));
        }
        // render keeps --heatmap as its switch.
        assert!(
            matches!(parse(&["render", "--heatmap", "x"]).command, Command::Render(r) if r.heatmap)
        );
    }

    /// A command line for `sub` with `-q` and a placeholder for each required positional
    /// (the first possible value where it has a list), descending into its first
    /// subcommand where it has some.
    fn minimal(sub: &clap::Command, mut line: Vec<String>) -> Vec<String> {
        line.push(sub.get_name().to_string());
        for a in sub.get_arguments() {
            if a.is_positional() && a.is_required_set() {
                let value = a
                    .get_possible_values()
                    .first()
                    .map(|v| v.get_name().to_string())
                    .unwrap_or_else(|| "x".into());
                line.push(value);
            }
        }
        match sub.get_subcommands().find(|s| s.get_name() != "help") {
            Some(inner) => minimal(inner, line),
            None => line,
        }
    }

    #[test]
    fn quiet_and_verbose_are_global_on_every_command() {
        let cli = Cli::command();
        for sub in cli.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut line = minimal(sub, vec!["devprof".into()]);
            // clean's --older is required unless --containers, which clap cannot show.
            if sub.get_name() == "clean" {
                line.extend(["--older".into(), "1d".into()]);
            }
            // diff's AFTER is required unless --slice, which clap cannot show either.
            if sub.get_name() == "diff" {
                line.push("y".into());
            }
            // trust's IMAGES are required unless --list.
            if sub.get_name() == "trust" {
                line.push("--list".into());
            }
            // export's --format is required unless a session is exported.
            if sub.get_name() == "export" {
                line.extend(["--format".into(), "pprof".into()]);
            }
            line.push("-q".into());
            let parsed = Cli::try_parse_from(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert!(parsed.quiet && !parsed.verbose, "{line:?}");
        }
        assert!(parse(&["--verbose", "ls"]).verbose);
        let cli = parse(&["build", "source", ".", "-v", "-p", "op-reth"]);
        assert!(cli.verbose);
        assert!(matches!(
            cli.command,
            Command::Build(BuildArgs { kind: BuildKindArgs::Source(s), .. }) if s.package.as_deref() == Some("op-reth")
        ));
        assert!(Cli::try_parse_from(["devprof", "ls", "-q", "-v"]).is_err());
        // --pid has no short form: -p is build's --package, as in cargo.
        let cli = Cli::command();
        let pid = cli
            .find_subcommand("cpu")
            .unwrap()
            .get_arguments()
            .find(|a| a.get_id() == "pid")
            .unwrap();
        assert_eq!(pid.get_short(), None);
    }
}
