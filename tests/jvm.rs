//! JVM targets end to end, against the demo devnet's `demo-jvm` (Debian's OpenJDK 17 as
//! user `app`, async-profiler in /opt/async-profiler, JAVA_TOOL_OPTIONS with
//! -XX:+PreserveFramePointer) and throw-away containers from its image: perf with the
//! JVM's perf map in exec and sidecar modes, async-profiler for CPU and wall-clock, and the
//! errors for what cannot work.

mod common;

use common::*;
use devprof::profile::folded::Folded;
use devprof::profile::top;
use predicates::prelude::*;
use std::path::Path;
use std::time::Duration;

const DEMO_JVM: &str = "demo-jvm";
/// The CPU-bound method (DemoJvm.java).
const HOT: &str = "DemoJvm.hashChain";
/// The method that only waits.
const SLEEPY: &str = "DemoJvm.sleepyWait";

fn jvm_image() -> String {
    std::env::var("DEVPROF_DEMO_JVM_IMAGE").unwrap_or_else(|_| "devprof-demo-jvm:latest".into())
}

/// Whether the devnet and its demo-jvm are up (see `devnet_ready`).
fn jvm_ready(test: &str) -> bool {
    if !devnet_ready(test) {
        return false;
    }
    let up = docker(&["inspect", "-f", "{{.State.Running}}", DEMO_JVM]);
    let running = up.status.success() && String::from_utf8_lossy(&up.stdout).trim() == "true";
    assert!(
        running,
        "{test}: the demo devnet is up but {DEMO_JVM} is not running"
    );
    true
}

fn folded_of(stem: &Path) -> Folded {
    Folded::from_folded_text(&std::fs::read_to_string(with_ext(stem, "folded")).unwrap())
}

/// The three heaviest functions by self samples, through devprof's own ranking.
fn top3(folded: &Folded) -> Vec<String> {
    top::by_self(folded, 3)
        .into_iter()
        .map(|row| row.name)
        .collect()
}

/// The share of samples whose leaf perf could not name: `[unknown]`, or a bare
/// `[perf-<pid>.map]` (a JIT address the perf map does not cover).
fn unnamed_leaf_share(folded: &Folded) -> f64 {
    let unnamed: u64 = folded
        .stacks
        .iter()
        .filter(|(stack, _)| {
            let leaf = stack.rsplit(';').next().unwrap_or("");
            leaf == "[unknown]" || (leaf.starts_with("[perf-") && leaf.ends_with(".map]"))
        })
        .map(|(_, c)| c)
        .sum();
    unnamed as f64 / folded.total().max(1) as f64
}

/// A frame named after a Java method: `Class.method` or `pkg/Class.method`, not a native
/// (`A::b`), a bracketed stand-in or a library.
fn is_java_frame(frame: &str) -> bool {
    frame.contains('.')
        && !frame.starts_with('[')
        && !frame.contains("::")
        && !frame.contains(".so")
        && !frame.ends_with("_[k]")
}

/// The share of samples with at least one Java-named frame below the thread root.
fn java_named_share(folded: &Folded) -> f64 {
    let named: u64 = folded
        .stacks
        .iter()
        .filter(|(stack, _)| stack.split(';').skip(1).any(is_java_frame))
        .map(|(_, c)| c)
        .sum();
    named as f64 / folded.total().max(1) as f64
}

