//! `devprof heap` end to end: the real binary, the real engine, the demo node's real
//! jemalloc dumps. Expected totals are computed here from the dump files themselves (the
//! header's `t*:` line and jeprof's unbiasing formula), not taken from devprof.

mod common;

use common::*;
use devprof::profile::folded::Folded;
use predicates::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// These tests send demo-seq dump signals and read "the newest dump": one at a time.
static DEMO_SEQ_DUMPS: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    DEMO_SEQ_DUMPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The dumps `PREFIX.PID.*.heap` that the process now running as `pid` in `container`
/// wrote, in sequence order. A restarted container often gets its old pid back (demo-seq
/// is pid 7 every time) while the earlier process's dumps stay on the volume: those are
/// older than the process and are left out, to the second, as devprof leaves them out.
fn running_process_dumps(container: &str, pid: &str, prefix: &str) -> Vec<(u64, String)> {
    let stat = docker_ok(&[
        "exec",
        container,
        "cat",
        &format!("/proc/{pid}/stat"),
        "/proc/stat",
    ]);
    // Field 22 of /proc/PID/stat, counted after the command name in parentheses.
    let after_comm = stat.lines().next().unwrap().rsplit_once(") ").unwrap().1;
    let start_ticks: i64 = after_comm.split(' ').nth(19).unwrap().parse().unwrap();
    let btime: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ticks_per_s: i64 = docker_ok(&["exec", container, "getconf", "CLK_TCK"])
        .parse()
        .unwrap();
    let started = btime + start_ticks / ticks_per_s;
    let listing = docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        &format!("stat -c '%Y %n' {prefix}.{pid}.*.heap"),
    ]);
    let base = prefix.rsplit('/').next().unwrap();
    let mut own: Vec<(u64, String)> = listing
        .lines()
        .filter_map(|line| {
            let (mtime, path) = line.split_once(' ').unwrap();
            let name = path.rsplit('/').next().unwrap().to_string();
            let seq = name
                .strip_prefix(&format!("{base}.{pid}."))
                .unwrap()
                .split('.')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            (mtime.parse::<i64>().unwrap() >= started).then_some((seq, name))
        })
        .collect();
    own.sort();
    own
}

