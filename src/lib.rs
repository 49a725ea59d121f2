//! devprof: profile the containers of a docker-compose devnet.
//!
//! The data path, top to bottom (ARCHITECTURE.md has the map): `cli` (raw arguments) ->
//! `settings` (validated once) -> `commands` (one per subcommand, `commands::dispatch`) ->
//! `capture` (one driver for every capture: target, placement, window, signals,
//! clean-up; the cpu/offcpu/stat/heap recipes) over `engines` (how each profiler starts,
//! stops and reads its output, chosen in one place) and `docker` (the only module that
//! talks to the engine) -> `symbols` (demangling, the symbolizer, ELF facts) -> `profile`
//! (pure analysis: folded stacks, filters, top/diff, off-CPU and heap parsing) -> `render`
//! -> `store` (paths, manifests, catalog, retention); `view` serves the store to a
//! browser. `setup` holds build, compose and doctor; `runtime` says what runs in a
//! process; `ui`, `units`, `text` and `signals` are shared helpers.

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
