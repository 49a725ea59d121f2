//! devprof under hostile conditions, against the real engine: a target killed in the
//! middle of a capture, host sysctls that must stay as they were, sidecars of running
//! captures. Every container here is the test's own, made from the demo node image.

mod common;

use common::*;
use predicates::prelude::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A demo node with demo-seq's rights (compose/demo.yml), busy hashing.
fn start_node(prefix: &str, extra: &[&str], cmd: &[&str]) -> ContainerGuard {
    let name = unique(&format!("devprof-test-robust-{prefix}"));
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["--cap-add", "SYSLOG", "-e", "DEMO_WORKLOADS=hash_chain:60"]);
    args.extend_from_slice(extra);
    let guard = run_container(&name, &args, &demo_image(), cmd);
    if cmd.is_empty() {
        wait_for_cpu(&name, "demo-node", 0.2);
    }
    guard
}

fn spawn_devprof(cwd: &std::path::Path, args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("devprof"))
        .args(args)
        .current_dir(cwd)
        .env_remove("DEVPROF_TARGET")
        .env_remove("DEVPROF_OUTPUT_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("devprof binary")
}

/// Waits (bounded) until a `perf record` runs in the container's pid namespace, which
/// a sidecar shares.
fn wait_for_perf_record(container: &str) {
    let started = Instant::now();
    while perf_records(&container_processes(container)).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no perf record appeared in {container}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn target_killed_mid_capture(mode: &str) {
    let node = start_node(&format!("kill-{mode}"), &["--init"], &[]);
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &node.0]);
    let cwd = workdir();
    let mut child = spawn_devprof(cwd.path(), &["cpu", &node.0, "40", "--mode", mode]);
    wait_for_perf_record(&node.0);
    wait_for_cpu(&node.0, "demo-node", 2.0);
    docker_ok(&["kill", &node.0]);
    let killed = Instant::now();
    // A liveness bound (devprof must not hang), not a speed assertion.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if killed.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            panic!("devprof ({mode} mode) still running 15 s after its target was killed");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(4), "{mode}: {stderr}");
    assert!(
        stderr.contains(&format!(
            "{} stopped during the capture (exit code 137, at T+",
            node.0
        )),
        "{mode}: {stderr}"
    );
    let error = &stderr[stderr.find("error:").unwrap_or(0)..];
    assert!(
        !error.contains("may not record") && !error.contains("missing:"),
        "{mode}: a privilege diagnosis for a stopped target: {stderr}"
    );
    assert!(
        sidecars_of_id(&id).is_empty(),
        "{mode}: sidecar left behind: {:?}",
        sidecars_of_id(&id)
    );
    assert!(
        files_under(cwd.path()).is_empty(),
        "{mode}: files written: {:?}",
        files_under(cwd.path())
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn target_killed_mid_capture_in_exec_mode_ends_with_its_name() {
    if !devnet_ready("target_killed_mid_capture_in_exec_mode_ends_with_its_name") {
        return;
    }
    target_killed_mid_capture("exec");
}

#[test]
#[ignore = "needs the demo devnet"]
fn target_killed_mid_capture_in_sidecar_mode_ends_with_its_name() {
    if !devnet_ready("target_killed_mid_capture_in_sidecar_mode_ends_with_its_name") {
        return;
    }
    target_killed_mid_capture("sidecar");
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_process_that_exits_mid_capture_still_gets_its_flamegraph() {
    if !devnet_ready("a_process_that_exits_mid_capture_still_gets_its_flamegraph") {
        return;
    }
    // The node is a child of a shell that outlives it: the container runs on.
    let node = start_node(
        "exit",
        &["--init"],
        &["sh", "-c", "timeout 15 demo-node; sleep 3600"],
    );
    let cwd = workdir();
    let started = Instant::now();
    devprof(cwd.path())
        .args([
            "cpu",
            &node.0,
            "40",
            "--mode",
            "exec",
            "--process",
            "^demo-node",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("exited at T+"));
    assert!(
        started.elapsed() < Duration::from_secs(35),
        "devprof waited for the whole window after the process exited"
    );
    let stem = only_capture(cwd.path(), &node.0, "perf-");
    let svg = std::fs::read_to_string(with_ext(&stem, "svg")).unwrap();
    assert!(svg.contains("hash_chain"));
}

/// The host's perf sysctls, read on the host.
fn host_sysctls() -> (String, String) {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .unwrap()
            .trim()
            .to_string()
    };
    (read("perf_event_paranoid"), read("kptr_restrict"))
}

/// Replaces every perf in the container with one that is refused its events (its trial,
/// `stat`, and its recorder, `record`, wherever the subcommand stands) while the host's
/// perf_event_paranoid is above -1, as a kernel that demands it would; the real perf does
/// the rest.
const DEMANDING_PERF: &str = r#"
set -e
real=$(ls /usr/bin/perf_[0-9]* 2>/dev/null | head -n1)
[ -n "$real" ] || real=/usr/bin/perf
mv "$real" /usr/bin/real-perf
cat > /usr/bin/perf-shim <<'EOS'
#!/bin/sh
case " $* " in *" stat "*|*" record "*) opens=1;; *) opens=;; esac
if [ -n "$opens" ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid)" != -1 ]; then
  echo "Error: No permission to enable cpu-clock event." >&2
  exit 255
