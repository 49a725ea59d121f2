//! The heatmap page in real headless Chromium (Debian's chromium; scripts/setup.sh installs
//! it): no script errors, one coloured cell per slice that holds samples, columns scaled to
//! the capture (a 5 s capture gets 200 or more), and a page opened with a `#t=` fragment
//! shows a flamegraph whose total is the samples of that range, all checked against the
//! capture's timeline. On a real capture of demo-blocks (tests/data/heatmap/, 8 s, 32 and
//! more block markers): a marker picked by a click on the list, by the keyboard and by a
//! click on its tick selects that block; and a capture's page in `devprof view` at
//! 1400x900 shows its flamegraph and its heatmap above the fold. Screenshots go to
//! target/tmp (`DEVPROF_WRITE_SCREENSHOTS=1` also writes the ones docs/view.md shows).

mod common;
mod timelines;

use common::*;
use devprof::profile::markers::{intervals, Markers};
use devprof::profile::perfscript::{SampleMeta, SampleSink};
use devprof::profile::timeline::{Timeline, TimelineWriter};
use devprof::render::heatmap::{column_step_ns, columns, ROWS};
use std::collections::BTreeSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `attr="value"` of the first element whose tag text contains `marker`, in a dumped DOM.
fn attribute(dom: &str, marker: &str, attr: &str) -> String {
    let at = dom
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not in the page"));
    let tag_start = dom[..=at].rfind('<').unwrap();
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>').unwrap()];
    let key = format!("{attr}=\"");
    let from = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {attr} in {tag}"))
        + key.len();
    tag[from..from + tag[from..].find('"').unwrap()].to_string()
}

