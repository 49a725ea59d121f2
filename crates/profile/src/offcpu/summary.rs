//! Off-CPU summaries computed in one pass over the `perf script` records: exact per-event
//! counts by group with their top stacks, off-CPU time per stack and per thread (from
//! sched_switch samples and switch-in records), and I/O bandwidth from syscall returns.
//! `text` renders the summary for people.

use super::script::{Frame, Record, Sample};
use super::series::{OverTime, SeriesBuilder};
use crate::folded::Folded;
use crate::perfscript::{SampleMeta, SampleSink};
use devprof_base::units::human_bytes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    LockContention,
    SyscallIo,
    DiskSync,
    Scheduler,
    BlockIo,
    PageFaults,
    MemoryPressure,
    Other,
}

impl Group {
    pub fn of(event: &str) -> Group {
        let syscall = event
            .strip_prefix("syscalls:sys_enter_")
            .or_else(|| event.strip_prefix("syscalls:sys_exit_"));
        match syscall {
            Some(name) if name.starts_with("futex") => return Group::LockContention,
            Some(
                "read" | "write" | "pread64" | "pwrite64" | "readv" | "writev" | "preadv"
                | "pwritev" | "preadv2" | "pwritev2",
            ) => return Group::SyscallIo,
            Some("fsync" | "fdatasync" | "sync_file_range" | "sync" | "syncfs") => {
                return Group::DiskSync
            }
            _ => {}
        }
        match event.split_once(':').map(|(system, _)| system) {
            Some("sched") => Group::Scheduler,
            Some("block") => Group::BlockIo,
            Some("vmscan") => Group::MemoryPressure,
            _ if matches!(
                event,
                "major-faults" | "minor-faults" | "page-faults" | "faults"
            ) =>
            {
                Group::PageFaults
            }
            _ => Group::Other,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Group::LockContention => "lock contention",
            Group::SyscallIo => "syscall I/O",
            Group::DiskSync => "disk sync",
            Group::Scheduler => "scheduler",
            Group::BlockIo => "block I/O",
            Group::PageFaults => "page faults",
            Group::MemoryPressure => "memory pressure",
            Group::Other => "other events",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Stacks symbolized: top stacks and flamegraphs by function.
    Full,
    /// No call chains or symbols: counts, off-CPU totals per thread and bandwidth only.
    Fast,
}

const PAGE_BYTES: u64 = 4096;
const TOP_STACKS: usize = 5;
const TOP_FUNCTIONS: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    pub group: Group,
    pub title: String,
    pub events: Vec<(String, u64)>,
    pub reading: String,
    /// Leaf-first user frames (`a <- b <- c`) with their event counts.
    pub top_stacks: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadOffCpu {
    pub tid: u32,
    pub comm: String,
    pub off_cpu_us: u64,
    pub switches: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffCpuTime {
    pub total_us: u64,
    pub threads: Vec<ThreadOffCpu>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IoStat {
    pub calls: u64,
    pub completed: u64,
    pub bytes: u64,
    pub errors: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub read: IoStat,
    pub written: IoStat,
    pub by_syscall: BTreeMap<String, IoStat>,
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
    /// (function, bytes, calls), heaviest first.
    pub top_by_bytes: Vec<(String, u64, u64)>,
    pub top_by_calls: Vec<(String, u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub mode: Mode,
    pub window_s: f64,
    pub total_events: u64,
    pub counts: BTreeMap<String, u64>,
    pub groups: Vec<GroupSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpuTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Bandwidth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_chunks: Option<u64>,
}

/// One pass over the records; `finish` produces the summary and the folded stacks.
pub struct Aggregator {
    mode: Mode,
    counts: BTreeMap<String, u64>,
    first_ns: Option<u64>,
    last_ns: u64,
    group_stacks: HashMap<(Group, String), u64>,
    event_stacks: HashMap<String, u64>,
    sched_states: BTreeMap<String, u64>,
    saw_sched_switch: bool,
    off_pending: HashMap<u32, (u64, String)>,
    off_stacks: HashMap<String, u64>,
    off_threads: HashMap<u32, (String, u64, u64)>,
    io_pending: HashMap<u32, (String, String)>,
    io: BTreeMap<String, IoStat>,
    io_functions: HashMap<String, (u64, u64)>,
    block_issued_bytes: u64,
    name_cache: HashMap<(String, String), String>,
    /// Stack ids handed to a timeline, by event-folded stack.
    timeline_ids: HashMap<String, u32>,
    /// Off-CPU time per thread and I/O bytes over the window, for the plots.
    series: SeriesBuilder,
    /// The capture's window, when known: off-CPU intervals are cut to it, counted from the
    /// first record (perf may run on a little past the window while it is being stopped,
    /// and a thread cannot be blocked for longer than the window the capture states).
    window_ns: Option<u64>,
}

/// What one pass produced: the summary and the flamegraph inputs.
pub struct Outcome {
    pub summary: Summary,
    /// `event;comm;frames... count` (event counts).
    pub events_folded: Folded,
    /// `comm;user frames... microseconds` (off-CPU time), when sched_switch was recorded.
    pub off_cpu_folded: Option<Folded>,
    /// Off-CPU time per thread and I/O bytes over the window.
    pub over_time: OverTime,
}

impl Aggregator {
    pub fn new(mode: Mode) -> Self {
        Aggregator {
            mode,
            counts: BTreeMap::new(),
            first_ns: None,
            last_ns: 0,
            group_stacks: HashMap::new(),
            event_stacks: HashMap::new(),
            sched_states: BTreeMap::new(),
            saw_sched_switch: false,
            off_pending: HashMap::new(),
            off_stacks: HashMap::new(),
            off_threads: HashMap::new(),
            io_pending: HashMap::new(),
            io: BTreeMap::new(),
            io_functions: HashMap::new(),
            block_issued_bytes: 0,
            name_cache: HashMap::new(),
            timeline_ids: HashMap::new(),
            series: SeriesBuilder::default(),
            window_ns: None,
        }
    }

    /// An aggregator that reports every recorded event, even those that never fired.
    pub fn for_events(mode: Mode, events: &[String]) -> Self {
        let mut aggregator = Aggregator::new(mode);
        for event in events {
            aggregator.counts.insert(event.clone(), 0);
        }
        aggregator
    }

    pub fn add(&mut self, record: Record<'_>) {
        self.add_to(record, None);
    }

    /// Adds a record and hands each event sample, with its event-folded stack, to the
    /// timeline `sink`.
    pub fn add_with_timeline(&mut self, record: Record<'_>, sink: &mut dyn SampleSink) {
        self.add_to(record, Some(sink));
    }

    fn add_to(&mut self, record: Record<'_>, sink: Option<&mut dyn SampleSink>) {
        match record {
            Record::Switch { tid, time_ns, out } => {
                self.see_time(time_ns);
                if !out {
                    self.switched_in(tid, time_ns);
                }
            }
            Record::Sample(sample) => self.add_sample(&sample, sink),
        }
    }

    fn see_time(&mut self, t: u64) {
        self.first_ns = Some(self.first_ns.map_or(t, |f| f.min(t)));
        self.series.see(t);
        self.last_ns = self.last_ns.max(t);
    }

    fn frame_name(&mut self, frame: &Frame) -> String {
        let key = (frame.symbol.clone(), frame.dso.clone());
        if let Some(name) = self.name_cache.get(&key) {
            return name.clone();
        }
        let name = frame.name().replace(';', ":");
        self.name_cache.insert(key, name.clone());
        name
    }

    /// User frames root first, joined with `;`.
    fn user_stack(&mut self, frames: &[Frame]) -> String {
        let names: Vec<String> = frames
            .iter()
            .rev()
            .filter(|f| !f.is_kernel())
            .map(|f| self.frame_name(f))
            .collect();
        names.join(";")
    }

    fn add_sample(&mut self, s: &Sample<'_>, sink: Option<&mut dyn SampleSink>) {
        self.see_time(s.time_ns);
        *self.counts.entry(s.event.to_string()).or_default() += 1;
        let group = Group::of(s.event);
        let comm = s.comm.replace(';', ":");
        let user = self.user_stack(s.frames);

        *self.group_stacks.entry((group, user.clone())).or_default() += 1;
        let all: Vec<String> = s.frames.iter().rev().map(|f| self.frame_name(f)).collect();
        let mut key = format!("{};{comm}", s.event);
        if !all.is_empty() {
            key.push(';');
            key.push_str(&all.join(";"));
        }
        if let Some(sink) = sink {
            let id = match self.timeline_ids.get(&key) {
                Some(id) => *id,
                None => {
                    let id = self.timeline_ids.len() as u32;
                    self.timeline_ids.insert(key.clone(), id);
                    sink.new_stack(id, &key);
                    id
                }
            };
            let meta = SampleMeta {
                time_ns: Some(s.time_ns),
                pid: Some(s.pid),
                tid: s.tid,
                comm: s.comm,
                weight: 1,
            };
            sink.sample(&meta, id);
        }
        *self.event_stacks.entry(key).or_default() += 1;

        match s.event {
            "sched:sched_switch" => {
                self.saw_sched_switch = true;
                let state = s.prev_state().unwrap_or_else(|| "?".to_string());
                *self.sched_states.entry(state).or_default() += 1;
                let stack = if user.is_empty() {
                    comm.clone()
                } else {
                    format!("{comm};{user}")
                };
                self.off_pending.insert(s.tid, (s.time_ns, stack));
                let thread = self
                    .off_threads
                    .entry(s.tid)
                    .or_insert_with(|| (comm.clone(), 0, 0));
                thread.0 = comm;
                thread.2 += 1;
            }
            "block:block_rq_issue" => {
                if let Some(bytes) = s.block_bytes() {
                    self.block_issued_bytes += bytes;
                }
            }
            event => self.add_syscall_io(s, event, &user),
        }
    }

    fn add_syscall_io(&mut self, s: &Sample<'_>, event: &str, user: &str) {
        if Group::of(event) != Group::SyscallIo {
            return;
        }
        if let Some(name) = event.strip_prefix("syscalls:sys_enter_") {
            self.io.entry(name.to_string()).or_default().calls += 1;
            let function = io_function(s.frames, user);
            let entry = self.io_functions.entry(function.clone()).or_default();
            entry.1 += 1;
            self.io_pending.insert(s.tid, (name.to_string(), function));
        } else if let Some(name) = event.strip_prefix("syscalls:sys_exit_") {
            let ret = s.syscall_return();
            let pending = self.io_pending.remove(&s.tid).filter(|(n, _)| n == name);
            let stat = self.io.entry(name.to_string()).or_default();
            stat.completed += 1;
            match ret {
                Some(bytes) if bytes >= 0 => {
                    stat.bytes += bytes as u64;
                    self.series
                        .add_io(s.time_ns, bytes as u64, name.contains("read"));
                    // Each exit is attributed to the stack of its own enter; without the
                    // enter (not recorded), to the exit's own stack.
                    let function = pending
                        .map(|(_, f)| f)
                        .unwrap_or_else(|| io_function(s.frames, user));
                    self.io_functions.entry(function).or_default().0 += bytes as u64;
                }
                _ => stat.errors += 1,
            }
        }
    }

    /// Cuts the off-CPU intervals to `window` from the first record (see `window_ns`).
    pub fn within(mut self, window: std::time::Duration) -> Self {
        self.window_ns = Some(u64::try_from(window.as_nanos()).unwrap_or(u64::MAX));
        self
    }

    /// Where the window ends, when it is known and a record was seen.
    fn window_end(&self) -> Option<u64> {
        Some(self.first_ns?.saturating_add(self.window_ns?))
    }

    fn switched_in(&mut self, tid: u32, time_ns: u64) {
        if let Some((out_at, stack)) = self.off_pending.remove(&tid) {
            let time_ns = self.window_end().map_or(time_ns, |end| time_ns.min(end));
            let out_at = out_at.min(time_ns);
            let off = time_ns - out_at;
            self.series.add_off_cpu(tid, out_at, time_ns);
            *self.off_stacks.entry(stack).or_default() += off;
            if let Some(thread) = self.off_threads.get_mut(&tid) {
                thread.1 += off;
            }
        }
    }

    /// Seconds between the first and the last record seen.
    pub fn span_s(&self) -> f64 {
        self.first_ns
            .map_or(0.0, |first| (self.last_ns - first) as f64 / 1e9)
    }

    /// Closes the pass. `window_s` is the real capture duration; `lost_chunks` what perf
    /// reported lost.
    pub fn finish(mut self, window_s: f64, lost_chunks: Option<u64>) -> Outcome {
        // Threads still off-CPU when the capture ended count up to its last record (or the
        // window's end, when that came first).
        let end = self
            .window_end()
            .map_or(self.last_ns, |end| end.min(self.last_ns));
        let pending: Vec<(u32, (u64, String))> = self.off_pending.drain().collect();
        for (tid, (out_at, stack)) in pending {
            let out_at = out_at.min(end);
            let off = end - out_at;
            self.series.add_off_cpu(tid, out_at, end);
            *self.off_stacks.entry(stack).or_default() += off;
            if let Some(thread) = self.off_threads.get_mut(&tid) {
                thread.1 += off;
            }
        }

        let total_events = self.counts.values().sum();
        let groups = self.group_summaries(window_s);
        let off_cpu = self.saw_sched_switch.then(|| {
            let mut threads: Vec<ThreadOffCpu> = self
                .off_threads
                .iter()
                .map(|(tid, (comm, ns, switches))| ThreadOffCpu {
                    tid: *tid,
                    comm: comm.clone(),
                    off_cpu_us: ns / 1000,
                    switches: *switches,
                })
                .collect();
            threads.sort_by(|a, b| b.off_cpu_us.cmp(&a.off_cpu_us).then(a.tid.cmp(&b.tid)));
            OffCpuTime {
                total_us: threads.iter().map(|t| t.off_cpu_us).sum(),
                threads,
            }
        });
        let bandwidth = self.bandwidth(window_s);
        let off_cpu_folded = self.saw_sched_switch.then(|| {
            Folded::from_pairs(self.off_stacks.iter().map(|(s, ns)| (s.clone(), ns / 1000)))
        });
        let names: HashMap<u32, String> = self
            .off_threads
            .iter()
            .map(|(tid, (comm, _, _))| (*tid, comm.clone()))
            .collect();
        let over_time = std::mem::take(&mut self.series).finish(&names);
        Outcome {
            summary: Summary {
                mode: self.mode,
                window_s,
                total_events,
                counts: self.counts.clone(),
                groups,
                off_cpu,
                bandwidth,
                lost_chunks,
            },
            events_folded: Folded::from_pairs(self.event_stacks.into_iter()),
            off_cpu_folded,
            over_time,
        }
    }

    fn group_summaries(&self, window_s: f64) -> Vec<GroupSummary> {
        let mut by_group: BTreeMap<Group, Vec<(String, u64)>> = BTreeMap::new();
        for (event, count) in &self.counts {
            by_group
                .entry(Group::of(event))
                .or_default()
                .push((event.clone(), *count));
        }
        by_group
            .into_iter()
            .map(|(group, events)| {
                let mut stacks: Vec<(String, u64)> = self
                    .group_stacks
                    .iter()
                    .filter(|((g, stack), _)| *g == group && !stack.is_empty())
                    .map(|((_, stack), count)| (leaf_first(stack, 4), *count))
                    .collect();
                stacks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                stacks.truncate(TOP_STACKS);
                GroupSummary {
                    group,
                    title: group.title().to_string(),
                    reading: self.reading(group, &events, window_s),
                    events,
                    top_stacks: stacks,
                }
            })
            .collect()
    }

    fn count(&self, event: &str) -> u64 {
        self.counts.get(event).copied().unwrap_or(0)
    }

    fn reading(&self, group: Group, events: &[(String, u64)], window_s: f64) -> String {
        let sum = |filter: &dyn Fn(&str) -> bool| {
            events
                .iter()
                .filter(|(e, _)| filter(e))
                .map(|(_, c)| c)
                .sum::<u64>()
        };
        let per_s = |n: u64| {
            if window_s > 0.0 {
                n as f64 / window_s
            } else {
                0.0
            }
        };
        match group {
            Group::LockContention => {
                let entered = sum(&|e| e.starts_with("syscalls:sys_enter_"));
                let returned = sum(&|e| e.starts_with("syscalls:sys_exit_"));
                let mut text = format!("{entered} futex calls entered ({:.0}/s)", per_s(entered));
                if returned > 0 {
                    text.push_str(&format!(", {returned} returned"));
                }
                text.push_str(
                    ": threads waiting for or waking each other at locks, condvars or parkers",
                );
                text
            }
            Group::SyscallIo => {
                let reads = sum(&|e| e.starts_with("syscalls:sys_enter_") && e.contains("read"));
                let writes = sum(&|e| e.starts_with("syscalls:sys_enter_") && e.contains("write"));
                match self.bandwidth(window_s) {
                    Some(b) => format!(
                        "{reads} reads ({}), {writes} writes ({}) from syscall return values",
                        human_bytes(b.read.bytes),
                        human_bytes(b.written.bytes)
                    ),
                    None => format!("{reads} read calls, {writes} write calls"),
                }
            }
            Group::DiskSync => {
                let fsync = self.count("syscalls:sys_enter_fsync");
                let fdatasync = self.count("syscalls:sys_enter_fdatasync");
                let all = sum(&|e| e.starts_with("syscalls:sys_enter_"));
                format!(
                    "{all} sync calls ({fsync} fsync, {fdatasync} fdatasync; {:.0}/s): each waits for the device to persist data",
                    per_s(all)
                )
            }
            Group::Scheduler => {
                let switches = self.count("sched:sched_switch");
                let states: Vec<String> = self
                    .sched_states
                    .iter()
                    .map(|(state, n)| {
                        let meaning = match state.as_str() {
                            "S" => "sleeping",
                            "D" => "uninterruptible (I/O)",
                            "R" | "R+" => "preempted",
                            _ => "other",
                        };
                        format!("{n} {meaning} ({state})")
                    })
                    .collect();
                format!("{switches} switches off the CPU: {}", states.join(", "))
            }
            Group::BlockIo => {
                let issued = self.count("block:block_rq_issue");
                let completed = self.count("block:block_rq_complete");
                format!(
                    "{issued} requests issued ({}), {completed} completed (completions run in interrupt context and show only when they land on this process)",
                    human_bytes(self.block_issued_bytes)
                )
            }
            Group::PageFaults => {
                let major = self.count("major-faults");
                let minor = self.count("minor-faults");
                let hit = if major + minor > 0 {
                    format!("{:.1}%", 100.0 * minor as f64 / (major + minor) as f64)
                } else {
                    "n/a".into()
                };
                format!(
                    "{major} major, {minor} minor; page cache hit rate {hit} (minor / (major + minor)); ~{:.1} MiB read through mmap (major faults x 4 KiB)",
                    (major * PAGE_BYTES) as f64 / (1024.0 * 1024.0)
                )
            }
            Group::MemoryPressure => {
                let begin = self.count("vmscan:mm_vmscan_direct_reclaim_begin");
                let end = self.count("vmscan:mm_vmscan_direct_reclaim_end");
                let kswapd = self.count("vmscan:mm_vmscan_kswapd_wake");
                if begin + end + kswapd == 0 {
                    "no memory pressure: no direct reclaim, kswapd not woken".into()
                } else {
                    format!("{begin} direct reclaims ({end} ended): allocations stalled to free memory; kswapd woken {kswapd} times")
                }
            }
            Group::Other => format!("{} events", sum(&|_| true)),
        }
    }

    fn bandwidth(&self, window_s: f64) -> Option<Bandwidth> {
        if self.io.is_empty() {
            return None;
        }
        let mut read = IoStat::default();
        let mut written = IoStat::default();
        for (name, stat) in &self.io {
            let side = if name.contains("read") {
                &mut read
            } else {
                &mut written
            };
            side.calls += stat.calls;
            side.completed += stat.completed;
            side.bytes += stat.bytes;
            side.errors += stat.errors;
        }
        let mut functions: Vec<(String, u64, u64)> = self
            .io_functions
            .iter()
            .map(|(f, (b, c))| (f.clone(), *b, *c))
            .collect();
        functions.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        let top_by_bytes: Vec<_> = functions.iter().take(TOP_FUNCTIONS).cloned().collect();
        functions.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)));
        let top_by_calls: Vec<_> = functions.into_iter().take(TOP_FUNCTIONS).collect();
        let rate = |bytes: u64| {
            if window_s > 0.0 {
                bytes as f64 / window_s
            } else {
                0.0
            }
        };
        Some(Bandwidth {
            read_bytes_per_s: rate(read.bytes),
            write_bytes_per_s: rate(written.bytes),
            read,
            written,
            by_syscall: self.io.clone(),
            top_by_bytes,
            top_by_calls,
        })
    }
}

/// The function an I/O syscall is charged to: the first frame, from the leaf, in the
/// program itself (not the kernel, libc or the Rust/C++ standard library).
fn io_function(frames: &[Frame], user_stack: &str) -> String {
    let is_system_lib = |dso: &str| {
        let base = dso.rsplit('/').next().unwrap_or(dso);
        [
            "libc.so",
            "libc-",
            "libpthread",
            "ld-linux",
            "libstdc++",
            "libgcc_s",
            "libm.so",
            "librt",
        ]
        .iter()
        .any(|p| base.starts_with(p))
    };
    let is_std = |name: &str| {
        let n = name.trim_start_matches('<');
        ["std::", "core::", "alloc::", "__"]
            .iter()
            .any(|p| n.starts_with(p))
    };
    frames
        .iter()
        .filter(|f| !f.is_kernel() && !is_system_lib(&f.dso))
        .map(|f| f.name())
        .find(|name| !is_std(name) && !name.starts_with('['))
        .or_else(|| {
            user_stack
                .rsplit(';')
                .next()
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "[no stack]".to_string())
}

/// `root;a;b;leaf` -> `leaf <- b <- a` (at most `n` frames).
pub(super) fn leaf_first(stack: &str, n: usize) -> String {
    let frames: Vec<&str> = stack.rsplit(';').take(n).collect();
    let mut text = frames.join(" <- ");
    if stack.split(';').count() > n {
        text.push_str(" <- …");
    }
    text
}
