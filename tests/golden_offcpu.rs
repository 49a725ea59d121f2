//! Golden files cut from real `devprof offcpu --keep-script` captures of demo-seq:
//! - perf-script-contextswitches.txt: 100 ms of the contextswitches config (sched_switch
//!   with stacks, switch records, futex enter/exit, fdatasync), 0.4 s into a capture;
//! - perf-script-iobandwidth.txt: 0.4 s of the iobandwidth config, its block_rq_* records
//!   taken out to keep the file small (the syscall records are untouched).
//!
//! The expected figures were computed by an independent script over the same text
//! (per-thread switch-out to switch-in intervals, exit return values), not by devprof.

use devprof::profile::offcpu::script::for_each_record;
use devprof::profile::offcpu::summary::{Aggregator, Mode, Outcome, Summary};
use std::collections::BTreeMap;

const CONTEXT_SWITCHES: &str = include_str!("data/perf-script-contextswitches.txt");
const IO_BANDWIDTH: &str = include_str!("data/perf-script-iobandwidth.txt");

fn summarize(text: &str, mode: Mode, window_s: f64) -> Outcome {
    let mut aggregator = Aggregator::new(mode);
    for_each_record(text.as_bytes(), |r| aggregator.add(r)).unwrap();
    aggregator.finish(window_s, None)
}

fn counts(summary: &Summary) -> BTreeMap<&str, u64> {
    summary
        .counts
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect()
}

#[test]
fn counts_every_event_under_its_own_name() {
    let out = summarize(CONTEXT_SWITCHES, Mode::Full, 0.1);
    assert_eq!(
        counts(&out.summary),
        BTreeMap::from([
            ("sched:sched_switch", 52),
            ("syscalls:sys_enter_fdatasync", 1),
            ("syscalls:sys_enter_futex", 9),
            ("syscalls:sys_exit_futex", 9),
        ])
    );
    assert_eq!(out.summary.total_events, 71);
}

#[test]
fn off_cpu_time_per_thread_runs_from_switch_out_to_switch_in() {
    let out = summarize(CONTEXT_SWITCHES, Mode::Full, 0.1);
    let off = out.summary.off_cpu.expect("sched_switch was recorded");
    let per_thread: BTreeMap<String, u64> = off
        .threads
        .iter()
        .map(|t| (format!("{}/{}", t.comm, t.tid), t.off_cpu_us))
        .collect();
    assert_eq!(
        per_thread,
        BTreeMap::from([
            ("hash_chain/9".to_string(), 76238),
            ("state_lookup/10".to_string(), 35635),
            ("contend_lock/11".to_string(), 58636),
            ("contend_lock/12".to_string(), 54962),
            ("contend_lock/13".to_string(), 54948),
            ("contend_lock/14".to_string(), 52069),
            ("sync_writes/15".to_string(), 66001),
            ("mmap_reads/16".to_string(), 87590),
            ("alloc_blocks/17".to_string(), 97912),
        ])
    );
    assert_eq!(off.total_us, 583991);
    assert!(
        off.threads.iter().all(|t| t.off_cpu_us <= 100_000),
        "no thread exceeds the 100 ms excerpt"
    );
    // The flamegraph holds the same time, attributed to the user stacks at switch-out.
    let folded = out.off_cpu_folded.unwrap();
    let contend: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| s.starts_with("contend_lock;"))
        .map(|(_, us)| us)
        .sum();
    assert_eq!(contend, 58636 + 54962 + 54948 + 52069);
    assert!(
        folded
            .stacks
            .iter()
            .all(|(s, _)| !s.contains("[kernel.kallsyms]") && !s.contains("__schedule")),
        "user stacks only"
    );
}

#[test]
fn bandwidth_comes_from_syscall_return_values() {
    let out = summarize(IO_BANDWIDTH, Mode::Full, 0.4);
    let bw = out
        .summary
        .bandwidth
        .expect("read/write syscalls were recorded");
    assert_eq!(
        (bw.written.calls, bw.written.completed, bw.written.bytes),
        (20, 20, 692224)
    );
    assert_eq!(
        (bw.read.calls, bw.read.completed, bw.read.bytes),
        (20, 20, 692224)
    );
    assert_eq!(bw.write_bytes_per_s, 692224.0 / 0.4);
    assert_eq!(bw.top_by_bytes[0].0, "demo_node::workloads::sync_writes");
    assert_eq!(bw.top_by_bytes[0].1, 2 * 692224);
    assert_eq!(bw.top_by_calls[0].2, 40);
}

#[test]
fn fast_mode_gives_the_same_counts_without_stacks() {
    let full = summarize(CONTEXT_SWITCHES, Mode::Full, 0.1).summary;
    let fast = summarize(&strip_stacks(CONTEXT_SWITCHES), Mode::Fast, 0.1).summary;
    assert_eq!(full.counts, fast.counts);
    assert_eq!(
        full.off_cpu.as_ref().unwrap().total_us,
        fast.off_cpu.as_ref().unwrap().total_us
    );
    assert!(fast.groups.iter().all(|g| g.top_stacks.is_empty()));
}

#[test]
fn summary_text_names_groups_readings_and_mode() {
    let out = summarize(IO_BANDWIDTH, Mode::Full, 0.4);
    let text = devprof::profile::offcpu::text::render_text(&out.summary, "demo-seq");
    for needle in [
        "mode: full (stacks symbolized)",
        "syscall I/O: 20 reads (676.0 KiB), 20 writes (676.0 KiB) from syscall return values",
        "disk sync: 20 sync calls (10 fsync, 10 fdatasync; 50/s)",
        "read:    20 calls, 676.0 KiB, avg 33.8 KiB per call",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

/// The same records as `perf script` prints them in fast mode (no call chains).
fn strip_stacks(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with(['\t', ' ']))
        .map(|l| format!("{l}\n"))
        .collect()
}
