//! Captures: one driver (`lifecycle`) owns the order of every capture, from finding the
//! container and process (`target`), placing the engine in it or in a sidecar beside it
//! (`place`, `sidecar`), its workdir (`workdir`), the recording window (`window`) with the
//! target watched (`liveness`) and its log's markers followed (`markers`), to the
//! manifest and a container left clean whatever happens. A kind is a recipe over it:
//! `cpu` (any engine), `offcpu` (perf tracepoints), `stat` (counters), `heap` (jemalloc
//! dumps or Go's heap profile). `session` runs several captures in one aligned window.
//! Everything a capture is given besides its settings travels in its `context`.
//! Analysis is in `profile`, files in `store`, the engines in `engines`.

pub mod alignment;
pub mod armed_stop;
pub mod clocks;
pub mod collect;
pub mod command;
pub mod context;
pub mod cpu;
pub mod gate;
pub mod heap;
pub mod jit;
pub mod kept;
pub mod lifecycle;
pub mod liveness;
pub mod manifest;
pub mod markers;
pub mod offcpu;
pub mod place;
pub mod record_script;
pub mod repeat;
pub mod session;
pub mod sidecar;
pub mod stat;
pub mod sysctl;
pub mod target;
pub mod window;
pub mod workdir;

pub use context::CaptureCtx;
pub use lifecycle::Captured;