/// A capture with `--engine perf` in `mode`: Java names from the perf map.
fn perf_map_capture(test: &str, mode: &str) {
    if !jvm_ready(test) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_JVM, "10", "--engine", "perf", "--mode", mode])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_JVM, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "perf");
    assert_eq!(manifest["runtime"], "jvm");
    assert!(
        manifest["notes"].to_string().contains("Compiler.perfmap"),
        "{}",
        manifest["notes"]
    );
    // The native fold names the JIT code from the map it read out of the container (from
    // a sidecar: under the target's /proc/PID/root, the binaries copied out of the target
    // container itself), and keeps that map beside the capture for a later fold.
    assert_eq!(
        manifest["fold_path"], "native",
        "{mode}: notes: {}",
        manifest["notes"]
    );
    let map = with_ext(&stem, "perf-map");
    let map_text = std::fs::read_to_string(&map).unwrap_or_default();
    assert!(
        map_text.lines().count() >= 100,
        "{} holds {} lines",
        map.display(),
        map_text.lines().count()
    );
    assert!(
        manifest["files"].to_string().contains(".perf-map"),
        "{}",
        manifest["files"]
    );
    let folded = folded_of(&stem);
    assert!(folded.total() >= 200, "only {} samples", folded.total());
    let unnamed = unnamed_leaf_share(&folded);
    assert!(
        unnamed <= 0.10,
        "{:.1}% of samples end unnamed; top: {:?}",
        unnamed * 100.0,
        top::by_self(&folded, 8)
    );
    let top = top3(&folded);
    assert!(
        top.iter().any(|f| f.contains(HOT)),
        "{HOT} not in the top 3: {top:?}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn perf_names_jit_frames_through_the_perf_map_in_exec_mode() {
    perf_map_capture(
        "perf_names_jit_frames_through_the_perf_map_in_exec_mode",
        "exec",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn perf_names_jit_frames_through_the_perf_map_from_a_sidecar() {
    perf_map_capture(
        "perf_names_jit_frames_through_the_perf_map_from_a_sidecar",
        "sidecar",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn auto_records_a_jvm_with_async_profiler_and_java_names() {
    if !jvm_ready("auto_records_a_jvm_with_async_profiler_and_java_names") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_JVM, "10"])
        .assert()
        .success()
        .stdout(predicate::str::contains(HOT));
    let stem = only_capture(cwd.path(), DEMO_JVM, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "asprof");
    assert_eq!(manifest["runtime"], "jvm");
    assert_eq!(manifest["runtime_version"], "Java 17");
    let event = manifest["events"][0].as_str().unwrap_or("");
    assert!(["cpu-clock", "ctimer"].contains(&event), "event {event}");
    let folded = folded_of(&stem);
    assert!(folded.total() >= 100, "only {} samples", folded.total());
    let java = java_named_share(&folded);
    assert!(
        java >= 0.90,
        "{:.1}% of samples carry a Java frame; top: {:?}",
        java * 100.0,
        top::by_self(&folded, 8)
    );
    let top = top3(&folded);
    assert!(
        top.iter().any(|f| f.contains(HOT)),
        "{HOT} not in the top 3: {top:?}"
    );
    // The store's own commands read it like any capture.
    devprof(cwd.path())
        .args(["top", DEMO_JVM, "-n", "5"])
        .assert()
        .success()
        .stdout(predicate::str::contains(HOT));
    // No agent is left sampling in the JVM.
    let status = docker_ok(&[
        "exec",
        "-u",
        "app",
        DEMO_JVM,
        "sh",
        "-c",
        "/opt/async-profiler/bin/asprof status $(pgrep -o java)",
    ]);
    assert!(!status.contains("is running"), "{status}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn wall_clock_shows_the_waiting_method() {
    if !jvm_ready("wall_clock_shows_the_waiting_method") {
        return;
    }
    // A private JVM: one async-profiler session per JVM at a time, and the auto test
    // records demo-jvm with it.
    let jvm = own_jvm("devprof-test-jvm-wall", "-XX:+PreserveFramePointer");
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &jvm.0, "5", "--wall", "--asprof-html"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), &jvm.0, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["engine"], "asprof");
    assert_eq!(manifest["events"][0], "wall");
    // async-profiler's own flamegraph of the same recording, listed with the capture.
    let html = std::fs::read_to_string(with_ext(&stem, "asprof.html")).unwrap();
    assert!(
        html.contains("sleepyWait"),
        "the HTML flamegraph lacks sleepyWait"
    );
    assert!(
        manifest["files"].to_string().contains(".asprof.html"),
        "{}",
        manifest["files"]
    );
    assert_eq!(devprof_leftovers(&jvm.0), "");
    let folded = folded_of(&stem);
    let sleepy: u64 = folded
        .stacks
        .iter()
        .filter(|(s, _)| s.contains(SLEEPY))
        .map(|(_, c)| c)
        .sum();
    // Wall-clock samples spread over every thread (about twenty in this JVM); the parked
    // one must hold its share.
    assert!(
        sleepy * 50 >= folded.total(),
        "{SLEEPY}: {sleepy} of {} wall-clock samples",
        folded.total()
    );
}

#[test]
fn a_bad_asprof_directory_is_refused_before_any_capture() {
    let cwd = workdir();
    let fake = cwd.path().join("not-a-release");
    std::fs::create_dir_all(fake.join("bin")).unwrap();
    std::fs::write(fake.join("bin/asprof"), "#!/bin/sh\n").unwrap();
    devprof(cwd.path())
        .args(["cpu", DEMO_JVM, "5", "--asprof"])
        .arg(&fake)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("lib/libasyncProfiler.so"));
    assert!(!cwd.path().join("profiling").exists());
}

