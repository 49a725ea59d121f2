//! devprof's own reader of `perf script` output: samples parsed without copying (`parse`),
//! frames named as flamegraphs show them (`name`), and folded — in parallel: the stream is
//! cut at sample boundaries into chunks, a pool of threads folds the chunks, and their
//! counts are merged. Memory is bounded by the distinct stacks plus the chunks in flight,
//! not by the size of the input, so a multi-gigabyte `perf script` streams through.
//!
//! Two hooks serve the paths that need more than counts: a `FrameResolver` names frames
//! perf left unnamed (a stripped binary whose names devprof can still recover), and a
//! `SampleSink` receives every sample in input order with its time and thread (for a
//! timeline).

mod fold;
pub mod name;
pub mod parse;

pub use fold::{fold, FoldOptions, FoldOutcome};

/// Names frames perf could not (`[unknown]` in a known module), from the module's file and
/// the frame's address. Called from the folding threads.
pub trait FrameResolver: Send + Sync {
    /// The frames at `address` in `module` (as perf printed both), outermost first (inlined
    /// frames after the function they were inlined into); None when it cannot say.
    fn resolve(&self, module: &str, address: u64) -> Option<Vec<String>>;
}

/// Receives every sample, in the order of the input. `stack` is an id for the sample's
/// folded stack; `new_stack` announces each id once, before its first sample.
pub trait SampleSink: Send {
    fn new_stack(&mut self, id: u32, stack: &str);
    fn sample(&mut self, sample: &SampleMeta<'_>, stack: u32);
}

/// What a sample says besides its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleMeta<'a> {
    pub time_ns: Option<u64>,
    pub pid: Option<u32>,
    pub tid: u32,
    pub comm: &'a str,
    /// How much the sample counts for (its period when perf printed one, else 1).
    pub weight: u64,
}
