//! The bed of the hostile-service tests (tests/hostile_container.rs): a turn at a
//! hostile container with its own marker directory, a bounded devprof run, and the
//! verdict every run gets (no panic, the window + 30 s, a clear message, no marker).

use crate::common::*;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const HOSTILE: &str = "demo-hostile";
/// What issue 28 allows past the window.
const GRACE: Duration = Duration::from_secs(30);
/// How long past the bound a devprof that overran is left before it is killed.
const KILL_AFTER: Duration = Duration::from_secs(60);

pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn hostile_image() -> String {
    std::env::var("DEVPROF_DEMO_HOSTILE_IMAGE")
        .unwrap_or_else(|_| "devprof-demo-hostile:latest".to_string())
}

/// What the planted perf does once run: `Wrap` runs the real perf (the capture goes on,
/// so later steps are reached), `Deny` answers with perf's permission error (the sidecar
/// then climbs its privilege ladder).
#[derive(Clone, Copy)]
pub enum PlantedPerf {
    Wrap,
    Deny,
}

/// One test's turn at a hostile container: its marker directory is the current one.
pub struct Bed {
    _turn: MutexGuard<'static, ()>,
    container: String,
    pub id: String,
    markers: String,
    sysctls: String,
}

/// One devprof run, bounded.
pub struct Run {
    args: Vec<String>,
    code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    elapsed: Duration,
    bound: Duration,
    /// devprof was still running at the bound + KILL_AFTER and was killed.
    killed: bool,
}

/// What a test expects beyond the rules every run follows.
#[derive(Default)]
pub struct Expect {
    /// devprof must refuse (exit non-zero with a message).
    pub refuse: bool,
    /// Further failures the test found (each a sentence).
    pub failures: Vec<String>,
    /// The host's perf sysctls must be as they were (checked only where devprof is let
    /// change them: other test binaries on a shared host may change them meanwhile).
    pub sysctls_kept: bool,
}

