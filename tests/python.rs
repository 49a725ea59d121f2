//! Python targets end to end: `devprof cpu demo-py` records with py-spy (from the profiler
//! sidecar: demo-py has perf but no py-spy), Python function names in the flamegraph.

mod common;

use common::*;
use devprof::profile::folded::Folded;
use devprof::profile::pyspy::{is_python_frame, python_named_share};
use predicates::prelude::*;

const DEMO_PY: &str = "demo-py";

fn folded_of(stem: &std::path::Path) -> Folded {
    Folded::from_folded_text(&std::fs::read_to_string(with_ext(stem, "folded")).unwrap())
}

#[test]
#[ignore = "needs the demo devnet"]
fn demo_py_is_profiled_with_py_spy_and_python_names() {
    if !demo_container_ready("demo_py_is_profiled_with_py_spy_and_python_names", DEMO_PY) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_PY, "10"])
        .assert()
        .success()
        .stdout(predicate::str::contains("py-spy"));
    let stem = only_capture(cwd.path(), DEMO_PY, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "py-spy");
    assert_eq!(manifest["runtime"], "python");
    // py-spy needs only ptrace: the sidecar gets nothing else.
    let mode = manifest["capture_mode"].as_str().unwrap();
    assert!(mode.ends_with("with cap_add SYS_PTRACE"), "{mode}");
    let folded = folded_of(&stem);
    assert!(folded.total() > 100, "only {} samples", folded.total());
    let share = python_named_share(&folded);
    assert!(
        share >= 0.9,
        "only {:.1}% of samples carry a Python function",
        share * 100.0
    );
    // Threads parked in threading's waits still show from a sidecar (py-spy's idle test
    // misses them there; docs/runtimes/python.md says to use --gil): rank the functions that do work.
    let top: Vec<String> = folded
        .top_self(usize::MAX)
        .into_iter()
        .map(|(f, _)| f)
        .filter(|f| !f.contains("(threading.py:"))
        .take(3)
        .collect();
    assert!(
        top.iter().any(|f| f.starts_with("hash_loop (busy.py:")),
        "hash_loop not in the top 3 working functions: {top:?}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn native_frames_appear_under_the_python_function_that_calls_them() {
    if !demo_container_ready(
        "native_frames_appear_under_the_python_function_that_calls_them",
        DEMO_PY,
    ) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_PY, "10", "--native-frames"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_PY, "perf-");
    let folded = folded_of(&stem);
    // compress_blob calls zlib.compress: libz's frames sit under it.
    let under: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| {
            let frames: Vec<&str> = s.split(';').collect();
            frames
                .iter()
                .position(|f| f.starts_with("compress_blob (busy.py:"))
                .is_some_and(|i| {
                    frames[i + 1..]
                        .iter()
                        .any(|f| !is_python_frame(f) && f.contains("libz"))
                })
        })
        .map(|(_, c)| c)
        .sum();
    assert!(under > 0, "no libz frame under compress_blob");
}

#[test]
#[ignore = "needs the demo devnet"]
fn exec_mode_without_py_spy_points_at_the_sidecar() {
    if !demo_container_ready("exec_mode_without_py_spy_points_at_the_sidecar", DEMO_PY) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_PY, "3", "--mode", "exec"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("py-spy is not installed"))
        .stderr(predicate::str::contains("--mode sidecar"))
        .stderr(predicate::str::contains("devprof build tools"));
    assert!(files_under(cwd.path()).is_empty(), "nothing is written");
}
