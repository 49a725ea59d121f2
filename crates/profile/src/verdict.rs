//! What bounds a container over a window, from what was measured: high CPU and low memory
//! growth is CPU-bound, low CPU and high growth memory-bound, both high both; both low is
//! "mostly waiting" when nothing recorded on what, and I/O-bound, lock-bound or sleeping
//! from the off-CPU breakdown when an off-CPU capture did; idle when it barely runs.

use crate::folded::Folded;
use serde::{Deserialize, Serialize};

/// A process using at least this share of one core over the window is CPU-heavy.
pub const CPU_HIGH_CORES: f64 = 0.5;
/// Below this share of a core it is idle rather than waiting on I/O.
pub const CPU_IDLE_CORES: f64 = 0.05;
/// Heap growth at or above this rate (bytes per second of window) is memory-heavy.
pub const HEAP_HIGH_BYTES_PER_S: f64 = 1024.0 * 1024.0;

/// The thresholds in words, for the table's footer and `--json`.
pub fn thresholds_text() -> String {
    format!(
        "CPU is high from {:.0}% of one core over the window; heap growth is high from {} MiB/s; \
         both high: both; CPU only: CPU-bound; heap only: memory-bound; neither, with CPU from {:.0}% of a core: \
         mostly waiting, and with off-CPU time recorded (--kinds offcpu) I/O-bound, lock-bound or sleeping by \
         where most of it went; under {:.0}%: idle",
        CPU_HIGH_CORES * 100.0,
        HEAP_HIGH_BYTES_PER_S / (1024.0 * 1024.0),
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
    /// Low CPU, low growth, and no off-CPU data to say on what it waits.
    Waiting,
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
    /// Summed off-CPU time of the process's threads (an off-CPU capture with sched_switch).
    pub offcpu_s: Option<f64>,
    /// Where the off-CPU time went, when an off-CPU capture recorded it.
    pub waits: Option<Waits>,
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

    /// The wait that took most of the time, if any was recognised.
    fn dominant(&self) -> Option<Bound> {
        [
            (self.io_us, Bound::IoBound),
            (self.lock_us, Bound::LockBound),
            (self.sleep_us, Bound::Sleeping),
        ]
        .into_iter()
        .filter(|(us, _)| *us > 0)
        .max_by_key(|(us, _)| *us)
        .map(|(_, b)| b)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub bound: Bound,
    /// The numbers it came from, in words.
    pub because: String,
}

/// The verdict, or None without a CPU reading (nothing to judge from).
pub fn judge(m: &Measured) -> Option<Verdict> {
    let cpu = m.cpu_cores?;
    let cpu_high = cpu >= CPU_HIGH_CORES;
    let growth_rate = m
        .heap_growth_bytes
        .map(|g| g as f64 / m.window_s.max(0.001));
    let heap_high = growth_rate.is_some_and(|r| r >= HEAP_HIGH_BYTES_PER_S);
    let bound = match (cpu_high, heap_high) {
        (true, true) => Bound::Both,
        (true, false) => Bound::CpuBound,
        (false, true) => Bound::MemoryBound,
        // Only an off-CPU capture says on what it waits.
        (false, false) if cpu >= CPU_IDLE_CORES => {
            m.waits.and_then(|w| w.dominant()).unwrap_or(Bound::Waiting)
        }
        (false, false) => Bound::Idle,
    };
    let mut because = vec![format!(
        "CPU {:.0}% of a core ({})",
        cpu * 100.0,
        if cpu_high { "high" } else { "low" }
    )];
    because.push(match growth_rate {
        Some(r) => format!(
            "heap {:+.2} MiB/s ({})",
            r / (1024.0 * 1024.0),
            if heap_high { "high" } else { "low" }
        ),
        None => "heap not measured (add --kinds heap)".into(),
    });
    if let Some(off) = m.offcpu_s {
        because.push(format!("off-CPU {off:.1} s over {:.1} s", m.window_s));
    }
    if let Some(w) = m.waits {
        let total = (w.io_us + w.lock_us + w.sleep_us + w.other_us).max(1) as f64;
        let pct = |us: u64| us as f64 * 100.0 / total;
        because.push(format!(
            "waits: I/O {:.0}%, locks {:.0}%, sleep {:.0}%, other {:.0}%",
            pct(w.io_us),
            pct(w.lock_us),
            pct(w.sleep_us),
            pct(w.other_us)
        ));
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
        let stacks = |lines: &[(&str, u64)]| Folded {
            stacks: lines.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        };
        let cases = [
            (
                "demo-node;worker;__lll_lock_wait;futex_wait_queue;schedule",
                Bound::LockBound,
            ),
            (
                "demo-node;sync_writes;fsync;do_fsync;jbd2_log_wait_commit;schedule",
                Bound::IoBound,
            ),
            (
                "demo-node;main;clock_nanosleep;hrtimer_nanosleep;schedule",
                Bound::Sleeping,
            ),
        ];
        for (stack, bound) in cases {
            let waits = Waits::of(&stacks(&[(stack, 900), ("demo-node;other;schedule", 100)]));
            let v = judge(&Measured {
                waits: Some(waits),
                offcpu_s: Some(1.0),
                ..m(0.2, None)
            })
            .unwrap();
            assert_eq!(v.bound, bound, "{stack}");
            assert!(v.because.contains("other 10%"), "{}", v.because);
        }
        // Nothing recognised: still only waiting.
        let unknown = Waits::of(&stacks(&[("demo-node;schedule", 5)]));
        assert_eq!(unknown.other_us, 5);
        let v = judge(&Measured {
            waits: Some(unknown),
            ..m(0.2, None)
        })
        .unwrap();
        assert_eq!(v.bound, Bound::Waiting);
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

    #[test]
    fn the_verdict_says_its_numbers() {
        let v = judge(&Measured {
            offcpu_s: Some(12.25),
            ..m(0.734, Some(-3 * 1024 * 1024))
        })
        .unwrap();
        assert_eq!(
            v.because,
            "CPU 73% of a core (high), heap -0.30 MiB/s (low), off-CPU 12.2 s over 10.0 s"
        );
        let v = judge(&m(0.2, None)).unwrap();
        assert!(v.because.contains("heap not measured"), "{}", v.because);
    }

    #[test]
    fn ticks_from_a_stat_line_with_spaces_in_the_name() {
        // Shaped like the kernel's /proc/<pid>/stat, with a space and a ")" in the name.
        let line = "7 (demo node)) S 1 7 7 0 -1 4194560 1234 0 0 0 4521 377 0 0 20 0 9 0 2345 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 4096 17987 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(stat_ticks(line), Some(4521 + 377));
        assert_eq!(stat_ticks("garbage"), None);
    }
}