fn host_sysctls() -> String {
    ["perf_event_paranoid", "kptr_restrict"]
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/kernel/{k}")).unwrap_or_default();
            format!("{k}={}", v.trim())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn host_paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn exec_root(container: &str, script: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["exec", "-u", "0", container, "sh", "-c", script, "sh"];
    all.extend_from_slice(args);
    docker(&all)
}

impl Bed {
    /// demo-hostile, with a fresh marker directory named after `test`.
    pub fn open(test: &str, perf: PlantedPerf) -> Option<Bed> {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        if !demo_container_ready(test, HOSTILE) {
            return None;
        }
        Some(Bed::on(turn, HOSTILE, test, perf))
    }

    pub fn on(
        turn: MutexGuard<'static, ()>,
        container: &str,
        test: &str,
        perf: PlantedPerf,
    ) -> Bed {
        let markers = unique(test);
        let mode = match perf {
            PlantedPerf::Wrap => "wrap",
            PlantedPerf::Deny => "deny",
        };
        let out = exec_root(
            container,
            "rm -rf /markers/unattributed && mkdir -p \"/markers/$1\" && chmod 1777 \"/markers/$1\" && \
             printf %s \"$1\" > /markers/current && printf %s \"$2\" > /markers/perf-mode",
            &[&markers, mode],
        );
        assert!(
            out.status.success(),
            "cannot set up /markers in {container}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Bed {
            _turn: turn,
            container: container.to_string(),
            id: docker_ok(&["inspect", "-f", "{{.Id}}", container]),
            markers,
            sysctls: host_sysctls(),
        }
    }

    /// The markers written since this test began, with their content.
    fn markers_found(&self) -> String {
        let out = exec_root(
            &self.container,
            "for d in \"/markers/$1\" /markers/unattributed; do for f in \"$d\"/*; do \
             [ -f \"$f\" ] && { echo \"--- marker $f\"; head -c 4000 \"$f\"; }; done; done; true",
            &[&self.markers],
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Runs devprof with `args` (and `env`) from a scratch directory; the bound is
    /// `window` + 30 s.
    pub fn devprof(&self, args: &[&str], env: &[(&str, &str)], window: Duration) -> Run {
        let cwd = workdir();
        let bound = window + GRACE;
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("devprof"));
        cmd.args(args)
            .current_dir(cwd.path())
            .env_remove("DEVPROF_TARGET")
            .env_remove("DEVPROF_OUTPUT_DIR")
            .env_remove("DEVPROF_DURATION")
            .env_remove("DEVPROF_MODE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().expect("devprof binary");
        let reader = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut text = Vec::new();
                let _ = pipe.read_to_end(&mut text);
                String::from_utf8_lossy(&text).into_owned()
            })
        };
        let out = reader(Box::new(child.stdout.take().unwrap()));
        let err = reader(Box::new(child.stderr.take().unwrap()));
        let mut killed = false;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > bound + KILL_AFTER {
                let _ = child.kill();
                killed = true;
                break child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let elapsed = started.elapsed();
        Run {
            args: args.iter().map(|a| a.to_string()).collect(),
            code: status.code(),
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
            elapsed,
            bound,
            killed,
        }
    }

    /// After a devprof that was killed: what it left running in the container and its
    /// sidecars go, so the next test starts clean.
    fn remove_leftovers(&self) {
        for sidecar in sidecars_of_id(&self.id) {
            let _ = docker(&["rm", "-f", &sidecar]);
        }
        // The pattern is split so that this shell's own command line does not match it.
        let _ = exec_root(
            &self.container,
            "p=/tmp/dev; p=${p}prof.; for d in /proc/[0-9]*; do \
             case \"$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\" in *\"$p\"*) kill -KILL ${d#/proc/} 2>/dev/null;; esac; \
             done; rm -rf \"$p\"*; true",
            &[],
        );
    }

    /// The verdict on `run`: every rule, then `expect`'s own; one panic listing them all.
    pub fn judge(&self, run: &Run, mut expect: Expect) {
        let mut failures = std::mem::take(&mut expect.failures);
        let seconds = run.elapsed.as_secs_f64();
        if run.killed {
            failures.push(format!(
                "did not end within its window + 30 s ({} s): killed after {seconds:.1} s",
                run.bound.as_secs()
            ));
        } else if run.elapsed > run.bound {
            failures.push(format!(
                "took {seconds:.1} s, over its window + 30 s ({} s)",
                run.bound.as_secs()
            ));
        }
        if run.code == Some(101) || run.stderr.contains("panicked") {
            failures.push(format!("panicked (exit {:?})", run.code));
        }
        if expect.refuse && run.code == Some(0) {
            failures.push("succeeded where it must refuse".into());
        }
        if !run.killed && run.code != Some(0) {
            let clear = run.stderr.contains("error:") && run.stderr.contains(&self.container);
            if !clear {
                failures.push(format!(
                    "failed (exit {:?}) without a clear message naming {}",
                    run.code, self.container
                ));
            }
        }
        let sysctls = host_sysctls();
        if expect.sysctls_kept && sysctls != self.sysctls {
            failures.push(format!(
                "the host's sysctls changed: {} before, {sysctls} after",
                self.sysctls
            ));
        }
        if !run.killed {
            let left = sidecars_of_id(&self.id);
            if !left.is_empty() {
                failures.push(format!("sidecars left behind: {left:?}"));
            }
        }
        let markers = self.markers_found();
        if !markers.is_empty() {
            failures.push(format!(
                "a planted program ran, or root signalled a hostile process:\n{markers}"
            ));
        }
        self.remove_leftovers();
        if failures.is_empty() {
            return;
        }
        let tail: Vec<&str> = run.stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "devprof {} (exit {:?}, {seconds:.1} s):\n  - {}\n--- stderr (end) ---\n{}\n--- stdout (start) ---\n{}",
            run.args.join(" "),
            run.code,
            failures.join("\n  - "),
            tail.join("\n"),
            run.stdout.chars().take(1500).collect::<String>()
        );
    }
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The pid in `container` of the hostile process whose command line contains `needle`.
pub fn pid_of(container: &str, needle: &str) -> Option<u32> {
    let out = exec_root(
        container,
        "for d in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\" in \
         *\"$1\"*) [ \"$(cat $d/comm 2>/dev/null)\" = sh ] || echo ${d#/proc/};; esac; done",
        &[needle],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().parse().ok())
}

/// The usual test: devprof with `args` against demo-hostile, its window `window` seconds,
/// judged by the rules every run follows and by what `expect` adds after seeing the run.
pub fn against_hostile(
    test: &str,
    perf: PlantedPerf,
    args: &[&str],
    env: &[(&str, &str)],
    window: u64,
    expect: impl FnOnce(&Run) -> Expect,
) {
    let Some(bed) = Bed::open(test, perf) else {
        return;
    };
    let run = bed.devprof(args, env, secs(window));
    bed.judge(&run, expect(&run));
}

pub fn nothing_more(_: &Run) -> Expect {
    Expect::default()
}

pub fn must_refuse(_: &Run) -> Expect {
    Expect {
        refuse: true,
        ..Expect::default()
    }
}

/// Watches the hostile container's sidecars while devprof runs: a perf map copied into
/// one beyond 64 MiB (a link to /dev/zero followed) is reported and the sidecar removed
/// at once, before it fills the host's disk.
pub struct CopyWatch {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl CopyWatch {
    pub fn start(target_id: &str) -> CopyWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let id = target_id.to_string();
        let thread = std::thread::spawn(move || {
            let mut found = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                for sidecar in sidecars_of_id(&id) {
                    let out = docker_within(
                        10,
                        &[
                        "exec",
                        &sidecar,
                        "sh",
                        "-c",
                        "for f in /tmp/perf-*; do [ -f \"$f\" ] && stat -c '%s %n' \"$f\"; done; true",
                    ],
                    );
                    for line in String::from_utf8_lossy(&out.stdout).lines() {
                        let size: u64 = line
                            .split_whitespace()
                            .next()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        if size > 64 << 20 {
                            found.push(format!(
                                "sidecar {sidecar} copied {} MiB into {} (the perf map is a link to /dev/zero); removed it",
                                size >> 20,
                                line.split_whitespace().nth(1).unwrap_or("?")
                            ));
                            let _ = docker(&["rm", "-f", &sidecar]);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            found
        });
        CopyWatch { stop, thread }
    }

    pub fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// OOM kills in `container` so far: cgroup v2 counts them in memory.events, v1 in
/// memory.oom_control. None where neither can be read.
pub fn oom_kills(container: &str) -> Option<u64> {
    let out = docker(&[
        "exec",
        container,
        "cat",
        "/sys/fs/cgroup/memory.events",
        "/sys/fs/cgroup/memory/memory.oom_control",
    ]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse::<u64>().ok())
}

/// A failure when `container` had OOM kills since `before`: something read a device to
/// its end (the hostile containers are memory-limited for that).
pub fn oom_failure(container: &str, before: Option<u64>, what: &str) -> Option<String> {
    let (before, after) = (before?, oom_kills(container)?);
    (after > before).then(|| {
        format!(
            "ran {container} out of memory ({} OOM kill(s)): {what}",
            after - before
        )
    })
}
