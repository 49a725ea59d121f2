//! `devprof offcpu` end to end on the demo devnet: the four shipped configs, off-CPU time,
//! the target from .env, and a bad custom config.

mod common;

use common::*;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;

/// Runs `devprof offcpu demo-seq 5 --config CONFIG` in `cwd` and returns its manifest.
fn capture(cwd: &Path, config: &str) -> (Value, std::path::PathBuf) {
    devprof(cwd)
        .args(["offcpu", DEMO_SEQ, "5", "--config", config])
        .assert()
        .success()
        .stdout(predicate::str::contains("files written"));
    let stem = only_capture(cwd, DEMO_SEQ, "offcpu-");
    let manifest = read_manifest(&stem);
    for ext in ["data", "folded", "svg", "txt"] {
        assert!(with_ext(&stem, ext).exists(), "{ext} missing");
    }
    (manifest, stem)
}

fn count(manifest: &Value, event: &str) -> u64 {
    manifest["offcpu"]["counts"][event].as_u64().unwrap_or(0)
}

#[test]
#[ignore = "needs the demo devnet"]
fn default_config_counts_futex_and_sync_calls() {
    if !devnet_ready("default_config_counts_futex_and_sync_calls") {
        return;
    }
    let cwd = workdir();
    let (m, stem) = capture(cwd.path(), "default");
    assert!(
        count(&m, "syscalls:sys_enter_futex") > 0,
        "no futex from contend_lock: {}",
        m["offcpu"]["counts"]
    );
    assert!(count(&m, "syscalls:sys_enter_fsync") + count(&m, "syscalls:sys_enter_fdatasync") > 0);
    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(
        svg.contains("events"),
        "event-count flamegraph must say events"
    );
    assert_eq!(m["offcpu"]["mode"], "full");
    let txt = std::fs::read_to_string(with_ext(&stem, "txt")).unwrap();
    assert!(
        txt.contains("lock contention:") && txt.contains("disk sync:"),
        "{txt}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn contextswitches_config_gives_off_cpu_time_under_contend_lock() {
    if !devnet_ready("contextswitches_config_gives_off_cpu_time_under_contend_lock") {
        return;
    }
    let cwd = workdir();
    let (m, stem) = capture(cwd.path(), "contextswitches");
    assert!(count(&m, "sched:sched_switch") > 0);
    assert!(count(&m, "syscalls:sys_enter_futex") > 0);
    // Enter and exit are counted under their own names, never merged.
    assert!(m["offcpu"]["counts"]
        .get("syscalls:sys_exit_futex")
        .is_some());

    let window_us = (m["duration_recorded_s"].as_f64().unwrap() * 1e6) as u64;
    let threads = m["offcpu"]["off_cpu"]["threads"]
        .as_array()
        .expect("per-thread off-CPU time");
    assert!(!threads.is_empty());
    for t in threads {
        let us = t["off_cpu_us"].as_u64().unwrap();
        assert!(
            us <= window_us + 50_000,
            "thread {} blocked {us} us in a {window_us} us window",
            t["tid"]
        );
    }

    let folded = std::fs::read_to_string(with_ext(&stem, "offcpu.folded"))
        .expect("off-CPU time folded stacks");
    let svg = std::fs::read_to_string(with_ext(&stem, "offcpu.svg")).unwrap();
    assert!(
        svg.contains("us off-CPU"),
        "off-CPU flamegraph must count microseconds"
    );
    let units: Vec<(&str, &str)> = m["graphs"]
        .as_array()
        .expect("graphs")
        .iter()
        .map(|g| (g["folded"].as_str().unwrap(), g["unit"].as_str().unwrap()))
        .collect();
    assert!(
        units
            .iter()
            .any(|(f, u)| f.ends_with(".offcpu.folded") && *u == "us off-CPU")
            && units
                .iter()
                .any(|(f, u)| !f.contains("offcpu.folded") && *u == "events"),
        "the manifest names what each folded file counts: {units:?}"
    );
    let (mut contenders, mut under_contend, mut under_futex) = (0u64, 0u64, 0u64);
    for line in folded.lines() {
        let (stack, us) = line.rsplit_once(' ').unwrap();
        let us: u64 = us.parse().unwrap();
        if stack.starts_with("contend_lock;") {
            contenders += us;
            if stack.contains("::contend_lock") {
                under_contend += us;
            }
            // The mutex's slow path; with frame pointers, libc's `syscall` wrapper may hide
            // the std frame above it.
            if stack.contains("lock_contended")
                || stack.contains("futex")
                || stack.ends_with(";syscall")
            {
                under_futex += us;
            }
        }
    }
    assert!(
        contenders > 0,
        "no off-CPU time for the contend_lock threads"
    );
    assert!(
        under_contend * 2 > contenders,
        "only {under_contend} of {contenders} us under contend_lock"
    );
    assert!(under_futex > 0, "no blocked time in the mutex's futex wait");

    // The plot of off-CPU time per thread, listed in the manifest; no bandwidth plot
    // without read/write syscalls.
    let plot = std::fs::read_to_string(with_ext(&stem, "threads.svg")).expect("threads plot");
    for t in threads.iter().take(12) {
        assert!(
            plot.contains(&format!("({})</text>", t["tid"])),
            "tid {} not plotted",
            t["tid"]
        );
    }
    let listed = |name: &str| {
        m["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"].as_str().unwrap().ends_with(name))
    };
    assert!(listed(".threads.svg") && !listed(".bandwidth.svg"));
}

