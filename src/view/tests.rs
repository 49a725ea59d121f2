//! The viewer's rules, on a store made of real capture files: only files a manifest lists
//! are served, nothing in a URL walks out of the store, other host names are refused, and
//! the pages show what the catalog and `devprof diff`'s code compute.

use super::library::Library;
use super::routes::{percent_decode, respond, Policy, Request, Response, Route, Viewer};
use crate::profile::diff::{compare, Measure};
use crate::store::{ContainerRecord, FileRecord, Manifest};
use std::fs;
use std::path::{Path, PathBuf};

const PORT: u16 = 4242;
const OLDER: &str = "perf-20261122-101500";
const NEWER: &str = "perf-20261122-101600";
const SESSION: &str = "session-20261122-101700";

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A capture `name` of demo-seq from a real folded file, with its flamegraph; `extra`
/// names more listed files.
fn capture(dir: &Path, name: &str, created: &str, folded: &str, extra: &[&str]) {
    fs::copy(data(folded), dir.join(format!("{name}.folded"))).unwrap();
    let stacks = crate::store::loader::read(&dir.join(format!("{name}.folded"))).unwrap();
    crate::render::write_svg_file(
        &stacks,
        &crate::render::SvgSpec::cpu(name.into(), None),
        &dir.join(format!("{name}.svg")),
    )
    .unwrap();
    let mut files: Vec<String> = vec![format!("{name}.folded"), format!("{name}.svg")];
    files.extend(extra.iter().map(|e| e.to_string()));
    files.push(format!("{name}.json"));
    let manifest = Manifest {
        kind: "cpu".into(),
        created: created.into(),
        target: "demo-seq".into(),
        container: ContainerRecord {
            name: "demo-seq".into(),
            ..Default::default()
        },
        sample_count: stacks.total(),
        files: files
            .into_iter()
            .map(|name| FileRecord { name, bytes: 0 })
            .collect(),
        ..Default::default()
    };
    fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// Two captures, one with markers, a link and names that walk listed in its manifest, a
/// file nobody listed, a file outside the store, and a session.
fn store() -> (tempfile::TempDir, Viewer) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("profiling");
    let dir = out.join("demo-seq");
    fs::create_dir_all(&dir).unwrap();
    fs::write(root.path().join("outside.txt"), "outside the store").unwrap();
    fs::write(dir.join("unlisted.txt"), "not devprof's").unwrap();
    fs::write(
        dir.join(format!("{OLDER}.markers")),
        "12.5 block=<b>17</b>\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd.svg")).unwrap();
    capture(
        &dir,
        OLDER,
        "2026-11-22T10:15:00.000+00:00",
        "cpu-demo-seq.folded",
        &[
            &format!("{OLDER}.markers"),
            "passwd.svg",
            "../outside.txt",
            "/etc/passwd",
        ],
    );
    capture(
        &dir,
        NEWER,
        "2026-11-22T10:16:00.000+00:00",
        "cpu-demo-shifted.folded",
        &[],
    );
    let sessions = out.join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    fs::write(
        sessions.join(format!("{SESSION}.json")),
        serde_json::json!({
            "devprof_version": "0", "kind": "session", "created": "2026-11-22T10:17:00.000+00:00",
            "targets": "named", "kinds": ["cpu"], "duration_requested_s": 5.0,
            "started_at": "2026-11-22T10:17:01.000+00:00", "interrupted": false,
            "rows": [{"container": "demo-seq", "cpu_cores": 0.8, "pid": 7, "samples": 4000,
                      "heap_growth_bytes": null, "offcpu_s": null, "verdict": null, "errors": []}],
            "captures": [{"container": "demo-seq", "kind": "cpu",
                          "manifest": format!("demo-seq/{NEWER}.json"),
                          "window_started_at": null, "window_stopped_at": null, "error": null}],
            "thresholds": "CPU is high from 50%"
        })
        .to_string(),
    )
    .unwrap();
    let viewer = Viewer {
        library: Library::new(out),
        port: PORT,
    };
    (root, viewer)
}

fn get_as(viewer: &Viewer, method: &str, target: &str, host: Option<&str>) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    respond(
        viewer,
        &Request {
            method,
            path,
            query,
            host,
        },
    )
}

fn get(viewer: &Viewer, target: &str) -> Response {
    get_as(viewer, "GET", target, Some(&format!("127.0.0.1:{PORT}")))
}

