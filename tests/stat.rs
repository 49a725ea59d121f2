//! `devprof stat` end to end on the demo devnet: counters of the running node compared
//! with what perf itself reports in the same container, command runs with their exit
//! statuses and times, and bad input.

mod common;

use common::*;
use predicates::prelude::*;
use serde_json::Value;

/// What `perf stat -x,` says about each event, run by hand in demo-seq: the value field
/// (a number, `<not supported>` or `<not counted>`) by event name.
fn perf_own_support(events: &str) -> Vec<(String, bool)> {
    let out = docker(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        &format!("perf stat -x, -e {events} -p \"$(pgrep -o demo-node)\" -- sleep 1"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f.len() > 2 && !f[2].is_empty()).then(|| (f[2].to_string(), f[0] != "<not supported>"))
        })
        .collect()
}

const DEFAULT_EVENTS: &str = "cycles,instructions,cache-misses,cache-references,branch-misses,\
L1-dcache-load-misses,task-clock,context-switches,cpu-migrations,page-faults";

#[test]
#[ignore = "needs the demo devnet"]
fn stat_window_counts_software_events_and_reports_hardware_support_as_perf_does() {
    if !devnet_ready("stat_window_counts_software_events_and_reports_hardware_support_as_perf_does")
    {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["stat", DEMO_SEQ, "5"])
        .assert()
        .success()
        .stdout(predicate::str::contains("task-clock"))
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stem = only_capture(cwd.path(), DEMO_SEQ, "stat-");
    let m = read_manifest(&stem);
    assert_eq!(m["kind"], "stat");
    assert!(with_ext(&stem, "csv").is_file());
    let counters = m["stat"]["counters"].as_array().unwrap();
    assert_eq!(counters.len(), 10, "{counters:?}");
    let by_name = |name: &str| -> &Value {
        counters
            .iter()
            .find(|c| c["event"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {counters:?}"))
    };
    for sw in ["task-clock", "context-switches", "page-faults"] {
        let c = by_name(sw);
        assert_eq!(c["reading"]["status"], "counted", "{sw}: {c}");
        assert!(c["reading"]["value"].as_f64().unwrap() > 0.0, "{sw}: {c}");
    }
    let perf_says = perf_own_support(DEFAULT_EVENTS);
    assert_eq!(perf_says.len(), 10, "{perf_says:?}");
    let mut unsupported = 0;
    for (event, supported) in &perf_says {
        let c = by_name(event);
        let status = c["reading"]["status"].as_str().unwrap();
        if *supported {
            assert_ne!(status, "not_supported", "{event}: perf counts it: {c}");
        } else {
            unsupported += 1;
            assert_eq!(
                status, "not_supported",
                "{event}: perf does not count it: {c}"
            );
            assert!(c["reading"]["value"].is_null(), "never a number: {c}");
            let line = stdout
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{event} ")))
                .unwrap_or_else(|| panic!("{event} not printed:\n{stdout}"));
            assert!(line.ends_with("not supported"), "{line}");
        }
    }
    if unsupported > 0 {
        let reason = m["stat"]["unsupported_reason"].as_str().unwrap();
        assert!(
            stdout.contains(&format!("not supported: {reason}")),
            "{stdout}"
        );
        let ipc = m["stat"]["derived"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == "IPC")
            .unwrap();
        if !perf_says.iter().any(|(e, s)| e == "cycles" && *s) {
            assert!(ipc["value"].is_null(), "IPC from uncounted cycles: {ipc}");
        }
    } else {
        assert!(m["stat"]["unsupported_reason"].is_null());
    }
    // The capture's directory in the container (perf's -o file) is gone.
    let output = m["perf"]["record_command"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|a| a.ends_with("/stat.csv"))
        .unwrap()
        .to_string();
    let workdir = output.trim_end_matches("/stat.csv");
    assert!(workdir.starts_with("/tmp/devprof."), "{workdir}");
    let left = docker(&["exec", DEMO_SEQ, "test", "-e", workdir]);
    assert!(!left.status.success(), "{workdir} left in {DEMO_SEQ}");
    // ls lists it as a stat capture.
    devprof(cwd.path())
        .args(["ls", DEMO_SEQ])
        .assert()
        .success()
        .stdout(predicate::str::contains("stat").and(predicate::str::contains("10 counters")));
}

/// The task-clock value in a list of counters.
fn task_clock(counters: &Value) -> f64 {
    counters
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["event"] == "task-clock")
        .unwrap()["reading"]["value"]
        .as_f64()
        .unwrap()
}

const FIXED_WORK: &str = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";

#[test]
#[ignore = "needs the demo devnet"]
fn stat_repeat_reports_each_run_and_statistics() {
    if !devnet_ready("stat_repeat_reports_each_run_and_statistics") {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args([
            "stat", DEMO_SEQ, "--repeat", "5", "--json", "--", "sh", "-c", FIXED_WORK,
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = j["stat"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    let walls: Vec<f64> = runs.iter().map(|r| r["wall_s"].as_f64().unwrap()).collect();
    for r in runs {
        assert_eq!(r["exit_status"], 0);
        assert!(r["wall_s"].as_f64().unwrap() > 0.0);
    }
    let w = &j["stat"]["wall"];
    assert_eq!(w["n"], 5);
    let min = walls.iter().cloned().fold(f64::MAX, f64::min);
    let max = walls.iter().cloned().fold(0.0, f64::max);
    assert_eq!(w["min"].as_f64().unwrap(), min);
    assert_eq!(w["max"].as_f64().unwrap(), max);
    assert!(w["stddev"].as_f64().unwrap() >= 0.0);
    let p95 = w["p95"].as_f64().unwrap();
    assert!(p95 >= w["median"].as_f64().unwrap() && p95 <= max);
    // task-clock summed over the runs equals the sum of the per-run values.
    let per_run: f64 = runs.iter().map(|r| task_clock(&r["counters"])).sum();
    let summed = task_clock(&j["stat"]["counters"]);
    assert!((summed - per_run).abs() < 1e-6 && summed > 0.0);
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_repeat_reports_a_failing_run_and_leaves_it_out() {
    if !devnet_ready("stat_repeat_reports_a_failing_run_and_leaves_it_out") {
        return;
    }
    let cwd = workdir();
    let marker = format!("/tmp/{}", unique("devprof-test-stat-marker"));
    // The second run finds the marker the first left and exits 1; later runs pass again.
    let script = format!(
        "{FIXED_WORK}; if [ -e {marker} ]; then rm {marker}; exit 1; fi; \
         [ -e {marker}.done ] && exit 0; touch {marker} {marker}.done"
    );
    let out = devprof(cwd.path())
        .args([
            "stat", DEMO_SEQ, "--repeat", "3", "--json", "--", "sh", "-c", &script,
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    docker(&[
        "exec",
        DEMO_SEQ,
        "rm",
        "-f",
        &marker,
        &format!("{marker}.done"),
    ]);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let statuses: Vec<i64> = j["stat"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["exit_status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![0, 1, 0]);
    assert_eq!(j["stat"]["failed_runs"], 1);
    assert_eq!(j["stat"]["wall"]["n"], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 3 runs exited non-zero"));
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_bad_input_fails_clearly_and_writes_nothing() {
    if !devnet_ready("stat_bad_input_fails_clearly_and_writes_nothing") {
        return;
    }
    let cwd = workdir();
    let cases: [(&[&str], &str); 4] = [
        (
            &["stat", DEMO_SEQ, "1", "-e", "task-clock,no-such-event"],
            "unknown event 'no-such-event'",
        ),
        (
            &["stat", DEMO_SEQ, "--repeat", "2", "--"],
            "the command after `--` is empty",
        ),
        (
            &[
                "stat",
                DEMO_SEQ,
                "--repeat",
                "2",
                "--",
                "no-such-command-xyz",
            ],
            "command 'no-such-command-xyz' not found",
        ),
        (
            &["stat", DEMO_SEQ, "--repeat", "0", "--", "true"],
            "at least 1",
        ),
    ];
    // Every check runs before devprof makes anything, here or in the container.
    assert_usage_errors_write_nothing(cwd.path(), &cases);
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_repeat_interrupted_leaves_no_command_running() {
    if !devnet_ready("stat_repeat_interrupted_leaves_no_command_running") {
        return;
    }
    let cwd = workdir();
    // A sleep length no other process in the container uses marks this run's command.
    let seconds = format!("{}", 4000 + std::process::id() % 1000);
    let running = || {
        docker_ok(&["exec", DEMO_SEQ, "sh", "-c", "ps -eo args"])
            .lines()
            .any(|l| l.trim() == format!("sleep {seconds}"))
    };
    let capture = spawn_capture(
        cwd.path(),
        &["stat", DEMO_SEQ, "--repeat", "2", "--", "sleep", &seconds],
    );
    let started = std::time::Instant::now();
    while !running() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    capture.interrupt();
    let out = capture.wait_with_output();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!running(), "sleep {seconds} still runs in {DEMO_SEQ}");
    assert!(
        files_under(cwd.path()).is_empty(),
        "{:?}",
        files_under(cwd.path())
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_window_ctrl_c_saves_the_counts_so_far() {
    if !devnet_ready("stat_window_ctrl_c_saves_the_counts_so_far") {
        return;
    }
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["stat", DEMO_SEQ, "10m", "-e", "task-clock"]);
    capture.wait_for_window();
    capture.interrupt();
    let out = capture.wait_with_output();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = read_manifest(&only_capture(cwd.path(), DEMO_SEQ, "stat-"));
    assert_eq!(m["interrupted"], true);
    assert!(m["duration_recorded_s"].as_f64().unwrap() < 600.0);
    assert!(task_clock(&m["stat"]["counters"]) > 0.0, "{}", m["stat"]);
}
