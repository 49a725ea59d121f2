//! Command runs end to end on the demo devnet: `devprof cpu TARGET -- CMD` records a
//! command from its start to its end inside the target container (as the target process's
//! user, in its directory and environment), reports how it ended, stops it on Ctrl-C; and
//! `devprof diff` of two stat captures.

mod common;

use common::*;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;

/// A copy of the demo node under another name in the container's /tmp, removed on drop:
/// a second `demo-node` would be taken for the node itself by tests running beside this
/// one (they look the node up by name).
struct Worker {
    container: &'static str,
    dir: String,
    path: String,
}

impl Worker {
    fn new(container: &'static str) -> Self {
        let dir = format!("/tmp/{}", unique("devprof-test-cmd"));
        let path = format!("{dir}/hashwork");
        docker_ok(&[
            "exec",
            container,
            "sh",
            "-c",
            &format!("mkdir -p {dir} && cp \"$(command -v demo-node)\" {path}"),
        ]);
        Worker {
            container,
            dir,
            path,
        }
    }

    /// Runs the worker's hash_chain for `secs` seconds, then stops it the way the node
    /// expects (SIGINT: it exits 0), then exits with `status`.
    fn bounded(&self, secs: u32, status: i32) -> String {
        format!(
            "DEMO_WORKLOADS=hash_chain {} & p=$!; sleep {secs}; kill -INT $p; wait $p; exit {status}",
            self.path
        )
    }

    /// Pids of processes running the worker's binary.
    fn pids(&self) -> String {
        docker_ok(&[
            "exec",
            self.container,
            "sh",
            "-c",
            &format!(
                "for d in /proc/[0-9]*; do [ \"$(readlink $d/exe)\" = {} ] && echo ${{d#/proc/}}; done; true",
                self.path
            ),
        ])
    }

    fn running(&self) -> bool {
        !self.pids().trim().is_empty()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = docker(&[
            "exec",
            self.container,
            "sh",
            "-c",
            &format!(
                "for d in /proc/[0-9]*; do [ \"$(readlink $d/exe)\" = {} ] && kill -9 ${{d#/proc/}}; done; rm -rf {}",
                self.path, self.dir
            ),
        ]);
    }
}

/// The first and last sample times of a capture's timeline, in seconds.
fn sample_span_s(stem: &Path) -> f64 {
    let file = std::fs::File::open(with_ext(stem, "timeline")).unwrap();
    let timeline = devprof::profile::timeline::Timeline::read(file).unwrap();
    let (first, last) = timeline.span_ns().expect("samples in the timeline");
    (last - first) as f64 / 1e9
}

