//! A timeline cut into one interval per marker: the samples of each interval as folded
//! stacks, how busy the interval was, and which intervals are the slowest and which is the
//! median, for `top|render|diff --slice MARK`. Marker times are Unix ns; the timeline's
//! clock record says how its sample times map to them.

use super::Interval;
use crate::folded::Folded;
use crate::timeline::Timeline;
use std::collections::HashMap;

/// An interval shorter than this many sampling periods holds too few samples to read.
pub const MIN_PERIODS: i64 = 4;

/// One interval and its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    pub interval: Interval,
    /// Summed weight of the samples in `[start, end)`.
    pub samples: u64,
    pub folded: Folded,
    /// Shorter than `MIN_PERIODS` sampling periods.
    pub too_short: bool,
}

impl Slice {
    /// CPU used over the interval, in cores (samples × period ÷ length).
    pub fn cores(&self, period_ns: Option<u64>) -> Option<f64> {
        let length = self.interval.duration_ns();
        (length > 0).then_some(())?;
        Some(self.samples as f64 * period_ns? as f64 / length as f64)
    }
}

/// The samples of each interval (intervals may overlap: a sample counts in each that holds
/// it). `to_unix_ns` maps the timeline's sample times to the markers' clock.
pub fn slice(
    timeline: &Timeline,
    to_unix_ns: i64,
    intervals: &[Interval],
    period_ns: Option<u64>,
) -> Vec<Slice> {
    let mut order: Vec<(i64, usize)> = timeline
        .samples
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.time_ns as i64).saturating_add(to_unix_ns), i))
        .collect();
    order.sort_unstable();
    intervals
        .iter()
        .map(|interval| {
            let from = order.partition_point(|(t, _)| *t < interval.start_ns);
            let to = order.partition_point(|(t, _)| *t < interval.end_ns);
            let mut counts: HashMap<u32, u64> = HashMap::new();
            for (_, i) in &order[from..to.max(from)] {
                let s = &timeline.samples[*i];
                *counts.entry(s.stack).or_default() += s.weight;
            }
            let folded =
                Folded::from_pairs(counts.into_iter().filter_map(|(stack, n)| {
                    Some((timeline.stacks.get(stack as usize)?.clone(), n))
                }));
            let too_short = period_ns
                .is_some_and(|p| interval.duration_ns() < MIN_PERIODS.saturating_mul(p as i64));
            Slice {
                interval: *interval,
                samples: folded.total(),
                folded,
                too_short,
            }
        })
        .collect()
}

/// Indexes of the `n` longest slices, longest first.
pub fn slowest(slices: &[Slice], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(slices[*i].interval.duration_ns()));
    order.truncate(n);
    order
}

/// Index of the slice of median length (the lower middle of an even count).
pub fn median(slices: &[Slice]) -> Option<usize> {
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by_key(|i| slices[*i].interval.duration_ns());
    order.get(order.len().saturating_sub(1) / 2).copied()
}

/// The samples of several slices together.
pub fn merged(slices: &[Slice], which: &[usize]) -> Folded {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for i in which {
        for (stack, n) in &slices[*i].folded.stacks {
            *counts.entry(stack.as_str()).or_default() += n;
        }
    }
    Folded::from_pairs(counts.into_iter().map(|(s, n)| (s.to_string(), n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::{Sample, Thread};

    fn timeline(times: &[(u64, u32)]) -> Timeline {
        Timeline {
            stacks: vec!["t;main;work".into(), "t;main;heavy".into()],
            threads: vec![Thread {
                tid: 1,
                pid: Some(1),
                comm: "t".into(),
            }],
            samples: times
                .iter()
                .map(|(t, stack)| Sample {
                    time_ns: *t,
                    thread: 0,
                    stack: *stack,
                    weight: 1,
                })
                .collect(),
            clock: None,
        }
    }

    fn interval(marker: usize, start: i64, end: i64) -> Interval {
        Interval {
            marker,
            start_ns: start,
            end_ns: end,
            from_elapsed: true,
        }
    }

    #[test]
    fn samples_fall_into_half_open_intervals_on_the_markers_clock() {
        // Sample times 1..=9 ms on a clock 1000 s behind the markers'.
        let t = timeline(&[
            (1_000_000, 0),
            (2_000_000, 0),
            (3_000_000, 1),
            (4_000_000, 1),
            (5_000_000, 1),
            (9_000_000, 0),
        ]);
        let offset = 1_000_000_000_000;
        let at = |ms: i64| offset + ms * 1_000_000;
        let slices = slice(
            &t,
            offset,
            &[
                interval(0, at(1), at(3)),
                interval(1, at(3), at(9)),
                interval(2, at(9), at(10)),
            ],
            Some(1_000_000),
        );
        let samples: Vec<u64> = slices.iter().map(|s| s.samples).collect();
        assert_eq!(samples, vec![2, 3, 1]);
        assert_eq!(
            slices[1].folded.stacks,
            vec![("t;main;heavy".to_string(), 3)]
        );
        let too_short: Vec<bool> = slices.iter().map(|s| s.too_short).collect();
        assert_eq!(too_short, vec![true, false, true]);
        assert_eq!(slices[1].cores(Some(1_000_000)), Some(0.5));
        assert_eq!(slowest(&slices, 2), vec![1, 0]);
        assert_eq!(median(&slices), Some(0));
        assert_eq!(
            merged(&slices, &[0, 2]).stacks,
            vec![("t;main;work".to_string(), 3)]
        );
    }
}
