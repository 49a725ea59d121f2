//! Pure analysis over folded stacks, for `devprof render`, `top` and `diff`: filtering
//! stacks and frames, ranking functions, and comparing two profiles. Nothing here reads
//! files or talks to anything; the commands bring the text in.
//!
//! Convention (as in `fold`): the first frame of a folded stack is the process or thread
//! name perf reports, not a function, so it is never ranked as one.

pub mod diff;
pub mod filter;
pub mod top;

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
