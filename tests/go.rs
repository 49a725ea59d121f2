//! Go targets end to end: demo-go, a stripped Go binary (no symbol table; its names only
//! in .gopclntab), profiled with perf; devprof names the frames perf could not.

mod common;

use common::*;
use devprof::profile::folded::Folded;

const DEMO_GO: &str = "demo-go";

#[test]
fn cpu_names_a_stripped_go_binary_from_its_pclntab() {
    if !demo_container_ready("cpu_names_a_stripped_go_binary_from_its_pclntab", DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", DEMO_GO, "10"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8_lossy(&out);
    assert!(
        !stdout.contains("force-frame-pointers"),
        "Rust advice for a Go target: {stdout}"
    );
    let stem = only_capture(cwd.path(), DEMO_GO, "perf-");
    let folded =
        Folded::from_folded_text(&std::fs::read_to_string(with_ext(&stem, "folded")).unwrap());
    let top: Vec<String> = folded.top_self(3).into_iter().map(|(f, _)| f).collect();
    for hot in ["main.hashChain", "main.sortChunk"] {
        assert!(
            top.iter().any(|f| f == hot),
            "{hot} not in the top 3 by self time: {top:?}"
        );
    }
    // Unnamed leaves are `[module]` (perf's `[unknown]` with the module's name).
    let total: u64 = folded.stacks.iter().map(|(_, n)| n).sum();
    let unnamed: u64 = folded
        .stacks
        .iter()
        .filter(|(stack, _)| stack.rsplit(';').next().is_some_and(|f| f.starts_with('[')))
        .map(|(_, n)| n)
        .sum();
    assert!(total > 100, "{total} samples");
    assert!(
        unnamed * 10 <= total,
        "{unnamed} of {total} samples end in an unnamed frame"
    );
}