/// No perf of this capture (found by its workdir, named in the manifest: other tests
/// record the same container meanwhile), and no worker, left in the container.
fn nothing_left(container: &str, worker: &Worker, manifest: &serde_json::Value) {
    let command: Vec<String> =
        serde_json::from_value(manifest["perf"]["record_command"].clone()).unwrap();
    let data = &command[command.iter().position(|a| a == "-o").unwrap() + 1];
    let workdir = data.rsplit_once('/').unwrap().0;
    assert!(workdir.starts_with("/tmp/devprof."), "{workdir}");
    let ps = container_processes(container);
    assert!(!worker.running(), "the command still runs:\n{ps}");
    assert!(
        !perf_records(&ps).iter().any(|l| l.contains(workdir)),
        "perf still runs:\n{ps}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_command_run_records_the_command_from_start_to_end() {
    if !devnet_ready("cpu_command_run_records_the_command_from_start_to_end") {
        return;
    }
    let worker = Worker::new(DEMO_SEQ);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args([
            "cpu",
            DEMO_SEQ,
            "--json",
            "--",
            "sh",
            "-c",
            &worker.bounded(3, 0),
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stem = only_capture(cwd.path(), DEMO_SEQ, "perf-");
    let m = read_manifest(&stem);
    assert_eq!(m["kind"], "cpu");
    assert_eq!(m["frequency_hz"], 997);
    let run = &m["command"];
    assert_eq!(run["exit_status"], 0, "{run}");
    assert_eq!(run["argv"][0], "sh");
    assert_eq!(j["command"], *run);
    // The node runs as root in demo-seq: the command too, in the node's directory.
    let node_cwd = docker_ok(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        "readlink /proc/$(pgrep -o demo-node)/cwd",
    ]);
    assert_eq!(run["cwd"], node_cwd.trim());
    assert_eq!(run["user"], "0:0");
    let wall = run["wall_s"].as_f64().unwrap();
    // The command sleeps 3 s around the worker: its run is at least that.
    assert!(wall >= 3.0, "{run}");
    assert_eq!(m["duration_recorded_s"].as_f64().unwrap(), wall);
    // The hot function of the command is among the top 3.
    let top: Vec<&str> = m["top_functions"]
        .as_array()
        .unwrap()
        .iter()
        .take(3)
        .map(|f| f[0].as_str().unwrap())
        .collect();
    assert!(
        top.iter().any(|f| f.contains("hash_chain")),
        "hash_chain not in the top 3: {top:?}"
    );
    // The samples lie within the command's run: the capture ended when it did.
    let span = sample_span_s(&stem);
    assert!(
        span <= wall && span >= wall / 2.0,
        "samples span {span:.3} s of a {wall:.3} s run"
    );
    assert!(with_ext(&stem, "svg").is_file() && with_ext(&stem, "folded").is_file());
    nothing_left(DEMO_SEQ, &worker, &m);
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_command_run_reports_a_failing_command_and_keeps_the_profile() {
    if !devnet_ready("cpu_command_run_reports_a_failing_command_and_keeps_the_profile") {
        return;
    }
    let worker = Worker::new(DEMO_SEQ);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_SEQ, "--", "sh", "-c", &worker.bounded(1, 3)])
        .assert()
        .success()
        .stderr(predicate::str::contains("the command exited with status 3"))
        .stdout(predicate::str::contains("exit status 3"));
    let stem = only_capture(cwd.path(), DEMO_SEQ, "perf-");
    let m = read_manifest(&stem);
    assert_eq!(m["command"]["exit_status"], 3);
    assert!(m["sample_count"].as_u64().unwrap() > 0);
    assert!(with_ext(&stem, "svg").is_file());
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_command_run_ctrl_c_stops_the_command_and_keeps_the_recording() {
    if !devnet_ready("cpu_command_run_ctrl_c_stops_the_command_and_keeps_the_recording") {
        return;
    }
    let worker = Worker::new(DEMO_SEQ);
    let cwd = workdir();
    // Runs until stopped.
    let command = format!("DEMO_WORKLOADS=hash_chain {}", worker.path);
    let capture = spawn_capture(cwd.path(), &["cpu", DEMO_SEQ, "--", "sh", "-c", &command]);
    let started = std::time::Instant::now();
    while !worker.running() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Some CPU time of this test's worker (other tests run copies of the same name).
    let pid = worker.pids().lines().next().unwrap_or_default().to_string();
    wait_for_cpu(DEMO_SEQ, &pid, 0.5);
    capture.interrupt();
    let out = capture.wait_with_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = read_manifest(&only_capture(cwd.path(), DEMO_SEQ, "perf-"));
    assert_eq!(m["interrupted"], true);
    assert!(m["sample_count"].as_u64().unwrap() > 0);
    nothing_left(DEMO_SEQ, &worker, &m);
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_command_run_bad_input_fails_clearly_and_writes_nothing() {
    if !devnet_ready("cpu_command_run_bad_input_fails_clearly_and_writes_nothing") {
        return;
    }
    let cwd = workdir();
    let cases: [(&[&str], &str); 5] = [
        (
            &["cpu", DEMO_SEQ, "--", ""],
            "the command after `--` is empty",
        ),
        (&["cpu", DEMO_SEQ, "--"], "the command after `--` is empty"),
        (
            &["cpu", DEMO_SEQ, "--", "no-such-command-xyz"],
            "command 'no-such-command-xyz' not found",
        ),
        (
            &["cpu", DEMO_SEQ, "5", "--", "true"],
            "DURATION (5) and a command after `--`",
        ),
        (
            &["cpu", DEMO_SEQ, "--mode", "sidecar", "--", "true"],
            "a command runs inside the target container",
        ),
    ];
    assert_usage_errors_write_nothing(cwd.path(), &cases);
}

const FIXED_WORK: &str = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";

/// The stat manifests in `cwd`'s store for demo-seq, oldest first.
fn stat_manifests(cwd: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<_> = files_under(cwd)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with("stat-") && name.ends_with(".json")
        })
        .map(|p| cwd.join(p))
        .collect();
    all.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    all
}

fn diff_json(cwd: &Path, before: &Path, after: &Path) -> Value {
    let out = devprof(cwd)
        .args(["diff", "--json"])
        .arg(before)
        .arg(after)
        .assert()
        .success()
        .get_output()
        .clone();
    serde_json::from_slice(&out.stdout).unwrap()
}

fn counter<'a>(diff: &'a Value, event: &str) -> &'a Value {
    diff["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["event"] == event)
        .unwrap_or_else(|| panic!("{event} missing: {diff}"))
}

