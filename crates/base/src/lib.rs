//! Text and units every part of devprof shares, pure: `text` (quoting for sh, truncating,
//! escaping what a container printed) and `units` (sizes, counts, durations).

pub mod text;
pub mod units;
