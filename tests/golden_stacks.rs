//! Broken stacks measured on real captures (tests/data/runtimes: 3 s at 299 Hz through
//! perf, frame-pointer call graphs). demo-js runs Debian's nodejs, whose libnode and libuv
//! have no frame pointers, so nearly every stack stops in unmapped memory ([unknown]);
//! the demo node (demo-seq) is built with frame pointers and its stacks reach libc's
//! thread entry.

use devprof::profile::folded::Folded;
use devprof::profile::perfscript::fold_perf_script;
use devprof::profile::stacks::{repair, UNKNOWN};
use std::io::BufReader;

fn fold(script: &str) -> Folded {
    fold_perf_script(BufReader::new(script.as_bytes())).expect("fold")
}

fn leading_unknown(stack: &str) -> usize {
    stack
        .split(';')
        .skip(1)
        .take_while(|f| *f == UNKNOWN)
        .count()
}

#[test]
fn demo_js_stacks_are_mostly_broken_and_collapse_to_one_unknown_root() {
    let folded = fold(include_str!("data/runtimes/perf-script-demo-js.txt"));
    let before_max = folded
        .stacks
        .iter()
        .map(|(s, _)| leading_unknown(s))
        .max()
        .unwrap();
    assert!(
        before_max > 10,
        "the capture has long [unknown] runs: {before_max}"
    );

    let (repaired, health) = repair(&folded);
    assert_eq!(health.samples, folded.total());
    assert_eq!(
        repaired.total(),
        folded.total(),
        "collapsing keeps every sample"
    );
    // 207 of the 210 samples begin at an address in no mapping; the other 3 stop at a
    // libc function (epoll_wait) or an unnamed libc frame (given the benefit of the doubt).
    assert_eq!(health.broken_samples, 209, "{health:?}");
    assert!(health.broken_share > 0.9);
    assert!(health.collapsed_samples > 0 && health.collapsed_frames > 30);
    for (stack, _) in &repaired.stacks {
        assert!(leading_unknown(stack) <= 1, "{stack}");
    }
    // The JavaScript frames are untouched.
    assert!(repaired
        .stacks
        .iter()
        .any(|(s, _)| s.contains("LazyCompile:*hashLoop /app/busy.js:43")));
}

#[test]
fn demo_seq_stacks_built_with_frame_pointers_reach_their_entry() {
    let folded = fold(include_str!("data/perf-script-demo-seq.txt"));
    let (repaired, health) = repair(&folded);
    assert!(health.broken_share < 0.05, "{health:?}");
    assert_eq!(repaired.total(), folded.total());
}

#[test]
fn demo_py_interpreter_stacks_are_broken() {
    let (_, health) = repair(&fold(include_str!("data/runtimes/perf-script-demo-py.txt")));
    assert!(health.broken_share > 0.5, "{health:?}");
}
