//! Off-CPU profiling: event configs, checking events against the kernel, parsing
//! `perf script` event streams, and the summaries (counts by group, off-CPU time per stack
//! and thread, I/O bandwidth). Everything here is pure; the recipe is in `capture::offcpu`.

pub mod config;
pub mod events;
pub mod script;
pub mod series;
pub mod summary;
pub mod text;
