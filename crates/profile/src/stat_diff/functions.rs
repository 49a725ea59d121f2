//! Per-function statistics over capture sets: each window of a set is one run. For every
//! function, its self and inclusive samples per window, as a share of the window's samples
//! (percentage points) and as a rate (samples per second of the window: one function
//! growing does not make the others look smaller); the mean over the windows with a
//! t interval from their spread; and between two sets, Welch's test per function with
//! Holm's correction over the functions compared.
//!
//! Why the windows' spread and not a binomial model of the samples: a binomial interval
//! (p(1-p)/n) assumes every sample is an independent draw from one fixed mix, so it only
//! shrinks with more samples; a real process drifts from window to window (GC, caches,
//! bursts of requests, neighbours on the host), and that drift is the noise a regression
//! must stand out of. The spread between windows contains both the sampling noise and the
//! drift.

use super::tdist;
use crate::folded::Folded;
use crate::top::{inclusive_counts, self_counts};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One window of a set: samples per function and in all, and its length when known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowCounts {
    pub self_samples: BTreeMap<String, u64>,
    pub inclusive: BTreeMap<String, u64>,
    pub total: u64,
    /// None for a bare .folded file: it says nothing of how long it took.
    pub seconds: Option<f64>,
}

impl WindowCounts {
    pub fn of(folded: &Folded, seconds: Option<f64>) -> Self {
        let own = |m: std::collections::HashMap<&str, u64>| {
            m.into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<BTreeMap<_, _>>()
        };
        WindowCounts {
            self_samples: own(self_counts(folded)),
            inclusive: own(inclusive_counts(folded)),
            total: folded.total(),
            seconds: seconds.filter(|s| *s > 0.0),
        }
    }
}

/// What is measured of a function in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quantity {
    SelfShare,
    InclShare,
    SelfRate,
    InclRate,
}

impl Quantity {
    const ALL: [Quantity; 4] = [
        Quantity::SelfShare,
        Quantity::InclShare,
        Quantity::SelfRate,
        Quantity::InclRate,
    ];

    fn is_rate(self) -> bool {
        matches!(self, Quantity::SelfRate | Quantity::InclRate)
    }

    /// The value of `name` in `w`; None for a rate of a window of unknown length.
    fn of(self, w: &WindowCounts, name: &str) -> Option<f64> {
        let counts = match self {
            Quantity::SelfShare | Quantity::SelfRate => &w.self_samples,
            Quantity::InclShare | Quantity::InclRate => &w.inclusive,
        };
        let n = counts.get(name).copied().unwrap_or(0) as f64;
        if self.is_rate() {
            w.seconds.map(|s| n / s)
        } else {
            Some(if w.total == 0 {
                0.0
            } else {
                100.0 * n / w.total as f64
            })
        }
    }
}

/// A mean over windows with its spread and interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub mean: f64,
    /// Sample standard deviation over the windows (None with one window).
    pub stddev: Option<f64>,
    /// Half-width of the t interval of the mean at the chosen confidence.
    pub ci: Option<f64>,
}

fn mean_var(values: &[f64]) -> (f64, Option<f64>) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    let var =
        (n > 1).then(|| values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64);
    (mean, var)
}

pub fn estimate(values: &[f64], confidence: f64) -> Estimate {
    let (mean, var) = mean_var(values);
    let n = values.len() as f64;
    Estimate {
        mean,
        stddev: var.map(f64::sqrt),
        ci: var.map(|v| tdist::quantile(confidence, n - 1.0) * (v / n).sqrt()),
    }
}

/// One function over a set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionSummary {
    pub name: String,
    /// Percentage points of each window's samples.
    pub self_share: Estimate,
    pub incl_share: Estimate,
    /// Samples per second of each window (None when the windows' lengths are unknown).
    pub self_rate: Option<Estimate>,
    pub incl_rate: Option<Estimate>,
}

/// A set summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetSummary {
    pub windows: usize,
    pub confidence: f64,
    pub samples_per_window: Vec<u64>,
    /// All samples per second of each window.
    pub total_rate: Option<Estimate>,
    /// By mean self share, heaviest first.
    pub functions: Vec<FunctionSummary>,
}

fn names(windows: &[&WindowCounts]) -> BTreeSet<String> {
    windows
        .iter()
        .flat_map(|w| w.inclusive.keys().chain(w.self_samples.keys()))
        .cloned()
        .collect()
}