#[test]
#[ignore = "needs the demo devnet"]
fn iobandwidth_config_measures_bytes_read_and_written_by_sync_writes() {
    if !devnet_ready("iobandwidth_config_measures_bytes_read_and_written_by_sync_writes") {
        return;
    }
    let cwd = workdir();
    let (m, stem) = capture(cwd.path(), "offcpu-events-iobandwidth.conf");
    let bw = &m["offcpu"]["bandwidth"];
    assert!(bw["read"]["bytes"].as_u64().unwrap() > 0, "{bw}");
    assert!(bw["written"]["bytes"].as_u64().unwrap() > 0, "{bw}");
    assert!(bw["write_bytes_per_s"].as_f64().unwrap() > 0.0);
    let top: Vec<String> = bw["top_by_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[0].as_str().unwrap().to_string())
        .collect();
    assert!(
        top.iter().any(|f| f.ends_with("::sync_writes")),
        "sync_writes not among {top:?}"
    );
    assert!(count(&m, "syscalls:sys_enter_fsync") + count(&m, "syscalls:sys_enter_fdatasync") > 0);
    // Bandwidth over time, beside the summary: its totals are the summary's.
    let plot = std::fs::read_to_string(with_ext(&stem, "bandwidth.svg")).expect("bandwidth plot");
    let written = devprof::units::human_bytes(bw["written"]["bytes"].as_u64().unwrap());
    assert!(plot.contains(&format!("written {written}")), "{written}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn pagefaults_config_counts_major_faults_from_target_in_dotenv() {
    if !devnet_ready("pagefaults_config_counts_major_faults_from_target_in_dotenv") {
        return;
    }
    let cwd = workdir();
    std::fs::write(
        cwd.path().join(".env"),
        "DEVPROF_TARGET=demo-seq\nDEVPROF_DURATION=5s\n",
    )
    .unwrap();
    devprof(cwd.path())
        .args(["offcpu", "--config", "pagefaults.conf"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_SEQ, "offcpu-");
    let m = read_manifest(&stem);
    assert!(
        count(&m, "major-faults") > 0,
        "no major faults from mmap_reads: {}",
        m["offcpu"]["counts"]
    );
    let txt = std::fs::read_to_string(with_ext(&stem, "txt")).unwrap();
    assert!(txt.contains("page cache hit rate"), "{txt}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn unknown_event_in_custom_config_is_named_and_nothing_is_written() {
    if !devnet_ready("unknown_event_in_custom_config_is_named_and_nothing_is_written") {
        return;
    }
    let cwd = workdir();
    let config = cwd.path().join("mine.conf");
    std::fs::write(
        &config,
        "# custom\nsyscalls:sys_enter_futex\nsched:sched_swich   # typo\n",
    )
    .unwrap();
    devprof(cwd.path())
        .args([
            "offcpu",
            DEMO_SEQ,
            "5",
            "--config",
            config.to_str().unwrap(),
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown event 'sched:sched_swich'",
        ))
        .stderr(predicate::str::contains(
            "did you mean 'sched:sched_switch'",
        ));
    assert_eq!(
        files_under(cwd.path()),
        vec![std::path::PathBuf::from("mine.conf")]
    );
}

#[test]
fn unknown_config_name_lists_the_shipped_ones() {
    let cwd = workdir();
    devprof(cwd.path())
        .args(["offcpu", DEMO_SEQ, "5", "--config", "nonesuch"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no event config 'nonesuch'"))
        .stderr(predicate::str::contains("offcpu-events-pagefaults.conf"));
    assert!(files_under(cwd.path()).is_empty());
}

/// tracefs mounts in a container's mount table (`/proc/self/mountinfo`).
fn tracefs_mounts(container: &str) -> Vec<String> {
    docker_ok(&["exec", container, "cat", "/proc/self/mountinfo"])
        .lines()
        .filter(|l| l.contains(" - tracefs "))
        .map(str::to_string)
        .collect()
}

/// Regression: the off-CPU capture mounted tracefs in a target that may (CAP_SYS_ADMIN)
/// and never unmounted it. It unmounts what it mounted, and only that: a tracefs the
/// container had before stays.
#[test]
#[ignore = "needs the demo devnet"]
fn offcpu_unmounts_the_tracefs_it_mounted_and_only_that() {
    if !devnet_ready("offcpu_unmounts_the_tracefs_it_mounted_and_only_that") {
        return;
    }
    let name = unique("devprof-test-offcpu-tracefs");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["-e", "DEMO_WORKLOADS=hash_chain:20,contend_lock:30"]);
    let node = run_container(&name, &args, &demo_image(), &[]);
    wait_for_cpu(&name, "demo-node", 0.2);
    assert!(tracefs_mounts(&node.0).is_empty(), "tracefs already there");
    let cwd = workdir();
    devprof(cwd.path())
        .args(["offcpu", &node.0, "2", "--mode", "exec"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "mounted tracefs at /sys/kernel/tracing",
        ));
    assert!(
        tracefs_mounts(&node.0).is_empty(),
        "left mounted: {:?}",
        tracefs_mounts(&node.0)
    );
    // One the container mounted itself is left as it is.
    docker_ok(&[
        "exec",
        &node.0,
        "mount",
        "-t",
        "tracefs",
        "nodev",
        "/sys/kernel/tracing",
    ]);
    let own = tracefs_mounts(&node.0);
    devprof(cwd.path())
        .args(["offcpu", &node.0, "2", "--mode", "exec"])
        .assert()
        .success()
        .stderr(predicate::str::contains("mounted tracefs").not());
    assert_eq!(tracefs_mounts(&node.0), own);
}
