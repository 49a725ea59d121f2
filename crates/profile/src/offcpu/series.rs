//! Off-CPU time per thread and I/O bytes over the window, in time buckets, for the plots
//! beside the summary. Buckets start at 10 ms and double in width whenever the window
//! outgrows [`MAX_BUCKETS`], so memory stays bounded (threads x buckets) however long the
//! recording, and a plot always has between half and all of `MAX_BUCKETS` points.

use std::collections::HashMap;

/// No series is longer.
pub const MAX_BUCKETS: usize = 240;
const FIRST_BUCKET_NS: u64 = 10_000_000;
/// Threads plotted one by one; the rest are summed into one line.
pub const PLOTTED_THREADS: usize = 12;

/// One thread's off-CPU nanoseconds per bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadOverTime {
    pub tid: u32,
    pub comm: String,
    pub off_cpu_ns: Vec<u64>,
}

/// The window in buckets of `bucket_ns`, bucket 0 starting at the first record.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OverTime {
    pub bucket_ns: u64,
    pub buckets: usize,
    /// Bytes returned by read and write syscalls that completed in each bucket.
    pub read_bytes: Vec<u64>,
    pub written_bytes: Vec<u64>,
    /// The threads with the most off-CPU time, heaviest first.
    pub threads: Vec<ThreadOverTime>,
    /// The other threads summed, and how many they are.
    pub other_threads: usize,
    pub other_off_cpu_ns: Vec<u64>,
}

/// Accumulates the series while the records stream by.
#[derive(Debug)]
pub struct SeriesBuilder {
    origin: Option<u64>,
    bucket_ns: u64,
    read: Vec<u64>,
    written: Vec<u64>,
    threads: HashMap<u32, Vec<u64>>,
}

impl Default for SeriesBuilder {
    fn default() -> Self {
        SeriesBuilder {
            origin: None,
            bucket_ns: FIRST_BUCKET_NS,
            read: Vec::new(),
            written: Vec::new(),
            threads: HashMap::new(),
        }
    }
}

/// Adds `amount` to bucket `i`, growing the series as needed.
fn add_at(series: &mut Vec<u64>, i: usize, amount: u64) {
    if series.len() <= i {
        series.resize(i + 1, 0);
    }
    series[i] = series[i].saturating_add(amount);
}

/// Halves the resolution: bucket i becomes buckets 2i and 2i+1 summed.
fn merge_pairs(series: &mut Vec<u64>) {
    let merged: Vec<u64> = series
        .chunks(2)
        .map(|pair| pair.iter().fold(0u64, |a, b| a.saturating_add(*b)))
        .collect();
    *series = merged;
}

impl SeriesBuilder {
    /// Notes a record's time: the first one seen starts bucket 0.
    pub fn see(&mut self, time_ns: u64) {
        self.origin.get_or_insert(time_ns);
    }

    /// The bucket of `time_ns`, coarsening first when it lies beyond the last one.
    fn bucket(&mut self, time_ns: u64) -> usize {
        let origin = *self.origin.get_or_insert(time_ns);
        let offset = time_ns.saturating_sub(origin);
        while offset / self.bucket_ns >= MAX_BUCKETS as u64 {
            self.bucket_ns = self.bucket_ns.saturating_mul(2);
            merge_pairs(&mut self.read);
            merge_pairs(&mut self.written);
            for series in self.threads.values_mut() {
                merge_pairs(series);
            }
        }
        (offset / self.bucket_ns) as usize
    }

    /// Bytes a read (`read`) or write syscall returned at `time_ns`.
    pub fn add_io(&mut self, time_ns: u64, bytes: u64, read: bool) {
        let i = self.bucket(time_ns);
        add_at(
            if read {
                &mut self.read
            } else {
                &mut self.written
            },
            i,
            bytes,
        );
    }

    /// Thread `tid` was off the CPU from `from_ns` to `to_ns`: each bucket gets its part.
    pub fn add_off_cpu(&mut self, tid: u32, from_ns: u64, to_ns: u64) {
        if to_ns <= from_ns {
            return;
        }
        // The end first: it may coarsen the buckets, and the start's bucket must be read
        // at the final width.
        let last = self.bucket(to_ns.saturating_sub(1));
        let first = self.bucket(from_ns);
        let origin = self.origin.unwrap_or(from_ns);
        let width = self.bucket_ns;
        let series = self.threads.entry(tid).or_default();
        for i in first..=last {
            let start = origin.saturating_add(width.saturating_mul(i as u64));
            let end = start.saturating_add(width);
            let part = to_ns.min(end).saturating_sub(from_ns.max(start));
            add_at(series, i, part);
        }
    }