/// task-clock of each successful run in a stat manifest.
fn task_clock_runs(manifest: &Value) -> Vec<f64> {
    manifest["stat"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["exit_status"] == 0)
        .map(|r| {
            r["counters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["event"] == "task-clock")
                .unwrap()["reading"]["value"]
                .as_f64()
                .unwrap()
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
#[ignore = "needs the demo devnet"]
fn diff_of_two_stat_captures_weighs_each_change_against_the_noise() {
    if !devnet_ready("diff_of_two_stat_captures_weighs_each_change_against_the_noise") {
        return;
    }
    let cwd = workdir();
    for _ in 0..2 {
        devprof(cwd.path())
            .args([
                "stat", DEMO_SEQ, "--repeat", "3", "--", "sh", "-c", FIXED_WORK,
            ])
            .assert()
            .success();
    }
    let runs = stat_manifests(cwd.path());
    assert_eq!(runs.len(), 2, "{runs:?}");
    let d = diff_json(cwd.path(), &runs[0], &runs[1]);
    assert_eq!(d["kind"], "stat");
    assert_eq!(d["basis"], "mean_per_run");
    let (b, a) = (
        task_clock_runs(
            &serde_json::from_str(&std::fs::read_to_string(&runs[0]).unwrap()).unwrap(),
        ),
        task_clock_runs(
            &serde_json::from_str(&std::fs::read_to_string(&runs[1]).unwrap()).unwrap(),
        ),
    );
    let t = counter(&d, "task-clock");
    assert_eq!(t["before"]["runs"], b.len() as u64);
    assert!((t["before"]["mean"].as_f64().unwrap() - mean(&b)).abs() < 1e-6);
    assert!((t["change"].as_f64().unwrap() - (mean(&a) - mean(&b))).abs() < 1e-6);
    let ci = t["ci95"].as_f64().unwrap();
    let verdict = t["verdict"].as_str().unwrap();
    let change = t["change"].as_f64().unwrap();
    assert_eq!(
        verdict,
        if change.abs() > ci {
            "significant"
        } else {
            "within_noise"
        },
        "{t}"
    );
    // Hardware counters this VM cannot count are said so, never compared as numbers.
    let cycles = counter(&d, "cycles");
    if cycles["change"].is_null() {
        assert_eq!(cycles["verdict"], "not_comparable");
        assert!(cycles["why"].as_str().unwrap().contains("not supported"));
    }
    assert!(d["counters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["event"] == "wall time"));
    // The same in words.
    devprof(cwd.path())
        .arg("diff")
        .arg(&runs[0])
        .arg(&runs[1])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("VERDICT")
                .and(predicate::str::contains("task-clock"))
                .and(predicate::str::contains(if verdict == "significant" {
                    "significant (±"
                } else {
                    "within noise (±"
                })),
        );

    // Two windows: compared per second of each window.
    for _ in 0..2 {
        devprof(cwd.path())
            .args(["stat", DEMO_SEQ, "2", "-e", "task-clock,page-faults"])
            .assert()
            .success();
    }
    let all = stat_manifests(cwd.path());
    let windows = &all[2..];
    let d = diff_json(cwd.path(), &windows[0], &windows[1]);
    assert_eq!(d["basis"], "per_second");
    let rate = |p: &Path| {
        let m: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let v = m["stat"]["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["event"] == "task-clock")
            .unwrap()["reading"]["value"]
            .as_f64()
            .unwrap();
        v / m["duration_recorded_s"].as_f64().unwrap()
    };
    let t = counter(&d, "task-clock");
    assert!((t["change"].as_f64().unwrap() - (rate(&windows[1]) - rate(&windows[0]))).abs() < 1e-6);
    assert_eq!(t["verdict"], "noise_unknown");

    // A window against command runs cannot be compared.
    devprof(cwd.path())
        .arg("diff")
        .arg(&runs[0])
        .arg(&windows[0])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "compare two windows or two command runs",
        ));
}

#[test]
#[ignore = "needs the demo devnet"]
fn command_runs_take_the_target_process_user_directory_and_environment() {
    // demo-py's process runs as a non-root user: the command must too.
    if !demo_container_ready(
        "command_runs_take_the_target_process_user_directory_and_environment",
        "demo-py",
    ) {
        return;
    }
    let cwd = workdir();
    let facts = docker_ok(&[
        "exec",
        "demo-py",
        "sh",
        "-c",
        "p=$(pgrep -o python3); stat -c %u:%g /proc/$p; readlink /proc/$p/cwd; \
         tr '\\0' '\\n' < /proc/$p/environ | grep ^PATH=",
    ]);
    let lines: Vec<&str> = facts.lines().collect();
    let (user, dir, path) = (lines[0], lines[1], lines[2]);
    assert_ne!(user, "0:0", "demo-py's process runs as root: {facts}");
    let check = format!(
        "test \"$(id -u):$(id -g)\" = {user} && test \"$(pwd)\" = {dir} && test \"PATH=$PATH\" = '{path}'"
    );
    let out = devprof(cwd.path())
        .args([
            "stat",
            "demo-py",
            "--repeat",
            "1",
            "-e",
            "task-clock",
            "--json",
            "--",
            "sh",
            "-c",
            &check,
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["stat"]["runs"][0]["exit_status"], 0, "{}", j["stat"]);
}