/// The names of the dumps a `heap --json` summary says it merged, in its order.
fn merged_dump_names(json: &serde_json::Value) -> Vec<String> {
    json["dumps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

/// The header `t*:` in-use bytes of a dump file, unbiased with jeprof's formula.
fn header_in_use_bytes(dump: &Path) -> f64 {
    let text = std::fs::read_to_string(dump).unwrap();
    let mut lines = text.lines();
    let period: f64 = lines
        .next()
        .unwrap()
        .trim_start_matches("heap_v2/")
        .parse()
        .unwrap();
    let total = lines.next().unwrap().trim();
    let counts = total
        .strip_prefix("t*:")
        .unwrap()
        .split('[')
        .next()
        .unwrap();
    let (objects, bytes) = counts.split_once(':').unwrap();
    let (objects, bytes): (f64, f64) = (
        objects.trim().parse().unwrap(),
        bytes.trim().parse().unwrap(),
    );
    bytes / (1.0 - (-(bytes / objects) / period).exp())
}

/// The `total:` line of the text report, in bytes.
fn report_total(txt: &str) -> f64 {
    let line = txt
        .lines()
        .find(|l| l.starts_with("total: "))
        .expect("total line");
    line["total: ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap()
}

/// Inclusive bytes of every `demo_node::workloads::*` function in a folded file.
fn workload_bytes(folded: &Folded) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for (stack, bytes) in &folded.stacks {
        let mut seen = std::collections::HashSet::new();
        for f in stack
            .split(';')
            .filter(|f| f.starts_with("demo_node::workloads::"))
        {
            if seen.insert(f) {
                *out.entry(f.to_string()).or_default() += bytes;
            }
        }
    }
    out
}

/// Checks one heap capture: artifacts, alloc_blocks largest, total vs the dump's header.
fn check_capture(cwd: &Path) -> serde_json::Value {
    let stem = only_capture(cwd, DEMO_SEQ, "heap-");
    for ext in ["folded", "svg", "txt", "json"] {
        let path = with_ext(&stem, ext);
        assert!(
            std::fs::metadata(&path)
                .map(|m| m.len() > 0)
                .unwrap_or(false),
            "{} missing",
            path.display()
        );
    }
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["kind"], "heap");
    assert_eq!(
        manifest["graphs"][0]["unit"], "bytes",
        "the manifest names what the folded counts are"
    );
    let dumps = manifest["heap"]["dumps"].as_array().unwrap();
    assert_eq!(dumps.len(), 1);
    let dump_name = dumps[0]["name"].as_str().unwrap();
    let dump_path = cwd.join("profiling").join(DEMO_SEQ).join(dump_name);
    assert!(
        dump_path.is_file(),
        "the dump is in the store under its own name: {}",
        dump_path.display()
    );

    let folded =
        Folded::from_folded_text(&std::fs::read_to_string(with_ext(&stem, "folded")).unwrap());
    let workloads = workload_bytes(&folded);
    let (top, top_bytes) = workloads
        .iter()
        .max_by_key(|(_, b)| **b)
        .expect("workload frames");
    assert_eq!(top, "demo_node::workloads::alloc_blocks", "{workloads:?}");
    assert!(
        *top_bytes as f64 > 0.3 * folded.total() as f64,
        "{workloads:?} of {}",
        folded.total()
    );

    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(
        svg.contains("demo_node::workloads::alloc_blocks") && svg.contains(" bytes"),
        "memory flamegraph in bytes"
    );
    assert!(!svg.contains("_rjem_"), "allocator frames dropped");

    let txt = std::fs::read_to_string(with_ext(&stem, "txt")).unwrap();
    let total = report_total(&txt);
    let header = header_in_use_bytes(&dump_path);
    assert!(
        (total - header).abs() / header < 0.01,
        "report total {total} vs dump t* {header}"
    );
    assert_eq!(
        total as u64,
        folded.total(),
        "the flamegraph holds every byte of the report"
    );
    assert!(txt.contains(dump_name), "the report names its dump");
    manifest
}

#[test]
#[ignore = "needs the demo devnet"]
fn heap_over_a_window_then_latest_show_alloc_blocks_and_the_dump_total() {
    if !devnet_ready("heap_over_a_window_then_latest_show_alloc_blocks_and_the_dump_total") {
        return;
    }
    let _guard = lock();
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "10"])
        .assert()
        .success()
        .stdout(predicate::str::contains("files written"))
        .stdout(predicate::str::contains("memory flamegraph"))
        .stdout(predicate::str::contains(
            "demo_node::workloads::alloc_blocks",
        ));
    let window = check_capture(cwd.path());
    assert!(window["heap"]["how"].as_str().unwrap().contains("SIGUSR2"));
    assert!(window["duration_recorded_s"].as_f64().unwrap() >= 9.9);
    let collected = window["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"].as_str().unwrap().ends_with(".heap"))
        .count();
    assert_eq!(collected, 2, "the start and the end dump are collected");
    // The heap over time: each dump's header total, plotted beside the report.
    let stem = only_capture(cwd.path(), DEMO_SEQ, "heap-");
    let totals = window["heap"]["dump_totals"].as_array().unwrap();
    assert_eq!(totals.len(), 2);
    for t in totals {
        let dump = stem.parent().unwrap().join(t["name"].as_str().unwrap());
        let expected = header_in_use_bytes(&dump);
        assert!(
            (t["bytes"].as_f64().unwrap() - expected).abs() <= 1.0,
            "{t} vs {expected}"
        );
    }
    let plot = std::fs::read_to_string(with_ext(&stem, "dumps.svg")).expect("the heap plot");
    assert_eq!(plot.matches("<circle").count(), 2);

    // --latest, in a fresh store: the newest dump, no waiting.
    let cwd2 = workdir();
    let started = std::time::Instant::now();
    devprof(cwd2.path())
        .args(["heap", DEMO_SEQ, "--latest"])
        .assert()
        .success();
    assert!(started.elapsed().as_secs() < 60);
    let latest = check_capture(cwd2.path());
    // One dump is no trend: no plot.
    assert!(!with_ext(&only_capture(cwd2.path(), DEMO_SEQ, "heap-"), "dumps.svg").exists());
    let newest = docker_ok(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        "ls -t /profiling/jeprof.demo-seq.*.heap | head -1",
    ]);
    assert_eq!(
        format!(
            "/profiling/{}",
            latest["heap"]["dumps"][0]["name"].as_str().unwrap()
        ),
        newest
    );
    assert_eq!(
        latest["heap"]["dumps"][0]["name"], window["heap"]["dumps"][0]["name"],
        "the window's end dump is the newest"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn last_two_merges_exactly_two_named_dumps_and_all_merges_every_one() {
    if !devnet_ready("last_two_merges_exactly_two_named_dumps_and_all_merges_every_one") {
        return;
    }
    let _guard = lock();
    let cwd = workdir();
    // At least two dumps of the running node (a window asks for two).
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "1"])
        .assert()
        .success();
    let pid = docker_ok(&["exec", DEMO_SEQ, "pgrep", "-x", "demo-node"]);
    let own = running_process_dumps(DEMO_SEQ, &pid, "/profiling/jeprof.demo-seq");
    assert!(own.len() >= 2, "{own:?}");
    let newest_two: Vec<String> = own[own.len() - 2..]
        .iter()
        .map(|(_, n)| n.clone())
        .collect();

    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--last", "2", "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let merged = merged_dump_names(&json);
    assert_eq!(merged, newest_two, "exactly the newest two, oldest first");
    let txt_path = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .find(|p| p.ends_with(".txt"))
        .unwrap();
    let txt = std::fs::read_to_string(cwd.path().join(txt_path)).unwrap();
    assert!(txt.contains("dumps merged (2)"), "{txt}");
    for name in &newest_two {
        assert!(txt.contains(name.as_str()), "the report names {name}");
    }
    // A merge adds the dumps: its total is the sum of their headers.
    let store = cwd.path().join("profiling").join(DEMO_SEQ);
    let expected: f64 = newest_two
        .iter()
        .map(|n| header_in_use_bytes(&store.join(n)))
        .sum();
    let total = json["total_bytes"].as_f64().unwrap();
    assert!(
        (total - expected).abs() / expected < 0.01,
        "{total} vs {expected}"
    );

    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--all-dumps", "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let all = merged_dump_names(&json);
    let own_names: Vec<String> = own.iter().map(|(_, n)| n.clone()).collect();
    assert_eq!(
        all, own_names,
        "every dump of the process, in sequence order"
    );

    // More than there are: an error that says how many there are, nothing more written.
    let before = files_under(cwd.path());
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--last", "100000"])
        .assert()
        .code(6)
        .stderr(predicate::str::contains("has written only"));
    assert_eq!(files_under(cwd.path()), before);
}

