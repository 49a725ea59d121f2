//! Compose files, read and never written (`read`), and the override file devprof writes
//! beside them (`overlay`).

pub mod overlay;
pub mod read;

pub use overlay::{
    choose_capabilities, jemalloc_conf, make_override, CapabilityChoice, OverrideOptions,
};
pub use read::{interpolate, parse, parse_env_file, ComposeFile, Service};
