//! Go targets end to end: demo-go, a stripped Go binary (no symbol table; its names only
//! in .gopclntab), profiled with perf in exec and sidecar modes (devprof names the frames
//! perf could not), and through the Go runtime's own net/http/pprof endpoint, which
//! listens on the container's loopback only.

mod common;

use common::*;
use devprof::profile::folded::Folded;
use std::path::Path;

const DEMO_GO: &str = "demo-go";

/// A Go function name: `main.x`, `runtime.x`, `net/http.(*conn).serve`. Kernel names
/// (no package, or gcc's `.isra.0`-style suffixes) and perf's `[module]` are not.
fn is_go_name(frame: &str) -> bool {
    let re = regex::Regex::new(r"^[a-z][a-z0-9_\-]*(/[a-zA-Z0-9_.\-]+)*\.[A-Za-z_(]").unwrap();
    re.is_match(frame)
        && ![".isra.", ".constprop.", ".part.", ".cold"]
            .iter()
            .any(|s| frame.contains(s))
}

/// The share of samples whose stack carries a Go function name (the root, the program's
/// name, is not a frame).
fn go_named_share(folded: &Folded) -> (u64, u64) {
    let total: u64 = folded.stacks.iter().map(|(_, n)| n).sum();
    let named: u64 = folded
        .stacks
        .iter()
        .filter(|(stack, _)| stack.split(';').skip(1).any(is_go_name))
        .map(|(_, n)| n)
        .sum();
    (named, total)
}

fn top3(stem: &Path) -> (Folded, Vec<String>) {
    let folded =
        Folded::from_folded_text(&std::fs::read_to_string(with_ext(stem, "folded")).unwrap());
    let top = folded.top_self(3).into_iter().map(|(f, _)| f).collect();
    (folded, top)
}

/// No Rust advice anywhere for a Go target.
fn assert_no_rust_advice(stdout: &str, stderr: &str) {
    for advice in ["force-frame-pointers", "debug info", "-C "] {
        assert!(
            !stdout.contains(advice) && !stderr.contains(advice),
            "Rust advice ({advice}) for a Go target:\n{stdout}\n{stderr}"
        );
    }
}

/// `devprof cpu demo-go 10 --mode MODE`: Go names on >=90% of samples, both hot
/// functions in the top 3, the runtime and its version recorded, no Rust advice.
fn cpu_names_go(test: &str, mode: &str) {
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", DEMO_GO, "10", "--mode", mode])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_rust_advice(&stdout, &stderr);
    let stem = only_capture(cwd.path(), DEMO_GO, "perf-");
    let (folded, top) = top3(&stem);
    for hot in ["main.hashChain", "main.sortChunk"] {
        assert!(
            top.iter().any(|f| f == hot),
            "{hot} not in the top 3 by self time: {top:?}"
        );
    }
    let (named, total) = go_named_share(&folded);
    assert!(total > 100, "{total} samples");
    assert!(
        named * 10 >= total * 9,
        "{named} of {total} samples carry a Go name (mode {mode})"
    );

    let manifest = read_manifest(&stem);
    assert_eq!(manifest["runtime"], "go", "{manifest}");
    let version = manifest["runtime_version"].as_str().unwrap_or("");
    assert!(version.starts_with("go1."), "runtime_version {version:?}");
    assert!(
        stdout.contains(&format!("go ({version})")),
        "the summary's process line names the Go version: {stdout}"
    );
    // Said once: stripped is fine for Go.
    assert_eq!(
        stderr.matches("stripped").count(),
        1,
        "one note about the stripped Go binary: {stderr}"
    );
    if mode == "sidecar" {
        assert!(
            manifest["capture_mode"]
                .as_str()
                .is_some_and(|m| m.starts_with("sidecar")),
            "{manifest}"
        );
    }
}

#[test]
fn cpu_names_a_stripped_go_binary_from_its_pclntab() {
    cpu_names_go("cpu_names_a_stripped_go_binary_from_its_pclntab", "exec");
}

#[test]
fn cpu_names_a_stripped_go_binary_from_a_sidecar() {
    cpu_names_go("cpu_names_a_stripped_go_binary_from_a_sidecar", "sidecar");
}

#[test]
fn heap_of_a_go_target_comes_from_its_pprof_endpoint() {
    if !demo_container_ready("heap_of_a_go_target_comes_from_its_pprof_endpoint", DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["heap", DEMO_GO])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stem = only_capture(cwd.path(), DEMO_GO, "heap-");
    let (folded, top) = top3(&stem);
    assert!(
        top.iter().any(|f| f == "main.allocBlocks"),
        "main.allocBlocks not in the top 3 by in-use bytes: {top:?}\n{stdout}"
    );
    // demo-go keeps up to 32 MiB alive in allocBlocks: the profile must show MiBs (Go
    // samples one allocation per 512 KiB on average and scales the counts up).
    assert!(folded.total() > 4 << 20, "{} bytes in use", folded.total());
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "pprof");
    assert_eq!(manifest["events"][0], "inuse_space");
    assert_eq!(manifest["heap"]["measure"], "in-use");
    let original = with_ext(&stem, "pb.gz");
    let bytes = std::fs::read(&original).unwrap();
    assert_eq!(
        &bytes[..2],
        &[0x1f, 0x8b],
        "the original profile is kept, gzip"
    );
    let listed: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert!(
        listed.iter().any(|n| n.ends_with(".pb.gz")),
        "the manifest lists the .pb.gz: {listed:?}"
    );

    // alloc_space on request.
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", DEMO_GO, "--alloc"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_GO, "heap-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["events"][0], "alloc_space");
    let (_, top) = top3(&stem);
    assert!(top.iter().any(|f| f == "main.allocBlocks"), "{top:?}");
}