fn series(windows: &[WindowCounts], q: Quantity, name: &str) -> Option<Vec<f64>> {
    windows.iter().map(|w| q.of(w, name)).collect()
}

fn total_rates(windows: &[WindowCounts]) -> Option<Vec<f64>> {
    windows
        .iter()
        .map(|w| w.seconds.map(|s| w.total as f64 / s))
        .collect()
}

pub fn summarize(windows: &[WindowCounts], confidence: f64) -> SetSummary {
    let all: Vec<&WindowCounts> = windows.iter().collect();
    let est = |q: Quantity, name: &str| series(windows, q, name).map(|v| estimate(&v, confidence));
    let mut functions: Vec<FunctionSummary> = names(&all)
        .into_iter()
        .map(|name| FunctionSummary {
            self_share: est(Quantity::SelfShare, &name).unwrap_or(Estimate {
                mean: 0.0,
                stddev: None,
                ci: None,
            }),
            incl_share: est(Quantity::InclShare, &name).unwrap_or(Estimate {
                mean: 0.0,
                stddev: None,
                ci: None,
            }),
            self_rate: est(Quantity::SelfRate, &name),
            incl_rate: est(Quantity::InclRate, &name),
            name,
        })
        .collect();
    functions.sort_by(|a, b| {
        b.self_share
            .mean
            .total_cmp(&a.self_share.mean)
            .then(b.incl_share.mean.total_cmp(&a.incl_share.mean))
            .then(a.name.cmp(&b.name))
    });
    SetSummary {
        windows: windows.len(),
        confidence,
        samples_per_window: windows.iter().map(|w| w.total).collect(),
        total_rate: total_rates(windows).map(|v| estimate(&v, confidence)),
        functions,
    }
}

/// Where a change stands at the chosen confidence, after the correction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Regressed,
    Improved,
    WithinNoise,
    /// One window on each side: no spread to judge by.
    NoiseUnknown,
}

impl Direction {
    pub fn words(self) -> &'static str {
        match self {
            Direction::Regressed => "regressed",
            Direction::Improved => "improved",
            Direction::WithinNoise => "within noise",
            Direction::NoiseUnknown => "noise unknown",
        }
    }
}

/// One quantity before and after.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Delta {
    pub before: f64,
    pub after: f64,
    pub change: f64,
    /// Half-width of the interval of the change at the chosen confidence (uncorrected).
    pub ci: Option<f64>,
    /// Welch's two-sided p, and Holm's over the functions compared.
    pub p: Option<f64>,
    pub p_holm: Option<f64>,
    pub verdict: Direction,
}

/// Welch's test of two series: change, interval half-width, p. A side with one window
/// borrows the other side's variance (equal variances, df of the other side).
fn welch(before: &[f64], after: &[f64], confidence: f64) -> Delta {
    let (mb, vb) = mean_var(before);
    let (ma, va) = mean_var(after);
    let (nb, na) = (before.len() as f64, after.len() as f64);
    let change = ma - mb;
    let spread = match (vb, va) {
        (Some(vb), Some(va)) => {
            let (sb, sa) = (vb / nb, va / na);
            let df = if sb + sa > 0.0 {
                (sb + sa).powi(2) / (sb * sb / (nb - 1.0) + sa * sa / (na - 1.0))
            } else {
                nb + na - 2.0
            };
            Some(((sb + sa).sqrt(), df))
        }
        (Some(v), None) => Some(((v * (1.0 / nb + 1.0 / na)).sqrt(), nb - 1.0)),
        (None, Some(v)) => Some(((v * (1.0 / nb + 1.0 / na)).sqrt(), na - 1.0)),
        (None, None) => None,
    };
    let (ci, p) = match spread {
        None => (None, None),
        Some((0.0, _)) => (Some(0.0), Some(if change == 0.0 { 1.0 } else { 0.0 })),
        Some((se, df)) => (
            Some(tdist::quantile(confidence, df) * se),
            Some(tdist::two_sided_p(change / se, df)),
        ),
    };
    Delta {
        before: mb,
        after: ma,
        change,
        ci,
        p,
        p_holm: p,
        verdict: Direction::NoiseUnknown,
    }
}

fn judge(d: &mut Delta, alpha: f64) {
    d.verdict = match d.p_holm {
        None => Direction::NoiseUnknown,
        Some(p) if p < alpha && d.change > 0.0 => Direction::Regressed,
        Some(p) if p < alpha && d.change < 0.0 => Direction::Improved,
        Some(_) => Direction::WithinNoise,
    };
}

