//! Two stat captures compared counter by counter: the change (absolute and %), and where
//! both captures ran a command several times, the noise of those runs and whether the
//! change stands out of it (Welch's t: the 95% confidence interval of the difference of
//! the means). Pure: stat records in, comparison out.
//!
//! The same statistics over capture sets (`functions`): per function, windows stand for
//! runs, with any confidence (`tdist`) and Holm's correction over the functions compared.

use super::stat::{Counter, Reading, StatRecord};

pub mod fail_if;
pub mod functions;
pub mod tdist;
use serde::Serialize;

/// What is compared: per-run means of command runs, or per-second rates of windows (two
/// windows of different lengths would otherwise differ by their lengths alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    MeanPerRun,
    PerSecond,
}

impl Basis {
    pub fn words(self) -> &'static str {
        match self {
            Basis::MeanPerRun => "mean per successful run",
            Basis::PerSecond => "per second of the window",
        }
    }
}

/// How far a change stands from the noise of the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The 95% confidence interval of the difference excludes zero.
    Significant,
    /// It includes zero: the runs vary as much as the captures differ.
    WithinNoise,
    /// Fewer than two runs on a side (or windows): no noise to judge by.
    NoiseUnknown,
    /// Not counted on one side (not supported, not counted, or not asked for).
    NotComparable,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Significant => "significant",
            Verdict::WithinNoise => "within noise",
            Verdict::NoiseUnknown => "noise unknown (no repeats)",
            Verdict::NotComparable => "not comparable",
        }
    }
}

/// The spread of one side's runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    pub mean: f64,
    /// Sample standard deviation over the runs (None for one run or a window).
    pub stddev: Option<f64>,
    pub runs: usize,
}

/// One counter (or the wall time) before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub event: String,
    pub unit: String,
    /// None when the side did not count it; `why` says what perf said.
    pub before: Option<Side>,
    pub after: Option<Side>,
    pub change: Option<f64>,
    /// Change relative to before, in percent (None when before is 0 or missing).
    pub change_pct: Option<f64>,
    /// Half-width of the 95% confidence interval of the change (Welch), when both sides
    /// have two or more runs.
    pub ci95: Option<f64>,
    pub verdict: Verdict,
    /// Why a side has no value (`not supported in AFTER`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Change {
    /// The verdict in words, with the noise where there is some.
    pub fn verdict_text(&self) -> String {
        match (self.verdict, self.ci95, &self.why) {
            (_, _, Some(why)) => why.clone(),
            (Verdict::Significant | Verdict::WithinNoise, Some(ci), _) => {
                format!("{} (±{} at 95%)", self.verdict.words(), short(ci))
            }
            (v, _, _) => v.words().to_string(),
        }
    }
}

/// The comparison of two stat captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatDiff {
    pub basis: Basis,
    pub changes: Vec<Change>,
    /// Things the reader must know (different commands, failed runs left out).
    pub notes: Vec<String>,
}

/// Why two stat records cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StatDiffError {
    #[error(
        "BEFORE counts {before} and AFTER counts {after}: compare two windows or two command runs"
    )]
    DifferentKinds {
        before: &'static str,
        after: &'static str,
    },
    #[error("{side} has no successful run (every run exited non-zero): nothing to compare")]
    NoSuccessfulRun { side: &'static str },
}

fn kind(r: &StatRecord) -> &'static str {
    if r.command.is_empty() {
        "a window"
    } else {
        "command runs"
    }
}

