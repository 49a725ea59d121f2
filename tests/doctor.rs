//! `devprof doctor` end to end: all ✓ on demo-seq; on a deliberately bad container (the
//! base image with a stripped copy of the demo node, no perf, no added capabilities,
//! Docker's default seccomp profile) each problem is a ✗ with its fix, and the exit status
//! says profiling is blocked.

mod common;

use common::*;
use predicates::prelude::*;
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_passes_every_check_on_demo_seq() {
    if !devnet_ready("doctor_passes_every_check_on_demo_seq") {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["doctor", DEMO_SEQ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().skip(1).collect();
    let checks: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with("fix:"))
        .collect();
    assert!(checks.len() >= 16, "{text}");
    for line in &checks {
        assert!(line.starts_with("  ✓ "), "not ✓: {line}\n{text}");
    }
    assert!(text.contains("nothing blocks profiling demo-seq"), "{text}");

    let json = devprof(cwd.path())
        .args(["doctor", DEMO_SEQ, "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["container"], DEMO_SEQ);
    let ids: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in [
        "daemon",
        "container",
        "process",
        "perf",
        "perf_event_open",
        "perf_event_paranoid",
        "kptr_restrict",
        "tracefs",
        "capabilities",
        "seccomp",
        "privileged",
        "symbols",
        "debuginfo",
        "frame_pointers",
        "jemalloc",
        "runtime",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    for c in v["checks"].as_array().unwrap() {
        assert_eq!(c["status"], "pass", "{c}");
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_reports_each_problem_of_a_bad_container_with_its_fix() {
    if !devnet_ready("doctor_reports_each_problem_of_a_bad_container_with_its_fix") {
        return;
    }
    // The base image plus a stripped copy of the demo node (stripped with the demo image's
    // own binutils): no perf, no symbols.
    let tag = format!("devprof-test-bad:{}", std::process::id());
    let _image = build_image_from_text(
        &tag,
        &format!(
            "FROM {demo} AS demo\nRUN strip -o /tmp/demo-node /usr/local/bin/demo-node\n\
             FROM {base}\nCOPY --from=demo /tmp/demo-node /usr/local/bin/demo-node\nCMD [\"demo-node\"]\n",
            demo = demo_image(),
            base = base_image()
        ),
    );
    let name = unique("devprof-test-bad");
    let _container = run_container(
        &name,
        &[
            "-e",
            "DEMO_WORKLOADS=hash_chain:5",
            "-e",
            "DEMO_DATA_DIR=/tmp",
        ],
        &tag,
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !container_processes(&name).contains("demo-node") {
        assert!(
            Instant::now() < deadline,
            "demo-node did not start in {name}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // What the container really lacks, asked independently of devprof.
    assert!(
        !docker(&["exec", &name, "sh", "-c", "command -v perf"])
            .status
            .success(),
        "perf must be absent"
    );
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{json .HostConfig.CapAdd}}", &name]),
        "null"
    );

    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["doctor", &name, "--mode", "exec"])
        .assert()
        .code(8)
        .stderr(predicate::str::contains(format!(
            "profiling '{name}' is blocked"
        )))
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    for (title, fix_says) in [
        ("perf", "devprof build tools"),
        ("capabilities", "cap_add"),
        ("seccomp", "seccomp=unconfined"),
        ("symbols", "strip"),
    ] {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("  ✗ {title} ")))
            .unwrap_or_else(|| panic!("no ✗ {title} line:\n{text}"));
        let fix = lines.get(at + 1).copied().unwrap_or("");
        assert!(
            fix.trim_start().starts_with("fix:") && fix.contains(fix_says),
            "{title}: {fix}\n{text}"
        );
    }
    assert!(text.contains("is stripped (no .symtab"), "{text}");

    let json = devprof(cwd.path())
        .args(["doctor", &name, "--json", "--mode", "exec"])
        .assert()
        .code(8)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["ok"], false);
    let blocking: Vec<&str> = v["blocking"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    for id in ["perf", "capabilities", "seccomp", "symbols"] {
        assert!(blocking.contains(&id), "{id} not blocking: {blocking:?}");
    }
    // What is fine is still said to be fine.
    let status = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["status"].clone())
            .unwrap()
    };
    assert_eq!(status("process"), "pass");
    assert_eq!(
        status("frame_pointers"),
        "pass",
        "judged from .eh_frame without symbols"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_on_a_node_container_with_a_stripped_node_does_not_block() {
    // demo-js: Debian's node (stripped /usr/bin/node) with --perf-basic-prof. V8's perf
    // map names the JavaScript frames, so the stripped launcher is a warning, not a block.
    if !demo_container_ready("doctor_on_a_node_container", "demo-js") {
        return;
    }
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["doctor", "demo-js"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let symbols = text
        .lines()
        .find(|l| l.contains("is stripped"))
        .unwrap_or_else(|| panic!("no symbols line: {text}"));
    assert!(symbols.trim_start().starts_with('!'), "{symbols}\n{text}");
    assert!(
        symbols.contains("stripped") && symbols.contains("perf map"),
        "{symbols}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_on_an_unknown_target_says_so_and_exits_4() {
    if !devnet_ready("doctor_on_an_unknown_target_says_so_and_exits_4") {
        return;
    }
    let missing = unique("devprof-test-no-such-container");
    devprof(workdir().path())
        .args(["doctor", &missing])
        .assert()
        .code(4)
        .stdout(predicate::str::contains("✗ container running"))
        .stdout(predicate::str::contains(format!(
            "no container matches '{missing}'"
        )));
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_judges_an_unprivileged_container_ready_through_the_sidecar() {
    if !devnet_ready("doctor_judges_an_unprivileged_container_ready_through_the_sidecar") {
        return;
    }
    // A Node container as users run it: no added capabilities, Docker's default seccomp
    // profile; perf is in the image but may not record there.
    let image =
        std::env::var("DEVPROF_DEMO_JS_IMAGE").unwrap_or_else(|_| "devprof-demo-js:latest".into());
    let name = unique("devprof-test-nodepy-unpriv");
    let _container = run_container(
        &name,
        &[
            "-e",
            "NODE_OPTIONS=--perf-basic-prof-only-functions",
            "-e",
            "BUSY_HASH_PCT=20",
        ],
        &image,
        &[],
    );
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{json .HostConfig.CapAdd}}", &name]),
        "null"
    );
    wait_for_cpu(&name, "node", 0.5);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["doctor", &name])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("✓ capture path"), "{text}");
    assert!(text.contains("ready (sidecar)"), "{text}");
    assert!(!text.contains("  ✗ "), "{text}");
    for title in ["perf_event_open", "capabilities", "seccomp"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("  - {title} ")))
            .unwrap_or_else(|| panic!("no - {title} line:\n{text}"));
        assert!(line.contains("exec mode only"), "{line}");
    }
    // Exec mode alone is blocked, and says so.
    devprof(cwd.path())
        .args(["doctor", &name, "--mode", "exec"])
        .assert()
        .code(8)
        .stdout(predicate::str::contains("blocked (exec)"));
    // The judgement holds: the capture goes through the sidecar.
    devprof(cwd.path())
        .args(["cpu", &name, "3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("via sidecar"));
}
