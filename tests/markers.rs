//! Markers from the demo node's block mode (the demo-blocks service of compose/demo.yml):
//! every block line of the window is in the `.markers` file (counted again with `docker
//! logs --since --until`), the clocks agree (the heavy workload's samples fall inside the
//! heavy blocks), `diff --slice block --slowest 3` ranks the heavy workload first, the
//! heatmap's ticks select their intervals in headless Chromium, and a session exports as one
//! Firefox Profiler timeline. A container whose logs cannot be read is a note.

mod common;
mod timelines;

use common::*;
use devprof::profile::markers::{intervals, Markers};
use devprof::profile::timeline::Timeline;
use std::path::Path;
use std::process::Command;
use timelines::check_firefox_thread;

const BLOCKS: &str = "demo-blocks";
const HEAVY: &str = "hash_chain";

fn read_markers(stem: &Path) -> Markers {
    Markers::read_path(&with_ext(stem, "markers"))
        .unwrap()
        .expect("the capture has a .markers file")
}

fn read_timeline(stem: &Path) -> Timeline {
    Timeline::read(std::fs::File::open(with_ext(stem, "timeline")).unwrap()).unwrap()
}

/// Block lines the engine has between `since` and `until` (ns, both included).
fn logged_blocks(since: i64, until: i64) -> usize {
    let stamp = |ns: i64| {
        format!(
            "{}.{:09}",
            ns.div_euclid(1_000_000_000),
            ns.rem_euclid(1_000_000_000)
        )
    };
    let out = docker_ok(&[
        "logs",
        "--since",
        &stamp(since),
        "--until",
        &stamp(until),
        BLOCKS,
    ]);
    out.lines()
        .filter(|l| l.contains("Block added to canonical chain"))
        .count()
}