fi
exec /usr/bin/real-perf "$@"
EOS
chmod +x /usr/bin/perf-shim
cp /usr/bin/perf-shim "$real"
cp /usr/bin/perf-shim /usr/bin/perf
"#;

/// Tests that change the host's sysctls run one at a time: each reads them first.
static SYSCTL_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The host's perf sysctls as a test found them, written back when it ends whatever
/// happens (the tests run as root on the engine's host).
struct SysctlsRestored {
    before: (String, String),
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl SysctlsRestored {
    fn take() -> Self {
        let serial = SYSCTL_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let before = host_sysctls();
        assert_ne!(
            before.0, "-1",
            "the host's perf_event_paranoid is already -1: nothing to protect"
        );
        SysctlsRestored {
            before,
            _serial: serial,
        }
    }
}

impl Drop for SysctlsRestored {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/perf_event_paranoid", &self.before.0);
        let _ = std::fs::write("/proc/sys/kernel/kptr_restrict", &self.before.1);
    }
}

/// A demo node that may write the host's /proc/sys (SYS_ADMIN with /proc/sys left
/// writable: what --privileged also gives, and what this engine allows), whose perf is
/// refused while perf_event_paranoid is above -1.
fn sysctl_writable_node(prefix: &str) -> ContainerGuard {
    let name = unique(&format!("devprof-test-robust-{prefix}"));
    let node = run_container(
        &name,
        &[
            "--cap-add",
            "SYS_ADMIN",
            "--cap-add",
            "SYS_PTRACE",
            "--security-opt",
            "systempaths=unconfined",
            "--security-opt",
            "seccomp=unconfined",
            "-e",
            "DEMO_WORKLOADS=hash_chain:60",
        ],
        &demo_image(),
        &[],
    );
    wait_for_cpu(&node.0, "demo-node", 0.2);
    docker_ok(&["exec", &node.0, "sh", "-c", DEMANDING_PERF]);
    node
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_container_that_may_write_host_sysctls_never_changes_them_unless_allowed() {
    if !devnet_ready("a_container_that_may_write_host_sysctls_never_changes_them_unless_allowed") {
        return;
    }
    let sysctls = SysctlsRestored::take();
    let before = sysctls.before.clone();
    let node = sysctl_writable_node("sysctl");
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &node.0, "2", "--mode", "exec"])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("--allow-sysctl"));
    assert_eq!(
        host_sysctls(),
        before,
        "host sysctls changed without --allow-sysctl"
    );
    assert!(files_under(cwd.path()).is_empty());
    // The workdir made beside the process's probe, before perf was refused, is gone.
    let tmp = workdirs_in(&node.0);
    assert!(tmp.is_empty(), "temp directory left: {tmp}");

    // Allowed: lowered for the capture, and restored when it ends.
    devprof(cwd.path())
        .args(["cpu", &node.0, "2", "--mode", "exec", "--allow-sysctl"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "lowered the host's kernel.perf_event_paranoid",
        ));
    assert_eq!(
        host_sysctls(),
        before,
        "host sysctls not restored after the capture"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn clean_containers_keeps_the_sidecar_of_a_running_capture() {
    if !devnet_ready("clean_containers_keeps_the_sidecar_of_a_running_capture") {
        return;
    }
    let node = start_node("clean", &["--init"], &[]);
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &node.0]);
    // A leftover of a devprof that died on this host (pid 0 is never a devprof).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let leftover = unique("devprof-test-robust-leftover");
    let _leftover_guard = run_container(
        &leftover,
        &[
            "--label",
            "devprof.sidecar=leftover-test",
            "--label",
            &format!("devprof.creator.host={}", host.trim()),
            "--label",
            "devprof.creator.pid=0",
            "--label",
            "devprof.expires=99999999999",
        ],
        &base_image(),
        &["sleep", "300"],
    );
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &node.0, "30", "--mode", "sidecar"]);
    capture.wait_for_window();
    wait_for_perf_record(&node.0);
    let running = sidecars_of_id(&id);
    assert_eq!(running.len(), 1, "{running:?}");
    let out = devprof(cwd.path())
        .args(["clean", "--containers"])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "removed sidecar {leftover}"
        )))
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        sidecars_of_id(&id),
        running,
        "the running capture's sidecar was removed: {}",
        String::from_utf8_lossy(&out)
    );
    // Some recording first: a window stopped before its first sample has nothing to keep.
    wait_for_cpu(&node.0, "demo-node", 0.5);
    capture.interrupt();
    let output = capture.wait_with_output();
    assert!(
        output.status.success(),
        "the capture failed after clean: {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Captures `node` briefly in exec mode (with `extra` arguments) and returns the
/// manifest's process record.
fn chosen_process(node: &str, extra: &[&str]) -> serde_json::Value {
    let cwd = workdir();
    let mut args = vec!["cpu", node, "2", "--mode", "exec"];
    args.extend_from_slice(extra);
    devprof(cwd.path()).args(&args).assert().success();
    read_manifest(&only_capture(cwd.path(), node, "perf-"))["process"].clone()
}

#[test]
#[ignore = "needs the demo devnet"]
fn the_busy_side_of_a_pipeline_is_chosen_and_process_names_beat_wrappers() {
    if !devnet_ready("the_busy_side_of_a_pipeline_is_chosen_and_process_names_beat_wrappers") {
        return;
    }
    for pipeline in ["demo-node | cat", "tail -f /dev/null | demo-node"] {
        let node = start_node("pipe", &[], &["sh", "-c", pipeline]);
        let process = chosen_process(&node.0, &[]);
        assert_eq!(process["comm"], "demo-node", "{pipeline}: {process}");
        // A word of the wrapper's command line picks the program, not the wrapper.
        let process = chosen_process(&node.0, &["--process", "demo"]);
        assert_eq!(process["comm"], "demo-node", "{pipeline}: {process}");
    }
}

/// A heap capture as devprof writes it, `days_ago` old, listing its own files and the
/// jemalloc dump `dump` (kept under its original name and reused by later captures).
fn heap_capture(dir: &std::path::Path, days_ago: i64, dump: &str) -> Vec<std::path::PathBuf> {
    heap_capture_with_modules(dir, days_ago, dump, &[])
}

/// `heap_capture` whose manifest names binaries of the symbol cache (`.symbols/<key>/<file>`).
fn heap_capture_with_modules(
    dir: &std::path::Path,
    days_ago: i64,
    dump: &str,
    cached: &[&str],
) -> Vec<std::path::PathBuf> {
    use devprof::store::{FileRecord, Manifest, Stem};
    let created = chrono::Local::now() - chrono::Duration::days(days_ago);
    let stem = Stem::reserve(dir, "heap", created).unwrap();
    let mut files = vec![];
    let mut records = vec![];
    for ext in ["folded", "svg", "txt"] {
        std::fs::write(stem.path(ext), format!("{ext} of {days_ago}")).unwrap();
        records.push(FileRecord {
            name: stem.file_name(ext),
            bytes: 4,
        });
        files.push(stem.path(ext));
    }
    records.push(FileRecord {
        name: dump.into(),
        bytes: 4,
    });
    let mut manifest = Manifest {
        kind: "heap".into(),
        created: created.to_rfc3339(),
        files: records,
        heap: Some(devprof::profile::heap::HeapRecord {
            modules: cached
                .iter()
                .map(|c| devprof::profile::heap::ModuleRecord {
                    path: format!("/usr/lib/{c}"),
                    symbols: "symtab".into(),
                    cached: Some(c.to_string()),
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    manifest.container.name = "demo-seq".into();
    files.push(manifest.write(&stem).unwrap());
    files
}

#[test]
fn clean_keeps_a_dump_a_kept_manifest_lists_and_reclaims_killed_captures() {
    let cwd = workdir();
    let dir = cwd.path().join("profiling").join("demo-seq");
    std::fs::create_dir_all(&dir).unwrap();
    let dump = "jeprof.demo-seq.7.0.u0.heap";
    std::fs::write(dir.join(dump), "heap_v2/131072\n").unwrap();
    let old = heap_capture(&dir, 30, dump);
    let new = heap_capture(&dir, 1, dump);
    // A capture killed before its manifest: the reservation and a raw file, 10 days old;
    // and one running now (fresh files), which must stay.
    let killed = devprof::store::Stem::reserve(&dir, "perf", chrono::Local::now()).unwrap();
    std::fs::write(killed.path("data"), "partial").unwrap();
    for ext in ["json", "data"] {
        let path = killed.path(ext);
        touch_10_days_ago(&path);
    }
    let running = devprof::store::Stem::reserve(&dir, "offcpu", chrono::Local::now()).unwrap();
    std::fs::write(running.path("data"), "recording").unwrap();

    devprof(cwd.path())
        .args(["clean", "--older", "7d"])
        .assert()
        .success()
        .stdout(predicate::str::contains("still listed by"))
        .stdout(predicate::str::contains(
            "leftovers of 1 interrupted capture",
        ));
    assert!(dir.join(dump).is_file(), "the shared dump was removed");
    assert!(old.iter().all(|p| !p.exists()), "the old capture stayed");
    assert!(
        new.iter().all(|p| p.is_file()),
        "the new capture lost files"
    );
    assert!(!killed.path("json").exists() && !killed.path("data").exists());
    assert!(running.path("json").is_file() && running.path("data").is_file());

    // Once no kept manifest lists it, the dump goes with the last capture.
    devprof(cwd.path())
        .args(["clean", "--older", "0s"])
        .assert()
        .success();
    assert!(!dir.join(dump).exists(), "the dump outlived every manifest");
}

/// Sets a file's modification time to 10 days ago (with touch(1), as a user would).
fn touch_10_days_ago(path: &std::path::Path) {
    let ok = Command::new("touch")
        .args(["-d", "10 days ago"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "touch {}", path.display());
}

#[test]
fn clean_reclaims_cached_binaries_no_kept_capture_uses() {
    let cwd = workdir();
    let dir = cwd.path().join("profiling").join("demo-seq");
    let cache = dir.join(".symbols");
    let used = ".symbols/1111111111111111/demo-node";
    let unused = ".symbols/2222222222222222/libold.so";
    let fresh = ".symbols/3333333333333333/libnew.so";
    let kernel = ".symbols/kernel-8f9dabeb-f799-40c6-af4b-86868d0cc3c7/kallsyms";
    for rel in [used, unused, fresh, kernel] {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "\x7fELF binary").unwrap();
    }
    // Old enough for retention, except the one a capture running now may have fetched.
    touch_10_days_ago(&dir.join(used));
    touch_10_days_ago(&dir.join(unused));
    touch_10_days_ago(&dir.join(kernel));
    let dump = "jeprof.demo-seq.7.0.m0.heap";
    std::fs::write(dir.join(dump), "heap_v2/131072\n").unwrap();
    let capture = heap_capture_with_modules(&dir, 1, dump, &[used]);

    let out = devprof(cwd.path())
        .args(["clean", "--older", "7d", "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let reclaimed: Vec<String> = json["symbol_cache"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(reclaimed.len(), 2, "{json}");
    assert!(reclaimed[0].ends_with(unused), "{json}");
    assert!(
        reclaimed[1].ends_with(kernel),
        "kernel symbols kept past AGE: {json}"
    );
    assert!(!dir.join(unused).exists(), "an unused cached binary stayed");
    assert!(
        !cache.join("2222222222222222").exists(),
        "its emptied key directory stayed"
    );
    assert!(
        dir.join(used).is_file(),
        "a binary a kept manifest uses went"
    );
    assert!(
        dir.join(fresh).is_file(),
        "a fresh binary (a capture running now) went"
    );
    assert!(capture.iter().all(|p| p.is_file()));

    // With the capture that used it gone, its binary goes too (once old enough).
    devprof(cwd.path())
        .args(["clean", "--older", "12h"])
        .assert()
        .success()
        .stdout(predicate::str::contains("1 cached file of .symbols/"));
    assert!(capture.iter().all(|p| !p.exists()));
    assert!(!dir.join(used).exists());
    assert!(dir.join(fresh).is_file());
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_third_ctrl_c_exits_130_at_once() {
    if !devnet_ready("a_third_ctrl_c_exits_130_at_once") {
        return;
    }
    let node = start_node("third", &["--init"], &[]);
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &node.0, "30", "--mode", "exec"]);
    capture.wait_for_window();
    // Three in a row, faster than the second one's clean-up can finish, far enough apart
    // that the kernel delivers each (signals pending at once merge into one).
    for _ in 0..3 {
        capture.interrupt();
        std::thread::sleep(Duration::from_millis(30));
    }
    let sent = Instant::now();
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("third interrupt: exiting now"), "{stderr}");
    // A liveness bound (no clean-up waited for), not a speed assertion.
    assert!(sent.elapsed() < Duration::from_secs(10), "{stderr}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn ctrl_c_while_folding_leaves_no_perf_script_in_the_target() {
    if !devnet_ready("ctrl_c_while_folding_leaves_no_perf_script_in_the_target") {
        return;
    }
    let node = start_node("fold", &["--init"], &[]);
    let cwd = workdir();
    // DWARF call graphs make `perf script` slow enough to be caught in the act.
    let mut capture = spawn_capture(
        cwd.path(),
        &[
            "cpu",
            &node.0,
            "6",
            "--mode",
            "exec",
            "--call-graph",
            "dwarf",
            // DWARF folds natively now: ask for the in-container path this test is about.
            "--fold",
            "perf-script",
        ],
    );
    capture.wait_for_text(devprof::engines::select::FOLDING_STARTED);
    let started = Instant::now();
    while !container_processes(&node.0).contains(" script ") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no perf script ran in {}",
            node.0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    capture.interrupt();
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let left = container_processes(&node.0);
    assert!(
        !left
            .lines()
            .any(|l| l.contains("perf") && l.contains("devprof.")),
        "perf left running in {}: {left}",
        node.0
    );
    let tmp = workdirs_in(&node.0);
    assert!(tmp.is_empty(), "temp directory left: {tmp}");
    // What was home stays, with a manifest that says the fold was interrupted.
    let manifest = read_manifest(&only_capture(cwd.path(), &node.0, "perf-"));
    assert!(
        manifest["notes"]
            .to_string()
            .contains("interrupted while folding"),
        "{manifest}"
    );
}

/// perf keeps a build-id cache (a hard link or copy of every binary it saw) in its user's
/// `~/.debug`: off-CPU captures left one in the target container (22 MB in demo-seq).
/// Records now keep no cache (`-N`) and perf's cache directory is the capture's workdir.
#[test]
#[ignore = "needs the demo devnet"]
fn captures_leave_no_build_id_cache_in_the_target_container() {
    if !devnet_ready("captures_leave_no_build_id_cache_in_the_target_container") {
        return;
    }
    let node = start_node("buildid", &["--init"], &[]);
    let before = docker_ok(&["diff", &node.0]);
    let cwd = workdir();
    let captures: [&[&str]; 3] = [
        &[
            "cpu",
            &node.0,
            "2",
            "--mode",
            "exec",
            "--fold",
            "perf-script",
        ],
        // Context switches: a duty-cycled hash_chain switches out every period, where
        // the default config's futex and fsync events may not fire in 2 s.
        &[
            "offcpu",
            &node.0,
            "2",
            "--mode",
            "exec",
            "--config",
            "contextswitches",
        ],
        // A command that works long enough to be sampled (`true` alone once gave 0 samples
        // on a loaded machine, which fails the capture).
        &[
            "cpu",
            &node.0,
            "--mode",
            "exec",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 50000 ]; do i=$((i+1)); done",
        ],
    ];
    for args in captures {
        devprof(cwd.path()).args(args).assert().success();
    }
    let after = docker_ok(&["diff", &node.0]);
    let added: Vec<&str> = after
        .lines()
        .filter(|line| !before.lines().any(|b| b == *line))
        .collect();
    assert!(
        added.is_empty(),
        "the captures changed {}'s filesystem: {added:?}",
        node.0
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_second_ctrl_c_aborts_a_session_with_130() {
    if !devnet_ready("a_second_ctrl_c_aborts_a_session_with_130") {
        return;
    }
    let nodes = [
        start_node("session-a", &["--init"], &[]),
        start_node("session-b", &["--init"], &[]),
    ];
    let cwd = workdir();
    let mut session = spawn_capture(cwd.path(), &["profile", &nodes[0].0, &nodes[1].0, "30"]);
    session.wait_for_window();
    session.interrupt();
    // The second comes while the first's stop is under way, as a user's impatient one does.
    std::thread::sleep(Duration::from_millis(300));
    session.interrupt();
    let sent = Instant::now();
    let output = session.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("third interrupt"), "{stderr}");
    // A liveness bound, not a speed assertion.
    assert!(sent.elapsed() < Duration::from_secs(30), "{stderr}");
    for node in &nodes {
        let left = container_processes(&node.0);
        assert!(
            perf_records(&left).is_empty(),
            "perf left in {}: {left}",
            node.0
        );
    }
}

/// Regression: sysctls lowered with --allow-sysctl were restored through the target only:
/// a target that died during the capture left the host's perf_event_paranoid at -1, with a
/// warning. A short-lived helper container restores them now.
#[test]
#[ignore = "needs the demo devnet"]
fn sysctls_lowered_for_a_target_that_dies_are_restored_through_a_helper() {
    if !devnet_ready("sysctls_lowered_for_a_target_that_dies_are_restored_through_a_helper") {
        return;
    }
    let sysctls = SysctlsRestored::take();
    let node = sysctl_writable_node("sysctl-dies");
    let cwd = workdir();
    let mut capture = spawn_capture(
        cwd.path(),
        &["cpu", &node.0, "60", "--mode", "exec", "--allow-sysctl"],
    );
    capture.wait_for_window();
    assert_eq!(host_sysctls().0, "-1", "not lowered for the capture");
    docker_ok(&["kill", &node.0]);
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(
            "restored the host's sysctls through a helper container from devprof-profiler:latest"
        ),
        "{stderr}"
    );
    assert_eq!(host_sysctls(), sysctls.before, "{stderr}");
    assert!(
        docker_ok(&["ps", "-aq", "--filter", "label=devprof.sysctl-helper"]).is_empty(),
        "a sysctl helper left behind"
    );
}

/// Where no helper could restore the sysctls without the target, --allow-sysctl is
/// refused before anything is lowered (not found out after the target is gone).
#[test]
#[ignore = "needs the demo devnet"]
fn allow_sysctl_is_refused_before_lowering_when_no_helper_could_restore_them() {
    if !devnet_ready("allow_sysctl_is_refused_before_lowering_when_no_helper_could_restore_them") {
        return;
    }
    let sysctls = SysctlsRestored::take();
    let node = sysctl_writable_node("sysctl-refused");
    let cwd = workdir();
    devprof(cwd.path())
        .args([
            "cpu",
            &node.0,
            "2",
            "--mode",
            "exec",
            "--allow-sysctl",
            "--profiler-image",
            "devprof-test-absent:none",
        ])
        .assert()
        .code(5)
        .stderr(predicate::str::contains("--allow-sysctl refused"))
        .stderr(predicate::str::contains("nothing was changed"))
        .stderr(predicate::str::contains(
            "devprof-test-absent:none is not on the engine",
        ))
        .stderr(predicate::str::contains("lowered the host's").not());
    assert_eq!(host_sysctls(), sysctls.before);
    assert!(files_under(cwd.path()).is_empty());
}

/// devprof in a terminal of its own (a new session whose controlling terminal is a pty),
/// as in an ssh login; `close` hangs the terminal up.
struct InTerminal {
    child: Child,
    master: std::fs::File,
}

impl InTerminal {
    fn spawn(cwd: &std::path::Path, args: &[&str]) -> Self {
        use std::os::fd::{AsRawFd, FromRawFd};
        use std::os::unix::process::CommandExt;
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors this test then owns.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(opened, 0, "openpty");
        // SAFETY: both descriptors were just opened and are owned here.
        let (master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        // SAFETY: the master is ours: non-blocking, so it can be drained without a thread,
        // and not inherited, so that closing it here hangs the terminal up.
        unsafe {
            libc::fcntl(master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("devprof"));
        cmd.args(args)
            .current_dir(cwd)
            .env_remove("DEVPROF_TARGET")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // SAFETY: setsid and TIOCSCTTY are async-signal-safe; stdin is the pty's slave.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                libc::ioctl(0, libc::TIOCSCTTY as _, 0);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("devprof binary");
        InTerminal { child, master }
    }

    /// Reads what devprof drew so far (its progress bar), so it never blocks on writing.
    fn drain(&mut self) {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        while matches!(self.master.read(&mut buf), Ok(n) if n > 0) {}
    }

    /// Closes the terminal: the kernel hangs it up and sends devprof SIGHUP.
    fn close(self) -> Child {
        drop(self.master);
        self.child
    }
}

/// Regression: a closed terminal (SIGHUP) ended devprof at once: the host's sysctls
/// stayed lowered and the recorder and workdir stayed in the target. SIGHUP is now an
/// interrupt like Ctrl-C: the window ends early and everything is put back.
#[test]
#[ignore = "needs the demo devnet"]
fn a_closed_terminal_still_restores_sysctls_and_cleans_up() {
    if !devnet_ready("a_closed_terminal_still_restores_sysctls_and_cleans_up") {
        return;
    }
    let sysctls = SysctlsRestored::take();
    let node = sysctl_writable_node("hangup");
    let cwd = workdir();
    let mut terminal = InTerminal::spawn(
        cwd.path(),
        &["cpu", &node.0, "60", "--mode", "exec", "--allow-sysctl"],
    );
    let started = Instant::now();
    while perf_records(&container_processes(&node.0)).is_empty() {
        terminal.drain();
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no perf record in {}",
            node.0
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for_cpu(&node.0, "demo-node", 0.5);
    terminal.drain();
    assert_eq!(host_sysctls().0, "-1", "not lowered for the capture");
    let mut child = terminal.close();
    let closed = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        // A liveness bound, not a speed assertion.
        if closed.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("devprof still running 120 s after its terminal closed");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        host_sysctls(),
        sysctls.before,
        "sysctls left lowered ({status})"
    );
    let left = container_processes(&node.0);
    assert!(perf_records(&left).is_empty(), "perf left running: {left}");
    let tmp = workdirs_in(&node.0);
    assert!(tmp.is_empty(), "temp directory left: {tmp}");
    // The first interrupt keeps what was recorded, as Ctrl-C does.
    let manifest = read_manifest(&only_capture(cwd.path(), &node.0, "perf-"));
    assert_eq!(manifest["interrupted"], true, "{manifest}");
    assert_eq!(status.code(), Some(0));
}

/// Pauses a container; the engine's freezer sometimes refuses while a process is in the
/// middle of a system call, so it is asked again.
fn pause(container: &str) -> Unpause {
    for _ in 0..10 {
        if docker(&["pause", container]).status.success() {
            return Unpause(container.to_string());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("could not pause {container}");
}

/// Unpauses the container when the test ends (a paused one cannot be removed).
struct Unpause(String);

impl Drop for Unpause {
    fn drop(&mut self) {
        let _ = docker(&["unpause", &self.0]);
    }
}

/// Regression: a paused target was refused with `docker start` as the fix.
#[test]
#[ignore = "needs the demo devnet"]
fn a_paused_target_is_refused_with_unpause_as_the_fix() {
    if !devnet_ready("a_paused_target_is_refused_with_unpause_as_the_fix") {
        return;
    }
    let node = start_node("paused-before", &["--init"], &[]);
    let _paused = pause(&node.0);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &node.0, "2"])
        .assert()
        .code(4)
        .stderr(predicate::str::contains(format!("container '{}'", node.0)))
        .stderr(predicate::str::contains("is paused"))
        .stderr(predicate::str::contains(format!(
            "`docker unpause {}`",
            node.0
        )))
        .stderr(predicate::str::contains("docker start").not());
    assert!(files_under(cwd.path()).is_empty());
}

/// Regression: a target paused during an exec-mode window was taken as running: the
/// capture ended ~45 s after its window with "the recorder did not stop when asked" and
/// left /tmp/devprof.* and perf in the container. Now the pause ends it at once, and what
/// it left is removed once the container is unpaused.
#[test]
#[ignore = "needs the demo devnet"]
fn a_target_paused_during_an_exec_window_ends_the_capture_and_is_cleaned_once_unpaused() {
    if !devnet_ready(
        "a_target_paused_during_an_exec_window_ends_the_capture_and_is_cleaned_once_unpaused",
    ) {
        return;
    }
    let node = start_node("paused-exec", &["--init"], &[]);
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &node.0, "60", "--mode", "exec"]);
    capture.wait_for_window();
    wait_for_perf_record(&node.0);
    let paused = pause(&node.0);
    let paused_at = Instant::now();
    capture.wait_for_text("is paused; waiting up to 30 s for it to be unpaused");
    // A liveness bound: seen at once, not at the end of the 60 s window.
    assert!(paused_at.elapsed() < Duration::from_secs(20));
    drop(paused);
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("{} was paused (`docker pause`) at T+", node.0))
            && stderr.contains(&format!("`docker unpause {}`", node.0)),
        "{stderr}"
    );
    assert!(!stderr.contains("did not stop when asked"), "{stderr}");
    let left = container_processes(&node.0);
    assert!(perf_records(&left).is_empty(), "perf left running: {left}");
    let tmp = workdirs_in(&node.0);
    assert!(tmp.is_empty(), "temp directory left: {tmp}");
    assert!(
        files_under(cwd.path()).is_empty(),
        "{:?}",
        files_under(cwd.path())
    );
}

/// A target still paused when devprof gives up waiting: what is left is named, with the
/// command that removes it once the container is unpaused, and that command works.
#[test]
#[ignore = "needs the demo devnet"]
fn a_target_left_paused_names_what_is_left_and_the_command_that_removes_it() {
    if !devnet_ready("a_target_left_paused_names_what_is_left_and_the_command_that_removes_it") {
        return;
    }
    let node = start_node("paused-left", &["--init"], &[]);
    let cwd = workdir();
    // A window shorter than the wait for the unpause: the recorder's window is over by
    // the time the container runs again, and it ends by itself.
    let mut capture = spawn_capture(cwd.path(), &["cpu", &node.0, "20", "--mode", "exec"]);
    capture.wait_for_window();
    wait_for_perf_record(&node.0);
    let paused = pause(&node.0);
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    let prefix = format!("`docker exec {} rm -rf /tmp/devprof.", node.0);
    let at = stderr
        .find(&prefix)
        .unwrap_or_else(|| panic!("no clean-up command: {stderr}"));
    let command = &stderr[at + 1..];
    let command = &command[..command.find('`').unwrap()];
    drop(paused);
    let started = Instant::now();
    while !perf_records(&container_processes(&node.0)).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the recorder did not end by itself after the unpause"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let argv: Vec<&str> = command.split(' ').skip(1).collect();
    docker_ok(&argv);
    let tmp = workdirs_in(&node.0);
    assert!(
        tmp.is_empty(),
        "temp directory left after `{command}`: {tmp}"
    );
}

/// In sidecar mode the recorder beside a paused target is not frozen: it is stopped at
/// the pause and what it recorded until then becomes the profile.
#[test]
#[ignore = "needs the demo devnet"]
fn a_target_paused_during_a_sidecar_window_keeps_what_was_recorded_until_then() {
    if !devnet_ready("a_target_paused_during_a_sidecar_window_keeps_what_was_recorded_until_then") {
        return;
    }
    let node = start_node("paused-sidecar", &["--init"], &[]);
    let id = docker_ok(&["inspect", "-f", "{{.Id}}", &node.0]);
    let cwd = workdir();
    let mut capture = spawn_capture(cwd.path(), &["cpu", &node.0, "60", "--mode", "sidecar"]);
    capture.wait_for_window();
    wait_for_perf_record(&node.0);
    // Samples to keep: the node runs for a while first (on a loaded machine it gets
    // little of the CPU).
    let cpu_at_start = node_cpu_seconds(&node.0);
    let started = Instant::now();
    while node_cpu_seconds(&node.0) - cpu_at_start < 0.5 {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "the node does not run"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let _paused = pause(&node.0);
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{} was paused (`docker pause`) at T+", node.0)),
        "{stderr}"
    );
    let manifest = read_manifest(&only_capture(cwd.path(), &node.0, "perf-"));
    assert!(
        manifest["notes"].to_string().contains("was paused"),
        "{manifest}"
    );
    assert!(
        manifest["duration_recorded_s"].as_f64().unwrap() < 30.0,
        "{manifest}"
    );
    assert!(sidecars_of_id(&id).is_empty(), "sidecar left behind");
}

/// The path of the kept recording and its manifest's notes.
fn kept_recording(
    cwd: &std::path::Path,
    container: &str,
    prefix: &str,
) -> (std::path::PathBuf, String) {
    let stem = only_capture(cwd, container, prefix);
    let data = with_ext(&stem, "data");
    assert!(
        data.is_file(),
        "the recording was deleted: {:?}",
        files_under(cwd)
    );
    let manifest = read_manifest(&stem);
    let listed: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    let name = data.file_name().unwrap().to_str().unwrap();
    assert!(listed.contains(&name), "{manifest}");
    (data, manifest["notes"].to_string())
}

/// Captures a fresh demo node (`extra`: its docker run options) with `kind` and `rest`,
/// kills the node once devprof printed `text`, and returns the node, the capture's
/// directory and devprof's standard error (exit 4: the target stopped).
fn killed_during(
    prefix: &str,
    extra: &[&str],
    kind: &str,
    rest: &[&str],
    text: &str,
) -> (ContainerGuard, tempfile::TempDir, String) {
    let node = start_node(prefix, extra, &[]);
    let cwd = workdir();
    let mut args = vec![kind, node.0.as_str()];
    args.extend_from_slice(rest);
    let mut capture = spawn_capture(cwd.path(), &args);
    capture.wait_for_text(text);
    docker_ok(&["kill", &node.0]);
    let output = capture.wait_with_output();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    (node, cwd, stderr)
}

/// The kept recording's path as devprof names it (relative to where it ran).
fn as_named(container: &str, data: &std::path::Path) -> String {
    std::path::Path::new("profiling")
        .join(container)
        .join(data.file_name().unwrap())
        .display()
        .to_string()
}

/// Regression: perf.data already on the host was deleted when the target stopped while
/// `perf script` folded it. It is kept, with what failed and the command that folds it.
#[test]
#[ignore = "needs the demo devnet"]
fn a_target_killed_while_folding_keeps_the_recording_and_the_command_to_fold_it() {
    if !devnet_ready("a_target_killed_while_folding_keeps_the_recording_and_the_command_to_fold_it")
    {
        return;
    }
    // DWARF call graphs make `perf script` slow enough to be caught in the act.
    let (node, cwd, stderr) = killed_during(
        "kept-fold",
        &["--init"],
        "cpu",
        // DWARF folds natively now: ask for the in-container path this test is about.
        &[
            "4",
            "--mode",
            "exec",
            "--call-graph",
            "dwarf",
            "--fold",
            "perf-script",
        ],
        devprof::engines::select::FOLDING_STARTED,
    );
    assert!(
        stderr.contains(&format!("{} stopped during the fold", node.0)),
        "{stderr}"
    );
    let (data, notes) = kept_recording(cwd.path(), &node.0, "perf-");
    let command = format!("perf script -i {}", as_named(&node.0, &data));
    assert!(
        stderr.contains("the recording is kept") && stderr.contains(&command),
        "{stderr}"
    );
    assert!(
        notes.contains("re-analyse it with") && notes.contains(&command),
        "{notes}"
    );
}

/// Regression: perf.data already on the host was deleted when the off-CPU summary
/// failed. It is kept, and `devprof summarize` (the command the note names) reads it.
#[test]
#[ignore = "needs the demo devnet"]
fn a_target_killed_during_the_offcpu_summary_keeps_the_recording_for_summarize() {
    if !devnet_ready("a_target_killed_during_the_offcpu_summary_keeps_the_recording_for_summarize")
    {
        return;
    }
    let (node, cwd, stderr) = killed_during(
        "kept-summary",
        &[
            "--init",
            "-e",
            "DEMO_WORKLOADS=hash_chain:20,contend_lock:40",
        ],
        "offcpu",
        &["6", "--mode", "exec", "--call-graph", "dwarf"],
        devprof::capture::offcpu::SUMMARY_STARTED,
    );
    let (data, notes) = kept_recording(cwd.path(), &node.0, "offcpu-");
    let relative = as_named(&node.0, &data);
    let command = format!("devprof summarize {relative}");
    assert!(
        stderr.contains(&command) && notes.contains(&command),
        "{stderr}\n{notes}"
    );
    devprof(cwd.path())
        .args(["summarize", &relative])
        .assert()
        .success()
        .stdout(predicate::str::contains("events (exact counts)"));
}
