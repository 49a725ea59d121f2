//! `devprof ls`, `clean`, `render`, `top`, `diff` and `fold` end to end: the real binary over a
//! store in a scratch directory. The store is built as `devprof cpu` builds it (a stem
//! reserved per capture, its files, a `store::Manifest` listing them), dated in the past;
//! the folded stacks are real captures of the demo node (tests/data). No Docker needed,
//! except for the test of `top` after a capture of demo-seq; the test of `fold` records
//! with this host's perf (as root, or with perf_event_paranoid <= 1, for kernel stacks).

mod common;

use chrono::{Duration as Days, Local};
use common::*;
use devprof::store::{FileRecord, Manifest, Stem};
use predicates::prelude::*;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const DEMO_SEQ_FOLDED: &str = include_str!("data/cpu-demo-seq.folded");
const SHIFTED_FOLDED: &str = include_str!("data/cpu-demo-shifted.folded");

/// One capture written into `profiling/<container>/` as devprof writes it, `days_ago` old.
struct Made {
    name: String,
    files: Vec<PathBuf>,
    bytes: u64,
}

fn make_capture(
    cwd: &Path,
    container: &str,
    days_ago: i64,
    folded: &str,
    extra_listed: &[&str],
) -> Made {
    let dir = cwd.join("profiling").join(container);
    let created = Local::now() - Days::days(days_ago);
    let stem = Stem::reserve(&dir, "perf", created).unwrap();
    let mut records = Vec::new();
    let mut files = Vec::new();
    for (ext, content) in [
        ("data", vec![7u8; 4096 + days_ago as usize]),
        ("folded", folded.as_bytes().to_vec()),
        ("svg", b"<svg></svg>\n".to_vec()),
    ] {
        let path = stem.path(ext);
        fs::write(&path, &content).unwrap();
        records.push(FileRecord {
            name: stem.file_name(ext),
            bytes: content.len() as u64,
        });
        files.push(path);
    }
    for name in extra_listed {
        records.push(FileRecord {
            name: name.to_string(),
            bytes: 0,
        });
    }
    let mut manifest = Manifest {
        devprof_version: "0.1.0".into(),
        kind: "cpu".into(),
        created: created.to_rfc3339(),
        target: container.into(),
        events: vec!["cpu-clock".into()],
        frequency_hz: 999,
        call_graph: "fp".into(),
        duration_requested_s: 3.0,
        duration_recorded_s: 3.0,
        sample_count: 1000 + days_ago as u64,
        files: records,
        ..Default::default()
    };
    manifest.container.name = container.into();
    files.push(manifest.write(&stem).unwrap());
    let bytes = files.iter().map(|p| fs::metadata(p).unwrap().len()).sum();
    Made {
        name: stem.name().to_string(),
        files,
        bytes,
    }
}

/// The store of the clean tests: demo-seq captures 1, 3, 10 and 30 days old; an unrelated
/// file, a JSON file that is no manifest, and a link to a file outside the store, which
/// the 10-day manifest also lists (as if tampered with), as it does `../outside/secret`.
struct Store {
    cwd: tempfile::TempDir,
    captures: Vec<Made>,
    outside: PathBuf,
    link: PathBuf,
    unrelated: Vec<PathBuf>,
}

fn store() -> Store {
    let cwd = workdir();
    let outside_dir = cwd.path().join("outside");
    fs::create_dir_all(&outside_dir).unwrap();
    let outside = outside_dir.join("secret");
    fs::write(&outside, "not devprof's\n").unwrap();
    let link_name = "perf-linked.folded";
    let captures = vec![
        make_capture(cwd.path(), DEMO_SEQ, 1, DEMO_SEQ_FOLDED, &[]),
        make_capture(cwd.path(), DEMO_SEQ, 3, DEMO_SEQ_FOLDED, &[]),
        make_capture(
            cwd.path(),
            DEMO_SEQ,
            10,
            DEMO_SEQ_FOLDED,
            &[link_name, "../outside/secret"],
        ),
        make_capture(cwd.path(), DEMO_SEQ, 30, DEMO_SEQ_FOLDED, &[]),
    ];
    let dir = cwd.path().join("profiling").join(DEMO_SEQ);
    let link = dir.join(link_name);
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let notes = dir.join("notes.txt");
    fs::write(&notes, "mine\n").unwrap();
    let other_json = dir.join("settings.json");
    fs::write(&other_json, "{\"theme\": \"dark\"}\n").unwrap();
    Store {
        cwd,
        captures,
        outside,
        link,
        unrelated: vec![notes, other_json],
    }
}

fn all_files(cwd: &Path) -> BTreeSet<PathBuf> {
    files_under(cwd).into_iter().collect()
}

fn rel(cwd: &Path, paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    paths
        .iter()
        .map(|p| p.strip_prefix(cwd).unwrap().to_path_buf())
        .collect()
}

fn assert_outside_and_link_survive(s: &Store) {
    assert_eq!(fs::read_to_string(&s.outside).unwrap(), "not devprof's\n");
    let link = fs::symlink_metadata(&s.link).expect("the link survives");
    assert!(link.file_type().is_symlink());
    for path in &s.unrelated {
        assert!(path.exists(), "{} was removed", path.display());
    }
}

