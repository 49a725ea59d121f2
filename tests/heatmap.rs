//! The heatmap page in real headless Chromium (Debian's chromium; scripts/setup.sh installs
//! it): no script errors, one coloured cell per 20 ms slice that holds samples, and a page
//! opened with a `#t=` fragment shows a flamegraph whose total is the samples of that range,
//! all checked against the capture's timeline. Screenshots go to target/tmp.

mod common;
mod timelines;

use common::*;
use devprof::profile::timeline::{Timeline, TimelineWriter};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Checks a heatmap page against its timeline, with the range `from..to` seconds.
fn check_page(page: &Path, timeline: &Timeline, from: f64, to: f64, shot: &str) {
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(shot);
    let (dom, log) = open_in_chromium(page, &format!("#t={from}-{to}"), &screenshot);
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");
    assert_eq!(attribute(&dom, "<body", "data-errors"), "0");
    assert_eq!(attribute(&dom, "<body", "data-ready"), "1");

    let (first, _) = timeline.span_ns().unwrap();
    let cells: BTreeSet<u64> = timeline
        .samples
        .iter()
        .map(|s| (s.time_ns - first) / 20_000_000)
        .collect();
    assert_eq!(
        attribute(&dom, "id=\"heatmap\"", "data-cells"),
        cells.len().to_string()
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
