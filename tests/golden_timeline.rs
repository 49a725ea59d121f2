//! The timeline written while folding real captures (tests/data: demo-seq at 199 Hz, the
//! JVM, Node, Python and Go demo services, and an off-CPU contextswitches capture) against
//! the folded stacks of the same pass and against samples counted straight from the text.

mod timelines;

use devprof::profile::offcpu::script::for_each_record;
use devprof::profile::offcpu::summary::{Aggregator, Mode};
use devprof::profile::timeline::{Timeline, TimelineWriter};
use std::collections::BTreeMap;
use timelines::{fold_with_timeline, per_tid, CPU_CAPTURES};

const CONTEXT_SWITCHES: &str = include_str!("data/perf-script-contextswitches.txt");

/// Samples per tid, counted from the text: an event line (`comm pid/tid time: event:`)
/// followed by at least one stack line.
fn samples_per_tid_in_text(text: &str) -> BTreeMap<u64, u64> {
    let mut counts = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.is_empty() || line.starts_with(char::is_whitespace) {
            continue;
        }
        let has_stack = lines
            .peek()
            .is_some_and(|next| next.starts_with(char::is_whitespace) && !next.trim().is_empty());
        let ids = line
            .split_whitespace()
            .find(|w| {
                w.chars().all(|c| c.is_ascii_digit() || c == '/')
                    && w.contains(|c: char| c.is_ascii_digit())
            })
            .unwrap();
        let tid: u64 = ids.rsplit('/').next().unwrap().parse().unwrap();
        if has_stack {
            *counts.entry(tid).or_default() += 1;
        }
    }
    counts
}

#[test]
fn cpu_timelines_hold_every_folded_sample_with_its_thread_and_time() {
    for (name, text) in CPU_CAPTURES {
        let (folded, timeline, size) = fold_with_timeline(text);
        assert!(folded.total() > 100, "{name}: {}", folded.total());
        // Per stack, the timeline adds up to the folded file.
        assert_eq!(timeline.stack_totals(), folded.stacks, "{name}");
        // Per thread name (the folded root), too.
        let mut by_root: BTreeMap<String, u64> = BTreeMap::new();
        for (stack, n) in &folded.stacks {
            *by_root
                .entry(stack.split(';').next().unwrap().to_string())
                .or_default() += n;
        }
        let mut by_comm: BTreeMap<String, u64> = BTreeMap::new();
        for s in &timeline.samples {
            let comm = timeline.threads[s.thread as usize].comm.replace(' ', "_");
            *by_comm.entry(comm).or_default() += s.weight;
        }
        assert_eq!(by_comm, by_root, "{name}");
        // Per tid, as counted from the text itself.
        assert_eq!(per_tid(&timeline), samples_per_tid_in_text(text), "{name}");
        // Times are perf's, in order, within the capture.
        let times: Vec<u64> = timeline.samples.iter().map(|s| s.time_ns).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "{name}: out of order"
        );
        assert!(
            size < text.len() / 10,
            "{name}: {size} bytes for {}",
            text.len()
        );
    }
    let (_, timeline, _) = fold_with_timeline(CPU_CAPTURES[0].1);
    // The first sample of the demo-seq golden file: `state_lookup 7/10 1085.945746`.
    assert_eq!(timeline.samples[0].time_ns, 1_085_945_746_000);
    assert_eq!(timeline.threads[0].tid, 10);
    assert_eq!(timeline.threads[0].pid, Some(7));
}

#[test]
fn offcpu_timelines_hold_every_event_sample_by_thread() {
    let mut aggregator = Aggregator::new(Mode::Full);
    let mut writer = TimelineWriter::new(Vec::new()).unwrap();
    for_each_record(CONTEXT_SWITCHES.as_bytes(), |r| {
        aggregator.add_with_timeline(r, &mut writer)
    })
    .unwrap();
    let timeline = Timeline::read(&writer.finish().unwrap()[..]).unwrap();
    let out = aggregator.finish(0.1, None);
    assert_eq!(timeline.stack_totals(), out.events_folded.stacks);
    assert_eq!(timeline.samples.len() as u64, out.summary.total_events);
    // Every event line of the text is a sample (switch records are not).
    let events = CONTEXT_SWITCHES
        .lines()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with(char::is_whitespace)
                && !l.contains("PERF_RECORD_SWITCH")
        })
        .count() as u64;
    assert_eq!(timeline.samples.len() as u64, events);
}