#[test]
#[ignore = "needs the demo devnet"]
fn files_selects_exactly_the_named_dumps_and_a_missing_name_lists_the_others() {
    if !devnet_ready("files_selects_exactly_the_named_dumps_and_a_missing_name_lists_the_others") {
        return;
    }
    let _guard = lock();
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "1"])
        .assert()
        .success();
    let first = docker_ok(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        "ls -tr /profiling/jeprof.demo-seq.*.heap | head -1",
    ]);
    let first = first.rsplit('/').next().unwrap().to_string();
    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--files", &first, "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["dumps"].as_array().unwrap().len(), 1);
    assert_eq!(json["dumps"][0]["name"], first.as_str());

    let cwd2 = workdir();
    devprof(cwd2.path())
        .args([
            "heap",
            DEMO_SEQ,
            "--files",
            &format!("{first},jeprof.demo-seq.1.999999.m9.heap"),
        ])
        .assert()
        .code(6)
        .stderr(predicate::str::contains(
            "no dump named jeprof.demo-seq.1.999999.m9.heap",
        ))
        .stderr(predicate::str::contains(first.as_str()));
    assert!(files_under(cwd2.path()).is_empty());
    devprof(cwd2.path())
        .args(["heap", DEMO_SEQ, "--files", "../../etc/passwd"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a relative path"));
    assert!(files_under(cwd2.path()).is_empty());
}

#[test]
#[ignore = "needs the demo devnet"]
fn alloc_renders_accumulated_bytes() {
    if !devnet_ready("alloc_renders_accumulated_bytes") {
        return;
    }
    let _guard = lock();
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "1"])
        .assert()
        .success();
    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--latest", "--alloc", "--json"])
        .assert()
        .success();
    let alloc: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--latest", "--json"])
        .assert()
        .success();
    let in_use: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(alloc["measure"], "allocated");
    assert_eq!(alloc["dumps"], in_use["dumps"]);
    // alloc_blocks frees half of what it holds again and again: it allocated far more
    // than it holds.
    assert!(alloc["total_bytes"].as_u64().unwrap() > in_use["total_bytes"].as_u64().unwrap());
}

