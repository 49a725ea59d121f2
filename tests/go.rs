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

/// `devprof ARGS` in `cwd`, which must succeed without Rust advice: the capture's stem
/// (file names starting with `prefix`), its manifest, stdout and stderr.
fn go_capture(
    cwd: &Path,
    args: &[&str],
    prefix: &str,
) -> (std::path::PathBuf, serde_json::Value, String, String) {
    let out = devprof(cwd)
        .args(args)
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_no_rust_advice(&stdout, &stderr);
    let stem = only_capture(cwd, DEMO_GO, prefix);
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["runtime"], "go", "{manifest}");
    if args.windows(2).any(|w| w == ["--mode", "sidecar"]) {
        assert!(
            manifest["capture_mode"]
                .as_str()
                .is_some_and(|m| m.starts_with("sidecar")),
            "{manifest}"
        );
    }
    (stem, manifest, stdout, stderr)
}

/// `devprof cpu demo-go 10 --mode MODE`: Go names on >=90% of samples, both hot
/// functions in the top 3, the runtime and its version recorded, no Rust advice.
fn cpu_names_go(test: &str, mode: &str) {
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let (stem, manifest, stdout, stderr) =
        go_capture(cwd.path(), &["cpu", DEMO_GO, "10", "--mode", mode], "perf-");
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
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_names_a_stripped_go_binary_from_its_pclntab() {
    cpu_names_go("cpu_names_a_stripped_go_binary_from_its_pclntab", "exec");
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_names_a_stripped_go_binary_from_a_sidecar() {
    cpu_names_go("cpu_names_a_stripped_go_binary_from_a_sidecar", "sidecar");
}

#[test]
#[ignore = "needs the demo devnet"]
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
#[ignore = "needs the demo devnet"]
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

/// A container of demo-go's image of its own (`args` for `docker run`), removed when the
/// guard drops.
fn demo_go_copy(prefix: &str, args: &[&str]) -> (String, ContainerGuard) {
    let image = docker_ok(&["inspect", "-f", "{{.Config.Image}}", DEMO_GO]);
    let name = unique(prefix);
    let guard = run_container(&name, args, &image, &[]);
    (name, guard)
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_go_target_without_a_pprof_endpoint_is_told_how_to_enable_it() {
    let test = "a_go_target_without_a_pprof_endpoint_is_told_how_to_enable_it";
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let (name, _guard) = demo_go_copy(
        "devprof-go2-nopprof",
        &["-e", "DEMO_PPROF_ADDR=off", "-e", "DEMO_ALLOC_MAX_MB=0"],
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

/// The weight of folded `lines` (`stack count`, the root first, then `skip` more
/// non-frame parts) whose frames carry a Go name, the total weight, and the stacks whose
/// frames are all unnamed (`[demo-go]`, `[unknown]`): none may be.
fn go_named_weight(lines: &str, skip: usize) -> (u64, u64, Vec<String>) {
    let (mut named, mut total, mut unnamed) = (0u64, 0u64, Vec::new());
    for line in lines.lines() {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let weight: u64 = weight.parse().unwrap();
        let frames: Vec<&str> = stack.split(';').skip(1 + skip).collect();
        total += weight;
        if frames.iter().any(|f| is_go_name(f)) {
            named += weight;
        }
        if !frames.is_empty()
            && frames
                .iter()
                .all(|f| *f == "[demo-go]" || *f == "[unknown]")
        {
            unnamed.push(line.to_string());
        }
    }
    (named, total, unnamed)
}

/// `devprof offcpu demo-go 10 --config contextswitches --mode MODE`: the Go runtime parks
/// its threads in runtime.futex/usleep/epollwait under schedule, sysmon and netpoll. At
/// least 90% of the off-CPU time and of the sched_switch events sit under Go names, and
/// no stack is left with the Go binary's frames unnamed only.
fn offcpu_names_go(test: &str, mode: &str) {
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let args = [
        "offcpu",
        DEMO_GO,
        "10",
        "--config",
        "contextswitches",
        "--mode",
        mode,
        "--full",
    ];
    let (stem, manifest, _, _) = go_capture(cwd.path(), &args, "offcpu-");
    assert_eq!(manifest["offcpu"]["mode"], "full");

    let off = std::fs::read_to_string(with_ext(&stem, "offcpu.folded")).unwrap();
    let (named, total, unnamed) = go_named_weight(&off, 0);
    assert!(total > 1_000_000, "{total} us off-CPU in 10 s");
    assert!(
        named * 10 >= total * 9,
        "{named} of {total} us off-CPU under a Go name (mode {mode}):\n{off}"
    );
    assert!(unnamed.is_empty(), "unnamed Go stacks: {unnamed:?}");

    // The event-count flamegraph (`event;comm;frames`, kernel frames included).
    let events = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    let switches: String = events
        .lines()
        .filter(|l| l.starts_with("sched:sched_switch;"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (named, total, _) = go_named_weight(&switches, 1);
    assert!(total > 100, "{total} sched_switch events");
    assert!(
        named * 10 >= total * 9,
        "{named} of {total} sched_switch events under a Go name (mode {mode})"
    );
    let summary = std::fs::read_to_string(with_ext(&stem, "txt")).unwrap();
    assert!(
        summary.contains("runtime."),
        "the summary's top stacks name Go functions:\n{summary}"
    );
    if mode == "exec" {
        // Fast mode reads perf.data without stacks: threads only, nothing to leave unnamed.
        let cwd = workdir();
        let args = [
            "offcpu",
            DEMO_GO,
            "3",
            "--config",
            "contextswitches",
            "--fast",
        ];
        let (stem, manifest, _, _) = go_capture(cwd.path(), &args, "offcpu-");
        assert_eq!(manifest["offcpu"]["mode"], "fast");
        let off = std::fs::read_to_string(with_ext(&stem, "offcpu.folded")).unwrap();
        assert!(!off.is_empty());
        for line in off.lines() {
            assert!(line.starts_with("demo-go "), "a fast-mode stack: {line}");
        }
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn offcpu_names_a_stripped_go_binary_from_its_pclntab() {
    offcpu_names_go("offcpu_names_a_stripped_go_binary_from_its_pclntab", "exec");
}

#[test]
#[ignore = "needs the demo devnet"]
fn offcpu_names_a_stripped_go_binary_from_a_sidecar() {
    offcpu_names_go(
        "offcpu_names_a_stripped_go_binary_from_a_sidecar",
        "sidecar",
    );
}

/// Go was told by grep in the container: without grep a Go target was taken as native
/// and its frames left unnamed. A container of demo-go's image with grep removed.
#[test]
#[ignore = "needs the demo devnet"]
fn a_go_target_whose_container_has_no_grep_is_not_taken_as_native() {
    let test = "a_go_target_whose_container_has_no_grep_is_not_taken_as_native";
    if !demo_container_ready(test, DEMO_GO) {
        return;
    }
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["-e", "DEMO_ALLOC_MAX_MB=0"]);
    let (name, _guard) = demo_go_copy("devprof-go-nogrep", &args);
    docker_ok(&[
        "exec",
        "-u",
        "root",
        &name,
        "rm",
        "-f",
        "/usr/bin/grep",
        "/bin/grep",
    ]);
    let gone = docker(&["exec", &name, "sh", "-c", "command -v grep"]);
    assert!(!gone.status.success(), "grep is still in {name}");

    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", &name, "5", "--mode", "exec"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stem = only_capture(cwd.path(), &name, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(
        manifest["runtime"],
        "go",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(manifest["runtime_version"]
        .as_str()
        .is_some_and(|v| v.starts_with("go1.")));
    let (folded, _) = top3(&stem);
    let (named, total) = go_named_share(&folded);
    assert!(total > 50, "{total} samples");
    assert!(
        named * 10 >= total * 9,
        "{named} of {total} samples carry a Go name without grep in the container"
    );
}

/// The doctor takes demo-go for what it is: Go, whose stripped binary is named from
/// .gopclntab; nothing blocks profiling it, and no Rust remedy is offered.
#[test]
#[ignore = "needs the demo devnet"]
fn doctor_of_a_stripped_go_target_blocks_nothing() {
    if !demo_container_ready("doctor_of_a_stripped_go_target_blocks_nothing", DEMO_GO) {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["doctor", DEMO_GO])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("runtime") && stdout.contains("Go:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("nothing blocks profiling demo-go"),
        "{stdout}"
    );
    // "debug info" is a check's title here, not advice.
    for advice in ["Cargo", "force-frame-pointers", "-C "] {
        assert!(!stdout.contains(advice), "Rust advice for Go: {stdout}");
    }
}

/// `devprof cpu demo-go 10 --inline`: the stripped binary's frames carry their place
/// (`main.hashChain (main.go:84)`) from .gopclntab, and main.mix, which the compiler
/// inlines into main.hashChain, is a frame of its own under it, marked inlined.
#[test]
#[ignore = "needs the demo devnet"]
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