/// One function compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionChange {
    pub name: String,
    /// Percentage points.
    pub self_share: Delta,
    pub incl_share: Delta,
    /// Samples per second (None when a side's windows have no known length).
    pub self_rate: Option<Delta>,
    pub incl_rate: Option<Delta>,
    /// The verdict of its self time: on the rate where both sides have one, else on the
    /// share.
    pub verdict: Direction,
}

impl FunctionChange {
    /// The delta the self verdict was taken on.
    pub fn self_basis(&self) -> &Delta {
        self.self_rate.as_ref().unwrap_or(&self.self_share)
    }

    pub fn incl_basis(&self) -> &Delta {
        self.incl_rate.as_ref().unwrap_or(&self.incl_share)
    }
}

/// What verdicts are taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictBasis {
    Rate,
    Share,
}

/// Two sets compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetDiff {
    pub confidence: f64,
    pub basis: VerdictBasis,
    pub before_windows: usize,
    pub after_windows: usize,
    /// Functions tested (the family Holm's correction is over), per quantity.
    pub functions_compared: usize,
    /// All samples per second: the process's CPU, up or down.
    pub total_rate: Option<Delta>,
    /// Largest self-share change first.
    pub functions: Vec<FunctionChange>,
    pub notes: Vec<String>,
}

