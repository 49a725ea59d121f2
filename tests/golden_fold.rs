//! Golden files cut from a real capture of the demo node (1 s at 199 Hz on demo-seq):
//! - perf-script-demo-seq.txt           `perf script -F comm,pid,tid,time,event,ip,sym,dso --no-inline`
//! - perf-script-demo-seq.folded        what devprof folded it to (reviewed by hand)
//! - perf-script-demo-seq.stackcollapse perf's own `perf script report stackcollapse` of the
//!   same perf.data, an independent reference for the per-function counts.

use devprof::profile::folded::Folded;
use devprof::profile::perfscript::fold_perf_script;
use std::collections::BTreeMap;
use std::io::BufReader;

const SCRIPT: &str = include_str!("data/perf-script-demo-seq.txt");
const EXPECTED: &str = include_str!("data/perf-script-demo-seq.folded");
const PERF_REFERENCE: &str = include_str!("data/perf-script-demo-seq.stackcollapse");

fn folded() -> Folded {
    fold_perf_script(BufReader::new(SCRIPT.as_bytes())).expect("fold")
}

#[test]
fn folds_real_perf_script_to_the_expected_lines() {
    let ours: Vec<String> = folded().lines().collect();
    let expected: Vec<&str> = EXPECTED.lines().collect();
    assert_eq!(ours, expected);
}

#[test]
fn folded_counts_match_perfs_own_stackcollapse() {
    // perf names unsymbolized frames differently ([unknown] vs [module]); compare the
    // symbolized leaf functions, which carry the self time.
    let leaf_counts = |text: &str| -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for line in text.lines() {
            let (stack, count) = line.rsplit_once(' ').unwrap();
            let leaf = stack.rsplit(';').next().unwrap().to_string();
            if !leaf.starts_with('[') {
                *counts.entry(leaf).or_default() += count.parse::<u64>().unwrap();
            }
        }
        counts
    };
    let ours = folded();
    let reference_total: u64 = PERF_REFERENCE
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(ours.total(), reference_total);
    assert_eq!(
        leaf_counts(&ours.lines().collect::<Vec<_>>().join("\n")),
        leaf_counts(PERF_REFERENCE)
    );
}

#[test]
fn real_capture_ranks_hash_chain_first_and_is_symbolized() {
    let f = folded();
    assert_eq!(f.top_self(1)[0].0, "demo_node::workloads::hash_chain");
    assert!(f.unsymbolized_share() < 0.5);
    assert!(
        !EXPECTED.contains("_ZN"),
        "golden output holds mangled names"
    );
}

/// inferno's collapser (then devprof's demangling) on the same text: the reference devprof's
/// own parser must agree with on every committed real capture.
fn inferno_reference(script: &str) -> Folded {
    use inferno::collapse::perf::{Folder, Options};
    use inferno::collapse::Collapse;
    let mut options = Options::default();
    options.nthreads = 1;
    let mut out = Vec::new();
    Folder::from(options)
        .collapse(BufReader::new(script.as_bytes()), &mut out)
        .expect("inferno collapse");
    Folded::from_folded_text(&String::from_utf8_lossy(&out))
}

/// Real captures of the sample kind (`cpu-clock`, with stacks): the demo node, and the runtime
/// services' programs through perf (JIT frames from V8's and the JVM's perf maps, a
/// stripped Go binary, the Python interpreter), 3 s at 299 Hz each.
const SAMPLE_CAPTURES: &[(&str, &str)] = &[
    ("perf-script-demo-seq.txt", SCRIPT),
    (
        "runtimes/perf-script-demo-js.txt",
        include_str!("data/runtimes/perf-script-demo-js.txt"),
    ),
    (
        "runtimes/perf-script-demo-jvm.txt",
        include_str!("data/runtimes/perf-script-demo-jvm.txt"),
    ),
    (
        "runtimes/perf-script-demo-go.txt",
        include_str!("data/runtimes/perf-script-demo-go.txt"),
    ),
    (
        "runtimes/perf-script-demo-py.txt",
        include_str!("data/runtimes/perf-script-demo-py.txt"),
    ),
];

#[test]
fn devprofs_parser_folds_every_real_capture_as_inferno_does() {
    for (name, script) in SAMPLE_CAPTURES {
        let ours = fold_perf_script(BufReader::new(script.as_bytes())).expect("fold");
        let reference = inferno_reference(script);
        assert!(ours.total() > 100, "{name}: only {} samples", ours.total());
        assert_eq!(ours, reference, "{name}");
    }
}

#[test]
fn tracepoint_samples_keep_their_thread_and_stack() {
    // A tracepoint's payload follows its event name on the event line; it is not a frame.
    // (inferno reads the payload as a frame and loses these stacks.)
    let script = include_str!("data/perf-script-contextswitches.txt");
    let ours = fold_perf_script(BufReader::new(script.as_bytes())).expect("fold");
    assert!(ours.total() > 0);
    for (stack, _) in &ours.stacks {
        let root = stack.split(';').next().unwrap();
        assert!(!root.is_empty() && !root.contains('='), "{stack}");
        assert!(
            stack.ends_with("__schedule"),
            "the leaf is the switch: {stack}"
        );
    }
}

/// Real async-profiler output from demo-jvm (`asprof collect -t -o collapsed`, 3 s of
/// `ctimer` and 2 s of `wall`): read as folded stacks, thread roots kept, streamed or not.
#[test]
fn async_profiler_collapsed_output_reads_as_folded_stacks() {
    let cpu = include_str!("data/runtimes/asprof-demo-jvm.collapsed");
    let folded = Folded::from_folded_reader(BufReader::new(cpu.as_bytes())).expect("read");
    assert_eq!(folded, Folded::from_folded_text(cpu));
    assert_eq!(folded.total(), 63);
    let top = devprof::profile::top::by_self(&folded, 2);
    assert_eq!(top[0].name, "DemoJvm.hashChain");
    assert_eq!(top[0].samples, 44);
    assert_eq!(top[1].name, "DemoJvm.sortChunk");
    assert!(folded
        .stacks
        .iter()
        .all(|(s, _)| s.starts_with('[') && s.split(';').next().unwrap().contains(" tid=")));

    let wall = include_str!("data/runtimes/asprof-wall-demo-jvm.collapsed");
    let folded = Folded::from_folded_text(wall);
    let sleepy: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| s.starts_with("[sleepy-wait") && s.contains("DemoJvm.sleepyWait"))
        .map(|(_, c)| c)
        .sum();
    assert!(sleepy > 0, "no sleepyWait in the wall-clock profile");
}
