//! The capture driver's promise, step by step, against the real engine: a failure at any
//! step (a debug build fails where `DEVPROF_TEST_FAULT` says: locate, place, workdir,
//! window, analysis) leaves no workdir, no recorder and no sidecar behind, writes nothing
//! to the store before the recording is home, and keeps the recording once it is. Every
//! container here is the test's own, made from the demo node image.

mod common;

use common::*;
use std::path::Path;

const STEPS: [&str; 5] = ["locate", "place", "workdir", "window", "analysis"];

/// A demo node with demo-seq's rights (compose/demo.yml), busy hashing.
fn start_node(prefix: &str) -> ContainerGuard {
    let name = unique(&format!("devprof-test-lifecycle-{prefix}"));
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["--cap-add", "SYSLOG", "-e", "DEMO_WORKLOADS=hash_chain:60"]);
    let guard = run_container(&name, &args, &demo_image(), &[]);
    wait_for_cpu(&name, "demo-node", 0.2);
    guard
}

/// What the container holds of a capture after it ended: workdirs and perf processes.
fn left_in(container: &str) -> (String, Vec<String>) {
    let workdirs = docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        "ls -d /tmp/devprof.* 2>/dev/null || true",
    ]);
    let processes = container_processes(container);
    let perf: Vec<String> = perf_records(&processes)
        .into_iter()
        .map(str::to_string)
        .collect();
    (workdirs, perf)
}

/// Runs `args` with a failure injected at `step` and checks what it leaves.
fn fails_cleanly_at(container: &str, id: &str, step: &str, args: &[&str], kind: &str) {
    let cwd = workdir();
    let out = devprof(cwd.path())
        .env("DEVPROF_TEST_FAULT", step)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("{} at {step}", args.join(" "));
    assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
    assert!(
        stderr.contains(&format!("a failure injected at the {step} step")),
        "{what}: {stderr}"
    );
    let (workdirs, perf) = left_in(container);
    assert!(workdirs.is_empty(), "{what}: left {workdirs}");
    assert!(perf.is_empty(), "{what}: perf still runs: {perf:?}");
    assert!(
        sidecars_of_id(id).is_empty(),
        "{what}: sidecar left: {:?}",
        sidecars_of_id(id)
    );
    let files = files_under(cwd.path());
    if step == "analysis" {
        // The recording is home: it stays, listed in a manifest that says how to
        // analyse it again.
        let stem = only_capture(cwd.path(), container, kind);
        assert!(with_ext(&stem, "data").is_file(), "{what}: {files:?}");
        let manifest = read_manifest(&stem);
        let notes = manifest["notes"].to_string();
        assert!(notes.contains("re-analyse it with"), "{what}: {notes}");
        assert!(stderr.contains("the recording is kept"), "{what}: {stderr}");
    } else {
        assert!(
            files.iter().all(|f| is_symbol_cache(f)),
            "{what}: files before the recording was home: {files:?}"
        );
    }
}

/// The store's symbol cache (kept across captures, not a capture's file).
fn is_symbol_cache(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == ".symbols")
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_cpu_capture_that_fails_at_any_step_leaves_nothing_behind_in_exec_and_sidecar_mode() {
    if !devnet_ready(
        "a_cpu_capture_that_fails_at_any_step_leaves_nothing_behind_in_exec_and_sidecar_mode",
    ) {
        return;
    }
    let node = start_node("cpu");
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &node.0]);
    for mode in ["exec", "sidecar"] {
        for step in STEPS {
            let args = ["cpu", node.0.as_str(), "2", "--mode", mode];
            fails_cleanly_at(&node.0, &id, step, &args, "perf-");
        }
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn an_offcpu_capture_that_fails_at_any_step_leaves_nothing_behind() {
    if !devnet_ready("an_offcpu_capture_that_fails_at_any_step_leaves_nothing_behind") {
        return;
    }
    let node = start_node("offcpu");
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &node.0]);
    for step in STEPS {
        let args = [
            "offcpu",
            node.0.as_str(),
            "2",
            "--config",
            "contextswitches",
        ];
        fails_cleanly_at(&node.0, &id, step, &args, "offcpu-");
    }
}