    /// The series, threads named by `names` (tid -> thread name).
    pub fn finish(mut self, names: &HashMap<u32, String>) -> OverTime {
        let buckets = self
            .threads
            .values()
            .map(Vec::len)
            .chain([self.read.len(), self.written.len()])
            .max()
            .unwrap_or(0);
        let pad = |mut v: Vec<u64>| {
            v.resize(buckets, 0);
            v
        };
        let mut threads: Vec<ThreadOverTime> = self
            .threads
            .drain()
            .map(|(tid, series)| ThreadOverTime {
                tid,
                comm: names.get(&tid).cloned().unwrap_or_default(),
                off_cpu_ns: pad(series),
            })
            .collect();
        let total = |t: &ThreadOverTime| t.off_cpu_ns.iter().sum::<u64>();
        threads.sort_by(|a, b| total(b).cmp(&total(a)).then(a.tid.cmp(&b.tid)));
        let rest = threads.split_off(threads.len().min(PLOTTED_THREADS));
        let mut other_off_cpu_ns = vec![0u64; buckets];
        for t in &rest {
            for (sum, ns) in other_off_cpu_ns.iter_mut().zip(&t.off_cpu_ns) {
                *sum = sum.saturating_add(*ns);
            }
        }
        OverTime {
            bucket_ns: self.bucket_ns,
            buckets,
            read_bytes: pad(self.read),
            written_bytes: pad(self.written),
            threads,
            other_threads: rest.len(),
            other_off_cpu_ns: if rest.is_empty() {
                Vec::new()
            } else {
                other_off_cpu_ns
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn an_off_cpu_interval_is_split_over_the_buckets_it_spans() {
        let mut b = SeriesBuilder::default();
        b.see(1_000 * MS);
        // 5 ms into bucket 0 up to 25 ms: 5 + 10 + 5 ms.
        b.add_off_cpu(7, 1_005 * MS, 1_025 * MS);
        let names = HashMap::from([(7, "worker".to_string())]);
        let t = b.finish(&names);
        assert_eq!(t.bucket_ns, 10 * MS);
        assert_eq!(t.threads[0].comm, "worker");
        assert_eq!(t.threads[0].off_cpu_ns, vec![5 * MS, 10 * MS, 5 * MS]);
    }

    #[test]
    fn a_long_window_coarsens_and_keeps_every_nanosecond_and_byte() {
        let mut b = SeriesBuilder::default();
        b.see(0);
        let mut off = 0;
        let mut bytes = 0;
        // 60 s of activity: far more than MAX_BUCKETS buckets of 10 ms.
        for s in 0..60u64 {
            let at = s * 1_000 * MS;
            b.add_off_cpu((s % 20) as u32, at + 100 * MS, at + 350 * MS);
            off += 250 * MS;
            b.add_io(at + 500 * MS, 4096, s % 2 == 0);
            bytes += 4096;
        }
        let t = b.finish(&HashMap::new());
        assert!(t.buckets <= MAX_BUCKETS && t.buckets > MAX_BUCKETS / 4);
        assert_eq!(t.read_bytes.len(), t.buckets);
        let plotted: u64 = t.threads.iter().flat_map(|t| &t.off_cpu_ns).sum();
        let other: u64 = t.other_off_cpu_ns.iter().sum();
        assert_eq!(plotted + other, off);
        assert_eq!((t.threads.len(), t.other_threads), (PLOTTED_THREADS, 8));
        let io: u64 = t.read_bytes.iter().chain(&t.written_bytes).sum();
        assert_eq!(io, bytes);
    }

    #[test]
    fn nothing_recorded_is_an_empty_series() {
        let t = SeriesBuilder::default().finish(&HashMap::new());
        assert_eq!(t.buckets, 0);
        assert!(t.threads.is_empty() && t.other_off_cpu_ns.is_empty());
    }
}
