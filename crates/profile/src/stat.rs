//! Counters from `perf stat -x,` (CSV on standard error or in its `-o` file), what they
//! mean in words (IPC, cache-miss rate, branch-miss rate), and timing statistics over
//! repeated runs. Pure: text in, values out.

use serde::{Deserialize, Serialize};

/// The events `devprof stat` counts when `-e` does not say.
pub const DEFAULT_EVENTS: &[&str] = &[
    "cycles",
    "instructions",
    "cache-misses",
    "cache-references",
    "branch-misses",
    "L1-dcache-load-misses",
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
];

/// How perf reported one event.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "value")]
pub enum Reading {
    Counted(f64),
    /// The CPU, or the hypervisor in front of it, cannot count this event.
    NotSupported,
    /// The event exists but was never scheduled on a counter.
    NotCounted,
}

/// One line of `perf stat -x,`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    pub event: String,
    pub reading: Reading,
    /// perf's unit (`msec` for task-clock), empty for plain counts.
    pub unit: String,
    /// Share of the window the event was on a counter (multiplexing), when perf says.
    pub running_pct: Option<f64>,
}

impl Counter {
    pub fn value(&self) -> Option<f64> {
        match self.reading {
            Reading::Counted(v) => Some(v),
            _ => None,
        }
    }

    /// The value as printed: a number with its unit, or perf's own word for why not.
    pub fn display(&self) -> String {
        match self.reading {
            Reading::Counted(v) if self.unit.is_empty() => format_count(v),
            Reading::Counted(v) => format!("{v:.2} {}", self.unit),
            Reading::NotSupported => "not supported".into(),
            Reading::NotCounted => "not counted".into(),
        }
    }
}

fn format_count(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        devprof_base::units::thousands(v as u64)
    } else {
        format!("{v:.2}")
    }
}

/// Parses `perf stat -x,` output: `value,unit,event,run-time,running%,metric,metric-unit`.
/// Lines that are not counter lines (comments, blank, perf's notes) are skipped.
pub fn parse_csv(text: &str) -> Vec<Counter> {
    text.lines()
        .filter_map(|line| {
            if line.starts_with('#') {
                return None;
            }
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() < 3 || fields[2].trim().is_empty() {
                return None;
            }
            let reading = match fields[0].trim() {
                "<not supported>" => Reading::NotSupported,
                "<not counted>" => Reading::NotCounted,
                v => Reading::Counted(v.parse().ok().filter(|v: &f64| v.is_finite())?),
            };
            Some(Counter {
                event: fields[2].trim().to_string(),
                reading,
                unit: fields[1].trim().to_string(),
                running_pct: fields.get(4).and_then(|f| f.trim().parse().ok()),
            })
        })
        .collect()
}

/// The event perf rejected, from its error text (`event syntax error: 'bogus'`).
pub fn unknown_event(stderr: &str) -> Option<String> {
    let at = stderr.find("event syntax error: '")?;
    let rest = &stderr[at + "event syntax error: '".len()..];
    let name = &rest[..rest.find('\'')?];
    Some(name.to_string())
}

/// Why hardware counters are missing, from what the machine shows: a hypervisor flag in
/// /proc/cpuinfo, and whether a CPU PMU is among perf's event sources.
pub fn unsupported_reason(hypervisor: bool, cpu_pmu: bool) -> String {
    match (hypervisor, cpu_pmu) {
        (true, false) => "a virtual machine without a PMU: the hypervisor exposes no hardware \
                          performance counters to this guest"
            .into(),
        (false, false) => "no CPU PMU is registered with the kernel (no `cpu` event source \
                           under /sys/bus/event_source/devices)"
            .into(),
        (true, true) => "the hypervisor's virtual PMU does not count these events".into(),
        (false, true) => "this CPU's PMU does not count these events".into(),
    }
}

/// A reading derived from two counted values, with its judgement in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    pub name: String,
    /// None: an input was not counted; `text` says which.
    pub value: Option<f64>,
    pub text: String,
}

fn counted(counters: &[Counter], event: &str) -> Option<f64> {
    counters
        .iter()
        .find(|c| c.event == event || c.event.starts_with(&format!("{event}:")))
        .and_then(Counter::value)
}

