//! Node targets end to end: demo-js (Debian's nodejs with NODE_OPTIONS=
//! --perf-basic-prof-only-functions) profiled with perf in exec and sidecar modes, and a
//! container of the same image without the flag.

mod common;

use common::*;
use devprof::profile::folded::Folded;
use std::path::Path;

const DEMO_JS: &str = "demo-js";

fn js_image() -> String {
    std::env::var("DEVPROF_DEMO_JS_IMAGE").unwrap_or_else(|_| "devprof-demo-js:latest".to_string())
}

fn read_folded(path: &Path) -> Folded {
    Folded::from_folded_text(&std::fs::read_to_string(path).unwrap())
}

/// A JavaScript frame once the Node preset stripped V8's prefix: `name /app/file.js:LINE`
/// or a Node built-in module's `name node:internal/...:LINE`.
fn is_js_frame(frame: &str) -> bool {
    frame
        .rsplit_once(' ')
        .is_some_and(|(_, place)| place.contains(".js:") || place.starts_with("node:"))
}

/// Records demo-js for 10 s in `mode` and checks both graphs.
fn profile_demo_js(mode: &str) {
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", DEMO_JS, "10", "--mode", mode])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8_lossy(&out);
    assert!(stdout.contains("flamegraph (unfiltered)"), "{stdout}");
    assert!(stdout.contains("flamegraph (preset node"), "{stdout}");

    let stem = only_capture(cwd.path(), DEMO_JS, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["runtime"], "node");
    // V8's perf map is read out of the container by the native fold itself, from a
    // sidecar too (its binaries copied out of the target container).
    assert_eq!(
        manifest["fold_path"], "native",
        "{mode}: notes: {}",
        manifest["notes"]
    );
    assert!(with_ext(&stem, "perf-map").is_file());
    let graphs = manifest["graphs"].as_array().expect("graphs");
    assert_eq!(graphs.len(), 2, "{graphs:?}");
    assert_eq!(graphs[0]["view"], "unfiltered");
    assert!(graphs[1]["svg"]
        .as_str()
        .unwrap()
        .ends_with(".node-preset.svg"));
    assert!(manifest["stacks"]["broken_share"].as_f64().is_some());

    let unfiltered = read_folded(&with_ext(&stem, "folded"));
    let top: Vec<String> = unfiltered.top_self(3).into_iter().map(|(f, _)| f).collect();
    assert!(
        top.iter().any(|f| f.contains("hashLoop /app/busy.js")),
        "hashLoop not in the top 3 by self time: {top:?}"
    );
    for (stack, _) in &unfiltered.stacks {
        let leading = stack
            .split(';')
            .skip(1)
            .take_while(|f| *f == "[unknown]")
            .count();
        assert!(leading <= 1, "{leading} leading [unknown] frames: {stack}");
    }

    let filtered = read_folded(&with_ext(&stem, "node-preset.folded"));
    assert_eq!(filtered.total(), unfiltered.total());
    let with_js: u64 = filtered
        .stacks
        .iter()
        .filter(|(s, _)| s.split(';').skip(1).any(is_js_frame))
        .map(|(_, c)| c)
        .sum();
    let share = with_js as f64 / filtered.total() as f64;
    assert!(
        share >= 0.8,
        "{mode}: only {:.1}% of samples carry a JavaScript frame",
        share * 100.0
    );
    assert!(with_ext(&stem, "node-preset.svg").is_file());
}

#[test]
#[ignore = "needs the demo devnet"]
fn demo_js_in_exec_mode_names_javascript_in_both_graphs() {
    if !demo_container_ready(
        "demo_js_in_exec_mode_names_javascript_in_both_graphs",
        DEMO_JS,
    ) {
        return;
    }
    profile_demo_js("exec");
}

#[test]
#[ignore = "needs the demo devnet"]
fn demo_js_in_sidecar_mode_names_javascript_in_both_graphs() {
    if !demo_container_ready(
        "demo_js_in_sidecar_mode_names_javascript_in_both_graphs",
        DEMO_JS,
    ) {
        return;
    }
    profile_demo_js("sidecar");
}

#[test]
#[ignore = "needs the demo devnet"]
fn node_without_the_perf_map_flag_is_captured_and_told_how() {
    if !demo_container_ready(
        "node_without_the_perf_map_flag_is_captured_and_told_how",
        DEMO_JS,
    ) {
        return;
    }
    let name = unique("devprof-test-nodepy-noflag");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["-e", "NODE_OPTIONS=", "-e", "BUSY_HASH_PCT=30"]);
    let _guard = run_container(&name, &args, &js_image(), &[]);
    wait_for_cpu(&name, "node", 0.5);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", &name, "3"])
        .assert()
        .success()
        .get_output()
        .clone();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("NODE_OPTIONS: \"--perf-basic-prof-only-functions\""),
        "{text}"
    );
    let stem = only_capture(cwd.path(), &name, "perf-");
    assert!(with_ext(&stem, "folded").is_file() && with_ext(&stem, "svg").is_file());
    let manifest = read_manifest(&stem);
    assert!(
        manifest["perf_map"]
            .as_str()
            .unwrap()
            .starts_with("missing"),
        "{manifest}"
    );
}

/// Regression: node run with V8's --perf-prof writes a jitdump and no perf map; perf script
/// cannot read a jitdump (it needs `perf inject --jit`), so JavaScript showed as
/// [perf-1.map] on 94% of samples. The native fold reads the jitdump the recording saw
/// mapped and names it.
#[test]
#[ignore = "needs the demo devnet"]
fn node_writing_a_jitdump_is_named_by_the_native_fold() {
    let test = "node_writing_a_jitdump_is_named_by_the_native_fold";
    if !demo_container_ready(test, DEMO_JS) {
        return;
    }
    let name = unique("devprof-test-node-jitdump");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    // V8 writes jit-<pid>.dump into its working directory, which must be writable.
    args.extend(["-e", "NODE_OPTIONS=--perf-prof", "-w", "/tmp"]);
    let _guard = run_container(&name, &args, &js_image(), &[]);
    wait_for_cpu(&name, "node", 0.5);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &name, "5"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), &name, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["fold_path"], "native", "{manifest}");
    assert!(
        manifest["perf_map"]
            .as_str()
            .unwrap()
            .starts_with("a jitdump"),
        "{manifest}"
    );
    let notes = manifest["notes"].to_string();
    assert!(
        notes.contains("named from its jitdump /tmp/jit-"),
        "{notes}"
    );
    let folded = read_folded(&with_ext(&stem, "folded"));
    let in_js: u64 = folded
        .stacks
        .iter()
        .filter(|(stack, _)| stack.contains("/app/busy.js:"))
        .map(|(_, n)| *n)
        .sum();
    assert!(
        in_js * 2 >= folded.total(),
        "{in_js} of {} samples in busy.js",
        folded.total()
    );
    // The names are kept beside the capture, as a perf map's text.
    let kept = std::fs::read_to_string(with_ext(&stem, "perf-map")).unwrap();
    assert!(
        kept.contains("/app/busy.js:"),
        "{}",
        &kept[..kept.len().min(500)]
    );
}