/// Samples (weight) of the timeline whose stack holds `frame`, inside / outside `spans`.
fn split_samples(timeline: &Timeline, frame: &str, spans: &[(i64, i64)]) -> (u64, u64) {
    let to_unix = timeline.to_unix_ns().expect("the timeline names its clock");
    let (mut inside, mut outside) = (0, 0);
    for s in &timeline.samples {
        if !timeline.stacks[s.stack as usize].contains(frame) {
            continue;
        }
        let t = s.time_ns as i64 + to_unix;
        if spans.iter().any(|(a, b)| *a <= t && t < *b) {
            inside += s.weight;
        } else {
            outside += s.weight;
        }
    }
    (inside, outside)
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_block_capture_keeps_every_block_and_its_clock_agrees_with_the_log_lines() {
    let test = "a_block_capture_keeps_every_block_and_its_clock_agrees_with_the_log_lines";
    if !demo_container_ready(test, BLOCKS) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", BLOCKS, "20"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), BLOCKS, "perf-");
    let listed = timelines::listed_files(&read_manifest(&stem));
    assert!(listed.iter().any(|n| n.ends_with(".markers")), "{listed:?}");

    // Every block the node logged in the window, counted independently.
    let markers = read_markers(&stem);
    let blocks: Vec<_> = markers
        .markers
        .iter()
        .filter(|m| m.name == "block")
        .collect();
    assert!(blocks.len() > 20, "only {} blocks in 20 s", blocks.len());
    assert_eq!(
        blocks.len(),
        logged_blocks(markers.header.since_ns, markers.header.until_ns)
    );
    assert!(blocks
        .iter()
        .all(|m| m.set == "reth" && m.number.is_some() && m.elapsed_ns.is_some()));
    let numbers: Vec<u64> = blocks.iter().filter_map(|m| m.number).collect();
    assert!(
        numbers.windows(2).all(|w| w[1] == w[0] + 1),
        "blocks missing: {numbers:?}"
    );

    // How late the engine stamps a line: the node writes its own wall clock in it (`at=`).
    let mut delays: Vec<i64> = blocks
        .iter()
        .filter_map(|m| {
            let at = m.line.split(" at=").nth(1)?.trim().parse::<i64>().ok()?;
            Some(m.time_ns - at)
        })
        .collect();
    delays.sort_unstable();
    if !delays.is_empty() {
        eprintln!(
            "log stamp delay over {} lines: median {:.3} ms, max {:.3} ms",
            delays.len(),
            delays[delays.len() / 2] as f64 / 1e6,
            delays[delays.len() - 1] as f64 / 1e6
        );
        assert!(
            delays[0] >= -1_000_000,
            "a line stamped before it was written: {delays:?}"
        );
    }

    // One clock: the heavy workload runs only in heavy blocks, so its samples fall inside
    // their intervals.
    let timeline = read_timeline(&stem);
    let heavy: Vec<(i64, i64)> = blocks
        .iter()
        .filter(|m| m.line.contains(&format!("heavy={HEAVY}")))
        .map(|m| (m.time_ns - m.elapsed_ns.unwrap() as i64, m.time_ns))
        .collect();
    assert!(heavy.len() >= 2, "heavy blocks: {heavy:?}");
    let (inside, outside) = split_samples(&timeline, HEAVY, &heavy);
    assert!(inside > 0, "no {HEAVY} samples");
    let share = inside as f64 / (inside + outside) as f64;
    eprintln!(
        "{inside} of {} {HEAVY} samples inside the heavy blocks ({:.1}%)",
        inside + outside,
        share * 100.0
    );
    assert!(
        share >= 0.9,
        "{inside} of {} {HEAVY} samples in the heavy blocks ({:.1}%)",
        inside + outside,
        share * 100.0
    );

    // The slowest blocks against the median one: the heavy workload gained most.
    let out = devprof(cwd.path())
        .args([
            "diff",
            with_ext(&stem, "json").to_str().unwrap(),
            "--slice",
            "block",
            "--slowest",
            "3",
            "--json",
            "-o",
            "slow.svg",
        ])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let first_gain = json["gains"][0]["name"].as_str().unwrap_or_default();
    assert!(
        first_gain.contains(HEAVY),
        "first gain {first_gain}: {json}"
    );
    assert!(cwd.path().join("slow.svg").is_file());
    // The table of intervals, and a flamegraph per slowest interval.
    let out = devprof(cwd.path())
        .args(["top", BLOCKS, "--slice", "block", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = top["intervals"].as_array().unwrap();
    // Blocks inside the recorded stretch (perf starts after the log stream is followed).
    let (first, last) = timeline.span_ns().unwrap();
    let to_unix = timeline.to_unix_ns().unwrap();
    let inside = blocks
        .iter()
        .filter(|m| {
            m.time_ns - m.elapsed_ns.unwrap() as i64 >= first as i64 + to_unix - 1_001_001
                && m.time_ns <= last as i64 + to_unix + 1_001_001
        })
        .count();
    assert_eq!(rows.len(), inside);
    let sliced: u64 = rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum();
    assert!(sliced > 0 && sliced <= timeline.samples.len() as u64);
    devprof(cwd.path())
        .args([
            "render",
            with_ext(&stem, "folded").to_str().unwrap(),
            "--slice",
            "block",
            "--slowest",
            "2",
            "-o",
            "slices",
        ])
        .assert()
        .success();
    let svgs = std::fs::read_dir(cwd.path().join("slices"))
        .unwrap()
        .count();
    let mut lengths: Vec<(f64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["length_ms"].as_f64().unwrap(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    lengths.sort_by(|a, b| b.0.total_cmp(&a.0));
    assert_eq!(svgs, lengths.iter().take(2).filter(|(_, n)| *n > 0).count());
    assert!(svgs > 0);

    check_heatmap_in_chromium(&stem, &markers, &timeline);
}

/// The heatmap page: no errors, one tick per marker, and a click on a tick selects the
/// marker's interval (the flamegraph's total is the timeline's samples in it).
fn check_heatmap_in_chromium(stem: &Path, markers: &Markers, timeline: &Timeline) {
    let to_unix = timeline.to_unix_ns().unwrap();
    let spans = intervals(&markers.markers, None, markers.header.since_ns);
    let (first, last) = timeline.span_ns().unwrap();
    let (first, last) = (first as i64 + to_unix, last as i64 + to_unix);
    // Ticks inside the sampled stretch: the heavy ones and a few others.
    let chosen: Vec<usize> = spans
        .iter()
        .enumerate()
        .filter(|(_, i)| i.start_ns > first && i.end_ns < last)
        .map(|(n, _)| n)
        .step_by(3)
        .take(6)
        .collect();
    assert!(!chosen.is_empty());
    let script = repo_root().join("tests/support/heatmap_markers.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).arg(with_ext(stem, "html"));
    cmd.args(chosen.iter().map(|i| i.to_string()));
    let out = cmd
        .output()
        .expect("python3 and chromium (scripts/setup.sh installs them)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(page["errors"], 0, "{page}");
    assert_eq!(page["console"].as_array().unwrap().len(), 0, "{page}");
    assert_eq!(
        page["ticks"].as_u64().unwrap() as usize,
        markers.markers.len()
    );
    assert_eq!(
        page["count"].as_u64().unwrap() as usize,
        markers.markers.len()
    );
    for click in page["clicks"].as_array().unwrap() {
        let i = click["index"].as_u64().unwrap() as usize;
        let span = spans[i];
        let expected: u64 = timeline
            .samples
            .iter()
            .filter(|s| span.contains(s.time_ns as i64 + to_unix))
            .map(|s| s.weight)
            .sum();
        assert_eq!(click["selected"], true, "{click}");
        assert_eq!(click["range"], format!("m{i}"), "{click}");
        assert_eq!(
            click["total"].as_u64().unwrap(),
            expected,
            "marker {i}: {click}"
        );
        assert_eq!(
            click["title"].as_str().unwrap(),
            markers.markers[span.marker].line
        );
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_session_exports_as_one_firefox_timeline_with_a_process_per_container() {
    let test = "a_session_exports_as_one_firefox_timeline_with_a_process_per_container";
    if !demo_container_ready(test, BLOCKS) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["profile", BLOCKS, DEMO_SEQ, "6", "--kinds", "cpu"])
        .assert()
        .success();
    devprof(cwd.path())
        .args(["export", "session", "-f", "firefox", "-o", "devnet.json"])
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cwd.path().join("devnet.json")).unwrap()).unwrap();
    // Invariants of the processed format as written by fxprof-processed-profile.
    assert!(json["meta"]["preprocessedProfileVersion"]
        .as_u64()
        .is_some());
    let threads = json["threads"].as_array().unwrap();
    let mut per_process: std::collections::BTreeMap<String, (u64, usize)> = Default::default();
    for thread in threads {
        check_firefox_thread(thread);
        let samples = &thread["samples"];
        let m = thread["markers"]["length"].as_u64().unwrap() as usize;
        let total: u64 = samples["weight"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum();
        let entry = per_process
            .entry(thread["processName"].as_str().unwrap().to_string())
            .or_default();
        entry.0 += total;
        entry.1 += m;
    }
    // One process per container, each with its own capture's samples.
    assert_eq!(per_process.len(), 2, "{:?}", per_process.keys());
    for container in [BLOCKS, DEMO_SEQ] {
        let (name, (total, markers)) = per_process
            .iter()
            .find(|(name, _)| name.starts_with(container))
            .unwrap_or_else(|| panic!("no process for {container}"));
        let stem = only_capture(cwd.path(), container, "perf-");
        // A capture whose recorder sampled past the session's window is exported as cut.
        let cut = with_ext(&stem, "session.folded");
        let exported = if cut.is_file() {
            cut
        } else {
            with_ext(&stem, "folded")
        };
        let folded = devprof::profile::folded::Folded::from_folded_text(
            &std::fs::read_to_string(exported).unwrap(),
        );
        assert_eq!(*total, folded.total(), "{name}");
        if container == BLOCKS {
            let file = read_markers(&stem);
            assert!(!file.markers.is_empty());
            assert_eq!(*markers, file.markers.len(), "{name}");
        }
    }
    // speedscope: one sampled profile per container, markers as evented profiles.
    devprof(cwd.path())
        .args([
            "export",
            "session",
            "-f",
            "speedscope",
            "-o",
            "devnet.speedscope.json",
        ])
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cwd.path().join("devnet.speedscope.json")).unwrap())
            .unwrap();
    let profiles = json["profiles"].as_array().unwrap();
    assert_eq!(
        profiles.iter().filter(|p| p["type"] == "sampled").count(),
        2
    );
    assert!(profiles.iter().any(|p| p["type"] == "evented"));
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_container_whose_logs_cannot_be_read_is_recorded_with_a_note() {
    let test = "a_container_whose_logs_cannot_be_read_is_recorded_with_a_note";
    if !devnet_ready(test) {
        return;
    }
    let name = unique("devprof-nologs");
    let mut args = vec!["--log-driver", "none", "-e", "DEMO_BLOCKS=1"];
    args.extend(PROFILING_RIGHTS.iter().copied());
    let _guard = run_container(&name, &args, &demo_image(), &["demo-node"]);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &name, "3", "--mark", "reth"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), &name, "perf-");
    let manifest = read_manifest(&stem);
    let notes = manifest["notes"].to_string();
    assert!(notes.contains("could not be read"), "{notes}");
    assert!(read_markers(&stem).markers.is_empty());
}

/// The mapping of CLOCK_MONOTONIC to the wall clock (the offset perf measures, CLOCK_DATA)
/// measured against the node's own wall clock: the block thread writes its line (with
/// `at=`, its wall clock) and goes to sleep at once, so its switch-out follows `at` by
/// microseconds when the mapping is right.
#[test]
#[ignore = "needs the demo devnet"]
fn the_monotonic_clock_maps_to_the_wall_clock_within_a_millisecond() {
    let test = "the_monotonic_clock_maps_to_the_wall_clock_within_a_millisecond";
    if !demo_container_ready(test, BLOCKS) {
        return;
    }
    let pid = docker_ok(&["exec", BLOCKS, "pgrep", "-x", "demo-node"]);
    let pid = pid.trim();
    let tid = docker_ok(&[
        "exec",
        BLOCKS,
        "sh",
        "-c",
        &format!("grep -l '^block_import$' /proc/{pid}/task/*/comm | cut -d/ -f5"),
    ]);
    let tid = tid.trim();
    assert!(!tid.is_empty(), "no block_import thread in {pid}");
    let data = format!("/tmp/{}.data", unique("devprof-clock"));
    let started = chrono::Utc::now().timestamp() - 1;
    docker_ok(&[
        "exec",
        BLOCKS,
        "perf",
        "record",
        "-N",
        "-q",
        "-e",
        "cpu-clock",
        "--switch-events",
        "-k",
        "CLOCK_MONOTONIC",
        "-t",
        tid,
        "-o",
        &data,
        "--",
        "sleep",
        "4",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("clock.data");
    docker_ok(&["cp", &format!("{BLOCKS}:{data}"), local.to_str().unwrap()]);
    docker_ok(&["exec", BLOCKS, "rm", "-f", &data]);

    let clock = devprof::profile::perfdata::recording_clock(&local)
        .unwrap()
        .expect("perf wrote its clock data");
    assert_eq!(clock.name, "CLOCK_MONOTONIC");
    let tid: u32 = tid.parse().unwrap();
    let mut outs: Vec<i64> = Vec::new();
    devprof::profile::perfdata::for_each_record(&local, |r| {
        if let devprof::profile::offcpu::script::Record::Switch {
            tid: t,
            time_ns,
            out,
        } = r
        {
            if t == tid && out {
                outs.push(time_ns as i64 + clock.to_unix_ns);
            }
        }
    })
    .unwrap();
    outs.sort_unstable();
    assert!(outs.len() > 5, "{} switch-outs", outs.len());
    let logs = docker_ok(&["logs", "--since", &started.to_string(), BLOCKS]);
    let mut deltas: Vec<i64> = logs
        .lines()
        .filter_map(|l| l.split(" at=").nth(1)?.trim().parse::<i64>().ok())
        .filter(|at| *at > outs[0] && *at < outs[outs.len() - 1])
        .filter_map(|at| {
            let next = outs[outs.partition_point(|t| *t < at - 1_000_000)..].first()?;
            Some(next - at)
        })
        .collect();
    deltas.sort_unstable();
    assert!(deltas.len() > 5, "{} lines in the recording", deltas.len());
    let median = deltas[deltas.len() / 2];
    eprintln!(
        "switch-out after the line's own wall clock, {} blocks: median {:.3} ms, min {:.3} ms, max {:.3} ms (mapping error bound {} ns)",
        deltas.len(),
        median as f64 / 1e6,
        deltas[0] as f64 / 1e6,
        deltas[deltas.len() - 1] as f64 / 1e6,
        clock.error_ns
    );
    assert!(median.abs() < 1_000_000, "median {median} ns: {deltas:?}");
}

/// Regression: `devprof offcpu` followed no log (its command never handed the marker rules
/// on, which travelled in a process global only `cpu` and `profile` set), so an off-CPU
/// capture kept no `.markers` and `top --slice block` on it found nothing to slice by.
#[test]
#[ignore = "needs the demo devnet"]
fn an_offcpu_window_keeps_its_blocks_as_markers_and_is_sliced_by_them() {
    let test = "an_offcpu_window_keeps_its_blocks_as_markers_and_is_sliced_by_them";
    if !demo_container_ready(test, BLOCKS) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["offcpu", BLOCKS, "4", "--config", "contextswitches"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), BLOCKS, "offcpu-");
    let listed = timelines::listed_files(&read_manifest(&stem));
    assert!(listed.iter().any(|n| n.ends_with(".markers")), "{listed:?}");
    let markers = read_markers(&stem);
    let blocks = markers
        .markers
        .iter()
        .filter(|m| m.name == "block" && m.set == "reth" && m.number.is_some())
        .count();
    assert!(blocks >= 3, "only {blocks} blocks in a 4 s window");
    assert_eq!(
        blocks,
        logged_blocks(markers.header.since_ns, markers.header.until_ns)
    );
    let out = devprof(cwd.path())
        .args(["top", BLOCKS, "--slice", "block", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = top["intervals"].as_array().expect("intervals");
    assert!(!rows.is_empty(), "no block intervals: {top}");
    assert!(
        rows.iter().any(|r| r["samples"].as_u64().unwrap_or(0) > 0),
        "no interval holds an event: {top}"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn an_offcpu_window_follows_a_custom_mark_and_none_with_mark_off() {
    let test = "an_offcpu_window_follows_a_custom_mark_and_none_with_mark_off";
    if !demo_container_ready(test, BLOCKS) {
        return;
    }
    let custom = workdir();
    devprof(custom.path())
        .args(["offcpu", BLOCKS, "3", "--config", "contextswitches"])
        .args([
            "--mark",
            "off",
            "--mark",
            "tick=canonical chain number=(?P<number>\\d+)",
        ])
        .assert()
        .success();
    let stem = only_capture(custom.path(), BLOCKS, "offcpu-");
    let markers = read_markers(&stem);
    assert!(
        markers.markers.iter().any(|m| m.name == "tick"),
        "the custom rule kept nothing: {:?}",
        markers.markers.iter().map(|m| &m.name).collect::<Vec<_>>()
    );
    assert!(
        markers.markers.iter().all(|m| m.name == "tick"),
        "a built-in set ran though turned off"
    );
    let off = workdir();
    devprof(off.path())
        .args([
            "offcpu",
            BLOCKS,
            "3",
            "--config",
            "contextswitches",
            "--mark",
            "off",
        ])
        .assert()
        .success();
    let stem = only_capture(off.path(), BLOCKS, "offcpu-");
    assert!(
        !with_ext(&stem, "markers").exists(),
        "--mark off kept a markers file"
    );
}

#[test]
fn offcpu_mark_help_prints_the_rule_sets_and_records_nothing() {
    let cwd = workdir();
    devprof(cwd.path())
        .args([
            "offcpu",
            "demo-seq",
            "--config",
            "contextswitches",
            "--mark",
            "help",
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("Built-in sets:"))
        .stdout(predicates::str::contains("reth ("));
    assert!(files_under(cwd.path()).is_empty());
}