#[test]
fn clean_older_7d_removes_exactly_the_10_and_30_day_captures() {
    let s = store();
    let before = all_files(s.cwd.path());
    let out = devprof(s.cwd.path())
        .args(["clean", "--older", "7d"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();

    let gone: BTreeSet<PathBuf> = s.captures[2..]
        .iter()
        .flat_map(|c| rel(s.cwd.path(), &c.files))
        .collect();
    let expected: BTreeSet<PathBuf> = before.difference(&gone).cloned().collect();
    assert_eq!(all_files(s.cwd.path()), expected, "{out}");
    assert_outside_and_link_survive(&s);

    for c in &s.captures[2..] {
        for f in &c.files {
            assert!(
                out.contains(&format!(
                    "removed {}",
                    f.strip_prefix(s.cwd.path()).unwrap().display()
                )),
                "{} not reported:\n{out}",
                f.display()
            );
        }
    }
    // Manifests go last: every manifest line follows its capture's other files.
    for c in &s.captures[2..] {
        let manifest_at = out.find(&format!("{}.json", c.name)).unwrap();
        let data_at = out.find(&format!("{}.data", c.name)).unwrap();
        assert!(data_at < manifest_at, "{out}");
    }
    assert!(
        out.contains("a symbolic link, not a file devprof wrote"),
        "{out}"
    );
    assert!(out.contains("'../outside/secret'"), "{out}");
    let freed = s.captures[2].bytes + s.captures[3].bytes;
    assert!(
        out.contains(&format!(
            "removed 2 captures (8 files), freed {}",
            human(freed)
        )),
        "expected {freed} bytes freed:\n{out}"
    );
}

#[test]
fn clean_dry_run_removes_nothing() {
    let s = store();
    let before = all_files(s.cwd.path());
    devprof(s.cwd.path())
        .args(["clean", "--older", "7d", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "would remove profiling/{DEMO_SEQ}/{}.data",
            s.captures[3].name
        )))
        .stdout(predicate::str::contains(
            "would remove 2 captures (8 files)",
        ))
        .stdout(predicate::str::contains("nothing was removed"));
    assert_eq!(all_files(s.cwd.path()), before);
    assert_outside_and_link_survive(&s);
}

#[test]
fn clean_keep_last_1_keeps_the_newest_even_when_it_is_older_than_age() {
    let s = store();
    let before = all_files(s.cwd.path());
    // All four are older than 12 h; the newest (1 day) stays.
    devprof(s.cwd.path())
        .args([
            "clean",
            DEMO_SEQ,
            "--older",
            "12h",
            "--keep-last",
            "1",
            "--json",
        ])
        .assert()
        .success();
    let kept = rel(s.cwd.path(), &s.captures[0].files);
    let gone: BTreeSet<PathBuf> = s.captures[1..]
        .iter()
        .flat_map(|c| rel(s.cwd.path(), &c.files))
        .collect();
    let now = all_files(s.cwd.path());
    assert!(kept.is_subset(&now));
    assert_eq!(now, before.difference(&gone).cloned().collect());
    assert_outside_and_link_survive(&s);
}

/// A session manifest `days_ago` old listing `captures` (as `devprof profile` writes them).
fn make_session(cwd: &Path, days_ago: i64, captures: &[&Made]) -> PathBuf {
    use devprof::store::session::{SessionCapture, SessionRecord, SESSIONS_DIR};
    let created = (Local::now() - Days::days(days_ago)).fixed_offset();
    let record = SessionRecord {
        devprof_version: "0.1.0".into(),
        kind: "session".into(),
        created: created.to_rfc3339(),
        targets: "named".into(),
        kinds: vec!["cpu".into()],
        duration_requested_s: 3.0,
        started_at: created.to_rfc3339(),
        interrupted: false,
        rows: Vec::new(),
        captures: captures
            .iter()
            .map(|c| SessionCapture {
                container: DEMO_SEQ.into(),
                kind: "cpu".into(),
                manifest: Some(format!("{DEMO_SEQ}/{}.json", c.name)),
                window_started_at: None,
                window_stopped_at: None,
                error: None,
            })
            .collect(),
        thresholds: String::new(),
        alignment: None,
        endpoints: Vec::new(),
    };
    let dir = cwd.join("profiling").join(SESSIONS_DIR);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("session-{}.json", created.format("%Y%m%d-%H%M%S")));
    fs::write(&path, serde_json::to_string_pretty(&record).unwrap()).unwrap();
    path
}

