//! Shared helpers for the tests that drive the real `devprof` binary against the real
//! Docker engine and the demo devnet (`scripts/testbed-up.sh`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub const DEMO_SEQ: &str = "demo-seq";

pub fn demo_image() -> String {
    std::env::var("DEVPROF_DEMO_IMAGE").unwrap_or_else(|_| "devprof-demo-node:latest".to_string())
}

pub fn base_image() -> String {
    std::env::var("DEVPROF_BASE_IMAGE").unwrap_or_else(|_| "debian:bookworm-slim".to_string())
}

/// Whether the engine and the demo devnet are there. Tests that need them are marked
/// `#[ignore = "needs the demo devnet"]`, so they run only when asked for
/// (`--include-ignored`, as scripts/test.sh and CI do); asked for, their absence fails the
/// test: a test that did not run never reports itself as passed.
pub fn devnet_ready(test: &str) -> bool {
    let up = Command::new("docker")
        .args(["inspect", "-f", "{{.State.Running}}", DEMO_SEQ])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
        .unwrap_or(false);
    if !up {
        not_run(
            test,
            "the Docker engine or the demo devnet (demo-seq) is not available; run scripts/testbed-up.sh",
        );
    }
    up
}

/// A test that was asked to run where it cannot: it fails, saying why.
pub fn not_run(test: &str, why: &str) {
    panic!("{test}: cannot run here: {why}");
}

/// `devnet_ready`, and `container` (a demo devnet service such as demo-js) running in it.
pub fn demo_container_ready(test: &str, container: &str) -> bool {
    if !devnet_ready(test) {
        return false;
    }
    let running = docker(&["inspect", "-f", "{{.State.Running}}", container]);
    assert!(
        String::from_utf8_lossy(&running.stdout).trim() == "true",
        "{test}: the demo devnet is up but {container} is not running"
    );
    true
}

/// A scratch directory to run devprof in, so `profiling/` lands there.
pub fn workdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

pub fn devprof(cwd: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("devprof").expect("devprof binary");
    cmd.current_dir(cwd)
        .env_remove("DEVPROF_TARGET")
        .env_remove("DEVPROF_OUTPUT_DIR")
        .env_remove("DEVPROF_DURATION")
        .timeout(std::time::Duration::from_secs(180));
    cmd
}

pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(with_limits(args))
        .output()
        .expect("docker CLI")
}

/// A container the tests start gets explicit resource limits: Podman's defaults (1048576
/// open files) are refused by a kernel whose limit is lower ("error setting rlimit type
/// 7"), so the same tests run against Docker and, through scripts/podman-matrix.sh, Podman.
fn with_limits<'a>(args: &[&'a str]) -> Vec<&'a str> {
    match args.split_first() {
        Some((&"run", rest)) => [
            "run",
            "--ulimit",
            "nofile=16384:16384",
            "--ulimit",
            "nproc=16384:16384",
        ]
        .into_iter()
        .chain(rest.iter().copied())
        .collect(),
        _ => args.to_vec(),
    }
}

/// `docker` with a deadline: an exec into a container removed while it attaches can wait
/// forever (seen with the hostile tests' sidecar watch).
pub fn docker_within(seconds: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .args(["-k", "2", &seconds.to_string(), "docker"])
        .args(args)
        .output()
        .expect("timeout and the docker CLI")
}

pub fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(
        out.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A unique name per test run, so parallel tests and reruns never collide.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Removes the container when the test ends, whatever happens.
pub struct ContainerGuard(pub String);

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// Starts a container; `args` go between `docker run -d --name NAME` and the image.
pub fn run_container(name: &str, args: &[&str], image: &str, cmd: &[&str]) -> ContainerGuard {
    let mut all = vec!["run", "-d", "--name", name];
    all.extend_from_slice(args);
    all.push(image);
    all.extend_from_slice(cmd);
    docker_ok(&all);
    ContainerGuard(name.to_string())
}

/// The profiling rights the demo devnet gives its containers.
pub const PROFILING_RIGHTS: &[&str] = &[
    "--cap-add",
    "SYS_ADMIN",
    "--cap-add",
    "SYS_PTRACE",
    "--cap-add",
    "IPC_LOCK",
    "--security-opt",
    "seccomp=unconfined",
];

/// Sidecars started for the container with this id (their label holds it).
pub fn sidecars_of_id(id: &str) -> Vec<String> {
    docker_ok(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=devprof.sidecar={id}"),
        "--format",
        "{{.Names}}",
    ])
    .lines()
    .map(str::to_string)
    .collect()
}

