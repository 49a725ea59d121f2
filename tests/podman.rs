//! devprof against Podman's Docker-compatible API: the rootful service and demo
//! containers scripts/podman-up.sh starts beside dockerd. The few that CI runs; the
//! larger set of existing tests runs against Podman in scripts/podman-matrix.sh.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const SOCKET: &str = "unix:///run/devprof-podman/podman.sock";
/// podman-up.sh's demo node on Podman.
const POD_SEQ: &str = "pod-demo-seq";
const NEEDS: &str = "the Podman service or pod-demo-seq is not available; run scripts/podman-up.sh";

/// Fails the test (never passes it) when Podman's endpoint or its demo node is missing.
fn podman_ready(test: &str) {
    let running = Command::new("docker")
        .args([
            "--host",
            SOCKET,
            "inspect",
            "-f",
            "{{.State.Running}}",
            POD_SEQ,
        ])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
        .unwrap_or(false);
    if !running {
        not_run(test, NEEDS);
    }
}

/// devprof talking to Podman.
fn devprof_on_podman(cwd: &Path) -> assert_cmd::Command {
    let mut cmd = devprof(cwd);
    cmd.env("DOCKER_HOST", SOCKET).env_remove("DOCKER_CONTEXT");
    cmd
}

fn succeeded(out: &std::process::Output) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

/// Sidecars left on Podman for the demo node (their label holds its id).
fn podman_sidecars() -> Vec<String> {
    let out = Command::new("docker")
        .args([
            "--host",
            SOCKET,
            "ps",
            "-a",
            "--filter",
            "label=devprof.sidecar",
            "--format",
            "{{.Names}}",
        ])
        .output()
        .expect("docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
#[ignore = "needs Podman (scripts/podman-up.sh)"]
fn podman_cpu_in_exec_mode_records_the_demo_node() {
    podman_ready("podman_cpu_in_exec_mode_records_the_demo_node");
    let cwd = workdir();
    let out = devprof_on_podman(cwd.path())
        .args(["cpu", POD_SEQ, "3", "--mode", "exec"])
        .output()
        .unwrap();
    succeeded(&out);
    let stem = only_capture(cwd.path(), POD_SEQ, "perf-");
    let manifest = read_manifest(&stem);
    assert!(manifest["sample_count"].as_u64().unwrap() > 0, "{manifest}");
    let mode = manifest["capture_mode"].as_str().unwrap_or_default();
    assert!(mode.starts_with("exec"), "{mode}");
    let folded = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    assert!(folded.contains("hash_chain"), "no demo function named");
}

#[test]
#[ignore = "needs Podman (scripts/podman-up.sh)"]
fn podman_cpu_in_a_sidecar_sets_its_own_limits_and_leaves_nothing() {
    podman_ready("podman_cpu_in_a_sidecar_sets_its_own_limits_and_leaves_nothing");
    let cwd = workdir();
    let out = devprof_on_podman(cwd.path())
        .args(["cpu", POD_SEQ, "3", "--mode", "sidecar"])
        .output()
        .unwrap();
    let text = succeeded(&out);
    // Podman's default limits would have failed every step of the ladder.
    assert!(!text.contains("rlimit"), "{text}");
    let stem = only_capture(cwd.path(), POD_SEQ, "perf-");
    let manifest = read_manifest(&stem);
    assert!(manifest["sample_count"].as_u64().unwrap() > 0, "{manifest}");
    let mode = manifest["capture_mode"].as_str().unwrap_or_default();
    assert!(mode.starts_with("sidecar"), "{mode}");
    let left: Vec<String> = podman_sidecars();
    assert!(left.is_empty(), "sidecars left on Podman: {left:?}");
}

#[test]
#[ignore = "needs Podman (scripts/podman-up.sh)"]
fn podman_offcpu_counts_its_events() {
    podman_ready("podman_offcpu_counts_its_events");
    let cwd = workdir();
    let out = devprof_on_podman(cwd.path())
        .args(["offcpu", POD_SEQ, "3"])
        .output()
        .unwrap();
    succeeded(&out);
    let stem = only_capture(cwd.path(), POD_SEQ, "offcpu-");
    let manifest = read_manifest(&stem);
    // The default config counts syscalls and block requests (off-CPU time in microseconds
    // comes with the context-switch config): the demo node's fsyncs and futex waits show.
    let total = manifest["offcpu"]["total_events"].as_u64();
    assert!(total.is_some_and(|n| n > 0), "{manifest}");
    let fsyncs = manifest["offcpu"]["counts"]["syscalls:sys_enter_fsync"].as_u64();
    assert!(fsyncs.is_some_and(|n| n > 0), "{manifest}");
}

#[test]
#[ignore = "needs Podman (scripts/podman-up.sh)"]
fn podman_doctor_names_the_endpoint_and_its_flavour() {
    podman_ready("podman_doctor_names_the_endpoint_and_its_flavour");
    let cwd = workdir();
    let out = devprof_on_podman(cwd.path())
        .args(["doctor", POD_SEQ])
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains(SOCKET), "{text}");
    assert!(text.contains("(Podman 4."), "{text}");
}