fn text(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

#[test]
fn only_files_a_manifest_lists_are_served() {
    let (_root, viewer) = store();
    let svg = get(&viewer, &format!("/file/demo-seq/{OLDER}/{OLDER}.svg"));
    assert_eq!((svg.status, svg.content_type), (200, "image/svg+xml"));
    assert_eq!(svg.policy, Policy::Artifact);
    assert!(text(&svg).contains("<svg"));
    let manifest = get(&viewer, &format!("/file/demo-seq/{OLDER}/{OLDER}.json"));
    assert_eq!(
        (manifest.status, manifest.content_type),
        (200, "application/json")
    );
    // In the capture's directory, but no manifest lists it.
    let unlisted = get(&viewer, &format!("/file/demo-seq/{OLDER}/unlisted.txt"));
    assert_eq!(unlisted.status, 404);
    assert!(!text(&unlisted).contains("not devprof's"));
    // Listed by the other capture only.
    let other = get(&viewer, &format!("/file/demo-seq/{NEWER}/{OLDER}.markers"));
    assert_eq!(other.status, 404);
}

#[test]
fn a_listed_link_or_a_listed_path_that_walks_is_not_served() {
    let (_root, viewer) = store();
    for name in ["passwd.svg", "..%2Foutside.txt", "%2Fetc%2Fpasswd"] {
        let response = get(&viewer, &format!("/file/demo-seq/{OLDER}/{name}"));
        assert_eq!(response.status, 404, "{name}");
        let body = text(&response);
        assert!(!body.contains("root:") && !body.contains("outside the store"));
    }
}

#[test]
fn traversal_in_the_url_is_no_route() {
    let (_root, viewer) = store();
    for path in [
        "/file/demo-seq/../../etc/passwd",
        "/file/demo-seq/perf-20261122-101500/..",
        "/file/demo-seq/perf-20261122-101500/%2e%2e",
        "/file/demo-seq/perf-20261122-101500/%2e%2e%2f%2e%2e%2foutside.txt",
        "/file/demo-seq/perf-20261122-101500/a%00b",
        "/file/demo-seq/perf-20261122-101500/%zz",
        "/file/..%2F..%2Fetc/x/passwd",
        "/file/.hidden/x/y",
        "/capture/demo-seq/..",
        "/capture/%2e%2e/x",
        "//etc/passwd",
        "/static/../Cargo.toml",
        "/session/..%2Fdemo-seq%2Fperf-20261122-101500",
    ] {
        assert_eq!(Route::parse(path), None, "{path}");
        let response = get(&viewer, path);
        assert_eq!(response.status, 404, "{path}");
        let body = text(&response);
        assert!(
            !body.contains("root:") && !body.contains("outside the store"),
            "{path}"
        );
    }
    assert_eq!(percent_decode("a%2Fb"), Some("a/b".into()));
    assert_eq!(percent_decode("%zz"), None);
    assert_eq!(percent_decode("%ff"), None);
}

#[test]
fn other_host_names_are_refused() {
    let (_root, viewer) = store();
    let store = viewer.library.output_dir().display().to_string();
    for host in [
        Some("attacker.example:4242"),
        Some("127.0.0.1:4243"),
        Some("127.0.0.1"),
        None,
    ] {
        let refused = get_as(&viewer, "GET", "/", host);
        assert_eq!(refused.status, 403, "{host:?}");
        // Not even the store's path.
        assert!(!text(&refused).contains(&store) && !text(&refused).contains(OLDER));
    }
    assert_eq!(
        get_as(&viewer, "GET", "/", Some("localhost:4242")).status,
        200
    );
    assert_eq!(
        get_as(&viewer, "HEAD", "/", Some("LOCALHOST:4242")).status,
        200
    );
    assert_eq!(
        get_as(&viewer, "POST", "/", Some("127.0.0.1:4242")).status,
        405
    );
}

#[test]
fn the_list_shows_every_capture_the_catalog_lists_and_filters_by_kind() {
    let (_root, viewer) = store();
    let page = text(&get(&viewer, "/"));
    let listed = viewer.library.captures().unwrap();
    assert_eq!(listed.len(), 2);
    for capture in &listed {
        assert!(page.contains(&format!(r#"data-id="demo-seq/{}""#, capture.name())));
    }
    assert!(page.contains(r#"<span id="shown-count">2</span> of 2"#));
    let filtered = text(&get(&viewer, "/?kind=heap"));
    assert_eq!(filtered.matches(" hidden>").count(), 2);
    assert!(filtered.contains(r#"<span id="shown-count">0</span> of 2"#));
    let since = text(&get(&viewer, "/?since=2030-01-01T00%3A00"));
    assert!(since.contains(r#"<span id="shown-count">0</span>"#));
    assert_eq!(get(&viewer, "/?since=tomorrow").status, 400);
}

#[test]
fn a_diff_shows_the_totals_and_rows_of_devprof_diffs_comparison() {
    let (_root, viewer) = store();
    // Ticked in either order, the older capture is before.
    let page = text(&get(
        &viewer,
        &format!("/diff?capture=demo-seq%2F{NEWER}&capture=demo-seq%2F{OLDER}"),
    ));
    let read = |name: &str| crate::store::loader::read(&data(name)).unwrap();
    let diff = compare(
        &read("cpu-demo-seq.folded"),
        &read("cpu-demo-shifted.folded"),
        Measure::SelfTime,
    );
    let total = |n: u64| crate::units::thousands(n);
    assert!(page.contains(&format!(
        r#"<span id="before-total">{}</span>"#,
        total(diff.before_total)
    )));
    assert!(page.contains(&format!(
        r#"<span id="after-total">{}</span>"#,
        total(diff.after_total)
    )));
    let first_gain = diff.gains(1)[0];
    assert!(page.contains(&format!("{:+.2}", first_gain.delta_points)));
    assert!(page.contains(&super::pages::escape(&first_gain.name)));
    let svg = get(
        &viewer,
        &format!("/diff.svg?before=demo-seq%2F{OLDER}&after=demo-seq%2F{NEWER}"),
    );
    assert_eq!(svg.status, 200);
    // inferno escapes the subtitle's apostrophe: compare past it.
    let subtitle = crate::render::differential_subtitle(diff.after_total, "samples");
    assert!(text(&svg).contains(subtitle.split_once('\'').unwrap().1));
    assert_eq!(get(&viewer, "/diff?capture=demo-seq%2Fx").status, 400);
    assert_eq!(
        get(&viewer, "/diff?before=demo-seq%2Fnone&after=demo-seq%2Fx").status,
        404
    );
}

#[test]
fn markers_show_only_when_the_manifest_lists_them() {
    let (_root, viewer) = store();
    let with = text(&get(&viewer, &format!("/capture/demo-seq/{OLDER}/markers")));
    assert!(with.contains("block=&lt;b&gt;17&lt;/b&gt;") && !with.contains("<b>17"));
    let overview = text(&get(&viewer, &format!("/capture/demo-seq/{NEWER}")));
    assert!(!overview.contains("tab-markers") && overview.contains("tab-flamegraph"));
    assert_eq!(
        get(&viewer, &format!("/capture/demo-seq/{NEWER}/markers")).status,
        404
    );
}

#[test]
fn sessions_are_listed_drawn_and_link_their_captures() {
    let (_root, viewer) = store();
    let list = text(&get(&viewer, "/sessions"));
    assert!(list.contains(&format!("/session/{SESSION}")));
    let page = text(&get(&viewer, &format!("/session/{SESSION}")));
    assert!(page.contains(&format!(r#"href="/capture/demo-seq/{NEWER}""#)));
    let picture = get(&viewer, &format!("/session/{SESSION}/table.svg"));
    assert_eq!(picture.content_type, "image/svg+xml");
    assert!(text(&picture).contains(">demo-seq</text>"));
}

#[test]
fn the_start_page_is_a_session_a_capture_or_a_container() {
    let (_root, viewer) = store();
    let library = &viewer.library;
    assert_eq!(
        library.start_page(SESSION).unwrap(),
        format!("/session/{SESSION}")
    );
    assert_eq!(
        library.start_page(OLDER).unwrap(),
        format!("/capture/demo-seq/{OLDER}")
    );
    let file = library
        .output_dir()
        .join(format!("demo-seq/{NEWER}.folded"));
    assert_eq!(
        library.start_page(&file.display().to_string()).unwrap(),
        format!("/capture/demo-seq/{NEWER}")
    );
    assert_eq!(
        library.start_page("demo-seq").unwrap(),
        "/?container=demo-seq"
    );
    assert!(library.start_page("op-reth").is_err());
}