/// Files under `dir`, recursively, as paths relative to it.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The single capture of `kind` (`perf`) for `container` under `cwd`: its stem path.
pub fn only_capture(cwd: &Path, container: &str, prefix: &str) -> PathBuf {
    let dir = cwd.join("profiling").join(container);
    let mut stems: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .map(|p| p.with_extension(""))
        .collect();
    assert_eq!(
        stems.len(),
        1,
        "expected one capture in {}: {stems:?}",
        dir.display()
    );
    stems.pop().unwrap()
}

/// A capture's manifest, as JSON.
pub fn read_manifest(stem: &Path) -> serde_json::Value {
    let path = with_ext(stem, "json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn with_ext(stem: &Path, ext: &str) -> PathBuf {
    PathBuf::from(format!("{}.{ext}", stem.display()))
}

/// Processes in a container, as `ps`-like lines read from /proc.
pub fn container_processes(container: &str) -> String {
    docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        "for d in /proc/[0-9]*; do tr '\\0' ' ' < $d/cmdline 2>/dev/null; echo; done",
    ])
}

/// The `perf record` command lines in `processes` (as `container_processes` lists them):
/// devprof runs `perf --buildid-dir DIR record ...`.
pub fn perf_records(processes: &str) -> Vec<&str> {
    processes
        .lines()
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.first().is_some_and(|w| w.ends_with("perf")) && words.contains(&"record")
        })
        .collect()
}

/// The repository root (where compose/, dockerfiles/ and Cargo.toml are).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Removes the image tag when the test ends, whatever happens.
pub struct ImageGuard(pub String);

impl Drop for ImageGuard {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rmi", "-f", &self.0]).output();
    }
}

/// Builds an image from a Dockerfile given as text, with no context (COPY --from only).
pub fn build_image_from_text(tag: &str, dockerfile: &str) -> ImageGuard {
    use std::io::Write;
    let mut child = Command::new("docker")
        .args(["build", "-q", "-t", tag, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docker CLI");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dockerfile.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "docker build {tag} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ImageGuard(tag.to_string())
}

/// `docker-compose` with the given arguments.
pub fn docker_compose(cwd: &Path, args: &[&str]) -> Output {
    Command::new("docker-compose")
        .current_dir(cwd)
        .args(args)
        .output()
        .expect("docker-compose")
}

/// Takes a compose project down (containers and volumes) when the test ends.
pub struct ComposeGuard {
    pub cwd: PathBuf,
    pub args: Vec<String>,
}

impl Drop for ComposeGuard {
    fn drop(&mut self) {
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.extend(["down", "-v", "--remove-orphans", "-t", "1"]);
        let _ = docker_compose(&self.cwd, &args);
    }
}

/// Whether the engine accepts `--cap-add PERFMON` (asked directly, with the docker CLI).
pub fn engine_knows_perfmon() -> bool {
    let name = unique("devprof-test-perfmon");
    let out = docker(&[
        "create",
        "--name",
        &name,
        "--cap-add",
        "PERFMON",
        &base_image(),
        "true",
    ]);
    let _ = docker(&["rm", "-f", &name]);
    out.status.success()
}

/// A `devprof` capture running in the background, its stderr read as it comes so a test
/// can wait for the window to start instead of guessing how long set-up takes.
pub struct RunningCapture {
    pub child: std::process::Child,
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// What devprof prints on stderr (when it is not a terminal) as the window opens.
pub const WINDOW_STARTED: &str = "window started";

pub fn spawn_capture(cwd: &Path, args: &[&str]) -> RunningCapture {
    spawn_capture_with(cwd, args, &[])
}

/// `spawn_capture` with variables `envs` set.
pub fn spawn_capture_with(cwd: &Path, args: &[&str], envs: &[(&str, &str)]) -> RunningCapture {
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("devprof"))
        .args(args)
        .current_dir(cwd)
        .env_remove("DEVPROF_TARGET")
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let pipe = child.stderr.take().unwrap();
    let sink = stderr.clone();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(pipe).lines().map_while(|l| l.ok()) {
            let mut text = sink.lock().unwrap();
            text.push_str(&line);
            text.push('\n');
        }
    });
    RunningCapture {
        child,
        stderr,
        reader: Some(reader),
    }
}

impl RunningCapture {
    /// Waits (bounded) until the capture window has opened.
    pub fn wait_for_window(&mut self) {
        self.wait_for_text(WINDOW_STARTED)
    }

    /// Waits (bounded) until devprof has printed `text` on stderr.
    pub fn wait_for_text(&mut self, text: &str) {
        let started = std::time::Instant::now();
        while !self.stderr.lock().unwrap().contains(text) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "devprof ended ({status}) before it printed '{text}': {}",
                    self.stderr.lock().unwrap()
                );
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "devprof did not print '{text}' in 120 s: {}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    pub fn interrupt(&self) {
        let kill = std::process::Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
    }

    /// The exit status and output, once the process has ended.
    pub fn wait_with_output(mut self) -> Output {
        let mut output = self.child.wait_with_output().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        output.stderr = self.stderr.lock().unwrap().clone().into_bytes();
        output
    }
}

