//! Sidecar mode end to end: a demo node in a plain container (no perf, no added
//! capabilities, Docker's default seccomp profile) profiled without changing it.

mod common;

use common::*;
use predicates::prelude::*;
use std::time::{Duration, Instant};

fn plain_image() -> String {
    std::env::var("DEVPROF_DEMO_PLAIN_IMAGE")
        .unwrap_or_else(|_| "devprof-demo-plain:latest".to_string())
}

/// Names of the containers that carry devprof's sidecar label.
fn sidecars() -> Vec<String> {
    docker_ok(&[
        "ps",
        "-a",
        "--filter",
        "label=devprof.sidecar",
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// Sidecars started for one target (their label holds the target's id).
fn sidecars_of(container: &str) -> Vec<String> {
    sidecars_of_id(&docker_ok(&["inspect", "-f", "{{.Id}}", container]))
}

fn start_plain(prefix: &str) -> ContainerGuard {
    let name = unique(prefix);
    let guard = run_container(
        &name,
        &["-e", "DEMO_WORKLOADS=hash_chain:90"],
        &plain_image(),
        &[],
    );
    // Let the node start its workload threads before the capture.
    wait_for_cpu(&name, "demo-node", 0.2);
    guard
}

#[test]
#[ignore = "needs the demo devnet"]
fn plain_container_is_profiled_from_a_sidecar_with_symbols_and_no_leftover() {
    if !devnet_ready("plain_container_is_profiled_from_a_sidecar_with_symbols_and_no_leftover") {
        return;
    }
    let plain = start_plain("devprof-test-plain");
    let cwd = workdir();
    let cpu_before = node_cpu_seconds(&plain.0);
    let started = Instant::now();
    devprof(cwd.path())
        .args(["cpu", &plain.0, "5"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "profiling from a sidecar container",
        ))
        .stdout(predicate::str::contains("via sidecar"));
    let run_secs = started.elapsed().as_secs_f64();
    let cpu_used = node_cpu_seconds(&plain.0) - cpu_before;
    let stem = only_capture(cwd.path(), &plain.0, "perf-");
    let folded = devprof::profile::folded::Folded::from_folded_text(
        &std::fs::read_to_string(with_ext(&stem, "folded")).unwrap(),
    );
    assert_samples_follow_cpu_time(folded.total(), cpu_used, run_secs, 5.0);
    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(
        svg.contains("demo_node::workloads::hash_chain"),
        "hash_chain not symbolized through /proc/<pid>/root"
    );
    let manifest = read_manifest(&stem);
    let mode = manifest["capture_mode"].as_str().unwrap();
    assert!(
        mode.starts_with("sidecar") && mode.contains("cap_add"),
        "{mode}"
    );
    // Folded natively, the binaries copied out of the target container itself: perf script
    // in a sidecar without CAP_SYS_ADMIN cannot open them (Podman grants PERFMON, so its
    // sidecar has no SYS_ADMIN, and hash_chain went unnamed there).
    assert_eq!(manifest["fold_path"], "native", "{manifest}");
    assert!(
        sidecars_of(&plain.0).is_empty(),
        "sidecar left behind: {:?}",
        sidecars_of(&plain.0)
    );
    assert_eq!(workdirs_in(&plain.0), "", "a workdir left in the target");
    // The target itself was not changed: still no perf, no added capabilities.
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{.HostConfig.CapAdd}}", &plain.0]),
        "[]"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn exec_mode_on_a_container_without_perf_fails_and_writes_nothing() {
    if !devnet_ready("exec_mode_on_a_container_without_perf_fails_and_writes_nothing") {
        return;
    }
    let plain = start_plain("devprof-test-exec");
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &plain.0, "5", "--mode", "exec"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("perf is not installed"));
    assert!(files_under(cwd.path()).is_empty());
    assert!(sidecars_of(&plain.0).is_empty());
    assert_eq!(workdirs_in(&plain.0), "", "a workdir left in the target");
}

/// Regression (security finding 1 of round two): the profiler image was trusted by its tag,
/// which anything that can build on the engine may move (a `.env`'s DEVPROF_BUILD_TAG, a
/// compose file's `image:` with `build:`). Trust is by image ID: once the trusted tag is
/// moved to another working image (the profiler image plus one file), a sidecar capture
/// refuses it with the command that trusts it, starts nothing and writes nothing; trusted
/// again, it runs.
#[test]
#[ignore = "needs the demo devnet"]
fn a_sidecar_refuses_a_profiler_tag_moved_to_an_image_devprof_does_not_trust() {
    if !devnet_ready("a_sidecar_refuses_a_profiler_tag_moved_to_an_image_devprof_does_not_trust") {
        return;
    }
    let profiler = std::env::var("DEVPROF_PROFILER_IMAGE")
        .unwrap_or_else(|_| "devprof-profiler:latest".to_string());
    let tag = format!("devprof-test-trust:{}", std::process::id());
    docker_ok(&["tag", &profiler, &tag]);
    let _tag = ImageGuard(tag.clone());
    let plain = start_plain("devprof-test-trust");
    // A trust list of this test's own: the user's is not touched.
    let config = workdir();
    let with_list = |cmd: &mut assert_cmd::Command| {
        cmd.env("XDG_CONFIG_HOME", config.path());
    };
    let cwd = workdir();
    let capture = |cwd: &std::path::Path| {
        let mut cmd = devprof(cwd);
        with_list(&mut cmd);
        cmd.args([
            "cpu",
            &plain.0,
            "2",
            "--mode",
            "sidecar",
            "--profiler-image",
            &tag,
        ]);
        cmd
    };
    // Not yet trusted: refused, with both fixes.
    capture(cwd.path())
        .assert()
        .code(5)
        .stderr(predicate::str::contains("is not one devprof trusts"))
        .stderr(predicate::str::contains(format!("devprof trust {tag}")));
    let mut trust = devprof(cwd.path());
    with_list(&mut trust);
    trust
        .args(["trust", &tag])
        .assert()
        .success()
        .stdout(predicate::str::contains("trusted on unix://"));
    capture(cwd.path()).assert().success();

    // The tag moved to another image that works just as well.
    let _moved = build_image_from_text(
        &tag,
        &format!("FROM {profiler}\nRUN echo planted > /planted\n"),
    );
    let moved = workdir();
    capture(moved.path())
        .assert()
        .code(5)
        .stderr(predicate::str::contains("is not one devprof trusts"))
        .stderr(predicate::str::contains(format!("devprof trust {tag}")));
    assert!(files_under(moved.path()).is_empty());
    assert!(sidecars_of(&plain.0).is_empty());
    assert_eq!(workdirs_in(&plain.0), "", "a workdir left in the target");

    // Trusted by name once more, it is run.
    let mut trust = devprof(cwd.path());
    with_list(&mut trust);
    trust.args(["trust", &tag]).assert().success();
    capture(moved.path()).assert().success();
    let mut list = devprof(cwd.path());
    with_list(&mut list);
    list.args(["trust", "--list"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&tag));
}

#[test]
#[ignore = "needs the demo devnet"]
fn sigint_mid_sidecar_capture_leaves_no_container_and_keeps_the_artifacts() {
    if !devnet_ready("sigint_mid_sidecar_capture_leaves_no_container_and_keeps_the_artifacts") {
        return;
    }
    let plain = start_plain("devprof-test-sigint");
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &plain.0, "30", "--mode", "sidecar"]);
    capture.wait_for_window();
    assert!(
        !sidecars_of(&plain.0).is_empty(),
        "no sidecar runs the window"
    );
    wait_for_cpu(&plain.0, "demo-node", 1.0);
    capture.interrupt();
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = capture.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(30),
            "devprof still running 30 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = capture.wait_with_output();
    assert!(
        status.success(),
        "exit {status:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stem = only_capture(cwd.path(), &plain.0, "perf-");
    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(svg.trim_end().ends_with("</svg>") && svg.contains("hash_chain"));
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["interrupted"], true);
    assert!(
        sidecars_of(&plain.0).is_empty(),
        "sidecar left behind after SIGINT"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn clean_containers_removes_leftover_sidecars() {
    if !devnet_ready("clean_containers_removes_leftover_sidecars") {
        return;
    }
    // A leftover as a killed devprof would leave it: labelled, still running.
    let name = unique("devprof-test-leftover");
    let _guard = run_container(
        &name,
        &["--label", "devprof.sidecar=leftover-test"],
        &base_image(),
        &["sleep", "300"],
    );
    let cwd = workdir();
    devprof(cwd.path())
        .args(["clean", "--containers", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(name.as_str()));
    assert!(sidecars().contains(&name), "--dry-run removed it");
    devprof(cwd.path())
        .args(["clean", "--containers"])
        .assert()
        .success()
        .stdout(predicate::str::contains(name.as_str()));
    assert!(!sidecars().contains(&name), "leftover sidecar still there");
}

/// Regression: two sidecars for one target got the same name, so the second capture of
/// `profile --kinds cpu,offcpu` on a target without perf failed at every tier.
#[test]
#[ignore = "needs the demo devnet"]
fn two_sidecar_captures_of_one_target_at_once_both_record() {
    if !devnet_ready("two_sidecar_captures_of_one_target_at_once_both_record") {
        return;
    }
    let name = unique("devprof-test-two-sidecars");
    // Lock contention for the off-CPU capture's futex events.
    let plain = run_container(
        &name,
        &["-e", "DEMO_WORKLOADS=hash_chain:40,contend_lock:20"],
        &plain_image(),
        &[],
    );
    wait_for_cpu(&name, "demo-node", 0.2);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .env("DEVPROF_MODE", "sidecar")
        .args(["profile", &plain.0, "3", "--kinds", "cpu,offcpu:default"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stderr.contains("could not record at any privilege level"),
        "{stderr}"
    );
    only_capture(cwd.path(), &plain.0, "perf-");
    only_capture(cwd.path(), &plain.0, "offcpu-");
    assert!(
        sidecars_of(&plain.0).is_empty(),
        "{:?}",
        sidecars_of(&plain.0)
    );
}