/// Compares `before` with `after`; windows are compared per second of their lengths.
pub fn compare(
    before: &StatRecord,
    before_window_s: f64,
    after: &StatRecord,
    after_window_s: f64,
) -> Result<StatDiff, StatDiffError> {
    if before.command.is_empty() != after.command.is_empty() {
        return Err(StatDiffError::DifferentKinds {
            before: kind(before),
            after: kind(after),
        });
    }
    let mut notes = Vec::new();
    let basis = if before.command.is_empty() {
        Basis::PerSecond
    } else {
        Basis::MeanPerRun
    };
    let samples =
        |r: &StatRecord, window_s: f64, side: &'static str| -> Result<Samples, StatDiffError> {
            match basis {
                Basis::PerSecond => Ok(Samples::window(&r.counters, window_s)),
                Basis::MeanPerRun => {
                    let ok: Vec<_> = r.runs.iter().filter(|run| run.exit_status == 0).collect();
                    if ok.is_empty() {
                        return Err(StatDiffError::NoSuccessfulRun { side });
                    }
                    Ok(Samples::runs(
                        &ok.iter()
                            .map(|run| run.counters.as_slice())
                            .collect::<Vec<_>>(),
                        &ok.iter().map(|run| run.wall_s).collect::<Vec<_>>(),
                    ))
                }
            }
        };
    let b = samples(before, before_window_s, "BEFORE")?;
    let a = samples(after, after_window_s, "AFTER")?;
    if basis == Basis::MeanPerRun {
        if before.command != after.command {
            notes.push(format!(
                "the captures ran different commands: `{}` and `{}`",
                before.command.join(" "),
                after.command.join(" ")
            ));
        }
        for (side, r) in [("BEFORE", before), ("AFTER", after)] {
            if r.failed_runs > 0 {
                notes.push(format!(
                    "{side}: {} of {} runs exited non-zero and are left out",
                    r.failed_runs,
                    r.runs.len()
                ));
            }
        }
    }
    let mut events: Vec<(String, String)> = Vec::new();
    for s in [&b, &a] {
        for (event, unit, _) in &s.series {
            if !events.iter().any(|(e, _)| e == event) {
                events.push((event.clone(), unit.clone()));
            }
        }
    }
    let mut changes: Vec<Change> = events
        .into_iter()
        .map(|(event, unit)| change_of(&event, &unit, b.get(&event), a.get(&event)))
        .collect();
    if basis == Basis::MeanPerRun {
        changes.push(change_of(
            "wall time",
            "s",
            Some(Ok(b.wall.as_slice())),
            Some(Ok(a.wall.as_slice())),
        ));
    }
    Ok(StatDiff {
        basis,
        changes,
        notes,
    })
}

/// One side's values per event: one per run, or one per-second rate for a window.
struct Samples {
    /// (event, unit, values or what perf said instead).
    series: Vec<(String, String, Result<Vec<f64>, Reading>)>,
    wall: Vec<f64>,
}

impl Samples {
    fn window(counters: &[Counter], window_s: f64) -> Self {
        let per_s = window_s.max(1e-9);
        Samples {
            series: counters
                .iter()
                .map(|c| {
                    let values = match c.reading {
                        Reading::Counted(v) => Ok(vec![v / per_s]),
                        other => Err(other),
                    };
                    let unit = if c.unit.is_empty() {
                        "/s".to_string()
                    } else {
                        format!("{}/s", c.unit)
                    };
                    (c.event.clone(), unit, values)
                })
                .collect(),
            wall: Vec::new(),
        }
    }

    fn runs(runs: &[&[Counter]], wall: &[f64]) -> Self {
        let mut series: Vec<(String, String, Result<Vec<f64>, Reading>)> = Vec::new();
        for run in runs {
            for c in *run {
                let at = match series.iter().position(|(e, _, _)| *e == c.event) {
                    Some(i) => i,
                    None => {
                        series.push((c.event.clone(), c.unit.clone(), Ok(Vec::new())));
                        series.len() - 1
                    }
                };
                let slot = &mut series[at].2;
                match (slot.as_mut(), c.reading) {
                    (Ok(values), Reading::Counted(v)) => values.push(v),
                    // A run that did not count it makes the whole side uncounted: a mean
                    // over the other runs would be a made-up number.
                    (Ok(_), other) => *slot = Err(other),
                    (Err(_), _) => {}
                }
            }
        }
        Samples {
            series,
            wall: wall.to_vec(),
        }
    }

    fn get(&self, event: &str) -> Option<Result<&[f64], Reading>> {
        self.series
            .iter()
            .find(|(e, _, _)| e == event)
            .map(|(_, _, v)| v.as_ref().map(Vec::as_slice).map_err(|r| *r))
    }
}