/// User + system CPU seconds of the demo node process in `container`, from /proc/PID/stat
/// (clock ticks of 1/100 s, the kernel's USER_HZ).
pub fn node_cpu_seconds(container: &str) -> f64 {
    process_cpu_seconds(container, "demo-node")
        .unwrap_or_else(|| panic!("no demo-node process in {container}"))
}

/// User + system CPU seconds of the first process named `comm` in `container` (or of the
/// process whose pid `comm` is), or None while there is none (or the container does not
/// answer).
pub fn process_cpu_seconds(container: &str, comm: &str) -> Option<f64> {
    let out = docker(&[
        "exec",
        container,
        "sh",
        "-c",
        // No pgrep in every image: the first process of that name, or that pid.
        "for d in /proc/[0-9]*; do { [ \"${d#/proc/}\" = \"$1\" ] || [ \"$(cat $d/comm 2>/dev/null)\" = \"$1\" ]; } && { cat $d/stat; break; }; done",
        "sh",
        comm,
    ]);
    let stat = String::from_utf8_lossy(&out.stdout);
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after the comm.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// Waits until the process named `comm` (or whose pid it is) in `container` has run `cpu_secs` more CPU seconds
/// than when this was called (from its start, when it did not run yet): a program that
/// has started its work, or a window that has something of it to keep, however loaded the
/// machine is. Panics after 90 s.
pub fn wait_for_cpu(container: &str, comm: &str, cpu_secs: f64) {
    let started = std::time::Instant::now();
    let from = process_cpu_seconds(container, comm).unwrap_or(0.0);
    loop {
        if let Some(now) = process_cpu_seconds(container, comm) {
            if now - from >= cpu_secs {
                return;
            }
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(90),
            "{comm} in {container} did not run {cpu_secs} CPU seconds within 90 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A 999 Hz cpu-clock capture samples each CPU-second the node used about 999 times. The
/// count follows the CPU the node got, which a shared two-core machine decides, so it is
/// checked against the node's own CPU time (kernel accounting) over the run: the window
/// (`window_secs`) is part of the run (which adds the trial and the copy-out), so at least
/// its share of the run's CPU time must be sampled, and never more than all of it.
pub fn assert_samples_follow_cpu_time(
    samples: u64,
    cpu_used: f64,
    run_secs: f64,
    window_secs: f64,
) {
    let sampled_secs = samples as f64 / 999.0;
    let window_share = (window_secs / run_secs).min(1.0);
    assert!(
        sampled_secs <= cpu_used * 1.1 + 0.2,
        "{samples} samples ({sampled_secs:.2} CPU-s) but the node used only {cpu_used:.2} CPU-s"
    );
    assert!(
        sampled_secs >= cpu_used * window_share * 0.6 && samples >= 200,
        "{samples} samples ({sampled_secs:.2} CPU-s) for {cpu_used:.2} CPU-s used over a {run_secs:.1} s run"
    );
}

/// `devprof cpu CONTAINER SECS` in `cwd`, which must succeed; the capture's stem.
pub fn cpu_capture(cwd: &Path, container: &str, secs: &str) -> PathBuf {
    devprof(cwd)
        .args(["cpu", container, secs])
        .assert()
        .success();
    only_capture(cwd, container, "perf-")
}

/// Each argument list fails as bad usage (exit 2) with its message, and none of them
/// writes a file under `cwd`.
pub fn assert_usage_errors_write_nothing(cwd: &Path, cases: &[(&[&str], &str)]) {
    for (args, message) in cases {
        devprof(cwd)
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(*message));
    }
    assert!(files_under(cwd).is_empty(), "{:?}", files_under(cwd));
}

/// `devprof cpu demo-seq 3` with the engine `configure` names (DOCKER_HOST cleared first)
/// succeeds and writes a capture with samples and its flamegraph.
pub fn assert_cpu_through(cwd: &Path, configure: impl Fn(&mut assert_cmd::Command)) {
    let mut cmd = devprof(cwd);
    cmd.args(["cpu", DEMO_SEQ, "3"]).env_remove("DOCKER_HOST");
    configure(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stem = only_capture(cwd, DEMO_SEQ, "perf-");
    let manifest = read_manifest(&stem);
    assert!(manifest["sample_count"].as_u64().unwrap() > 0);
    assert!(with_ext(&stem, "svg").is_file());
}

/// The capture workdirs left in `container`'s /tmp (empty when none).
pub fn workdirs_in(container: &str) -> String {
    docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        "ls -d /tmp/devprof.* 2>/dev/null || true",
    ])
}