#[test]
#[ignore = "needs the demo devnet"]
fn target_without_profiling_fails_naming_the_variable_and_writes_nothing() {
    if !devnet_ready("target_without_profiling_fails_naming_the_variable_and_writes_nothing") {
        return;
    }
    let name = unique("devprof-test-noprof");
    let _guard = run_container(
        &name,
        &[
            "-e",
            "DEMO_WORKLOADS=alloc_blocks:5",
            "-e",
            "_RJEM_MALLOC_CONF=prof:false",
        ],
        &demo_image(),
        &[],
    );
    let cwd = workdir();
    for args in [
        vec!["heap", name.as_str(), "2"],
        vec!["heap", name.as_str(), "--latest"],
    ] {
        devprof(cwd.path())
            .args(&args)
            .assert()
            .code(5)
            .stderr(predicate::str::contains(
                "jemalloc heap profiling is not on",
            ))
            .stderr(predicate::str::contains(
                "_RJEM_MALLOC_CONF=prof:false has no prof:true",
            ))
            .stderr(predicate::str::contains("when the process starts"))
            .stderr(predicate::str::contains(".env"));
    }
    assert!(
        files_under(cwd.path()).is_empty(),
        "{:?}",
        files_under(cwd.path())
    );

    // Not set at all: the same, naming the variable this program reads.
    let bare = unique("devprof-test-noconf");
    let _g2 = run_container(
        &bare,
        &["-e", "DEMO_WORKLOADS=alloc_blocks:5"],
        &demo_image(),
        &[],
    );
    devprof(cwd.path())
        .args(["heap", &bare, "2"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("_RJEM_MALLOC_CONF is not set"));
    assert!(files_under(cwd.path()).is_empty());
}

#[test]
#[ignore = "needs the demo devnet"]
fn interval_dumps_are_collected_and_an_uncaught_signal_is_never_sent() {
    if !devnet_ready("interval_dumps_are_collected_and_an_uncaught_signal_is_never_sent") {
        return;
    }
    // SIGUSR1 is not caught by the demo node: devprof must not send it (it would kill it).
    let name = unique("devprof-test-interval");
    let _guard = run_container(
        &name,
        &[
            "-e",
            "DEMO_WORKLOADS=alloc_blocks:20",
            "-e",
            "_RJEM_MALLOC_CONF=prof:true,lg_prof_sample:17,lg_prof_interval:24,prof_prefix:/tmp/jeprof",
        ],
        &demo_image(),
        &[],
    );
    let no_interval = unique("devprof-test-nosig");
    let _g2 = run_container(
        &no_interval,
        &[
            "-e",
            "DEMO_WORKLOADS=alloc_blocks:5",
            "-e",
            "_RJEM_MALLOC_CONF=prof:true,prof_prefix:/tmp/jeprof",
        ],
        &demo_image(),
        &[],
    );
    // Both nodes started and allocating.
    wait_for_cpu(&name, "demo-node", 0.3);
    wait_for_cpu(&no_interval, "demo-node", 0.1);
    let cwd = workdir();
    devprof(cwd.path())
        .env("DEVPROF_HEAP_DUMP_SIGNAL", "USR1")
        .args(["heap", &no_interval, "2"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("does not catch SIGUSR1"))
        .stderr(predicate::str::contains("lg_prof_interval"));
    assert!(files_under(cwd.path()).is_empty());
    let alive = docker_ok(&["exec", &no_interval, "pgrep", "-x", "demo-node"]);
    assert!(!alive.is_empty(), "the node still runs");

    let out = devprof(cwd.path())
        .env("DEVPROF_HEAP_DUMP_SIGNAL", "USR1")
        .args(["heap", &name, "4", "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(
        json["how"].as_str().unwrap().contains("interval dumps"),
        "{}",
        json["how"]
    );
    assert!(
        json["dumps"][0]["name"].as_str().unwrap().contains(".i"),
        "an interval dump: {}",
        json["dumps"]
    );
    assert!(
        !docker_ok(&["exec", &name, "pgrep", "-x", "demo-node"]).is_empty(),
        "the node still runs"
    );
}

#[test]
fn duration_with_a_selection_and_last_zero_are_usage_errors() {
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", "demo-seq", "10", "--latest"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("give one or the other"));
    devprof(cwd.path())
        .args(["heap", "demo-seq", "--last", "0"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("at least 1"));
    devprof(cwd.path())
        .args(["heap", "demo-seq", "--latest", "--all-dumps"])
        .assert()
        .code(2);
    devprof(cwd.path())
        .env("DEVPROF_HEAP_DUMP_SIGNAL", "KILL")
        .args(["heap", "demo-seq", "5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be caught"));
    assert!(files_under(cwd.path()).is_empty());
}

/// A demo node in its own container that blanks its environment after start
/// (DEMO_CLEAR_ENVIRON=1), started by `sh -c SCRIPT` (which ends in `exec .../demo-node`) with
/// `env` as the container's configured environment. Returns the guard and the node's pid.
fn environ_clearing_node(prefix: &str, env: &[&str], script: &str) -> (ContainerGuard, String) {
    let name = unique(&format!("devprof-test-robust2-{prefix}"));
    let mut args = vec![
        "-e",
        "DEMO_WORKLOADS=alloc_blocks:20",
        "-e",
        "DEMO_CLEAR_ENVIRON=1",
    ];
    for e in env {
        args.extend(["-e", e]);
    }
    let guard = run_container(&name, &args, &demo_image(), &["sh", "-c", script]);
    let started = std::time::Instant::now();
    let pid = loop {
        let out = docker(&["exec", &name, "pgrep", "-x", "demo-node"]);
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let logs = docker_ok(&["logs", &name]);
        if !pid.is_empty() && logs.contains("environment cleared in place") {
            break pid;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{name}: the node did not start and clear its environment: {logs}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    // The point of the set-up: /proc/PID/environ reads blank (only NULs), the command
    // line is a title.
    let environ = docker_ok(&[
        "exec",
        &name,
        "sh",
        "-c",
        &format!("wc -c < /proc/{pid}/environ; tr -d '\\0' < /proc/{pid}/environ | wc -c"),
    ]);
    let sizes: Vec<u64> = environ
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(
        sizes[0] > 0 && sizes[1] == 0,
        "/proc/{pid}/environ is not blank: {environ}"
    );
    let cmdline = docker_ok(&[
        "exec",
        &name,
        "sh",
        "-c",
        &format!("tr '\\0' ' ' < /proc/{pid}/cmdline"),
    ]);
    assert!(cmdline.starts_with("demo-node: alloc_blocks"), "{cmdline}");
    (guard, pid)
}

/// Sends the dump signal by hand and waits for the dump `<prefix>.<pid>.0.m0.heap`.
fn dump_by_hand(container: &str, pid: &str, prefix: &str) -> String {
    docker_ok(&["exec", container, "kill", "-USR2", pid]);
    let path = format!("{prefix}.{pid}.0.m0.heap");
    let started = std::time::Instant::now();
    while !docker(&["exec", container, "test", "-s", &path])
        .status
        .success()
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "no dump {path} in {container}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    path
}

/// The artifacts of the one heap capture of `container` exist and are not empty.
fn heap_artifacts_written(cwd: &Path, container: &str) -> serde_json::Value {
    let stem = only_capture(cwd, container, "heap-");
    for ext in ["folded", "svg", "txt", "json"] {
        let path = with_ext(&stem, ext);
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
            "{} missing",
            path.display()
        );
    }
    let folded = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    assert!(
        folded.contains("demo_node::workloads::alloc_blocks"),
        "{folded}"
    );
    read_manifest(&stem)
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_node_that_blanked_its_environment_is_profiled_with_the_settings_it_started_with() {
    if !devnet_ready(
        "a_node_that_blanked_its_environment_is_profiled_with_the_settings_it_started_with",
    ) {
        return;
    }
    let (node, _pid) = environ_clearing_node(
        "blank",
        &["_RJEM_MALLOC_CONF=prof:true,lg_prof_sample:17,prof_prefix:/tmp/jeprof"],
        "exec /usr/local/bin/demo-node",
    );
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", &node.0, "3"])
        .assert()
        .success()
        .stderr(predicate::str::contains("reads blank"))
        .stdout(predicate::str::contains("files written"));
    let manifest = heap_artifacts_written(cwd.path(), &node.0);
    assert_eq!(manifest["heap"]["conf_variable"], "_RJEM_MALLOC_CONF");
    assert!(manifest["heap"]["how"]
        .as_str()
        .unwrap()
        .contains("SIGUSR2"));
}

#[test]
#[ignore = "needs the demo devnet"]
fn dumps_the_pid_already_wrote_show_its_profiling_on_when_nothing_else_does() {
    if !devnet_ready("dumps_the_pid_already_wrote_show_its_profiling_on_when_nothing_else_does") {
        return;
    }
    // The variable is set by the start script, not the container: after the node blanks
    // its environment, only its dumps (default prefix, in its working directory) tell.
    let (node, pid) = environ_clearing_node(
        "dumps",
        &[],
        "cd /tmp && _RJEM_MALLOC_CONF=prof:true,lg_prof_sample:17 exec /usr/local/bin/demo-node",
    );
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", &node.0, "2"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("_RJEM_MALLOC_CONF is not set"))
        .stderr(predicate::str::contains(
            "also checked: /etc/_rjem_malloc.conf",
        ));
    assert!(files_under(cwd.path()).is_empty());
    dump_by_hand(&node.0, &pid, "/tmp/jeprof");
    devprof(cwd.path())
        .args(["heap", &node.0, "3"])
        .assert()
        .success();
    let manifest = heap_artifacts_written(cwd.path(), &node.0);
    let source = manifest["heap"]["conf_variable"].as_str().unwrap();
    assert!(
        source.contains(&format!("dump(s) of pid {pid} already in /tmp")),
        "{source}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn the_config_file_symlink_turns_profiling_on() {
    if !devnet_ready("the_config_file_symlink_turns_profiling_on") {
        return;
    }
    // jemalloc's own config file: the target of the /etc/<prefix>malloc.conf symlink.
    let (node, _pid) = environ_clearing_node(
        "conffile",
        &[],
        "ln -s 'prof:true,lg_prof_sample:17,prof_prefix:/tmp/jeprof' /etc/_rjem_malloc.conf && exec /usr/local/bin/demo-node",
    );
    let logs = docker_ok(&["logs", &node.0]);
    assert!(logs.contains("jemalloc profiling: on"), "{logs}");
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", &node.0, "3"])
        .assert()
        .success();
    let manifest = heap_artifacts_written(cwd.path(), &node.0);
    assert_eq!(
        manifest["heap"]["conf_variable"],
        "/etc/_rjem_malloc.conf (symlink)"
    );
    assert_eq!(
        manifest["heap"]["conf"],
        "prof:true,lg_prof_sample:17,prof_prefix:/tmp/jeprof"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn files_takes_any_dump_the_user_names_and_refuses_a_huge_one_naming_the_limit() {
    if !devnet_ready("files_takes_any_dump_the_user_names_and_refuses_a_huge_one_naming_the_limit")
    {
        return;
    }
    // Profiling set by the start script, dumps outside the working directory: devprof
    // cannot see it on, but the user knows where the dumps are.
    let (node, pid) = environ_clearing_node(
        "files",
        &[],
        "mkdir -p /tmp/hidden && _RJEM_MALLOC_CONF=prof:true,lg_prof_sample:17,prof_prefix:/tmp/hidden/jeprof exec /usr/local/bin/demo-node",
    );
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", &node.0, "2"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains(
            "jemalloc heap profiling is not on",
        ));
    let dump = dump_by_hand(&node.0, &pid, "/tmp/hidden/jeprof");
    devprof(cwd.path())
        .args(["heap", &node.0, "--files", &dump])
        .assert()
        .success()
        .stderr(predicate::str::contains("not visible"));
    let manifest = heap_artifacts_written(cwd.path(), &node.0);
    let name = dump.rsplit('/').next().unwrap();
    assert_eq!(manifest["heap"]["dumps"][0]["name"], name);
    assert!(cwd
        .path()
        .join("profiling")
        .join(&node.0)
        .join(name)
        .is_file());

    // A file far larger than any heap dump (sparse: it takes no disk) is refused before
    // anything of it is written, and the error names the limit.
    docker_ok(&["exec", &node.0, "truncate", "-s", "3G", "/tmp/huge.heap"]);
    let cwd2 = workdir();
    devprof(cwd2.path())
        .args(["heap", &node.0, "--files", "/tmp/huge.heap"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/tmp/huge.heap"))
        .stderr(predicate::str::contains("limit of 1.0 GiB for a heap dump"));
    assert!(
        files_under(cwd2.path()).is_empty(),
        "{:?}",
        files_under(cwd2.path())
    );
    // Not a regular file: refused by name.
    devprof(cwd2.path())
        .args(["heap", &node.0, "--files", "/dev/zero"])
        .assert()
        .code(6)
        .stderr(predicate::str::contains("no regular file at /dev/zero"));
}

/// A restarted container often gets its old pid back while the old process's dumps stay
/// (here in the container's own /tmp): they once made devprof wait for a sequence number
/// the new process would not reach for a while, and fail with "no new dump appeared".
#[test]
#[ignore = "needs the demo devnet"]
fn heap_window_after_a_restart_that_reused_the_pid_ignores_the_old_process_dumps() {
    if !devnet_ready(
        "heap_window_after_a_restart_that_reused_the_pid_ignores_the_old_process_dumps",
    ) {
        return;
    }
    let name = unique("devprof-test-restart");
    let _guard = run_container(
        &name,
        &[
            "-e",
            "DEMO_WORKLOADS=alloc_blocks:5",
            "-e",
            "_RJEM_MALLOC_CONF=prof:true,prof_accum:true,prof_prefix:/tmp/jeprof",
        ],
        &demo_image(),
        &[],
    );
    let node_pid = |name: &str| {
        let started = std::time::Instant::now();
        loop {
            let out = docker(&["exec", name, "pgrep", "-x", "demo-node"]);
            let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !pid.is_empty() {
                return pid;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(15),
                "no demo-node in {name}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    let pid = node_pid(&name);
    // The old process writes dumps 0, 1 and 2.
    dump_by_hand(&name, &pid, "/tmp/jeprof");
    for seq in 1..3 {
        docker_ok(&["exec", &name, "kill", "-USR2", &pid]);
        let path = format!("/tmp/jeprof.{pid}.{seq}.m{seq}.heap");
        let started = std::time::Instant::now();
        while !docker(&["exec", &name, "test", "-s", &path])
            .status
            .success()
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(15),
                "no dump {path}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    // The dumps' times must fall before the new process's start, to the second.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    docker_ok(&["restart", "-t", "1", &name]);
    assert_eq!(
        node_pid(&name),
        pid,
        "the restarted node has its old pid back"
    );
    let old = docker_ok(&["exec", &name, "sh", "-c", "ls /tmp/jeprof.*.heap | wc -l"]);
    assert_eq!(old, "3", "the old process's dumps are still there");

    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", &name, "3"])
        .assert()
        .success();
    heap_artifacts_written(cwd.path(), &name);

    // --all-dumps merged every dump with the pid, the earlier process's 0, 1 and 2 too
    // (its sequence restarts, so its dumps even passed for the newest).
    let own = running_process_dumps(&name, &pid, "/tmp/jeprof");
    assert!(own.len() >= 2, "{own:?}");
    let out = devprof(cwd.path())
        .args(["heap", &name, "--all-dumps", "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let merged = merged_dump_names(&json);
    let expected: Vec<String> = own.into_iter().map(|(_, n)| n).collect();
    assert_eq!(merged, expected, "the running process's dumps only");
}

/// Regression: a dump already copied home was deleted when rendering it failed after. It
/// is the recording: it stays in the store, the manifest lists it with what failed, and
/// the error gives the command that renders it again.
#[test]
#[ignore = "needs the demo devnet"]
fn a_dump_home_that_cannot_be_rendered_is_kept_with_the_command_to_render_it_again() {
    if !devnet_ready(
        "a_dump_home_that_cannot_be_rendered_is_kept_with_the_command_to_render_it_again",
    ) {
        return;
    }
    let path = "/tmp/devprof-test-cut.heap";
    docker_ok(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        &format!("printf 'heap_v2/524288\\n  t*: oops\\n' > {path}"),
    ]);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "--files", path])
        .assert()
        .failure()
        .get_output()
        .clone();
    docker_ok(&["exec", DEMO_SEQ, "rm", "-f", path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the recording is kept"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "devprof --output-dir profiling heap {DEMO_SEQ} --files {path}"
        )),
        "{stderr}"
    );
    let store = cwd.path().join("profiling").join(DEMO_SEQ);
    let kept = store.join("devprof-test-cut.heap");
    assert!(kept.is_file(), "{:?}", files_under(cwd.path()));
    let stem = only_capture(cwd.path(), DEMO_SEQ, "heap-");
    let manifest = read_manifest(&stem);
    let files: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .filter(|name| !name.ends_with(".json"))
        .collect();
    assert_eq!(files, ["devprof-test-cut.heap"], "{manifest}");
    assert!(
        manifest["notes"]
            .to_string()
            .contains("the analysis failed"),
        "{manifest}"
    );
    for ext in ["folded", "svg", "txt"] {
        assert!(!with_ext(&stem, ext).exists(), "half-written .{ext} left");
    }
}

/// Ctrl-C in a heap window ends it at once: the end dump is asked for and rendered, the
/// manifest states the shortened window, and nothing of devprof stays in the container.
/// Regression: the window's recorder was not known to the capture's stop, so Ctrl-C
/// waited out the whole window.
#[test]
#[ignore = "needs the demo devnet"]
fn ctrl_c_ends_a_heap_window_at_once_and_renders_its_end_dump() {
    if !devnet_ready("ctrl_c_ends_a_heap_window_at_once_and_renders_its_end_dump") {
        return;
    }
    let _guard = lock();
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["heap", DEMO_SEQ, "60"]);
    capture.wait_for_window();
    wait_for_cpu(DEMO_SEQ, "demo-node", 0.5);
    capture.interrupt();
    let out = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stem = only_capture(cwd.path(), DEMO_SEQ, "heap-");
    let manifest = read_manifest(&stem);
    assert_eq!(manifest["interrupted"], true, "{manifest}");
    let edge =
        |key: &str| chrono::DateTime::parse_from_rfc3339(manifest[key].as_str().unwrap()).unwrap();
    let stated = (edge("window_stopped_at") - edge("window_started_at")).num_milliseconds();
    assert!(
        (1_000..15_000).contains(&stated),
        "the stated window lasted {stated} ms of the 60 s asked"
    );
    let recorded = manifest["duration_recorded_s"].as_f64().unwrap();
    assert!(recorded < 15.0, "recorded {recorded} s");
    let left = docker_ok(&[
        "exec",
        DEMO_SEQ,
        "sh",
        "-c",
        "ls -d /tmp/devprof.* 2>/dev/null || true",
    ]);
    assert!(left.is_empty(), "left in the container: {left}");
}