#[test]
#[ignore = "needs the demo devnet"]
fn the_asprof_engine_refuses_a_native_process() {
    if !devnet_ready("the_asprof_engine_refuses_a_native_process") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_SEQ, "5", "--engine", "asprof"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("records JVMs only").and(predicate::str::contains("native")),
        );
    assert!(!cwd.path().join("profiling").exists());
}

/// A throw-away JVM from the demo image with `java_options` in JAVA_TOOL_OPTIONS.
fn own_jvm(prefix: &str, java_options: &str) -> ContainerGuard {
    let name = unique(prefix);
    let env = format!("JAVA_TOOL_OPTIONS={java_options}");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["--init", "-e", &env, "-e", "DEMO_JVM_HASH_DUTY=30"]);
    let guard = run_container(&name, &args, &jvm_image(), &[]);
    // Let the JVM start and compile its hot loops.
    wait_for_cpu(&name, "java", 2.0);
    guard
}

/// devprof's leftovers in a container's /tmp.
fn devprof_leftovers(container: &str) -> String {
    docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        "ls -a /tmp | grep devprof || true",
    ])
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_jvm_that_refuses_attach_is_an_error_for_asprof_and_a_warning_for_perf() {
    if !jvm_ready("a_jvm_that_refuses_attach_is_an_error_for_asprof_and_a_warning_for_perf") {
        return;
    }
    let jvm = own_jvm(
        "devprof-test-jvm-noattach",
        "-XX:+PreserveFramePointer -XX:+DisableAttachMechanism",
    );
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &jvm.0, "3", "--engine", "asprof"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("-XX:+DisableAttachMechanism"));
    assert_eq!(devprof_leftovers(&jvm.0), "");
    devprof(cwd.path())
        .args(["cpu", &jvm.0, "3", "--engine", "perf", "--mode", "exec"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("-XX:+DisableAttachMechanism")
                .and(predicate::str::contains("stay unnamed")),
        );
    assert_eq!(devprof_leftovers(&jvm.0), "");
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_jvm_without_preserve_frame_pointer_is_warned_about_once() {
    if !jvm_ready("a_jvm_without_preserve_frame_pointer_is_warned_about_once") {
        return;
    }
    let jvm = own_jvm("devprof-test-jvm-nofp", "-Xss1m");
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["cpu", &jvm.0, "3", "--engine", "perf", "--mode", "exec"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("without -XX:+PreserveFramePointer").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"));
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_host_release_is_copied_in_used_and_removed() {
    if !jvm_ready("a_host_release_is_copied_in_used_and_removed") {
        return;
    }
    // A private JVM: the agent stays loaded in a JVM for good, so the shared one keeps
    // only its own.
    let jvm = own_jvm("devprof-test-jvm-hostasprof", "-XX:+PreserveFramePointer");
    let host = workdir();
    docker_ok(&[
        "cp",
        &format!("{}:/opt/async-profiler", jvm.0),
        &host.path().display().to_string(),
    ]);
    let release = host.path().join("async-profiler");
    let cwd = workdir();
    for _ in 0..2 {
        devprof(cwd.path())
            .args(["cpu", &jvm.0, "3", "--engine", "asprof", "--asprof"])
            .arg(&release)
            .assert()
            .success();
        assert_eq!(devprof_leftovers(&jvm.0), "");
    }
    let dir = cwd.path().join("profiling").join(&jvm.0);
    let manifests: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(manifests.len(), 2);
    for m in manifests {
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(m.path()).unwrap()).unwrap();
        assert!(manifest["perf"]["path"]
            .as_str()
            .unwrap()
            .starts_with("/tmp/devprof.asprof-"));
        assert!(manifest["sample_count"].as_u64().unwrap() > 0);
    }
    // One agent library in the JVM, however many captures.
    let maps = docker_ok(&[
        "exec",
        &jvm.0,
        "sh",
        "-c",
        "grep libasyncProfiler /proc/$(pgrep -o java)/maps | awk '{print $6}' | sort -u",
    ]);
    assert_eq!(maps.lines().count(), 1, "{maps}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_reports_what_a_jvm_needs() {
    if !jvm_ready("doctor_reports_what_a_jvm_needs") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["doctor", DEMO_JVM])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("JVM user")
                .and(predicate::str::contains("app (1000)"))
                .and(predicate::str::contains("attach allowed"))
                .and(predicate::str::contains("found at /opt/async-profiler"))
                .and(predicate::str::contains("PreserveFramePointer"))
                .and(predicate::str::contains("on: perf walks whole Java stacks"))
                .and(predicate::str::contains("perf map")),
        );
    // Without the flags and with attach disabled: the failure names the flag.
    let jvm = own_jvm("devprof-test-jvm-doctor", "-XX:+DisableAttachMechanism");
    devprof(cwd.path())
        .args(["doctor", &jvm.0])
        .assert()
        .code(8)
        .stdout(predicate::str::contains("-XX:+DisableAttachMechanism").and(
            predicate::str::contains("off: perf's Java stacks come out cut short"),
        ));
}

#[test]
#[ignore = "needs the demo devnet"]
fn sigint_stops_async_profiler_early_and_keeps_the_profile() {
    if !jvm_ready("sigint_stops_async_profiler_early_and_keeps_the_profile") {
        return;
    }
    let jvm = own_jvm("devprof-test-jvm-sigint", "-XX:+PreserveFramePointer");
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &jvm.0, "30"]);
    capture.wait_for_window();
    wait_for_cpu(&jvm.0, "java", 1.0);
    capture.interrupt();
    let sent = std::time::Instant::now();
    while capture.child.try_wait().unwrap().is_none() {
        if sent.elapsed() > Duration::from_secs(30) {
            let _ = capture.child.kill();
            panic!("devprof still running 30 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = capture.wait_with_output();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stem = only_capture(cwd.path(), &jvm.0, "perf-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["interrupted"], true);
    assert_eq!(manifest["engine"], "asprof");
    assert!(manifest["duration_recorded_s"].as_f64().unwrap() < 20.0);
    assert!(folded_of(&stem).stacks.iter().any(|(s, _)| s.contains(HOT)));
    // The agent stopped sampling, and nothing of devprof stays in the container.
    let status = docker_ok(&[
        "exec",
        &jvm.0,
        "sh",
        "-c",
        "/opt/async-profiler/bin/asprof status $(pgrep -o java)",
    ]);
    assert!(status.contains("not active"), "{status}");
    assert_eq!(devprof_leftovers(&jvm.0), "");
}

#[test]
#[ignore = "needs the demo devnet"]
fn without_async_profiler_auto_falls_back_to_perf_and_asprof_says_how_to_get_it() {
    if !jvm_ready("without_async_profiler_auto_falls_back_to_perf_and_asprof_says_how_to_get_it") {
        return;
    }
    let jvm = own_jvm("devprof-test-jvm-noasprof", "-XX:+PreserveFramePointer");
    docker_ok(&[
        "exec",
        "-u",
        "0",
        &jvm.0,
        "rm",
        "-rf",
        "/opt/async-profiler",
    ]);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &jvm.0, "3", "--engine", "asprof"])
        .assert()
        .code(5)
        .stderr(
            predicate::str::contains("async-profiler is not in container")
                .and(predicate::str::contains("--asprof DIR")),
        );
    assert!(!cwd.path().join("profiling").exists());
    devprof(cwd.path())
        .args(["cpu", &jvm.0, "3", "--mode", "exec"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), &jvm.0, "perf-");
    assert_eq!(read_manifest(&stem)["engine"], "perf");
    assert_eq!(devprof_leftovers(&jvm.0), "");
}