#[test]
fn clean_removes_old_session_manifests_once_their_captures_are_gone() {
    let s = store();
    // 10 days old over the 30-day capture: goes. 10 days old but listing the 1-day
    // capture that stays: kept. 1 day old: kept.
    let old = make_session(s.cwd.path(), 10, &[&s.captures[3]]);
    let old_but_listing_a_kept = make_session(s.cwd.path(), 11, &[&s.captures[0]]);
    let recent = make_session(s.cwd.path(), 1, &[]);
    let dry = devprof(s.cwd.path())
        .args(["clean", "--older", "7d", "--dry-run"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let dry = String::from_utf8(dry).unwrap();
    assert!(
        dry.contains("would remove 1 session manifest (older than 7d"),
        "{dry}"
    );
    assert!(old.is_file(), "a dry run removes nothing");
    let out = devprof(s.cwd.path())
        .args(["clean", "--older", "7d", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let summary: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let listed: Vec<&str> = summary["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{summary}");
    assert!(old.ends_with(listed[0]), "{listed:?}");
    assert!(!old.exists());
    assert!(old_but_listing_a_kept.is_file() && recent.is_file());
}

#[test]
fn clean_never_follows_a_container_directory_that_is_a_link() {
    // A store entry that links to another store: its captures are not this store's.
    let s = store();
    let elsewhere = workdir();
    let made = make_capture(elsewhere.path(), "far", 30, DEMO_SEQ_FOLDED, &[]);
    std::os::unix::fs::symlink(
        elsewhere.path().join("profiling").join("far"),
        s.cwd.path().join("profiling").join("far"),
    )
    .unwrap();
    devprof(s.cwd.path())
        .args(["clean", "--older", "1d"])
        .assert()
        .success();
    for f in &made.files {
        assert!(f.exists(), "{} removed through a link", f.display());
    }
}

#[test]
fn clean_rejects_a_bad_age_and_an_unknown_target() {
    let s = store();
    devprof(s.cwd.path())
        .args(["clean", "--older", "7x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown unit 'x'"));
    devprof(s.cwd.path())
        .args(["clean", "no-such", "--older", "7d"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("no captures of 'no-such'"))
        .stderr(predicate::str::contains(DEMO_SEQ));
}

#[test]
fn ls_lists_captures_from_manifests_oldest_first() {
    let s = store();
    let out = devprof(s.cwd.path())
        .args(["ls"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("TIME"), "{out}");
    let positions: Vec<usize> = s
        .captures
        .iter()
        .map(|c| {
            out.find(&c.name)
                .unwrap_or_else(|| panic!("{} missing:\n{out}", c.name))
        })
        .collect();
    // captures[] are 1, 3, 10, 30 days old: oldest first means reverse order.
    assert!(positions.windows(2).all(|w| w[0] > w[1]), "{out}");
    assert!(
        out.contains("1,030 samples") && out.contains("3.0 s"),
        "{out}"
    );
    assert!(out.contains("4 captures"), "{out}");
    assert!(!out.contains("settings"), "{out}");

    let json = devprof(s.cwd.path())
        .args(["ls", DEMO_SEQ, "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&json).unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["capture"], s.captures[3].name.as_str());
    assert_eq!(rows[0]["count"], 1030);
    assert_eq!(rows[0]["kind"], "cpu");
    assert_eq!(rows[3]["bytes"], s.captures[0].bytes);

    devprof(s.cwd.path())
        .args(["ls", "no-such"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains("containers with captures"));
    let empty = workdir();
    devprof(empty.path())
        .args(["ls"])
        .assert()
        .success()
        .stdout(predicate::str::contains("no captures in profiling"));
}

#[test]
fn top_of_a_target_reads_its_newest_capture_by_manifest_date() {
    let cwd = workdir();
    // The newer capture by date gets the file name that sorts first.
    let newer = make_capture(cwd.path(), "node", 1, SHIFTED_FOLDED, &[]);
    let older = make_capture(cwd.path(), "node", 2, DEMO_SEQ_FOLDED, &[]);
    let out_dir = cwd.path().join("profiling").join("node");
    let renamed = |c: &Made, to: &str| {
        for f in &c.files {
            let name = f
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace(&c.name, to);
            fs::rename(f, out_dir.join(name)).unwrap();
        }
        let manifest = out_dir.join(format!("{to}.json"));
        let text = fs::read_to_string(&manifest).unwrap().replace(&c.name, to);
        fs::write(manifest, text).unwrap();
    };
    renamed(&newer, "perf-a");
    renamed(&older, "perf-b");
    let json = devprof(cwd.path())
        .args(["top", "node", "--json", "-n", "1"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["capture"], "perf-a");
    let expected_total: u64 = SHIFTED_FOLDED
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(v["total"], expected_total);
    devprof(cwd.path()).args(["top", "nobody"]).assert().code(4);
}

#[test]
fn top_prints_self_and_inclusive_tables_callers_and_modules() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cpu-demo-seq.folded");
    let cwd = workdir();
    devprof(cwd.path())
        .arg("top")
        .arg(&data)
        .args(["-n", "3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("top 3 by self samples"))
        .stdout(predicate::str::contains("top 3 by inclusive samples"))
        .stdout(predicate::str::contains("demo_node::workloads::hash_chain"));
    devprof(cwd.path())
        .arg("top")
        .arg(&data)
        .args([
            "--callers",
            "^page_fault|exc_page_fault$",
            "--module",
            "^demo_node::",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "callers of /^page_fault|exc_page_fault$/",
        ))
        .stdout(predicate::str::contains("demo_node::workloads::"))
        .stdout(predicate::str::contains("top 3").not());
    devprof(cwd.path())
        .arg("top")
        .arg(&data)
        .args(["--modules", r"^demo_node::workloads::(\w+)$"])
        .assert()
        .success()
        .stdout(predicate::str::contains("37.60  hash_chain"))
        .stdout(predicate::str::contains("1.68  <other>"));
    devprof(cwd.path())
        .arg("top")
        .arg(&data)
        .args(["--callers", "("])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--callers: invalid regex"));
}

#[test]
fn render_applies_layout_palette_and_filters() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cpu-demo-seq.folded");
    let cwd = workdir();
    devprof(cwd.path())
        .arg("render")
        .arg(&data)
        .args([
            "--title",
            "icicle of demo-seq",
            "--width",
            "900",
            "--colors",
            "hot",
            "--inverted",
            "--min-width",
            "0.5",
            "--include",
            "hash_chain|state_lookup",
            "-o",
            "icicle.svg",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("flamegraph: icicle.svg"));
    let svg = fs::read_to_string(cwd.path().join("icicle.svg")).unwrap();
    assert!(svg.contains("icicle of demo-seq"));
    assert!(svg.contains(r#"width="900""#), "width not applied");
    assert!(svg.contains("var inverted = true"), "not an icicle graph");
    assert!(svg.contains("demo_node::workloads::state_lookup"));
    assert!(
        !svg.contains("demo_node::workloads::mmap_reads"),
        "--include ignored"
    );
    assert!(
        svg.contains("samples shown (include"),
        "subtitle names the filter"
    );

    // Default output: ./<name>.svg; --reverse puts leaves at the root.
    devprof(cwd.path())
        .arg("render")
        .arg(&data)
        .args(["--reverse", "--exclude", "hash_chain", "--preset", "node"])
        .assert()
        .success();
    let svg = fs::read_to_string(cwd.path().join("cpu-demo-seq.svg")).unwrap();
    assert!(!svg.contains("[unknown]"), "node preset drops [unknown]");
    assert!(
        !svg.contains("demo_node::workloads::hash_chain"),
        "--exclude ignored"
    );

    devprof(cwd.path())
        .arg("render")
        .arg(&data)
        .args(["--colors", "rainbow"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a palette"));
    devprof(cwd.path())
        .arg("render")
        .arg(&data)
        .args(["--include", "no-such-frame"])
        .assert()
        .code(6);
}

#[test]
fn render_of_perf_data_without_perf_on_the_host_says_to_render_the_folded() {
    let cwd = workdir();
    fs::write(cwd.path().join("perf-1.data"), b"PERFILE2").unwrap();
    let empty_path = cwd.path().join("bin");
    fs::create_dir(&empty_path).unwrap();
    devprof(cwd.path())
        .env("PATH", &empty_path)
        .args(["render", "perf-1.data"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains(
            "perf is not installed on this host",
        ))
        .stderr(predicate::str::contains("devprof render perf-1.folded"));
}

#[test]
fn diff_writes_a_differential_flamegraph_and_the_largest_changes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cwd = workdir();
    let out = devprof(cwd.path())
        .arg("diff")
        .arg(dir.join("cpu-demo-seq.folded"))
        .arg(dir.join("cpu-demo-shifted.folded"))
        .args(["-n", "3"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("largest gains") && out.contains("largest losses"),
        "{out}"
    );
    let svg_path = cwd.path().join("diff-cpu-demo-seq-cpu-demo-shifted.svg");
    assert!(out.contains("differential flamegraph: diff-cpu-demo-seq-cpu-demo-shifted.svg"));
    let svg = fs::read_to_string(svg_path).unwrap();
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("cpu-demo-seq.folded → cpu-demo-shifted.folded"));
    // inferno writes each frame's change into its tooltip: "f (N samples, a%; +b%)".
    assert!(
        svg.contains("%; +") && svg.contains("%; -"),
        "no differential tooltips (gains and losses)"
    );

    let json = devprof(cwd.path())
        .arg("diff")
        .arg(dir.join("cpu-demo-seq.folded"))
        .arg(dir.join("cpu-demo-shifted.folded"))
        .args(["--json", "-o", "d.svg", "--by", "inclusive"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(v["measure"], "inclusive");
    assert!(!v["gains"].as_array().unwrap().is_empty());
    assert!(cwd.path().join("d.svg").exists());
}

#[test]
fn every_store_command_has_help_with_examples() {
    let cwd = workdir();
    for cmd in ["ls", "clean", "render", "top", "diff"] {
        devprof(cwd.path())
            .args([cmd, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Examples:"))
            .stdout(predicate::str::contains(format!("devprof {cmd}")));
    }
}

#[test]
#[ignore = "needs the demo devnet"]
fn after_a_cpu_capture_of_demo_seq_top_lists_hash_chain_among_its_top_3() {
    if !devnet_ready("after_a_cpu_capture_of_demo_seq_top_lists_hash_chain_among_its_top_3") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", DEMO_SEQ, "3"])
        .assert()
        .success();
    let json = devprof(cwd.path())
        .args(["top", DEMO_SEQ, "-n", "3", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let top3: Vec<&str> = v["self"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        top3.iter().any(|f| f.ends_with("::hash_chain")),
        "hash_chain not in the top 3: {top3:?}"
    );
    devprof(cwd.path())
        .args(["top", DEMO_SEQ, "-n", "3"])
        .assert()
        .success()
        .stdout(predicate::str::contains("demo_node::workloads::hash_chain"));
    devprof(cwd.path())
        .args(["ls", DEMO_SEQ])
        .assert()
        .success()
        .stdout(predicate::str::contains("cpu"))
        .stdout(predicate::str::contains(DEMO_SEQ));

    // The .data of the same capture, through this host's perf: the same samples.
    let stem = only_capture(cwd.path(), DEMO_SEQ, "perf-");
    let host_perf = std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !host_perf {
        // scripts/setup.sh installs perf; under CI its absence is a failure, not a skip.
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "perf is not installed on this host"
        );
        eprintln!("render of perf.data: NOT RUN: perf is not installed on this host");
        return;
    }
    devprof(cwd.path())
        .arg("render")
        .arg(with_ext(&stem, "data"))
        .args(["-o", "from-data.svg"])
        .assert()
        .success();
    let svg = fs::read_to_string(cwd.path().join("from-data.svg")).unwrap();
    assert!(svg.trim_end().ends_with("</svg>"));
    let total = |file: PathBuf| -> u64 {
        let out = devprof(cwd.path())
            .arg("top")
            .arg(file)
            .arg("--json")
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()["total"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        total(with_ext(&stem, "data")),
        total(with_ext(&stem, "folded"))
    );
}

fn human(bytes: u64) -> String {
    devprof::units::human_bytes(bytes)
}

/// Host perf recording a kernel-heavy command (reads and writes through /dev/zero and
/// /dev/null) with call graphs into `data`.
fn record_on_host(data: &Path) {
    let out = std::process::Command::new("perf")
        .args(["record", "-q", "-F", "999", "-g", "-o"])
        .arg(data)
        .args([
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64k",
            "count=200000",
        ])
        .output()
        .expect("perf on the host (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Regression: every native fold had the kernel write out /proc/kallsyms (50-70 ms, most
/// of a fold's wall time). A capture in the store now uses the copy its symbol cache keeps
/// for the boot; one outside the store still reads the kernel's.
#[test]
fn fold_of_a_stored_capture_names_kernel_frames_from_the_copy_kept_for_the_boot() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let cwd = workdir();
    let target = cwd.path().join("profiling/host");
    fs::create_dir_all(target.join(".symbols")).unwrap();
    let data = target.join("perf-1.data");
    record_on_host(&data);
    let fold = |input: &Path, output: &str| {
        devprof(cwd.path())
            .arg("fold")
            .arg(input)
            .args(["-o", output])
            .assert()
            .success();
        fs::read_to_string(cwd.path().join(output)).unwrap()
    };

    let first = fold(&data, "first.folded");
    assert!(
        first.contains("do_syscall_64"),
        "no kernel frame named:\n{first}"
    );
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let kept = target.join(format!(".symbols/kernel-{}/kallsyms", boot.trim()));
    let meta = fs::metadata(&kept).expect("the kernel's symbols kept for this boot");
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "kernel addresses readable by others"
    );

    let second = fold(&data, "second.folded");
    assert_eq!(
        first, second,
        "the kept copy names the frames as the kernel does"
    );
    assert_eq!(
        fs::metadata(&kept).unwrap().ino(),
        meta.ino(),
        "the kept copy was read again from the kernel"
    );

    // Names that only the kept copy has show that it is what the fold reads.
    let text = fs::read_to_string(&kept).unwrap();
    let renamed = text.replace(" do_syscall_64\n", " kept_syscall_64\n");
    fs::write(&kept, &renamed).unwrap();
    let third = fold(&data, "third.folded");
    assert!(
        third.contains("kept_syscall_64") && !third.contains("do_syscall_64"),
        "{third}"
    );

    // A copy that does not cover every kernel frame (here: core text shrunk to one byte,
    // as if the frames were in a BPF program loaded since) is read again from the kernel.
    let address_of = |name: &str| {
        let line = renamed
            .lines()
            .find(|l| l.ends_with(&format!(" T {name}")))
            .unwrap();
        u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap()
    };
    let (stext, etext) = (address_of("_stext"), address_of("_etext"));
    fs::write(
        &kept,
        renamed.replace(
            &format!("{etext:016x} T _etext\n"),
            &format!("{:016x} T _etext\n", stext + 1),
        ),
    )
    .unwrap();
    let fourth = fold(&data, "fourth.folded");
    assert_eq!(
        fourth, first,
        "frames the copy does not cover were named from it"
    );
    assert_ne!(
        fs::metadata(&kept).unwrap().ino(),
        meta.ino(),
        "the copy was not read again"
    );
    assert!(!fs::read_to_string(&kept)
        .unwrap()
        .contains("kept_syscall_64"));

    // Outside the store: the kernel's own list, and nothing written beside the capture.
    let loose = cwd.path().join("loose");
    fs::create_dir(&loose).unwrap();
    fs::copy(&data, loose.join("perf-1.data")).unwrap();
    let outside = fold(&loose.join("perf-1.data"), "outside.folded");
    assert_eq!(outside, first);
    assert_eq!(
        fs::read_dir(&loose).unwrap().count(),
        1,
        "fold wrote beside a capture outside the store"
    );
}

/// A heap capture as `devprof heap` writes it: folded stacks weighted by bytes, listed in
/// the manifest's graphs with their unit (`listed`), or not (a manifest older than that).
fn heap_capture(cwd: &Path, listed: bool) -> PathBuf {
    let dir = cwd.join("profiling").join(DEMO_SEQ);
    let stem = Stem::reserve(&dir, "heap", Local::now()).unwrap();
    let folded = include_str!("data/heap/expected.folded");
    fs::write(stem.path("folded"), folded).unwrap();
    let mut manifest = Manifest {
        kind: "heap".into(),
        created: Local::now().to_rfc3339(),
        target: DEMO_SEQ.into(),
        files: vec![FileRecord {
            name: stem.file_name("folded"),
            bytes: folded.len() as u64,
        }],
        ..Default::default()
    };
    if listed {
        manifest.graphs.push(devprof::store::GraphRecord {
            svg: stem.file_name("svg"),
            folded: stem.file_name("folded"),
            view: "unfiltered".into(),
            unit: "bytes".into(),
        });
    }
    manifest.container.name = DEMO_SEQ.into();
    manifest.write(&stem).unwrap();
    stem.path("folded")
}

/// Regression: top, render and diff called every count a sample, a heap capture's bytes
/// and an off-CPU capture's microseconds too.
#[test]
fn top_of_a_heap_capture_counts_bytes_not_samples() {
    for listed in [true, false] {
        let cwd = workdir();
        let folded = heap_capture(cwd.path(), listed);
        let out = devprof(cwd.path())
            .arg("top")
            .arg(&folded)
            .args(["-n", "3"])
            .assert()
            .success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(
            text.lines().next().unwrap().ends_with(" bytes") && text.contains("BYTES"),
            "{text}"
        );
        assert!(!text.contains("samples"), "{text}");
        devprof(cwd.path())
            .arg("render")
            .arg(&folded)
            .args(["-o", "heap.svg"])
            .assert()
            .success()
            .stdout(predicate::str::contains(" bytes in "));
        let svg = fs::read_to_string(cwd.path().join("heap.svg")).unwrap();
        assert!(
            svg.contains("125,829,120 bytes") && !svg.contains(" samples"),
            "the graph's counts are bytes"
        );
    }
}

/// The threads of the demo node (the root frame of its stacks): thread names, which a
/// ranking of functions must never list.
const DEMO_THREADS: [&str; 6] = [
    "alloc_blocks",
    "contend_lock",
    "hash_chain",
    "mmap_reads",
    "state_lookup",
    "sync_writes",
];

/// A store as `devprof profile demo-seq --kinds cpu,offcpu` leaves it, from real captures
/// of the demo node: its cpu capture (tests/data/cpu-demo-seq.folded) and, a few seconds
/// newer as in a real session (the off-CPU summary takes longer), its off-CPU capture,
/// whose event counts are folded by devprof's own aggregator from a real recording
/// (tests/data/perf-script-contextswitches.txt), `EVENT;THREAD;frames`; both listed by one
/// session manifest.
struct Mixed {
    cwd: tempfile::TempDir,
    cpu: String,
    offcpu: String,
    session: String,
}

fn write_capture(
    cwd: &Path,
    prefix: &str,
    kind: &str,
    created: chrono::DateTime<Local>,
    folded: &str,
    unit: &str,
    session: &str,
) -> String {
    let dir = cwd.join("profiling").join(DEMO_SEQ);
    let stem = Stem::reserve(&dir, prefix, created).unwrap();
    fs::write(stem.path("folded"), folded).unwrap();
    let mut manifest = Manifest {
        devprof_version: "0.1.0".into(),
        kind: kind.into(),
        created: created.to_rfc3339(),
        target: DEMO_SEQ.into(),
        events: if kind == "offcpu" {
            vec![
                "sched:sched_switch".into(),
                "syscalls:sys_enter_futex".into(),
                "syscalls:sys_exit_futex".into(),
                "syscalls:sys_enter_fdatasync".into(),
            ]
        } else {
            vec!["cpu-clock".into()]
        },
        duration_requested_s: 4.0,
        duration_recorded_s: 4.0,
        session: Some(format!("{session}.json")),
        sample_count: folded
            .lines()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum(),
        files: vec![FileRecord {
            name: stem.file_name("folded"),
            bytes: folded.len() as u64,
        }],
        graphs: vec![devprof::store::GraphRecord {
            svg: stem.file_name("svg"),
            folded: stem.file_name("folded"),
            view: "unfiltered".into(),
            unit: unit.into(),
        }],
        ..Default::default()
    };
    manifest.container.name = DEMO_SEQ.into();
    manifest.write(&stem).unwrap();
    stem.name().to_string()
}

fn mixed_session() -> Mixed {
    use devprof::profile::offcpu::script::for_each_record;
    use devprof::profile::offcpu::summary::{Aggregator, Mode};
    let cwd = workdir();
    let mut aggregator = Aggregator::new(Mode::Full);
    for_each_record(
        include_str!("data/perf-script-contextswitches.txt").as_bytes(),
        |r| aggregator.add(r),
    )
    .unwrap();
    let mut events = Vec::new();
    aggregator
        .finish(0.1, None)
        .events_folded
        .write_to(&mut events)
        .unwrap();
    let events = String::from_utf8(events).unwrap();
    assert!(events.starts_with("sched:sched_switch;"), "{events}");
    // The cpu capture 3 min 16 s old: `3 min ago`.
    let started = Local::now() - Days::seconds(200);
    let session = format!("session-{}", started.format("%Y%m%d-%H%M%S"));
    let cpu = write_capture(
        cwd.path(),
        "perf",
        "cpu",
        started + Days::seconds(4),
        DEMO_SEQ_FOLDED,
        "samples",
        &session,
    );
    let offcpu = write_capture(
        cwd.path(),
        "offcpu",
        "offcpu",
        started + Days::seconds(6),
        &events,
        "events",
        &session,
    );
    use devprof::store::session::{SessionCapture, SessionRecord, SESSIONS_DIR};
    let capture = |kind: &str, stem: &str| SessionCapture {
        container: DEMO_SEQ.into(),
        kind: kind.into(),
        manifest: Some(format!("{DEMO_SEQ}/{stem}.json")),
        window_started_at: None,
        window_stopped_at: None,
        error: None,
    };
    let record = SessionRecord {
        devprof_version: "0.1.0".into(),
        kind: "session".into(),
        created: (started + Days::seconds(6)).to_rfc3339(),
        targets: "named".into(),
        kinds: vec!["cpu".into(), "offcpu:contextswitches".into()],
        duration_requested_s: 4.0,
        started_at: started.to_rfc3339(),
        interrupted: false,
        rows: Vec::new(),
        captures: vec![capture("cpu", &cpu), capture("offcpu", &offcpu)],
        thresholds: String::new(),
        alignment: None,
        endpoints: Vec::new(),
    };
    let dir = cwd.path().join("profiling").join(SESSIONS_DIR);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("{session}.json")),
        serde_json::to_string_pretty(&record).unwrap(),
    )
    .unwrap();
    Mixed {
        cwd,
        cpu,
        offcpu,
        session,
    }
}

fn stdout_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).into_owned()
}

fn stderr_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// The function names of `top --json`'s self and inclusive rankings.
fn ranked_names(top: &serde_json::Value) -> Vec<String> {
    ["self", "inclusive"]
        .iter()
        .flat_map(|table| top[table].as_array().unwrap().iter())
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

/// Regression: after `profile --kinds cpu,offcpu`, `top demo-seq` read the newest capture
/// of any kind, the off-CPU one (`__schedule` at 81.55% of "samples"), and ranked its
/// thread names as functions (`mmap_reads` beside `demo_node::workloads::mmap_reads`): the
/// off-CPU event stacks are rooted at the event, the thread name below it.
#[test]
fn top_of_a_target_after_a_cpu_and_offcpu_session_reads_the_cpu_capture_and_says_so() {
    let m = mixed_session();
    let out = devprof(m.cwd.path())
        .args(["top", DEMO_SEQ, "-n", "15", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], m.cpu.as_str(), "{top}");
    assert_eq!(top["kind"], "cpu");
    assert_eq!(top["unit"], "samples");
    let said = stderr_of(&out);
    assert!(
        said.contains(&format!(
            "top: {DEMO_SEQ}'s newest cpu capture, {} (3 min ago)",
            m.cpu
        )),
        "{said}"
    );
    assert!(
        !ranked_names(&top).iter().any(|n| n == "__schedule"),
        "{top}"
    );

    // The off-CPU capture when asked for, by kind, by stem or by a file of it: its thread
    // names are roots, not functions.
    let offcpu_file = format!("profiling/{DEMO_SEQ}/{}.folded", m.offcpu);
    let qualified = format!("{DEMO_SEQ}/{}", m.offcpu);
    for args in [
        vec!["top", DEMO_SEQ, "--kind", "offcpu"],
        vec!["top", m.offcpu.as_str()],
        vec!["top", qualified.as_str()],
        vec!["top", offcpu_file.as_str()],
    ] {
        let out = devprof(m.cwd.path())
            .args(&args)
            .args(["-n", "100", "--json"])
            .assert()
            .success();
        let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        assert_eq!(top["capture"], m.offcpu.as_str(), "{args:?}: {top}");
        assert_eq!(top["unit"], "events", "{args:?}");
        let names = ranked_names(&top);
        assert!(names.iter().any(|n| n.contains("__schedule")), "{names:?}");
        for thread in DEMO_THREADS {
            assert!(
                !names.iter().any(|n| n == thread),
                "{args:?}: the thread name {thread} is ranked as a function: {names:?}"
            );
        }
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("sched:") || n.starts_with("syscalls:")),
            "{args:?}: an event is ranked as a function: {names:?}"
        );
    }
    // The session stands for its capture of the kind asked for.
    let out = devprof(m.cwd.path())
        .args(["top", &m.session, "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], m.cpu.as_str());
    // A capture named with another kind is a usage error.
    devprof(m.cwd.path())
        .args(["top", &m.cpu, "--kind", "offcpu"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a cpu capture, not offcpu"));
}

/// Regression: `export perf-…` was refused (`no captures of 'perf-…'`) while `view
/// perf-…` opened it; `export demo-seq --format firefox` exported the off-CPU capture, into
/// the current directory.
#[test]
fn export_by_stem_and_by_target_takes_the_cpu_capture_and_writes_beside_it() {
    let m = mixed_session();
    let dir = m.cwd.path().join("profiling").join(DEMO_SEQ);
    let out = devprof(m.cwd.path())
        .args(["export", &m.cpu, "-f", "collapsed"])
        .assert()
        .success();
    let written = dir.join(format!("{}.collapsed", m.cpu));
    assert_eq!(fs::read_to_string(&written).unwrap(), {
        let mut text = String::new();
        let folded = devprof::profile::folded::Folded::from_folded_text(DEMO_SEQ_FOLDED);
        for line in folded.lines() {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    assert!(
        stderr_of(&out).contains(&format!("wrote profiling/{DEMO_SEQ}/{}.collapsed", m.cpu)),
        "{}",
        stderr_of(&out)
    );
    // Listed in the capture's manifest: clean removes it with the capture.
    let manifest = fs::read_to_string(dir.join(format!("{}.json", m.cpu))).unwrap();
    assert!(
        manifest.contains(&format!("{}.collapsed", m.cpu)),
        "{manifest}"
    );

    let out = devprof(m.cwd.path())
        .args(["export", DEMO_SEQ, "-f", "firefox"])
        .assert()
        .success();
    assert!(
        stderr_of(&out).contains(&format!(
            "export: {DEMO_SEQ}'s newest cpu capture, {}",
            m.cpu
        )),
        "{}",
        stderr_of(&out)
    );
    assert!(dir.join(format!("{}.firefox.json", m.cpu)).is_file());
    assert!(!dir.join(format!("{}.firefox.json", m.offcpu)).exists());
    assert_eq!(
        fs::read_dir(m.cwd.path()).unwrap().count(),
        1,
        "only profiling/ in the current directory"
    );
    // pprof beside the capture never takes the name of a Go capture's own profile.
    devprof(m.cwd.path())
        .args(["export", &m.offcpu, "-f", "pprof"])
        .assert()
        .success();
    assert!(dir.join(format!("{}.pprof.pb.gz", m.offcpu)).is_file());
    // The export is not a capture.
    let ls = devprof(m.cwd.path())
        .args(["ls", "--json"])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&ls.get_output().stdout).unwrap();
    assert_eq!(rows.len(), 2);
}

/// Regression: the README's `devprof diff before.folded demo-seq` compared CPU samples with
/// off-CPU event counts (`+81.48 __schedule`) without a word.
#[test]
fn diff_of_cpu_samples_against_off_cpu_events_is_refused_unless_mixed() {
    let m = mixed_session();
    let before = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cpu-demo-shifted.folded");
    let out = devprof(m.cwd.path())
        .arg("diff")
        .arg(&before)
        .args([DEMO_SEQ, "--json"])
        .assert()
        .success();
    let diff: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(diff["after"]["capture"], m.cpu.as_str(), "{diff}");
    assert_eq!(diff["after"]["unit"], "samples");
    assert!(
        stderr_of(&out).contains(&format!(
            "diff: AFTER is {DEMO_SEQ}'s newest cpu capture, {}",
            m.cpu
        )),
        "{}",
        stderr_of(&out)
    );
    // The image goes beside AFTER's capture, and the output says where.
    let image = format!("profiling/{DEMO_SEQ}/diff-cpu-demo-shifted-{}.svg", m.cpu);
    assert_eq!(diff["flamegraph"], image.as_str());
    assert!(m.cwd.path().join(&image).is_file());

    let out = devprof(m.cwd.path())
        .args(["diff", &m.cpu, &m.offcpu])
        .assert()
        .code(2);
    let said = stderr_of(&out);
    assert!(
        said.contains("counts CPU samples") && said.contains("counts off-CPU events"),
        "{said}"
    );
    assert!(said.contains("--mixed"), "{said}");
    // Told, it compares and says what it compares.
    let out = devprof(m.cwd.path())
        .args(["diff", &m.cpu, &m.offcpu, "--mixed", "-o", "mixed.svg"])
        .assert()
        .success();
    assert!(
        stderr_of(&out).contains("compared anyway (--mixed)"),
        "{}",
        stderr_of(&out)
    );
    assert!(m.cwd.path().join("mixed.svg").is_file());
    // A target beside an off-CPU capture: its newest off-CPU capture, so no mixing.
    let out = devprof(m.cwd.path())
        .args(["diff", &m.offcpu, DEMO_SEQ, "--json", "-o", "-"])
        .assert()
        .success();
    assert!(
        stderr_of(&out).contains(&format!("newest offcpu capture, {}", m.offcpu)),
        "{}",
        stderr_of(&out)
    );
}

/// Regression: `top`, `diff` and `export` ignored DEVPROF_TARGET, which `cpu` honours.
#[test]
fn devprof_target_serves_top_diff_and_export_when_no_target_is_given() {
    let m = mixed_session();
    let out = devprof(m.cwd.path())
        .env("DEVPROF_TARGET", DEMO_SEQ)
        .args(["top", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], m.cpu.as_str());
    let out = devprof(m.cwd.path())
        .env("DEVPROF_TARGET", DEMO_SEQ)
        .args(["export", "-f", "collapsed", "-o", "-"])
        .assert()
        .success();
    assert!(stdout_of(&out).contains("demo_node::workloads::hash_chain"));
    let before = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cpu-demo-shifted.folded");
    let out = devprof(m.cwd.path())
        .env("DEVPROF_TARGET", DEMO_SEQ)
        .arg("diff")
        .arg(&before)
        .args(["--json", "-o", "d.svg"])
        .assert()
        .success();
    let diff: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(diff["after"]["capture"], m.cpu.as_str());
    // An argument wins over the environment.
    let out = devprof(m.cwd.path())
        .env("DEVPROF_TARGET", "no-such")
        .args(["top", DEMO_SEQ, "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], m.cpu.as_str());
}

/// Regression: the error for an unknown name listed `sessions` among the containers with
/// captures.
#[test]
fn an_unknown_reference_lists_the_containers_with_captures_and_not_sessions() {
    let m = mixed_session();
    for command in [
        vec!["top", "no-such"],
        vec!["export", "no-such", "-f", "pprof"],
        vec!["ls", "sessions"],
    ] {
        let out = devprof(m.cwd.path()).args(&command).assert().code(4);
        let said = stderr_of(&out);
        assert!(
            said.contains(&format!("- {DEMO_SEQ}")),
            "{command:?}: {said}"
        );
        assert!(!said.contains("- sessions"), "{command:?}: {said}");
    }
    devprof(m.cwd.path())
        .args(["top", "perf-20000101-000000"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains(
            "no captures of 'perf-20000101-000000'",
        ));
}

#[test]
fn ls_says_which_session_and_set_each_capture_belongs_to() {
    let m = mixed_session();
    let out = devprof(m.cwd.path()).args(["ls"]).assert().success();
    let text = stdout_of(&out);
    assert!(text.lines().next().unwrap().contains("PART OF"), "{text}");
    for stem in [&m.cpu, &m.offcpu] {
        let line = text.lines().find(|l| l.contains(stem.as_str())).unwrap();
        assert!(line.trim_end().ends_with(&m.session), "{line}");
    }
    let out = devprof(m.cwd.path())
        .args(["ls", "--json"])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert!(
        rows.iter().all(|r| r["session"] == m.session.as_str()),
        "{rows:?}"
    );
    assert!(rows.iter().all(|r| r["set_windows"].is_null()));
    // A session's name lists its captures; a capture's name, that capture.
    let out = devprof(m.cwd.path())
        .args(["ls", &m.session, "--json"])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(rows.len(), 2);
    let out = devprof(m.cwd.path())
        .args(["ls", &m.offcpu, "--json"])
        .assert()
        .success();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["capture"], m.offcpu.as_str());
}

/// The same lookups on a store a real session wrote: `devprof profile demo-seq 4 --kinds
/// cpu,offcpu` (one session, reused by every assertion).
#[test]
#[ignore = "needs the demo devnet"]
fn after_a_real_cpu_and_offcpu_session_every_store_command_reads_the_cpu_capture() {
    if !devnet_ready(
        "after_a_real_cpu_and_offcpu_session_every_store_command_reads_the_cpu_capture",
    ) {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["profile", DEMO_SEQ, "4", "--kinds", "cpu,offcpu"])
        .assert()
        .success();
    let cpu = only_capture(cwd.path(), DEMO_SEQ, "perf-");
    let offcpu = only_capture(cwd.path(), DEMO_SEQ, "offcpu-");
    let name = |stem: &PathBuf| stem.file_name().unwrap().to_string_lossy().into_owned();
    let (cpu, offcpu) = (name(&cpu), name(&offcpu));

    let out = devprof(cwd.path())
        .env("DEVPROF_TARGET", DEMO_SEQ)
        .args(["top", "-n", "15", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], cpu.as_str(), "{top}");
    assert!(
        stderr_of(&out).contains(&format!("top: {DEMO_SEQ}'s newest cpu capture, {cpu}")),
        "{}",
        stderr_of(&out)
    );
    let out = devprof(cwd.path())
        .args(["top", DEMO_SEQ, "--kind", "offcpu", "-n", "200", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(top["capture"], offcpu.as_str());
    let names = ranked_names(&top);
    for thread in DEMO_THREADS {
        assert!(
            !names.iter().any(|n| n == thread),
            "{thread} ranked: {names:?}"
        );
    }
    devprof(cwd.path())
        .args(["diff", &cpu, &offcpu])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--mixed"));
    devprof(cwd.path())
        .args(["export", &offcpu, "-f", "collapsed"])
        .assert()
        .success();
    assert!(cwd
        .path()
        .join(format!("profiling/{DEMO_SEQ}/{offcpu}.collapsed"))
        .is_file());
    let ls = devprof(cwd.path())
        .args(["ls", DEMO_SEQ])
        .assert()
        .success();
    let session = stdout_of(&ls);
    assert!(
        session.lines().filter(|l| l.contains("session-")).count() == 2,
        "{session}"
    );
}