#[test]
fn cpu_engine_pprof_names_the_hot_go_function() {
    if !demo_container_ready("cpu_engine_pprof_names_the_hot_go_function", DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", DEMO_GO, "10", "--engine", "pprof"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_no_rust_advice(&stdout, &stderr);
    let stem = only_capture(cwd.path(), DEMO_GO, "perf-");
    let (_, top) = top3(&stem);
    // Go's profile keeps inlined frames: hashChain's loop is mostly main.mix, inlined
    // into it, so the hot code shows as main.mix (under main.hashChain) or sortChunk.
    assert!(
        top.iter()
            .any(|f| ["main.hashChain", "main.mix", "main.sortChunk"].contains(&f.as_str())),
        "no hot function in the top 3: {top:?}"
    );
    let folded = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    assert!(
        folded.contains("main.hashChain;main.mix"),
        "main.mix is named as inlined into main.hashChain"
    );
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "pprof");
    assert_eq!(manifest["kind"], "cpu");
    assert!(with_ext(&stem, "pb.gz").is_file());
    assert!(with_ext(&stem, "svg").is_file());
}

#[test]
fn a_go_target_without_a_pprof_endpoint_is_told_how_to_enable_it() {
    let test = "a_go_target_without_a_pprof_endpoint_is_told_how_to_enable_it";
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let image = docker_ok(&["inspect", "-f", "{{.Config.Image}}", DEMO_GO]);
    let name = unique("devprof-go2-nopprof");
    let _guard = run_container(
        &name,
        &["-e", "DEMO_PPROF_ADDR=off", "-e", "DEMO_ALLOC_MAX_MB=0"],
        &image,
        &[],
    );
    let cwd = workdir();
    for args in [
        vec!["cpu", name.as_str(), "2", "--engine", "pprof"],
        vec!["heap", name.as_str()],
    ] {
        let out = devprof(cwd.path())
            .args(&args)
            .assert()
            .failure()
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {stderr}");
        for needle in [
            "net/http/pprof",
            "--pprof.enabled",
            "--pprof",
            "--pprof-url",
        ] {
            assert!(
                stderr.contains(needle),
                "{args:?}: no {needle} in: {stderr}"
            );
        }
    }
    // A named endpoint that does not answer is the same failure.
    let out = devprof(cwd.path())
        .args(["heap", &name, "--pprof-url", "http://127.0.0.1:6060"])
        .assert()
        .failure()
        .get_output()
        .clone();
    assert_eq!(out.status.code(), Some(5));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nothing answers at http://127.0.0.1:6060")
    );
    // Nothing half-written, and no fetcher left beside the container.
    assert!(
        files_under(&cwd.path().join("profiling")).is_empty(),
        "{:?}",
        files_under(&cwd.path().join("profiling"))
    );
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &name]);
    assert!(sidecars_of_id(&id).is_empty(), "{:?}", sidecars_of_id(&id));
}

/// `devprof cpu demo-go 10 --inline`: the stripped binary's frames carry their place
/// (`main.hashChain (main.go:84)`) from .gopclntab, and main.mix, which the compiler
/// inlines into main.hashChain, is a frame of its own under it, marked inlined.
#[test]
fn cpu_inline_gives_stripped_go_frames_places_and_inlined_calls() {
    let test = "cpu_inline_gives_stripped_go_frames_places_and_inlined_calls";
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_GO, "10", "--inline"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_GO, "perf-");
    let (folded, top) = top3(&stem);
    let placed =
        regex::Regex::new(r"^main\.[A-Za-z0-9_.]+ \(main\.go:[1-9][0-9]*\)(_\[i\])?$").unwrap();
    assert!(
        top.iter().any(|f| placed.is_match(f)),
        "a main.* frame with its place in the top 3: {top:?}"
    );
    let inlined = regex::Regex::new(
        r";main\.hashChain \(main\.go:[0-9]+\);main\.mix \(main\.go:[0-9]+\)_\[i\](;|$)",
    )
    .unwrap();
    let under: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| inlined.is_match(s))
        .map(|(_, n)| n)
        .sum();
    assert!(
        under * 10 >= folded.total(),
        "main.mix inlined under main.hashChain in {under} of {} samples",
        folded.total()
    );
    // Go names keep being recognized with their places.
    let (named, total) = go_named_share(&folded);
    assert!(
        named * 10 >= total * 9,
        "{named} of {total} samples carry a Go name"
    );
}
