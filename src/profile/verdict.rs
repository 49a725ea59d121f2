//! What bounds a container over a window, from its measured numbers: high CPU and low
//! memory growth is CPU-bound, low CPU and high growth memory-bound, both high both, both
//! low I/O-bound (it waits more than it runs; the off-CPU capture says on what), or idle
//! when it barely runs at all.

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
         I/O-bound (it waits more than it runs; see off-CPU time); under {:.0}%: idle",
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
    Both,
    Idle,
}

impl Bound {
    pub fn label(self) -> &'static str {
        match self {
            Bound::CpuBound => "CPU-bound",
            Bound::MemoryBound => "memory-bound",
            Bound::IoBound => "I/O-bound",
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
        (false, false) if cpu >= CPU_IDLE_CORES => Bound::IoBound,
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
        assert_eq!(judge(&m(0.2, Some(mib))).unwrap().bound, Bound::IoBound);
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
