//! devprof: profile the containers of a docker-compose devnet.
//!
//! Layout: `cli` (raw arguments) -> `settings` (validated) -> `commands` (one per
//! subcommand) -> `capture` (recipes) over `docker` (the only module that talks to the
//! engine) and `perf` (what perf can do there); `fold`/`render` are pure analysis;
//! `store` owns paths and manifests. The store commands: `catalog` (captures listed from
//! their manifests, retention) and `loader` (reading profiles) feed `analysis` (pure:
//! filter, top, diff); `store_settings` validates their flags.

pub mod analysis;
pub mod archive;
pub mod binary;
pub mod capture;
pub mod catalog;
pub mod cli;
pub mod commands;
pub mod composefile;
pub mod docker;
pub mod doctor;
pub mod duration;
pub mod elf;
pub mod error;
pub mod fold;
pub mod heap;
pub mod imagebuild;
pub mod loader;
pub mod offcpu;
pub mod perf;
pub mod perfdata;
pub mod pipe;
pub mod progress;
pub mod render;
pub mod settings;
pub mod setup_settings;
pub mod signals;
pub mod store;
pub mod store_settings;
pub mod target;
pub mod units;

pub use error::{exit, Error};

/// Runs one parsed command line. Errors carry their exit code.
pub async fn run(cli: cli::Cli) -> Result<(), Error> {
    match cli.command {
        cli::Command::Cpu(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::cpu::run(args, cli.output_dir, &mut interrupts).await
        }
        cli::Command::Fold(args) => commands::fold::run(args),
        cli::Command::Ls(args) => commands::ls::run(args, cli.output_dir),
        cli::Command::Clean(args) if args.containers => {
            commands::clean::remove_sidecars(args.dry_run, args.json).await
        }
        cli::Command::Clean(args) => commands::clean::run(args, cli.output_dir),
        cli::Command::Render(args) => commands::render::run(args),
        cli::Command::Top(args) => commands::top::run(args, cli.output_dir),
        cli::Command::Diff(args) => commands::diff::run(args, cli.output_dir),
        cli::Command::Summarize(args) => commands::summarize::run(args),
        cli::Command::Offcpu(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::offcpu::run(args, cli.output_dir, &mut interrupts).await
        }
        cli::Command::Heap(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::heap::run(args, cli.output_dir, &mut interrupts).await
        }
        cli::Command::Build(args) => commands::build::run(args).await,
        cli::Command::Compose(args) => commands::compose::run(args).await,
        cli::Command::Doctor(args) => commands::doctor::run(args).await,
    }
}
