//! devprof: profile the containers of a docker-compose devnet.
//!
//! The data path, top to bottom (ARCHITECTURE.md has the map): `cli` (raw arguments) ->
//! `settings` (validated once) -> `commands` (one per subcommand) -> `capture` (sessions:
//! target, window, signals, clean-up; the cpu/offcpu/heap recipes) over `engines` (perf;
//! how each profiler starts, stops and reads its output) and `docker` (the only module that
//! talks to the engine) -> `symbols` (demangling, the symbolizer, ELF facts) -> `profile`
//! (pure analysis: folded stacks, filters, top/diff, off-CPU and heap parsing) -> `render`
//! -> `store` (paths, manifests, catalog, retention); `view` serves the store to a
//! browser. `setup` holds build, compose and doctor; `runtime` says what runs in a process; `ui`, `units`, `text` and `signals` are
//! shared helpers.

pub mod capture;
pub mod cli;
pub mod commands;
pub mod docker;
pub mod engines;
pub mod error;
pub mod export;
pub use devprof_profile as profile;
pub mod render;
pub mod runtime;
pub mod settings;
pub mod setup;
pub mod signals;
pub mod store;
pub use devprof_base::text;
pub use devprof_symbols as symbols;
pub mod ui;
pub use devprof_base::units;
pub mod view;

pub use error::{exit, Error};

/// Runs one parsed command line. Errors carry their exit code.
pub async fn run(cli: cli::Cli) -> Result<(), Error> {
    ui::phases::start();
    ui::set_verbosity(cli.quiet, cli.verbose);
    match cli.command {
        cli::Command::Cpu(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::cpu::run(args, cli.output_dir, &mut interrupts).await
        }
        cli::Command::Profile(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::profile::run(args, cli.output_dir, &mut interrupts).await
        }
        cli::Command::Completions(args) => commands::completions::write_script(args.shell),
        cli::Command::Fold(args) => commands::fold::run(args),
        cli::Command::Ls(args) => commands::ls::run(args, cli.output_dir),
        cli::Command::Clean(args) if args.containers => {
            commands::clean::remove_sidecars(args.dry_run, args.json).await
        }
        cli::Command::Clean(args) => commands::clean::run(args, cli.output_dir),
        cli::Command::Render(args) => commands::render::run(args, cli.output_dir),
        cli::Command::Top(args) => commands::top::run(args, cli.output_dir),
        cli::Command::Diff(args) => commands::diff::run(args, cli.output_dir),
        cli::Command::Export(args) => commands::export::run(args, cli.output_dir),
        cli::Command::Summarize(args) => commands::summarize::run(args),
        cli::Command::Stat(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::stat::run(args, cli.output_dir, &mut interrupts).await
        }
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
        cli::Command::View(args) => {
            let mut interrupts = signals::Interrupts::install()
                .map_err(|e| Error::io("install signal handlers", e))?;
            commands::view::run(args, cli.output_dir, &mut interrupts).await
        }
    }
}
