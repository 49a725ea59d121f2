//! What bounds a container over a window, from what was measured: high CPU and low memory
//! growth is CPU-bound, low CPU and high growth memory-bound, both high both; both low is
//! "mostly waiting" when nothing recorded on what, and I/O-bound, lock-bound, sleeping or
//! "waiting: mostly other" from the off-CPU breakdown when an off-CPU capture did; idle
//! when it barely runs.
//!
//! A verdict is a function of the figures printed beside it, as printed: each figure is
//! formatted first and judged on the text's value (a CPU of 49.96% prints `50%` and is
//! high), the bound named from the off-CPU breakdown is its largest printed share, "other"
//! included, and its advice never asks for a kind the session was given.

use crate::folded::Folded;
use serde::{Deserialize, Serialize};

/// A process using at least this share of one core over the window is CPU-heavy.
pub const CPU_HIGH_CORES: f64 = 0.5;
/// Below this share of a core it is idle rather than waiting on I/O.
pub const CPU_IDLE_CORES: f64 = 0.05;
/// Heap growth at or above this rate (bytes per second of window) is memory-heavy.
pub const HEAP_HIGH_BYTES_PER_S: f64 = 1024.0 * 1024.0;

const MIB: f64 = 1024.0 * 1024.0;

/// The thresholds in words, for the table's footer and `--json`.
pub fn thresholds_text() -> String {
    format!(
        "CPU is high from {:.0}% of one core over the window; heap growth is high from {} MiB/s; \
         both high: both; CPU only: CPU-bound; heap only: memory-bound; neither, with CPU from {:.0}% of a core: \
         mostly waiting, and with off-CPU time recorded (--kinds offcpu) I/O-bound, lock-bound, sleeping \
         or waiting: mostly other by the largest share of it; under {:.0}%: idle; \
         judged on the figures as printed; off-CPU time is summed over threads (thread-seconds)",
        CPU_HIGH_CORES * 100.0,
        HEAP_HIGH_BYTES_PER_S / MIB,
        CPU_IDLE_CORES * 100.0,
        CPU_IDLE_CORES * 100.0
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    CpuBound,
    MemoryBound,
    IoBound,
    LockBound,
    Sleeping,
    /// Low CPU, low growth, and no off-CPU capture to say on what it waits.
    Waiting,
    /// Low CPU, low growth, and most off-CPU time in stacks that are neither I/O, locks
    /// nor sleep.
    WaitingOther,
    /// Low CPU, low growth, an off-CPU capture given, but no off-CPU time stacks from it
    /// (its events had no `sched:sched_switch`, or it recorded no switch).
    WaitingUnrecorded,
    Both,
    Idle,
}

impl Bound {
    pub fn label(self) -> &'static str {
        match self {
            Bound::CpuBound => "CPU-bound",
            Bound::MemoryBound => "memory-bound",
            Bound::IoBound => "I/O-bound",
            Bound::LockBound => "lock-bound",
            Bound::Sleeping => "sleeping",
            Bound::Waiting => "mostly waiting (add --kinds offcpu to see on what)",
            Bound::WaitingOther => "waiting: mostly other",
            Bound::WaitingUnrecorded => "mostly waiting (on what: not recorded)",
            Bound::Both => "both",
            Bound::Idle => "idle",
        }
    }
}

/// What was measured on one container over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// CPU time over wall time: 1.0 is one core busy the whole window.
    pub cpu_cores: Option<f64>,
    pub window_s: f64,
    /// Heap growth over the window (a heap capture's end dump less its start dump).
    pub heap_growth_bytes: Option<i64>,
    /// Off-CPU time summed over the process's threads, in thread-seconds (an off-CPU
    /// capture with sched_switch): several threads waiting at once each count.
    pub offcpu_s: Option<f64>,
    /// Where the off-CPU time went, when an off-CPU capture recorded it.
    pub waits: Option<Waits>,
}

/// The kinds of capture a session was given besides cpu: advice never asks for one of
/// them, and a figure missing although its kind was given is said so, not asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Given {
    pub heap: bool,
    pub offcpu: bool,
}

impl Given {
    /// From the kinds as a session names them (`cpu`, `heap`, `offcpu`, `offcpu:CONFIG`).
    pub fn of_kinds<S: AsRef<str>>(kinds: &[S]) -> Given {
        let has = |name: &str| {
            kinds
                .iter()
                .any(|k| k.as_ref().split(':').next() == Some(name))
        };
        Given {
            heap: has("heap"),
            offcpu: has("offcpu"),
        }
    }