impl SetDiff {
    pub fn function(&self, name: &str) -> Option<&FunctionChange> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// The smallest mean share (percent of a window's samples, on either side) a function
/// needs to be tested. Each function tested widens Holm's correction; the long tail of
/// functions with a few samples (mostly kernel frames) cannot show a change at any
/// confidence and would only bury the ones that can.
pub const MIN_TESTED_SHARE: f64 = 1.0;

/// Whether function `i` is heavy enough on either side to be tested (its mean share of
/// the quantity's own kind, self or inclusive).
fn heavy_enough(shares: &[Option<Delta>], i: usize) -> bool {
    shares[i].is_some_and(|d| d.before.max(d.after) >= MIN_TESTED_SHARE)
}

/// Compares two sets function by function at `confidence` (0.95), Holm-corrected over
/// the functions with at least `MIN_TESTED_SHARE` of the samples on either side.
pub fn compare_sets(before: &[WindowCounts], after: &[WindowCounts], confidence: f64) -> SetDiff {
    let alpha = 1.0 - confidence;
    let all: Vec<&WindowCounts> = before.iter().chain(after).collect();
    let names: Vec<String> = names(&all).into_iter().collect();
    // deltas[q][i]: quantity q of function i.
    let mut deltas: Vec<Vec<Option<Delta>>> = Quantity::ALL
        .iter()
        .map(|&q| {
            names
                .iter()
                .map(|name| {
                    let b = series(before, q, name)?;
                    let a = series(after, q, name)?;
                    Some(welch(&b, &a, confidence))
                })
                .collect()
        })
        .collect();
    // Which functions are tested, by their shares: self quantities by the self share,
    // inclusive ones by the inclusive share.
    let heavy: Vec<Vec<bool>> = [0, 1]
        .iter()
        .map(|&q| {
            (0..names.len())
                .map(|i| heavy_enough(&deltas[q], i))
                .collect()
        })
        .collect();
    for (q, family) in deltas.iter_mut().enumerate() {
        let heavy = &heavy[q % 2];
        let tested: Vec<usize> = (0..family.len())
            .filter(|i| heavy[*i] && family[*i].is_some_and(|d| d.p.is_some()))
            .collect();
        // The untested keep their estimates and raw p-value, but no corrected one.
        for (i, d) in family.iter_mut().enumerate() {
            if let Some(d) = d.as_mut().filter(|_| !heavy[i]) {
                d.p_holm = None;
            }
        }
        let p: Vec<f64> = tested
            .iter()
            .map(|i| family[*i].and_then(|d| d.p).unwrap_or(1.0))
            .collect();
        for (i, adjusted) in tested.iter().zip(tdist::holm(&p)) {
            if let Some(d) = family[*i].as_mut() {
                d.p_holm = Some(adjusted);
            }
        }
        for (i, d) in family.iter_mut().enumerate() {
            if let Some(d) = d.as_mut() {
                judge(d, alpha);
                // Below the floor and judgeable: never flagged, so within noise.
                if !heavy[i] && d.p.is_some() {
                    d.verdict = Direction::WithinNoise;
                }
            }
        }
    }
    let zero = Delta {
        before: 0.0,
        after: 0.0,
        change: 0.0,
        ci: None,
        p: None,
        p_holm: None,
        verdict: Direction::NoiseUnknown,
    };
    let mut functions: Vec<FunctionChange> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut f = FunctionChange {
                name: name.clone(),
                self_share: deltas[0][i].unwrap_or(zero),
                incl_share: deltas[1][i].unwrap_or(zero),
                self_rate: deltas[2][i],
                incl_rate: deltas[3][i],
                verdict: Direction::NoiseUnknown,
            };
            f.verdict = f.self_basis().verdict;
            f
        })
        .collect();
    functions.sort_by(|a, b| {
        b.self_share
            .change
            .abs()
            .total_cmp(&a.self_share.change.abs())
            .then(a.name.cmp(&b.name))
    });
    let total_rate = match (total_rates(before), total_rates(after)) {
        (Some(b), Some(a)) => {
            let mut d = welch(&b, &a, confidence);
            judge(&mut d, alpha);
            Some(d)
        }
        _ => None,
    };
    let basis = if functions.iter().any(|f| f.self_rate.is_some()) {
        VerdictBasis::Rate
    } else {
        VerdictBasis::Share
    };
    let mut notes = Vec::new();
    for (side, n) in [("BEFORE", before.len()), ("AFTER", after.len())] {
        if n == 1 {
            notes.push(format!("{side} is one window: it has no spread of its own"));
        }
    }
    if before.len() == 1 && after.len() == 1 {
        notes.push("one window on each side: no noise to judge by, no verdicts".into());
    } else if before.len() == 1 || after.len() == 1 {
        notes.push(
            "the side with one window is given the other side's window-to-window variance".into(),
        );
    }
    if basis == VerdictBasis::Share {
        notes.push(
            "a side's windows have no known length (.folded files): verdicts on shares, not rates"
                .into(),
        );
    }
    SetDiff {
        confidence,
        basis,
        before_windows: before.len(),
        after_windows: after.len(),
        functions_compared: names.len(),
        total_rate,
        functions,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of 1 s with `hot` self samples in `hot_fn` and `rest` in `other`.
    fn window(hot: u64, rest: u64) -> WindowCounts {
        let folded = Folded::from_folded_text(&format!(
            "t;main;hot_fn {hot}\nt;main;other {rest}\nt;main;third 50\n"
        ));
        WindowCounts::of(&folded, Some(1.0))
    }

    #[test]
    fn a_long_tail_of_light_functions_does_not_bury_a_heavy_change() {
        // 200 functions at a few samples each: tested, Holm would divide alpha by 203.
        let tail: String = (0..200).map(|i| format!("t;k;light{i} 2\n")).collect();
        let w = |hot: u64, jitter: u64| {
            let text = format!("t;main;hot_fn {hot}\nt;main;other {}\n{tail}", 600 + jitter);
            WindowCounts::of(&Folded::from_folded_text(&text), Some(2.0))
        };
        let before: Vec<WindowCounts> = [0, 7, 3, 9, 5].iter().map(|j| w(300 + j, *j)).collect();
        let after: Vec<WindowCounts> = [4, 0, 8, 2, 6].iter().map(|j| w(345 + j, *j)).collect();
        let diff = compare_sets(&before, &after, 0.95);
        let hot = diff.function("hot_fn").unwrap();
        assert_eq!(hot.verdict, Direction::Regressed, "{hot:?}");
        let light = diff.function("light7").unwrap();
        assert_eq!(light.self_share.p_holm, None, "below the floor: not tested");
        assert_eq!(light.verdict, Direction::WithinNoise);
    }

    #[test]
    fn identical_windows_give_no_verdicts() {
        let set: Vec<WindowCounts> = (0..5).map(|_| window(300, 600)).collect();
        let d = compare_sets(&set, &set, 0.95);
        assert_eq!(d.basis, VerdictBasis::Rate);
        assert!(d
            .functions
            .iter()
            .all(|f| f.verdict == Direction::WithinNoise && f.self_share.change == 0.0));
        assert_eq!(d.total_rate.unwrap().verdict, Direction::WithinNoise);
    }

    #[test]
    fn a_function_ten_points_up_in_every_window_regresses() {
        let noise = [0, 7, -5, 2, -4];
        let before: Vec<WindowCounts> = noise
            .iter()
            .map(|n| window((300 + n) as u64, (600 - n) as u64))
            .collect();
        // hot_fn from 300 of 950 (31.6%) to about 400 of 950 (42.1%): +10.5 points.
        let after: Vec<WindowCounts> = noise
            .iter()
            .map(|n| window((400 - n) as u64, (500 + n) as u64))
            .collect();
        let d = compare_sets(&before, &after, 0.95);
        let hot = d.function("hot_fn").unwrap();
        assert_eq!(hot.verdict, Direction::Regressed);
        assert!((hot.self_share.change - 100.0 * 100.0 / 950.0).abs() < 1e-9);
        assert_eq!(hot.self_rate.unwrap().change, 100.0);
        assert_eq!(d.function("other").unwrap().verdict, Direction::Improved);
        // The third function's samples did not move: neither its rate nor its share.
        let third = d.function("third").unwrap();
        assert_eq!(third.verdict, Direction::WithinNoise);
        // main is on every stack: 100% inclusive on both sides.
        assert_eq!(d.function("main").unwrap().incl_share.change, 0.0);
        assert_eq!(d.functions[0].name, "hot_fn");
        assert_eq!(d.functions_compared, 4);
    }

    #[test]
    fn one_window_a_side_has_no_verdict_and_says_so() {
        let d = compare_sets(&[window(300, 600)], &[window(400, 500)], 0.95);
        assert!(d
            .functions
            .iter()
            .all(|f| f.verdict == Direction::NoiseUnknown));
        assert!(d.notes.iter().any(|n| n.contains("no verdicts")));
    }

    /// A real capture set: `cpu demo-seq 6 --repeat 3` on a busy host (tests/data/gate).
    #[test]
    fn golden_set_of_demo_seq() {
        let parts: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../tests/data/gate/demo-seq.parts.json"
        ))
        .unwrap();
        let texts = [
            include_str!("../../../../tests/data/gate/demo-seq.part1.folded"),
            include_str!("../../../../tests/data/gate/demo-seq.part2.folded"),
            include_str!("../../../../tests/data/gate/demo-seq.part3.folded"),
        ];
        let windows: Vec<WindowCounts> = texts
            .iter()
            .zip(parts.as_array().unwrap())
            .map(|(text, p)| {
                WindowCounts::of(&Folded::from_folded_text(text), p["duration_s"].as_f64())
            })
            .collect();
        let samples: Vec<u64> = windows.iter().map(|w| w.total).collect();
        assert_eq!(samples, vec![225, 353, 340]);
        let s = summarize(&windows, 0.95);
        let hash = &s.functions[0];
        assert_eq!(hash.name, "demo_node::workloads::hash_chain");
        // Self samples 82, 145, 155 of 225, 353, 340 in windows of 2.022 s.
        assert!((hash.self_share.mean - 41.036_389).abs() < 1e-5);
        assert!((hash.self_share.stddev.unwrap() - 4.572_027).abs() < 1e-5);
        assert!((hash.self_share.ci.unwrap() - 4.303 * 4.572_027 / 3f64.sqrt()).abs() < 1e-2);
        assert!((hash.self_rate.unwrap().mean - 62.974_159).abs() < 1e-5);
        // The set against itself: nothing moves, nothing is flagged.
        let d = compare_sets(&windows, &windows, 0.95);
        assert!(d
            .functions
            .iter()
            .all(|f| f.verdict == Direction::WithinNoise));
        // Its first window alone against the other two: one side borrows the other's
        // spread, and hash_chain's lower first window stays within that noise.
        let d = compare_sets(&windows[..1], &windows[1..], 0.95);
        assert!(d.notes.iter().any(|n| n.contains("BEFORE is one window")));
        let hash = d.function("demo_node::workloads::hash_chain").unwrap();
        assert_eq!(hash.verdict, Direction::WithinNoise);
    }

    #[test]
    fn summary_means_and_intervals() {
        let set = vec![window(300, 600), window(310, 590), window(290, 610)];
        let s = summarize(&set, 0.95);
        assert_eq!(s.windows, 3);
        let other = &s.functions[0];
        assert_eq!(other.name, "other");
        let rate = other.self_rate.unwrap();
        assert_eq!(rate.mean, 600.0);
        assert_eq!(rate.stddev, Some(10.0));
        // t(0.975, 2) = 4.303, times 10 / sqrt(3).
        assert!((rate.ci.unwrap() - 4.303 * 10.0 / 3f64.sqrt()).abs() < 1e-2);
        assert_eq!(s.total_rate.unwrap().mean, 950.0);
    }
}