fn present(counters: &[Counter], event: &str) -> bool {
    counters
        .iter()
        .any(|c| c.event == event || c.event.starts_with(&format!("{event}:")))
}

/// IPC, cache-miss rate and branch-miss rate, each only from counted values; a reading
/// whose inputs were asked for but not counted says so instead of a number.
pub fn derive(counters: &[Counter]) -> Vec<Derived> {
    let mut out = Vec::new();
    let mut ratio = |name: &str, num: &str, den: &str, judge: &dyn Fn(f64) -> String| {
        if !present(counters, num) && !present(counters, den) {
            return;
        }
        let (n, d) = (counted(counters, num), counted(counters, den));
        let (value, text) = match (n, d) {
            (Some(n), Some(d)) if d > 0.0 => {
                let v = n / d;
                (Some(v), judge(v))
            }
            (Some(_), Some(_)) => (None, format!("{den} counted 0: no ratio")),
            _ => {
                let why: Vec<String> = [(num, n), (den, d)]
                    .iter()
                    .filter(|(_, v)| v.is_none())
                    .map(|(e, _)| {
                        if present(counters, e) {
                            format!("{e} not counted")
                        } else {
                            format!("{e} not asked for (-e)")
                        }
                    })
                    .collect();
                (None, format!("not available: {}", why.join(", ")))
            }
        };
        out.push(Derived {
            name: name.into(),
            value,
            text,
        });
    };
    ratio("IPC", "instructions", "cycles", &|v| {
        let word = if v > 2.0 {
            "good: the core retires several instructions per cycle"
        } else if v < 1.0 {
            "stalling: under one instruction per cycle (memory, branches or dependencies)"
        } else {
            "moderate"
        };
        format!("{v:.2} instructions per cycle, {word}")
    });
    ratio(
        "cache-miss rate",
        "cache-misses",
        "cache-references",
        &|v| {
            let word = if v > 0.10 {
                "poor locality (over 10%)"
            } else {
                "good locality (10% or less)"
            };
            format!("{:.1}% of cache references miss, {word}", v * 100.0)
        },
    );
    ratio("branch-miss rate", "branch-misses", "branches", &|v| {
        let word = if v > 0.05 {
            "high (over 5%): hard-to-predict branches"
        } else {
            "low"
        };
        format!("{:.2}% of branches mispredicted, {word}", v * 100.0)
    });
    out
}

/// One run of a command under perf stat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub exit_status: i32,
    pub wall_s: f64,
    pub counters: Vec<Counter>,
}

/// What a stat capture found, as saved in its manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatRecord {
    /// The command run (empty: the target process was counted over a window).
    pub command: Vec<String>,
    /// Counters over the window, or summed over the successful runs.
    pub counters: Vec<Counter>,
    pub derived: Vec<Derived>,
    /// Why some events were not supported, when some were not.
    pub unsupported_reason: Option<String>,
    pub runs: Vec<Run>,
    /// Wall time statistics over the successful runs (exit status 0).
    pub wall: Option<Spread>,
    /// Runs that exited non-zero: kept in `runs`, left out of `wall` and `counters`.
    pub failed_runs: usize,
}

/// min/max/median/mean/stddev/p95/p99 of a sample (wall times of repeated runs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one value.
    pub stddev: f64,
    pub p95: f64,
    pub p99: f64,
}

/// Statistics of `values`; None when empty. Percentiles interpolate linearly between
/// the closest ranks.
pub fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let pct = |p: f64| {
        let rank = p * (n - 1) as f64;
        let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
    };
    Some(Spread {
        n,
        min: v[0],
        max: v[n - 1],
        median: pct(0.5),
        mean,
        stddev: var.sqrt(),
        p95: pct(0.95),
        p99: pct(0.99),
    })
}