    /// What the figures show was given (a heap growth comes only from a heap capture,
    /// off-CPU figures only from an off-CPU capture), for callers that know no more.
    pub fn shown_by(m: &Measured) -> Given {
        Given {
            heap: m.heap_growth_bytes.is_some(),
            offcpu: m.offcpu_s.is_some() || m.waits.is_some(),
        }
    }

    /// The kinds' names, as `--kinds` takes them.
    pub fn names(self) -> Vec<&'static str> {
        let mut names = vec!["cpu"];
        if self.heap {
            names.push("heap");
        }
        if self.offcpu {
            names.push("offcpu");
        }
        names
    }
}

/// Off-CPU time by what the threads waited on, from the off-CPU stacks' kernel frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    pub io_us: u64,
    pub lock_us: u64,
    pub sleep_us: u64,
    pub other_us: u64,
}

/// Frames that say a thread waits on a lock, on I/O, or sleeps (timers, polling an idle
/// descriptor); the innermost match decides.
const LOCK_FRAMES: &[&str] = &[
    "futex",
    "mutex_lock",
    "rwsem",
    "__lll_lock",
    "pthread_mutex",
    "pthread_cond",
];
const IO_FRAMES: &[&str] = &[
    "io_schedule",
    "blk_",
    "fsync",
    "fdatasync",
    "sys_read",
    "sys_write",
    "sys_pread",
    "sys_pwrite",
    "ksys_read",
    "ksys_write",
    "vfs_read",
    "vfs_write",
    "ext4_",
    "xfs_",
    "filemap_",
    "wait_on_page",
    "folio_wait",
    "jbd2",
    "submit_bio",
    "do_sync",
];
const SLEEP_FRAMES: &[&str] = &[
    "nanosleep",
    "hrtimer",
    "schedule_timeout",
    "epoll_wait",
    "do_poll",
    "do_select",
    "sys_poll",
    "sys_select",
    "sys_pause",
    "sigsuspend",
    "sys_wait4",
];

impl Waits {
    /// Sums an off-CPU profile (counts in microseconds) by what each stack waits on.
    pub fn of(folded: &Folded) -> Waits {
        let mut w = Waits::default();
        for (stack, us) in &folded.stacks {
            let kind = stack.rsplit(';').find_map(|frame| {
                let has = |names: &[&str]| names.iter().any(|n| frame.contains(n));
                if has(LOCK_FRAMES) {
                    Some(Bound::LockBound)
                } else if has(IO_FRAMES) {
                    Some(Bound::IoBound)
                } else if has(SLEEP_FRAMES) {
                    Some(Bound::Sleeping)
                } else {
                    None
                }
            });
            match kind {
                Some(Bound::LockBound) => w.lock_us += us,
                Some(Bound::IoBound) => w.io_us += us,
                Some(Bound::Sleeping) => w.sleep_us += us,
                _ => w.other_us += us,
            }
        }
        w
    }

    fn total_us(&self) -> u64 {
        self.io_us + self.lock_us + self.sleep_us + self.other_us
    }