/// Opens `page#fragment` in headless Chromium: the DOM after its scripts ran, and what
/// Chromium printed. Also writes a screenshot to `screenshot`.
fn open_in_chromium(page: &Path, fragment: &str, screenshot: &Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let url = format!(
        "file://{}{fragment}",
        page.canonicalize().unwrap().display()
    );
    let run = |extra: &[String]| {
        let out = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("--virtual-time-budget=10000")
            .args(extra)
            .arg(&url)
            .output()
            .expect("chromium (Debian's chromium package; scripts/setup.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let dom = run(&["--dump-dom".to_string()]);
    run(&[
        format!("--screenshot={}", screenshot.display()),
        "--window-size=1200,900".to_string(),
    ]);
    assert!(std::fs::metadata(screenshot)
        .map(|m| m.len() > 1000)
        .unwrap_or(false));
    (
        String::from_utf8_lossy(&dom.stdout).to_string(),
        String::from_utf8_lossy(&dom.stderr).to_string(),
    )
}

/// Checks a heatmap page against its timeline, with the range `from..to` seconds; returns
/// the columns it drew.
fn check_page(page: &Path, timeline: &Timeline, from: f64, to: f64, shot: &str) -> u64 {
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(shot);
    let (dom, log) = open_in_chromium(page, &format!("#t={from}-{to}"), &screenshot);
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");
    assert_eq!(attribute(&dom, "<body", "data-errors"), "0");
    assert_eq!(attribute(&dom, "<body", "data-ready"), "1");

    // The cells' size follows the samples' span: a second's column from 200 s up, shorter
    // columns (at least 200 of them) below.
    let (first, last) = timeline.span_ns().unwrap();
    let cell_ns = column_step_ns(last - first) / ROWS;
    let cells: BTreeSet<u64> = timeline
        .samples
        .iter()
        .map(|s| (s.time_ns - first) / cell_ns)
        .collect();
    assert_eq!(
        attribute(&dom, "id=\"heatmap\"", "data-cells"),
        cells.len().to_string()
    );
    let drawn: u64 = attribute(&dom, "id=\"heatmap\"", "data-columns")
        .parse()
        .unwrap();
    assert_eq!(drawn, columns(last - first));
    // The canvas is that many columns wide.
    let col_px: u64 = attribute(&dom, "id=\"heatmap\"", "data-col-px")
        .parse()
        .unwrap();
    assert_eq!(
        attribute(&dom, "id=\"heatmap\"", " width"),
        (drawn * col_px).to_string()
    );

    let (a, b) = ((from * 1e9) as u64, (to * 1e9) as u64);
    let in_range: u64 = timeline
        .samples
        .iter()
        .filter(|s| (a..b).contains(&(s.time_ns - first)))
        .map(|s| s.weight)
        .sum();
    assert!(in_range > 0, "the range {from}-{to} holds no samples");
    assert_eq!(
        attribute(&dom, "id=\"flame-box\"", "data-total"),
        in_range.to_string()
    );
    drawn
}

#[test]
#[ignore = "needs chromium (scripts/setup.sh installs it)"]
fn the_heatmap_of_a_golden_capture_shows_its_cells_and_a_ranges_samples_in_chromium() {
    let (_, text) = timelines::CPU_CAPTURES[0];
    let dir = tempfile::tempdir().unwrap();
    let timeline_path = dir.path().join("perf.timeline");
    let mut writer = TimelineWriter::new(std::fs::File::create(&timeline_path).unwrap()).unwrap();
    devprof::profile::perfscript::fold_perf_script_with(text.as_bytes(), &mut writer).unwrap();
    writer.finish().unwrap();
    let page = dir.path().join("perf.html");
    devprof::render::write_heatmap_file(&timeline_path, "golden demo-seq", "samples", &page)
        .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing is fetched from anywhere.
    for outside in ["src=", "href=", "http://", "https://", "@import"] {
        assert!(
            !html.contains(outside),
            "the page refers outside: {outside}"
        );
    }
    let timeline = Timeline::read(std::fs::File::open(&timeline_path).unwrap()).unwrap();
    check_page(&page, &timeline, 0.2, 0.6, "heatmap-golden.png");
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_real_capture_writes_a_heatmap_that_render_heatmap_rewrites() {
    if !devnet_ready("a_real_capture_writes_a_heatmap_that_render_heatmap_rewrites") {
        return;
    }
    let cwd = workdir();
    let stem = cpu_capture(cwd.path(), DEMO_SEQ, "3");
    let listed = timelines::listed_files(&read_manifest(&stem));
    assert!(listed.iter().any(|n| n.ends_with(".html")), "{listed:?}");
    let timeline =
        Timeline::read(std::fs::File::open(with_ext(&stem, "timeline")).unwrap()).unwrap();
    check_page(
        &with_ext(&stem, "html"),
        &timeline,
        1.0,
        2.0,
        "heatmap-demo-seq.png",
    );

    devprof(cwd.path())
        .args(["render", "--heatmap", DEMO_SEQ, "-o", "again.html"])
        .assert()
        .success();
    check_page(
        &cwd.path().join("again.html"),
        &timeline,
        0.5,
        2.5,
        "heatmap-render.png",
    );
    // A capture without a timeline is a clear error, and nothing is written.
    std::fs::write(cwd.path().join("bare.folded"), "a;b 1\n").unwrap();
    devprof(cwd.path())
        .args(["render", "--heatmap", "bare.folded", "-o", "bare.html"])
        .assert()
        .code(2);
    assert!(!cwd.path().join("bare.html").exists());
}

#[test]
#[ignore = "needs the demo devnet"]
fn an_offcpu_capture_keeps_a_timeline_of_its_events_and_a_heatmap() {
    if !devnet_ready("an_offcpu_capture_keeps_a_timeline_of_its_events_and_a_heatmap") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["offcpu", DEMO_SEQ, "3", "--config", "contextswitches"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_SEQ, "offcpu-");
    let listed = timelines::listed_files(&read_manifest(&stem));
    for ext in [".timeline", ".html"] {
        assert!(listed.iter().any(|n| n.ends_with(ext)), "{ext}: {listed:?}");
    }
    let timeline =
        Timeline::read(std::fs::File::open(with_ext(&stem, "timeline")).unwrap()).unwrap();
    let folded = devprof::profile::folded::Folded::from_folded_text(
        &std::fs::read_to_string(with_ext(&stem, "folded")).unwrap(),
    );
    // The timeline's stacks are the event-count flamegraph's, sample for sample.
    let totals = timeline.stack_totals();
    assert_eq!(totals.iter().map(|t| t.1).sum::<u64>(), folded.total());
    assert_eq!(totals.len(), folded.stacks.len());
    check_page(
        &with_ext(&stem, "html"),
        &timeline,
        0.5,
        2.0,
        "heatmap-offcpu.png",
    );
}

/// The committed capture of demo-blocks (tests/data/heatmap/): its stem, without extension.
fn fixture_stem() -> PathBuf {
    let dir = repo_root().join("tests/data/heatmap");
    let manifest = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a capture's manifest in tests/data/heatmap");
    manifest.with_extension("")
}

fn read_timeline(path: &Path) -> Timeline {
    Timeline::read(std::fs::File::open(path).unwrap()).unwrap()
}

/// The fixture's timeline and markers copied to `dir` under `name`, the timeline cut to its
/// first `seconds` of samples (all of it with `None`); returns the new timeline's path.
fn copy_fixture(dir: &Path, name: &str, seconds: Option<u64>) -> PathBuf {
    let stem = fixture_stem();
    let timeline = read_timeline(&with_ext(&stem, "timeline"));
    let path = dir.join(format!("{name}.timeline"));
    let (first, _) = timeline.span_ns().unwrap();
    let end = seconds.map_or(u64::MAX, |s| first + s * 1_000_000_000);
    let mut w = TimelineWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    if let Some(clock) = &timeline.clock {
        w.set_clock(clock);
    }
    for (i, stack) in timeline.stacks.iter().enumerate() {
        w.new_stack(i as u32, stack);
    }
    for s in timeline.samples.iter().filter(|s| s.time_ns < end) {
        let t = &timeline.threads[s.thread as usize];
        w.sample(
            &SampleMeta {
                time_ns: Some(s.time_ns),
                pid: t.pid,
                tid: t.tid,
                comm: &t.comm,
                weight: s.weight,
            },
            s.stack,
        );
    }
    w.finish().unwrap();
    std::fs::copy(
        with_ext(&stem, "markers"),
        dir.join(format!("{name}.markers")),
    )
    .unwrap();
    path
}

/// Copies a screenshot into docs/images when asked to (`DEVPROF_WRITE_SCREENSHOTS=1`).
fn keep_for_docs(shot: &Path, name: &str) {
    if std::env::var_os("DEVPROF_WRITE_SCREENSHOTS").is_some() {
        std::fs::copy(shot, repo_root().join("docs/images").join(name)).unwrap();
    }
}

#[test]
#[ignore = "needs chromium (scripts/setup.sh installs it)"]
fn a_short_capture_gets_at_least_200_columns_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    for (name, seconds) in [("five", Some(5)), ("whole", None)] {
        let timeline_path = copy_fixture(dir.path(), name, seconds);
        let page = dir.path().join(format!("{name}.html"));
        devprof::render::write_heatmap_file(&timeline_path, "demo-blocks", "samples", &page)
            .unwrap();
        let timeline = read_timeline(&timeline_path);
        let (first, last) = timeline.span_ns().unwrap();
        let span_s = (last - first) as f64 / 1e9;
        if seconds == Some(5) {
            assert!(span_s > 4.9 && span_s <= 5.0, "{span_s} s");
        }
        // One second's FlameScope column would give this capture 5 (or 8) columns.
        let drawn = check_page(&page, &timeline, 1.0, 1.5, &format!("heatmap-{name}.png"));
        assert!(drawn >= 200, "{name}: {span_s} s in {drawn} columns");
    }
}

/// What heatmap_page.py printed.
fn drive(args: &[&str]) -> serde_json::Value {
    let out = Command::new("python3")
        .arg(repo_root().join("tests/support/heatmap_page.py"))
        .args(args)
        .output()
        .expect("python3 and chromium (scripts/setup.sh installs them)");
    assert!(
        out.status.success(),
        "heatmap_page.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs chromium (scripts/setup.sh installs it)"]
fn every_marker_of_a_dense_capture_is_picked_by_click_and_by_keyboard_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let timeline_path = copy_fixture(dir.path(), "blocks", None);
    let page = dir.path().join("blocks.html");
    devprof::render::write_heatmap_file(&timeline_path, "demo-blocks", "samples", &page).unwrap();
    let timeline = read_timeline(&timeline_path);
    let markers = Markers::read_path(&dir.path().join("blocks.markers"))
        .unwrap()
        .unwrap();
    let spans = intervals(&markers.markers, None, markers.header.since_ns);
    // The case: 32 block markers or more in 8 s.
    assert!(spans.len() >= 32, "{} markers", spans.len());
    let to_unix = timeline.to_unix_ns().unwrap();
    let number = |i: usize| markers.markers[spans[i].marker].number.unwrap().to_string();
    let total = |i: usize| -> u64 {
        timeline
            .samples
            .iter()
            .filter(|s| spans[i].contains(s.time_ns as i64 + to_unix))
            .map(|s| s.weight)
            .sum()
    };
    // Marker k of the 32: one with samples, in the second half.
    let k = (20..spans.len() - 3)
        .find(|i| total(*i) > 0)
        .expect("a block with samples");
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("heatmap-markers.png");
    let seen = drive(&[
        "pick",
        page.to_str().unwrap(),
        &k.to_string(),
        shot.to_str().unwrap(),
    ]);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    let initial = &seen["initial"];
    assert_eq!(initial["ticks"], spans.len(), "{initial}");
    assert!(initial["columns"].as_u64() >= Some(200), "{initial}");
    // Ticks far enough apart to aim at (they were 2 px apart, under their 3 px width).
    assert!(
        initial["min_tick_gap_px"].as_f64() >= Some(4.0),
        "{initial}"
    );
    let steps = seen["steps"].as_array().unwrap();
    // ArrowRight from the whole capture, a click on row k, ArrowRight, j, ArrowLeft, k, a
    // click on row 0, a click on tick k.
    let expected = [0, k, k + 1, k + 2, k + 1, k, 0, k];
    assert_eq!(steps.len(), expected.len());
    for (step, i) in steps.iter().zip(expected) {
        let what = step["action"].as_str().unwrap();
        assert_eq!(step["marker"], i.to_string(), "{what}: {step}");
        // The block the marker's line names, and the samples of its interval.
        assert_eq!(step["number"], number(i), "{what}: {step}");
        assert_eq!(step["range"], format!("m{i}"), "{what}: {step}");
        assert_eq!(step["total"].as_u64(), Some(total(i)), "{what}: {step}");
        assert_eq!(step["selected_row"], i, "{what}: {step}");
        assert_eq!(
            step["selected_ticks"],
            serde_json::json!([i]),
            "{what}: {step}"
        );
        assert_eq!(step["hash"], format!("#m={i}"), "{what}: {step}");
        assert_eq!(step["errors"], 0, "{what}: {step}");
    }
    keep_for_docs(&shot, "heatmap-markers.png");
}

/// A `devprof view` of `store`, stopped when dropped.
struct Viewer(std::process::Child, String);

impl Viewer {
    fn start(store: &Path) -> Viewer {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("devprof"))
            .arg("--output-dir")
            .arg(store)
            .arg("view")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("devprof");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        Viewer(child, url)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs chromium (scripts/setup.sh installs it)"]
fn a_captures_page_shows_its_flamegraph_and_heatmap_above_the_fold_in_chromium() {
    // The committed capture, as its store held it, with its flamegraph and heatmap drawn by
    // this build.
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("profiling");
    let stem = fixture_stem();
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(with_ext(&stem, "json")).unwrap()).unwrap();
    let container = manifest["container"]["name"].as_str().unwrap();
    let name = stem.file_name().unwrap().to_str().unwrap();
    let dir = store.join(container);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(stem.parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(name)
        {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let copied = dir.join(name);
    devprof(work.path())
        .args(["render"])
        .arg(with_ext(&copied, "folded"))
        .arg("-o")
        .arg(with_ext(&copied, "svg"))
        .assert()
        .success();
    devprof::render::write_heatmap_file(
        &with_ext(&copied, "timeline"),
        "demo-blocks",
        "samples",
        &with_ext(&copied, "html"),
    )
    .unwrap();
    // (The recording, `.data`, is not kept in the repository: the Files tab says it is gone.)

    let viewer = Viewer::start(&store);
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capture-page");
    let seen = drive(&[
        "fold",
        &viewer.1,
        &format!("/capture/{container}/{name}"),
        shots.to_str().unwrap(),
    ]);
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    let fold = 900.0;
    let graph = &seen["flamegraph_tab"];
    assert_eq!(graph["inner_height"], 900, "{graph}");
    // The facts are one line that unfolds: the flamegraph comes first.
    assert_eq!(graph["facts_open"], false, "{graph}");
    assert!(
        graph["facts_summary"].as_str().unwrap().contains(container),
        "{graph}"
    );
    let top = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap();
    assert!(top(graph, "graph_top") < fold / 2.0, "{graph}");
    let heat = &seen["heatmap_tab"];
    assert!(top(heat, "heatmap_top") < fold / 2.0, "{heat}");
    assert!(top(heat, "list_top") < fold / 2.0, "{heat}");
    // The heatmap's flamegraph of the selection starts above the fold too.
    assert!(top(heat, "flame_top") < fold, "{heat}");
    assert!(heat["columns"].as_u64() >= Some(200), "{heat}");
    assert_eq!(heat["frame_errors"], 0, "{heat}");
    keep_for_docs(&shots.join("capture-page.png"), "capture-page.png");
}
