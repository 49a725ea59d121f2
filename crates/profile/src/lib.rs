//! Profiles as data, pure: folded stacks (`folded`) and what is computed from them
//! (`filter`, `top`, `diff`); off-CPU event streams and their summaries (`offcpu`), read
//! from `perf script` text or straight from perf.data (`perfdata`); jemalloc heap dumps
//! (`heap`). Functions over text and bytes: no Docker, no files written.
//!
//! Convention: the first frame of a folded stack is the process or thread name the
//! recorder reports, not a function, so it is never ranked as one.

pub mod clock;
pub mod diff;
pub mod filter;
pub mod folded;
pub mod heap;
pub mod markers;
pub mod offcpu;
pub mod perfdata;
pub mod perfscript;
pub mod pprof;
pub mod pyspy;
pub mod stacks;
pub mod stat;
pub mod stat_diff;
pub mod timeline;
pub mod top;
pub mod verdict;

/// The function frames of a folded stack (root first), without the process/thread root.
pub fn function_frames(stack: &str) -> impl DoubleEndedIterator<Item = &str> {
    stack
        .split_once(';')
        .map(|(_, rest)| rest.split(';'))
        .into_iter()
        .flatten()
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}
