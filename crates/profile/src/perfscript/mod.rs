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

/// What one sample adds to the count of its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weight {
    /// One per sample, as devprof's captures count.
    #[default]
    Samples,
    /// perf's period, where the text has one (`-F ...,period`; perf script's default
    /// fields print it): nanoseconds for cpu-clock, events for a counter; 1 elsewhere.
    Period,
}

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
    /// How much the sample counts for (1, or its period under `Weight::Period`).
    pub weight: u64,
}
/// Folds `perf script` output read from `reader`, streaming, on every core. Memory grows
/// with the number of distinct stacks, not with the input size.
pub fn fold_perf_script<R: std::io::BufRead>(reader: R) -> std::io::Result<crate::folded::Folded> {
    Ok(fold(reader, FoldOptions::default())?.folded)
}

/// Folds like `fold_perf_script` and hands every folded sample, in input order, to `sink`
/// (the timeline).
pub fn fold_perf_script_with<R: std::io::BufRead>(
    reader: R,
    sink: &mut dyn SampleSink,
) -> std::io::Result<crate::folded::Folded> {
    fold_perf_script_resolved(reader, sink, None)
}

/// `fold_perf_script_with`, and `resolver` names the frames perf left unnamed.
pub fn fold_perf_script_resolved<R: std::io::BufRead>(
    reader: R,
    sink: &mut dyn SampleSink,
    resolver: Option<&dyn FrameResolver>,
) -> std::io::Result<crate::folded::Folded> {
    let options = FoldOptions {
        sink: Some(sink),
        resolver,
        ..FoldOptions::default()
    };
    Ok(fold(reader, options)?.folded)
}
