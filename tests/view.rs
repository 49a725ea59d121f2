//! `devprof view`, the real binary. Without a browser: the URL it prints, 127.0.0.1 only,
//! other host names refused over the wire, `--open` with and without a browser, Ctrl-C.
//! With one: real headless Chromium driven by clicks and key presses
//! (scripts/view-check.py over the DevTools protocol) on a store made by real captures of
//! the demo devnet: the list shows every capture `devprof ls` shows, a diff opened by
//! ticking two captures and pressing the button shows `devprof diff`'s totals and rows,
//! every tab of every capture loads with no console error. Screenshots go to
//! target/tmp/view-screenshots/.

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

/// A raw HTTP/1.1 GET with the given Host header: status line and body.
fn http_get(port: u16, path: &str, host: &str) -> (String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
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
    let (status, body) = http_get(port, "/", &format!("127.0.0.1:{port}"));
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.contains("No captures in"), "{body}");
    // DNS rebinding: a page of another site whose name points here gets nothing.
    let (status, body) = http_get(port, "/", &format!("attacker.example:{port}"));
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
    let (status, _) = http_get(port, "/sessions", &format!("localhost:{port}"));
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
    assert!(seen["session_picture"].as_u64() > Some(0));
    assert_eq!(seen["errors"], serde_json::json!([]), "console errors");
    let screenshots = seen["screenshots"].as_array().unwrap();
    assert!(screenshots.len() > 10);
    for s in screenshots {
        assert!(Path::new(s.as_str().unwrap()).is_file(), "{s}");
    }
    eprintln!("screenshots: {}", shots.display());
    assert!(served.interrupt().success());
}