    /// Each share as printed (whole percent), in the printed order, with what it names:
    /// `I/O`, `locks`, `sleep`, `other`. None when no off-CPU time was recorded.
    fn printed_shares(&self) -> Option<[(&'static str, String, Bound); 4]> {
        let total = self.total_us();
        if total == 0 {
            return None;
        }
        let pct = |us: u64| format!("{:.0}", us as f64 * 100.0 / total as f64);
        Some([
            ("I/O", pct(self.io_us), Bound::IoBound),
            ("locks", pct(self.lock_us), Bound::LockBound),
            ("sleep", pct(self.sleep_us), Bound::Sleeping),
            ("other", pct(self.other_us), Bound::WaitingOther),
        ])
    }

    /// The breakdown in words, and the bound its largest printed share names (the first
    /// in the printed order on a tie): `waits: mostly locks (I/O 2%, locks 81%, ...)`.
    fn judged(&self) -> Option<(Bound, String)> {
        let shares = self.printed_shares()?;
        let value = |text: &str| text.parse::<f64>().unwrap_or(0.0);
        let (name, largest, bound) = shares
            .iter()
            .fold(&shares[0], |best, s| {
                if value(&s.1) > value(&best.1) {
                    s
                } else {
                    best
                }
            })
            .clone();
        let listed = shares
            .iter()
            .map(|(n, p, _)| format!("{n} {p}%"))
            .collect::<Vec<_>>()
            .join(", ");
        let most = if value(&largest) >= 50.0 {
            "mostly"
        } else {
            "largest share"
        };
        Some((bound, format!("waits: {most} {name} ({listed})")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub bound: Bound,
    /// The numbers it came from, in words.
    pub because: String,
}

/// The verdict, or None without a CPU reading (nothing to judge from), for a caller that
/// knows which kinds were given only from the figures (`Given::shown_by`).
pub fn judge(m: &Measured) -> Option<Verdict> {
    judge_given(m, Given::shown_by(m))
}

/// The verdict of a session given the kinds in `given`, or None without a CPU reading.
/// Every threshold is applied to a figure as printed in `because` (and in the table).
pub fn judge_given(m: &Measured, given: Given) -> Option<Verdict> {
    let cpu = m.cpu_cores?;
    let cpu_text = format!("{:.0}", cpu * 100.0);
    let cpu_shown: f64 = cpu_text.parse().unwrap_or(0.0);
    let cpu_high = cpu_shown >= CPU_HIGH_CORES * 100.0;
    let growth = m.heap_growth_bytes.map(|g| {
        let text = format!("{:+.2}", g as f64 / m.window_s.max(0.001) / MIB);
        let shown: f64 = text.parse().unwrap_or(0.0);
        (text, shown >= HEAP_HIGH_BYTES_PER_S / MIB)
    });
    let heap_high = growth.as_ref().is_some_and(|(_, high)| *high);
    let waits = m.waits.and_then(|w| w.judged());
    let bound = match (cpu_high, heap_high) {
        (true, true) => Bound::Both,
        (true, false) => Bound::CpuBound,
        (false, true) => Bound::MemoryBound,
        (false, false) if cpu_shown < CPU_IDLE_CORES * 100.0 => Bound::Idle,
        // Only an off-CPU capture says on what it waits.
        (false, false) => match (&waits, given.offcpu) {
            (Some((bound, _)), _) => *bound,
            (None, true) => Bound::WaitingUnrecorded,
            (None, false) => Bound::Waiting,
        },
    };
    let high = |h: bool| if h { "high" } else { "low" };
    let mut because = vec![format!("CPU {cpu_text}% of a core ({})", high(cpu_high))];
    because.push(match (&growth, given.heap) {
        (Some((text, high_growth)), _) => format!("heap {text} MiB/s ({})", high(*high_growth)),
        (None, false) => "heap not measured (add --kinds heap)".into(),
        (None, true) => "heap growth not measured (the heap capture gave none)".into(),
    });
    if let Some(off) = m.offcpu_s {
        because.push(format!(
            "off-CPU {off:.1} thread-seconds over a {:.1} s window (summed over threads)",
            m.window_s
        ));
    }
    match (&waits, m.waits) {
        (Some((_, words)), _) => because.push(words.clone()),
        (None, Some(_)) => because.push("waits: no off-CPU time recorded".into()),
        (None, None) if given.offcpu => {
            because.push("waits: the off-CPU capture recorded no off-CPU time stacks".into())
        }
        (None, None) => {}
    }
    Some(Verdict {
        bound,
        because: because.join(", "),
    })
}

/// CPU time in clock ticks (utime + stime) from a `/proc/<pid>/stat` line. The command
/// name in parentheses may hold spaces, so fields are counted after its closing one.
pub fn stat_ticks(line: &str) -> Option<u64> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(cpu: f64, growth: Option<i64>) -> Measured {
        Measured {
            cpu_cores: Some(cpu),
            window_s: 10.0,
            heap_growth_bytes: growth,
            offcpu_s: None,
            waits: None,
        }
    }

    #[test]
    fn the_matrix() {
        let mib = 1024 * 1024;
        assert_eq!(judge(&m(0.9, Some(0))).unwrap().bound, Bound::CpuBound);
        assert_eq!(
            judge(&m(0.1, Some(20 * mib))).unwrap().bound,
            Bound::MemoryBound
        );
        assert_eq!(judge(&m(0.9, Some(20 * mib))).unwrap().bound, Bound::Both);
        assert_eq!(judge(&m(0.2, Some(mib))).unwrap().bound, Bound::Waiting);
        assert_eq!(judge(&m(0.01, None)).unwrap().bound, Bound::Idle);
        // The edges belong to the high side.
        assert_eq!(judge(&m(0.5, None)).unwrap().bound, Bound::CpuBound);
        assert_eq!(
            judge(&m(0.0, Some(10 * mib))).unwrap().bound,
            Bound::MemoryBound
        );
        assert!(judge(&Measured::default()).is_none());
    }

    fn stacks(lines: &[(&str, u64)]) -> Folded {
        Folded {
            stacks: lines.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn waiting_is_named_only_from_the_off_cpu_breakdown() {
        // Low CPU without off-CPU data: waiting, on what unknown.
        let v = judge(&m(0.2, None)).unwrap();
        assert_eq!(v.bound, Bound::Waiting);
        assert_eq!(
            v.bound.label(),
            "mostly waiting (add --kinds offcpu to see on what)"
        );
        // Off-CPU time recorded: the stacks say on what.
        let cases = [
            (
                "demo-node;worker;__lll_lock_wait;futex_wait_queue;schedule",
                Bound::LockBound,
                "mostly locks",
            ),
            (
                "demo-node;sync_writes;fsync;do_fsync;jbd2_log_wait_commit;schedule",
                Bound::IoBound,
                "mostly I/O",
            ),
            (
                "demo-node;main;clock_nanosleep;hrtimer_nanosleep;schedule",
                Bound::Sleeping,
                "mostly sleep",
            ),
        ];
        for (stack, bound, words) in cases {
            let waits = Waits::of(&stacks(&[(stack, 900), ("demo-node;other;schedule", 100)]));
            let v = judge(&Measured {
                waits: Some(waits),
                offcpu_s: Some(1.0),
                ..m(0.2, None)
            })
            .unwrap();
            assert_eq!(v.bound, bound, "{stack}");
            assert!(v.because.contains(words), "{}", v.because);
            assert!(v.because.contains("other 10%"), "{}", v.because);
        }
        // Nothing recognised: waiting, mostly on other things.
        let unknown = Waits::of(&stacks(&[("demo-node;schedule", 5)]));
        assert_eq!(unknown.other_us, 5);
        let v = judge(&Measured {
            waits: Some(unknown),
            ..m(0.2, None)
        })
        .unwrap();
        assert_eq!(v.bound, Bound::WaitingOther);
        // High CPU is CPU-bound whatever the waits.
        let v = judge(&Measured {
            waits: Some(Waits {
                io_us: 10,
                ..Default::default()
            }),
            ..m(0.9, None)
        })
        .unwrap();
        assert_eq!(v.bound, Bound::CpuBound);
    }

    /// demo-py in a session: a few µs in a lock frame, everything else in stacks no rule
    /// recognises. It was called lock-bound beside `locks 0%, other 100%`.
    #[test]
    fn a_wait_that_is_mostly_other_is_not_called_lock_bound() {
        let waits = Waits::of(&stacks(&[
            ("python3;futex_wait;schedule", 3),
            ("python3;[unknown];schedule", 8_000_000),
        ]));
        let v = judge_given(
            &Measured {
                waits: Some(waits),
                offcpu_s: Some(8.0),
                ..m(0.2, None)
            },
            Given {
                heap: false,
                offcpu: true,
            },
        )
        .unwrap();
        assert_eq!(v.bound, Bound::WaitingOther, "{}", v.because);
        assert_eq!(v.bound.label(), "waiting: mostly other");
        assert!(
            v.because
                .contains("waits: mostly other (I/O 0%, locks 0%, sleep 0%, other 100%)"),
            "{}",
            v.because
        );
    }

    /// demo-jvm in a session run with `--kinds cpu,offcpu` whose off-CPU capture wrote no
    /// off-CPU time stacks: it was told to add --kinds offcpu.
    #[test]
    fn advice_never_asks_for_a_kind_the_session_was_given() {
        let given = Given::of_kinds(&["cpu", "offcpu"]);
        assert_eq!(
            given,
            Given {
                heap: false,
                offcpu: true
            }
        );
        let v = judge_given(&m(0.2, None), given).unwrap();
        assert_eq!(v.bound, Bound::WaitingUnrecorded);
        assert!(!v.bound.label().contains("--kinds"), "{}", v.bound.label());
        assert!(
            v.because.contains("add --kinds heap") && !v.because.contains("--kinds offcpu"),
            "{}",
            v.because
        );
        let all = Given::of_kinds(&["cpu", "heap", "offcpu:iobandwidth"]);
        let v = judge_given(&m(0.2, None), all).unwrap();
        assert!(
            !v.because.contains("--kinds") && !v.bound.label().contains("--kinds"),
            "{} — {}",
            v.bound.label(),
            v.because
        );
        assert!(
            v.because.contains("heap growth not measured"),
            "{}",
            v.because
        );
    }

    /// `off-CPU 43.7 s over 5.0 s` summed thread-seconds without saying so.
    #[test]
    fn off_cpu_time_is_said_in_thread_seconds() {
        let v = judge(&Measured {
            offcpu_s: Some(43.7),
            window_s: 5.0,
            ..m(0.2, None)
        })
        .unwrap();
        assert!(
            v.because
                .contains("off-CPU 43.7 thread-seconds over a 5.0 s window (summed over threads)"),
            "{}",
            v.because
        );
    }

    #[test]
    fn the_verdict_says_its_numbers() {
        let v = judge(&Measured {
            offcpu_s: Some(12.25),
            ..m(0.734, Some(-3 * 1024 * 1024))
        })
        .unwrap();
        assert_eq!(
            v.because,
            "CPU 73% of a core (high), heap -0.30 MiB/s (low), off-CPU 12.2 thread-seconds \
             over a 10.0 s window (summed over threads), \
             waits: the off-CPU capture recorded no off-CPU time stacks"
        );
        let v = judge(&m(0.2, None)).unwrap();
        assert!(v.because.contains("heap not measured"), "{}", v.because);
        // Judged as printed: 49.96% prints 50% and is high, 4.96% prints 5% and is not idle, 4.49% prints 4%.
        assert_eq!(judge(&m(0.4996, None)).unwrap().bound, Bound::CpuBound);
        assert_eq!(judge(&m(0.0496, None)).unwrap().bound, Bound::Waiting);
        assert_eq!(judge(&m(0.0449, None)).unwrap().bound, Bound::Idle);
    }

    /// A small deterministic generator (xorshift64*), so that every run tries the same
    /// figure sets and a failure names the one it failed on.
    struct Figures(u64);

    impl Figures {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }

        /// Mostly ordinary values, often an edge: a threshold's neighbourhood, zero.
        fn cpu(&mut self) -> f64 {
            match self.below(4) {
                0 => CPU_HIGH_CORES + (self.unit() - 0.5) * 0.02,
                1 => CPU_IDLE_CORES + (self.unit() - 0.5) * 0.02,
                2 => self.unit() * 2.0,
                _ => (self.unit() * 1000.0).round() / 1000.0,
            }
        }

        fn micros(&mut self) -> u64 {
            match self.below(5) {
                0 => 0,
                1 => self.below(10),
                2 => self.below(1_000),
                _ => self.below(10_000_000_000),
            }
        }

        fn measured(&mut self) -> (Measured, Given) {
            let window_s = [1.0, 2.5, 5.0, 10.0, 30.0][self.below(5) as usize];
            let growth = match self.below(4) {
                0 => None,
                1 => Some(((self.unit() - 0.5) * 0.04 + 1.0) * HEAP_HIGH_BYTES_PER_S * window_s),
                _ => Some((self.unit() - 0.3) * 8.0 * HEAP_HIGH_BYTES_PER_S * window_s),
            };
            let waits = (self.below(3) > 0).then(|| Waits {
                io_us: self.micros(),
                lock_us: self.micros(),
                sleep_us: self.micros(),
                other_us: self.micros(),
            });
            let m = Measured {
                cpu_cores: Some(self.cpu()),
                window_s,
                heap_growth_bytes: growth.map(|g| g as i64),
                offcpu_s: (self.below(2) == 0 || waits.is_some())
                    .then(|| (self.unit() * 100_000.0).round() / 1000.0),
                waits,
            };
            let shown = Given::shown_by(&m);
            let given = Given {
                heap: shown.heap || self.below(2) == 0,
                offcpu: shown.offcpu || self.below(2) == 0,
            };
            (m, given)
        }
    }

    /// The number after `prefix` in `text` (`CPU 73%` → 73).
    fn number_after(text: &str, prefix: &str) -> Option<f64> {
        let rest = &text[text.find(prefix)? + prefix.len()..];
        let digits: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+'))
            .collect();
        digits.parse().ok()
    }

    /// The printed shares of the off-CPU breakdown: I/O, locks, sleep, other.
    fn printed_waits(because: &str) -> Option<[(Bound, f64); 4]> {
        let list = &because[because.find("waits: ")?..];
        let list = &list[list.find('(')? + 1..];
        Some([
            (Bound::IoBound, number_after(list, "I/O ")?),
            (Bound::LockBound, number_after(list, "locks ")?),
            (Bound::Sleeping, number_after(list, "sleep ")?),
            (Bound::WaitingOther, number_after(list, "other ")?),
        ])
    }

    #[test]
    fn verdicts_are_a_function_of_the_figures_printed_beside_them() {
        let mut figures = Figures(0x9e37_79b9_7f4a_7c15);
        let mut seen = std::collections::BTreeSet::new();
        for case in 0..20_000 {
            let (m, given) = figures.measured();
            let v = judge_given(&m, given).unwrap();
            let (label, because) = (v.bound.label(), v.because.as_str());
            let context = format!("case {case}: {m:?} {given:?}: {label} — {because}");
            seen.insert(label);
            // CPU and heap: high or low by the printed figure, and the bound agrees.
            let cpu = number_after(because, "CPU ").expect("CPU printed");
            let cpu_high = cpu >= 50.0;
            assert!(
                because.contains(&format!(
                    "% of a core ({})",
                    if cpu_high { "high" } else { "low" }
                )),
                "{context}"
            );
            let heap_high = number_after(because, "heap ").is_some_and(|r| r >= 1.0);
            let expected = match (cpu_high, heap_high) {
                (true, true) => Some(Bound::Both),
                (true, false) => Some(Bound::CpuBound),
                (false, true) => Some(Bound::MemoryBound),
                (false, false) if cpu < 5.0 => Some(Bound::Idle),
                (false, false) => None,
            };
            match expected {
                Some(bound) => assert_eq!(v.bound, bound, "{context}"),
                None => {
                    // Waiting: the named bound is the largest printed share, other included.
                    match printed_waits(because) {
                        Some(shares) => {
                            let named = shares.iter().find(|(b, _)| *b == v.bound);
                            let (_, share) = named.unwrap_or_else(|| panic!("{context}"));
                            assert!(shares.iter().all(|(_, s)| share >= s), "{context}");
                            assert!(*share > 0.0, "{context}");
                        }
                        None if given.offcpu => {
                            assert_eq!(v.bound, Bound::WaitingUnrecorded, "{context}")
                        }
                        None => assert_eq!(v.bound, Bound::Waiting, "{context}"),
                    }
                }
            }
            if v.bound == Bound::LockBound {
                let shares = printed_waits(because).expect("a lock-bound verdict shows its waits");
                assert!(shares[1].1 > 0.0, "{context}");
            }
            // Advice never asks for a kind that was given.
            for text in [label, because] {
                for kind in given.names() {
                    assert!(
                        !text.contains(&format!("--kinds {kind}")),
                        "asks for {kind}: {context}"
                    );
                }
            }
            // Summed off-CPU time says its unit.
            if m.offcpu_s.is_some() {
                assert!(because.contains("thread-seconds"), "{context}");
            }
            // The same printed figures give the same verdict: from the CPU and heap rate
            // as printed, the breakdown unchanged.
            let printed = Measured {
                cpu_cores: Some(cpu / 100.0),
                heap_growth_bytes: number_after(because, "heap ").map(|r| {
                    let bytes = (r * HEAP_HIGH_BYTES_PER_S * m.window_s).round() as i64;
                    // `-0.00`: a shrink too small to print.
                    if bytes == 0 && because.contains("heap -") {
                        -1
                    } else {
                        bytes
                    }
                }),
                ..m
            };
            assert_eq!(judge_given(&printed, given), Some(v), "{context}");
        }
        // The generator reached every verdict.
        assert_eq!(seen.len(), 10, "{seen:?}");
    }

    #[test]
    fn ticks_from_a_stat_line_with_spaces_in_the_name() {
        // Shaped like the kernel's /proc/<pid>/stat, with a space and a ")" in the name.
        let line = "7 (demo node)) S 1 7 7 0 -1 4194560 1234 0 0 0 4521 377 0 0 20 0 9 0 2345 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 17987 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(stat_ticks(line), Some(4521 + 377));
        assert_eq!(stat_ticks("garbage"), None);
    }
}