/// Sums counters over runs, event by event: an event not counted in some run stays what
/// perf said there (a sum of some runs would be a made-up number).
pub fn sum_runs(runs: &[Vec<Counter>]) -> Vec<Counter> {
    let mut out: Vec<Counter> = Vec::new();
    for run in runs {
        for c in run {
            match out.iter_mut().find(|o| o.event == c.event) {
                None => out.push(Counter {
                    running_pct: None,
                    ..c.clone()
                }),
                Some(o) => {
                    o.reading = match (o.reading, c.reading) {
                        (Reading::Counted(a), Reading::Counted(b)) => Reading::Counted(a + b),
                        (Reading::Counted(_), other) => other,
                        (keep, _) => keep,
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: &str = include_str!("../../../tests/data/stat/demo-seq-window.csv");
    const COMMAND: &str = include_str!("../../../tests/data/stat/demo-seq-command-exit1.csv");

    #[test]
    fn reads_a_vm_without_pmu_as_not_supported_never_zero() {
        let c = parse_csv(WINDOW);
        assert_eq!(c.len(), 10);
        for hw in DEFAULT_EVENTS.iter().take(6) {
            let counter = c.iter().find(|x| x.event == *hw).unwrap();
            assert_eq!(counter.reading, Reading::NotSupported, "{hw}");
            assert_eq!(counter.display(), "not supported");
        }
        let task = c.iter().find(|x| x.event == "task-clock").unwrap();
        assert_eq!(task.reading, Reading::Counted(689.72));
        assert_eq!(task.unit, "msec");
        assert_eq!(task.display(), "689.72 msec");
        let cs = c.iter().find(|x| x.event == "context-switches").unwrap();
        assert_eq!(cs.reading, Reading::Counted(3181.0));
        assert_eq!(cs.display(), "3,181");
        assert_eq!(cs.running_pct, Some(100.0));
    }

    #[test]
    fn derived_readings_come_only_from_counted_values() {
        let d = derive(&parse_csv(WINDOW));
        let ipc = d.iter().find(|r| r.name == "IPC").unwrap();
        assert_eq!(ipc.value, None);
        assert!(
            ipc.text
                .contains("instructions not counted, cycles not counted"),
            "{}",
            ipc.text
        );
        // branches was not asked for and branch-misses was not counted.
        let br = d.iter().find(|r| r.name == "branch-miss rate").unwrap();
        assert_eq!(br.value, None);

        let counted = parse_csv(
            "3000,,instructions,1,100.00,,\n1000,,cycles,1,100.00,,\n30,,cache-misses,1,100.00,,\n\
             100,,cache-references,1,100.00,,\n",
        );
        let d = derive(&counted);
        let ipc = d.iter().find(|r| r.name == "IPC").unwrap();
        assert_eq!(ipc.value, Some(3.0));
        assert!(ipc.text.contains("good"));
        let cm = d.iter().find(|r| r.name == "cache-miss rate").unwrap();
        assert_eq!(cm.value, Some(0.3));
        assert!(cm.text.contains("poor locality"));
        assert!(!d.iter().any(|r| r.name == "branch-miss rate"));
    }

    #[test]
    fn names_the_event_perf_rejected() {
        let stderr =
            "event syntax error: 'bogus-event'\n                          \\___ parser error\n";
        assert_eq!(unknown_event(stderr).as_deref(), Some("bogus-event"));
        assert_eq!(unknown_event(COMMAND), None);
    }

    #[test]
    fn command_run_output_parses() {
        let c = parse_csv(COMMAND);
        assert_eq!(c[0].event, "task-clock");
        assert_eq!(c[1].reading, Reading::NotSupported);
    }

    #[test]
    fn spread_of_known_values() {
        let s = spread(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.min, s.max, s.median, s.mean), (1.0, 5.0, 3.0, 3.0));
        assert!((s.stddev - 1.5811).abs() < 1e-3);
        assert!((s.p95 - 4.8).abs() < 1e-9);
        assert!((s.p99 - 4.96).abs() < 1e-9);
        assert!(spread(&[]).is_none());
        assert_eq!(spread(&[2.0]).unwrap().stddev, 0.0);
    }

    #[test]
    fn sums_keep_not_supported() {
        let a = parse_csv(COMMAND);
        let total = sum_runs(&[a.clone(), a]);
        assert_eq!(total[0].reading, Reading::Counted(572.39 * 2.0));
        assert_eq!(total[1].reading, Reading::NotSupported);
    }

    #[test]
    fn reason_follows_what_the_machine_shows() {
        assert!(unsupported_reason(true, false).contains("virtual machine without a PMU"));
        assert!(!unsupported_reason(false, true).contains("virtual"));
    }
}