fn side(values: &[f64]) -> Side {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    let stddev = (n > 1)
        .then(|| (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
    Side {
        mean,
        stddev,
        runs: n,
    }
}

fn reading_words(r: Reading) -> &'static str {
    match r {
        Reading::NotSupported => "not supported",
        Reading::NotCounted => "not counted",
        Reading::Counted(_) => "counted",
    }
}

fn change_of(
    event: &str,
    unit: &str,
    before: Option<Result<&[f64], Reading>>,
    after: Option<Result<&[f64], Reading>>,
) -> Change {
    let mut change = Change {
        event: event.to_string(),
        unit: unit.to_string(),
        before: None,
        after: None,
        change: None,
        change_pct: None,
        ci95: None,
        verdict: Verdict::NotComparable,
        why: None,
    };
    let mut why = Vec::new();
    for (name, value, slot) in [
        ("BEFORE", before, &mut change.before),
        ("AFTER", after, &mut change.after),
    ] {
        match value {
            Some(Ok(values)) if !values.is_empty() => *slot = Some(side(values)),
            Some(Ok(_)) => why.push(format!("no value in {name}")),
            Some(Err(r)) => why.push(format!("{} in {name}", reading_words(r))),
            None => why.push(format!("not counted in {name} (not asked for)")),
        }
    }
    let (Some(b), Some(a)) = (change.before, change.after) else {
        change.why = Some(why.join(", "));
        return change;
    };
    let delta = a.mean - b.mean;
    change.change = Some(delta);
    change.change_pct = (b.mean != 0.0).then(|| 100.0 * delta / b.mean);
    change.verdict = Verdict::NoiseUnknown;
    if let (Some(sb), Some(sa)) = (b.stddev, a.stddev) {
        let (vb, va) = (sb * sb / b.runs as f64, sa * sa / a.runs as f64);
        let se = (vb + va).sqrt();
        let ci = if se > 0.0 {
            // Welch–Satterthwaite degrees of freedom.
            let df =
                (vb + va).powi(2) / (vb * vb / (b.runs - 1) as f64 + va * va / (a.runs - 1) as f64);
            t95(df) * se
        } else {
            0.0
        };
        change.ci95 = Some(ci);
        change.verdict = if delta.abs() > ci {
            Verdict::Significant
        } else {
            Verdict::WithinNoise
        };
    }
    change
}

/// Student's t for a two-sided 95% interval with `df` degrees of freedom (rounded down:
/// the interval errs wide).
pub fn t95(df: f64) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if !df.is_finite() {
        return 1.960;
    }
    let k = (df.floor() as usize).max(1);
    match k {
        1..=30 => T[k - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// A number short enough for a table: thousands separators for large ones.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        let s = devprof_base::units::thousands(a.round() as u64);
        if v < 0.0 {
            format!("-{s}")
        } else {
            s
        }
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 0.01 || a == 0.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::Run;

    fn counter(event: &str, unit: &str, v: f64) -> Counter {
        Counter {
            event: event.into(),
            reading: Reading::Counted(v),
            unit: unit.into(),
            running_pct: Some(100.0),
        }
    }

    fn runs(task_ms: &[f64]) -> StatRecord {
        StatRecord {
            command: vec!["sh".into(), "-c".into(), "work".into()],
            runs: task_ms
                .iter()
                .map(|v| Run {
                    exit_status: 0,
                    wall_s: v / 1000.0,
                    counters: vec![
                        counter("task-clock", "msec", *v),
                        Counter {
                            event: "cycles".into(),
                            reading: Reading::NotSupported,
                            unit: String::new(),
                            running_pct: None,
                        },
                    ],
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_change_larger_than_the_noise_is_significant() {
        let d = compare(
            &runs(&[100.0, 101.0, 99.0]),
            0.0,
            &runs(&[150.0, 151.0, 149.0]),
            0.0,
        )
        .unwrap();
        assert_eq!(d.basis, Basis::MeanPerRun);
        let t = d.changes.iter().find(|c| c.event == "task-clock").unwrap();
        assert_eq!(t.change, Some(50.0));
        assert_eq!(t.change_pct, Some(50.0));
        assert_eq!(t.verdict, Verdict::Significant);
        // se = sqrt(1/3 + 1/3), df = 4: ±2.776 * 0.8165
        assert!((t.ci95.unwrap() - 2.776 * (2.0f64 / 3.0).sqrt()).abs() < 1e-9);
        let c = d.changes.iter().find(|c| c.event == "cycles").unwrap();
        assert_eq!(c.verdict, Verdict::NotComparable);
        assert_eq!(
            c.verdict_text(),
            "not supported in BEFORE, not supported in AFTER"
        );
        assert!(d.changes.iter().any(|c| c.event == "wall time"));
    }

    #[test]
    fn a_change_smaller_than_the_noise_is_within_it() {
        let d = compare(
            &runs(&[100.0, 130.0, 70.0]),
            0.0,
            &runs(&[105.0, 135.0, 75.0]),
            0.0,
        )
        .unwrap();
        let t = &d.changes[0];
        assert_eq!(t.verdict, Verdict::WithinNoise);
        assert!(t.verdict_text().starts_with("within noise (±"));
    }

    #[test]
    fn one_run_has_no_noise_and_windows_compare_per_second() {
        let d = compare(&runs(&[100.0]), 0.0, &runs(&[120.0, 121.0]), 0.0).unwrap();
        assert_eq!(d.changes[0].verdict, Verdict::NoiseUnknown);
        let window = |v: f64| StatRecord {
            counters: vec![counter("page-faults", "", v)],
            ..Default::default()
        };
        let d = compare(&window(100.0), 5.0, &window(400.0), 10.0).unwrap();
        assert_eq!(d.basis, Basis::PerSecond);
        assert_eq!(d.changes[0].change, Some(20.0));
        assert_eq!(d.changes[0].unit, "/s");
        assert_eq!(
            compare(&window(1.0), 1.0, &runs(&[1.0]), 0.0).unwrap_err(),
            StatDiffError::DifferentKinds {
                before: "a window",
                after: "command runs"
            }
        );
    }

    #[test]
    fn failed_runs_are_left_out_and_said() {
        let mut r = runs(&[100.0, 500.0, 102.0]);
        r.runs[1].exit_status = 1;
        r.failed_runs = 1;
        let d = compare(&r, 0.0, &runs(&[100.0, 102.0]), 0.0).unwrap();
        assert_eq!(d.changes[0].before.unwrap().mean, 101.0);
        assert!(d.notes.iter().any(|n| n.contains("BEFORE: 1 of 3 runs")));
        r.runs.iter_mut().for_each(|run| run.exit_status = 1);
        assert!(compare(&r, 0.0, &r, 0.0).is_err());
    }

    /// Two real captures of `stat --repeat 3 -e task-clock,page-faults,context-switches,cycles
    /// -- sh -c <a 20,000-step shell loop>` (demo-py, a VM without a PMU).
    #[test]
    fn golden_repeat_captures() {
        let read = |text: &str| -> StatRecord { serde_json::from_str(text).unwrap() };
        let before = read(include_str!(
            "../../../../tests/data/stat/repeat3-before.json"
        ));
        let after = read(include_str!(
            "../../../../tests/data/stat/repeat3-after.json"
        ));
        let d = compare(&before, 0.0, &after, 0.0).unwrap();
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        let t = d.changes.iter().find(|c| c.event == "task-clock").unwrap();
        // task-clock per run: 53.87, 56.49, 53.30 then 54.17, 55.32, 54.49 ms.
        let (b, a) = (t.before.unwrap(), t.after.unwrap());
        assert!((b.mean - 54.553_333).abs() < 1e-5 && (a.mean - 54.66).abs() < 1e-9);
        assert!((b.stddev.unwrap() - 1.701_245).abs() < 1e-5);
        assert!((t.change.unwrap() - 0.106_667).abs() < 1e-5);
        // The same loop twice: the change is well inside the noise of three runs.
        assert_eq!(t.verdict, Verdict::WithinNoise);
        assert!((t.ci95.unwrap() - 4.476_315).abs() < 1e-5);
        let cycles = d.changes.iter().find(|c| c.event == "cycles").unwrap();
        assert_eq!(cycles.verdict, Verdict::NotComparable);
        assert_eq!(cycles.change, None);
        let wall = d.changes.iter().find(|c| c.event == "wall time").unwrap();
        assert_eq!(wall.before.unwrap().runs, 3);
    }

    #[test]
    fn t_table() {
        assert_eq!(t95(1.0), 12.706);
        assert_eq!(t95(4.7), 2.776);
        assert_eq!(t95(35.0), 2.021);
        assert!(t95(f64::INFINITY) < 1.97);
    }
}
