//! Fresh dumps over a window, through the capture lifecycle (`Run`): the window's recorder
//! is a small shell in the target's container, run as the process's user, that sends the
//! dump signal when the window opens and again when it ends (its own timer, the session's
//! armed stop, Ctrl-C). So a heap window waits at the session's gate, is released and
//! stopped with the other recorders, is watched for the target stopping, follows the log's
//! markers and states its real edges like every capture. Interval dumps written meanwhile
//! are collected too. After the window, the dumps are awaited until the end dump settles.

use super::dumps::dumps_since_process_start;
use super::{HeapTarget, Jemalloc, Obtained, DUMP_WAIT, POLL};
use crate::capture::context::CaptureCtx;
use crate::capture::kept::Again;
use crate::capture::lifecycle::{Run, WindowPlan};
use crate::capture::window::Recording;
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{DumpFile, DumpKind, Signal};
use crate::store::Manifest;
use crate::text::{first_line, printable, truncate};
use std::time::Duration;

/// The recorder's exit status when the signal at the window's start could not be sent.
const START_SIGNAL_FAILED: i64 = 3;
/// The same for the signal at its end.
const END_SIGNAL_FAILED: i64 = 4;

/// The window's recorder: `sh -c SCRIPT sh PID SIGNAL SECONDS ASK WORKDIR/` (ASK 1: send
/// SIGNAL at both edges; 0: interval dumps only, the window just waits). Its command line
/// names the workdir, which is how a stop knows it for the capture's recorder; it names
/// itself in /proc/self/comm so that a stop can tell it from the shell that started it;
/// and it ends the window on SIGINT or SIGTERM by sending the end signal, once (a second
/// stop while it ends is ignored).
pub(super) fn window_argv(
    pid: u32,
    signal: u32,
    window: Duration,
    ask: bool,
    workdir: &str,
) -> Vec<String> {
    const SCRIPT: &str = "pid=$1 sig=$2 secs=$3 ask=$4 s=; cd \"$5\" || exit 5; \
        { printf devprof-heap > /proc/$$/comm; } 2>/dev/null; \
        end() { trap '' INT TERM; [ -n \"$s\" ] && kill \"$s\" 2>/dev/null; \
          if [ \"$ask\" = 1 ]; then kill -\"$sig\" \"$pid\" || exit 4; fi; exit 0; }; \
        trap end INT TERM; \
        if [ \"$ask\" = 1 ]; then kill -\"$sig\" \"$pid\" || exit 3; fi; \
        sleep \"$secs\" & s=$!; wait \"$s\"; end";
    // Whole seconds where the window is whole: not every `sleep` takes a fraction.
    let seconds = if window.subsec_nanos() == 0 {
        window.as_secs().to_string()
    } else {
        format!("{:.3}", window.as_secs_f64())
    };
    [
        "sh",
        "-c",
        SCRIPT,
        "sh",
        &pid.to_string(),
        &signal.to_string(),
        &seconds,
        if ask { "1" } else { "0" },
        &format!("{}/", workdir.trim_end_matches('/')),
    ]
    .map(String::from)
    .to_vec()
}

/// What the container's shell said on its standard error, for a message: its first line,
/// its control characters escaped, shortened (the container's words cannot add lines,
/// move the cursor or add length to devprof's own).
fn said(stderr: &str) -> String {
    truncate(&printable(first_line(stderr.trim())), 200)
}

/// Before anything is made for the window: a process that neither catches the dump signal
/// nor writes interval dumps cannot give a fresh dump.
pub(super) fn check_can_dump(target: &HeapTarget, signal: &Signal) -> Result<()> {
    let jemalloc = &target.ready;
    if jemalloc.catches_signal || jemalloc.conf.lg_interval().is_some() {
        return Ok(());
    }
    let signal_name = signal.name.as_str();
    Err(Error::HeapDumpUnavailable {
        container: target.container.name.clone(),
        pid: target.process.pid,
        detail: format!(
            "it does not catch SIG{signal_name} (sending it would kill it) and interval dumps are off (no lg_prof_interval in {})",
            jemalloc.conf_variable
        ),
        hint: format!(
            "either have the program call jemalloc's prof.dump on SIG{signal_name} (DEVPROF_HEAP_DUMP_SIGNAL names another signal), \
             or add lg_prof_interval:N to {} (a dump per 2^N allocated bytes; restart needed), \
             or render dumps it already wrote: `devprof heap {} --latest`",
            jemalloc.conf_variable, target.container.name
        ),
    })
}

/// Why a fresh dump cannot come, with what to check.
fn unavailable(target: &HeapTarget, signal: &Signal, detail: String) -> Error {
    let jemalloc = &target.ready;
    Error::HeapDumpUnavailable {
        container: target.container.name.clone(),
        pid: target.process.pid,
        detail,
        hint: format!(
            "check that the process may write to {} (prof_prefix in {}), and that the program calls jemalloc's \
             prof.dump on SIG{}; its log may say why (`docker logs {}`)",
            jemalloc.shown_dir(), jemalloc.conf_variable, signal.name, target.container.name
        ),
    }
}

/// The window over which fresh dumps are asked for: the signal at the start and the end
/// (when the process catches it), interval dumps meanwhile. Returns it, with the newest
/// dump sequence of the process before it.
pub(super) async fn plan(
    run: &Run<'_, Jemalloc>,
    window: Duration,
    signal: &Signal,
) -> Result<(WindowPlan, Option<u64>)> {
    let target = run.target;
    let jemalloc = &target.ready;
    let signal_name = signal.name.as_str();
    let pid = target.process.pid;
    // The signal acts for the process's user: it is sent as that user, never as root.
    let Some(user) = target.process_facts.exec_user() else {
        return Err(unavailable(target, signal, format!(
            "the user of pid {pid} is unknown, and the dump signal is sent only as the process's own user"
        )));
    };
    let owned = target.shell.run(&["chown", &user, run.workdir()]).await?;
    if !owned.success() {
        return Err(unavailable(target, signal, format!(
            "chown {user} {} failed (the window's helper runs as the process's user in a private directory of /tmp): {}",
            run.workdir(),
            said(&owned.stderr)
        )));
    }
    let before = dumps_since_process_start(target).await?;
    let before_max = before.iter().filter(|d| d.pid == pid).map(|d| d.seq).max();
    let argv = window_argv(
        pid,
        signal.number,
        window,
        jemalloc.catches_signal,
        run.workdir(),
    );
    let note = match jemalloc.conf.lg_interval() {
        Some(n) if jemalloc.catches_signal => {
            format!("SIG{signal_name} at the start and the end, interval dumps every 2^{n} bytes")
        }
        None => format!("SIG{signal_name} at the start and the end"),
        Some(n) => format!(
            "interval dumps every 2^{n} bytes (the process does not catch SIG{signal_name})"
        ),
    };
    let plan = WindowPlan {
        argv,
        duration: window,
        label: format!("heap dumps of {} (pid {pid})", target.container.name),
        notes: vec![note],
        user: Some(user),
        ..Default::default()
    };
    Ok((plan, before_max))
}

/// After the window: its helper's end checked, and the dumps it asked for awaited until
/// the end dump settles. The newest fresh dump is rendered; all are collected.
pub(super) async fn obtained(
    run: &Run<'_, Jemalloc>,
    signal: &Signal,
    recording: Recording,
    before_max: Option<u64>,
    ctx: &mut CaptureCtx,
) -> Result<Obtained> {
    let target = run.target;
    let jemalloc = &target.ready;
    let signal_name = signal.name.as_str();
    let pid = target.process.pid;
    let unavailable = |detail| unavailable(target, signal, detail);
    if recording.process_exited.is_some() {
        return Err(unavailable(
            "the process exited during the window; its end dump cannot come".into(),
        ));
    }
    match recording.output.exit_code {
        Some(0) => {}
        Some(code @ (START_SIGNAL_FAILED | END_SIGNAL_FAILED)) => {
            let edge = if code == START_SIGNAL_FAILED {
                "start"
            } else {
                "end"
            };
            return Err(unavailable(format!(
                "sending SIG{signal_name} to pid {pid} at the window's {edge} failed: {}",
                said(&recording.output.stderr)
            )));
        }
        status => {
            let status = status.map_or("no status".to_string(), |c| format!("status {c}"));
            return Err(unavailable(format!(
                "the window's helper ended with {status}: {}",
                said(&recording.output.stderr)
            )));
        }
    }
    // The end dump lands after the window: waited for under the target's watch and Ctrl-C.
    let expected = if jemalloc.catches_signal { 2 } else { 0 };
    let ended = recording.stopped_at.timestamp();
    let spinner = ctx
        .report
        .spinner(&format!("waiting for the dumps of pid {pid}"));
    let nothing_home = Again::Heap {
        container: target.container.name.clone(),
        paths: Vec::new(),
        local: Vec::new(),
    };
    let (fresh, settled) = run
        .after_window(
            settled_dumps(
                async || dumps_since_process_start(target).await,
                pid,
                before_max,
                expected,
                ended,
            ),
            "wait for the dumps",
            "waiting for the dumps",
            &nothing_home,
            Manifest::default,
            || spinner.finish_and_clear(),
            ctx,
        )
        .await?;
    let Some(newest) = fresh.last().cloned() else {
        return Err(no_fresh_dump(target, signal, &recording));
    };
    let intervals = fresh
        .iter()
        .filter(|d| matches!(d.kind, DumpKind::Interval(_)))
        .count();
    let how = how(jemalloc.catches_signal, intervals, signal_name, settled);
    Ok(Obtained {
        collected: fresh,
        merged: vec![newest],
        how,
        window: Some(recording.window),
        interrupted: recording.interrupted,
        recording: Some(recording),
    })
}

/// No dump of the window came.
fn no_fresh_dump(target: &HeapTarget, signal: &Signal, recording: &Recording) -> Error {
    let jemalloc = &target.ready;
    if jemalloc.catches_signal {
        return unavailable(
            target,
            signal,
            format!(
                "no new dump appeared in {} within {} s of SIG{}",
                jemalloc.shown_dir(),
                DUMP_WAIT.as_secs(),
                signal.name
            ),
        );
    }
    Error::HeapDumpUnavailable {
        container: target.container.name.clone(),
        pid: target.process.pid,
        detail: format!(
            "no interval dump was written in the {:.0} s window (one comes every 2^{} allocated bytes)",
            recording.window.as_secs_f64(),
            jemalloc.conf.lg_interval().unwrap_or(0)
        ),
        hint: "lengthen the window or lower lg_prof_interval, or have the program call prof.dump on a signal".into(),
    }
}

/// How the window's dumps were obtained, for the report and the manifest.
fn how(catches_signal: bool, intervals: usize, signal_name: &str, settled: bool) -> String {
    let asked = match (catches_signal, intervals) {
        (true, 0) => format!(
            "SIG{signal_name} at the start and the end of the window (the program calls prof.dump)"
        ),
        (true, n) => format!(
            "SIG{signal_name} at the start and the end of the window, and {n} interval dumps"
        ),
        (false, n) => format!("{n} interval dumps written in the window (lg_prof_interval)"),
    };
    let rendered = match (settled, catches_signal) {
        (true, true) => "the end dump is rendered".to_string(),
        (true, false) => "the newest is rendered".to_string(),
        (false, _) => format!(
            "the dumps had not all appeared and settled within {} s: the newest whole dump of the window is rendered",
            DUMP_WAIT.as_secs()
        ),
    };
    format!("{asked}; {rendered}")
}

/// The dumps of the window, oldest first, from `list` (the process's dumps): those of
/// `pid` newer than `before_max`, up to the end dump (the `expected`-th asked for with
/// `prof.dump`), or with none asked for, up to the newest at the first look; once none of
/// them grows any more. Later ones (a busy process writes interval dumps on) are not the
/// window's. With whether that happened within `DUMP_WAIT`; if not, those of the window
/// that were whole (up to the end dump when it came, else written by `ended`, seconds
/// since the epoch).
async fn settled_dumps(
    mut list: impl AsyncFnMut() -> Result<Vec<DumpFile>>,
    pid: u32,
    before_max: Option<u64>,
    expected: usize,
    ended: i64,
) -> Result<(Vec<DumpFile>, bool)> {
    let deadline = tokio::time::Instant::now() + DUMP_WAIT;
    let mut first_look: Option<u64> = None;
    let mut previous: Vec<DumpFile> = Vec::new();
    loop {
        let mut fresh: Vec<DumpFile> = list()
            .await?
            .into_iter()
            .filter(|d| d.pid == pid && before_max.is_none_or(|m| d.seq > m))
            .collect();
        fresh.sort_by_key(|d| d.seq);
        let last = if expected > 0 {
            fresh
                .iter()
                .filter(|d| matches!(d.kind, DumpKind::Manual(_)))
                .nth(expected - 1)
                .map(|d| d.seq)
        } else {
            match (first_look, fresh.last()) {
                (Some(seq), _) => Some(seq),
                (None, Some(newest)) => Some(*first_look.insert(newest.seq)),
                // Nothing asked for and nothing written: the window has no dump.
                (None, None) => return Ok((fresh, true)),
            }
        };
        if let Some(last) = last {
            fresh.retain(|d| d.seq <= last);
        }
        // Whole: the same file with the same size in two listings in a row.
        let whole = |d: &DumpFile| {
            d.size > 0
                && previous
                    .iter()
                    .any(|p| p.name == d.name && p.size == d.size)
        };
        if last.is_some() && fresh.iter().all(whole) {
            return Ok((fresh, true));
        }
        if tokio::time::Instant::now() > deadline {
            // A dump still being written cannot be read.
            fresh.retain(|d| whole(d) && (last.is_some() || d.mtime <= ended + 1));
            return Ok((fresh, false));
        }
        previous = fresh;
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::heap::dumps::listed;
    use std::cell::RefCell;

    /// The dumps of pid 7 a listing shows: (name's seq and kind, size, mtime).
    fn listing(entries: &[(&str, u64, i64)]) -> Vec<DumpFile> {
        listed(
            "jeprof",
            entries
                .iter()
                .map(|(k, size, mtime)| (format!("jeprof.7.{k}.heap"), *size, *mtime)),
        )
    }

    /// `settled_dumps` over listings shown in turn (the last one from then on).
    async fn settle(
        looks: Vec<Vec<DumpFile>>,
        before_max: Option<u64>,
        expected: usize,
    ) -> (Vec<String>, bool) {
        let looks = RefCell::new(looks.into_iter().collect::<std::collections::VecDeque<_>>());
        let (dumps, settled) = settled_dumps(
            async || {
                let mut looks = looks.borrow_mut();
                let look = if looks.len() > 1 {
                    looks.pop_front().unwrap()
                } else {
                    looks[0].clone()
                };
                Ok(look)
            },
            7,
            before_max,
            expected,
            1_000,
        )
        .await
        .unwrap();
        (dumps.into_iter().map(|d| d.name).collect(), settled)
    }

    /// A busy process writes interval dumps after the window: the window ends at its end
    /// dump, whatever comes after it, and only once that dump stopped growing.
    #[tokio::test(start_paused = true)]
    async fn the_window_ends_at_the_end_dump_once_it_is_whole() {
        let start = ("3.m1", 900, 990);
        let looks = vec![
            listing(&[start, ("4.i0", 800, 995)]),
            listing(&[start, ("4.i0", 800, 995), ("5.m2", 100, 1_000)]),
            listing(&[
                start,
                ("4.i0", 800, 995),
                ("5.m2", 700, 1_000),
                ("6.i1", 10, 1_001),
            ]),
            listing(&[
                start,
                ("4.i0", 800, 995),
                ("5.m2", 700, 1_000),
                ("6.i1", 900, 1_001),
                ("7.i2", 5, 1_002),
            ]),
        ];
        let (dumps, settled) = settle(looks, Some(2), 2).await;
        assert!(settled);
        assert_eq!(
            dumps,
            [
                "jeprof.7.3.m1.heap",
                "jeprof.7.4.i0.heap",
                "jeprof.7.5.m2.heap"
            ]
        );
    }

    /// Without the signal, the window's dumps are those listed right after it, and an
    /// earlier process's or an older dump never counts.
    #[tokio::test(start_paused = true)]
    async fn interval_dumps_of_the_window_are_those_listed_right_after_it() {
        let looks = vec![
            listing(&[("2.i0", 800, 900), ("3.i1", 800, 990)]),
            listing(&[("2.i0", 800, 900), ("3.i1", 800, 990), ("4.i2", 300, 1_001)]),
        ];
        let (dumps, settled) = settle(looks, Some(2), 0).await;
        assert!(settled);
        assert_eq!(dumps, ["jeprof.7.3.i1.heap"]);
        let (none, settled) = settle(vec![listing(&[("2.i0", 800, 900)])], Some(2), 0).await;
        assert!(settled && none.is_empty());
    }

    /// The end dump never comes: after the wait, the whole dumps written in the window.
    #[tokio::test(start_paused = true)]
    async fn without_the_end_dump_the_whole_dumps_of_the_window_are_given_unsettled() {
        let looks = vec![listing(&[
            ("3.m1", 900, 990),
            ("4.i0", 800, 1_000),
            ("5.i1", 800, 1_005),
        ])];
        let (dumps, settled) = settle(looks, Some(2), 2).await;
        assert!(!settled);
        assert_eq!(dumps, ["jeprof.7.3.m1.heap", "jeprof.7.4.i0.heap"]);
    }

    /// A helper's standard error is the container's text: one line, bounded, with no
    /// control character that could move the cursor, in a message.
    #[test]
    fn what_the_container_said_is_one_bounded_line() {
        assert_eq!(
            said("  kill: No such process\nerror: forged\n"),
            "kill: No such process"
        );
        assert!(said(&"x".repeat(10_000)).chars().count() <= 201);
        assert_eq!(said("gone\r\u{1b}[2Kok"), "gone\\r\\u{1b}[2Kok");
    }

    /// The recorder script as the container's shell runs it: the signal at both edges to
    /// the pid, the window from its own timer, and the end signal on SIGINT too.
    #[test]
    fn the_window_script_signals_the_process_at_both_edges_and_on_a_stop() {
        let argv = window_argv(41, 12, Duration::from_millis(1500), true, "/tmp/devprof.x");
        assert_eq!(&argv[..2], ["sh", "-c"]);
        assert_eq!(
            &argv[3..],
            ["sh", "41", "12", "1.500", "1", "/tmp/devprof.x/"]
        );
        // Whole seconds as an integer: not every `sleep` takes a fraction.
        assert_eq!(
            window_argv(41, 12, Duration::from_secs(60), true, "/w")[6],
            "60"
        );
        let script = &argv[2];
        assert!(script.contains("trap end INT TERM"), "{script}");
        assert!(
            script.contains("kill -\"$sig\" \"$pid\" || exit 3"),
            "{script}"
        );
        assert!(
            script.contains("kill -\"$sig\" \"$pid\" || exit 4"),
            "{script}"
        );
        let quiet = window_argv(41, 12, Duration::from_secs(2), false, "/tmp/devprof.x");
        assert_eq!(quiet[7], "0");
    }

    /// Run by this host's `sh` as the record script starts it (its pidfile, then `exec`):
    /// the script signals the pid at the start, and once more when the capture's own stop
    /// (`stop_script`, as on Ctrl-C) ends it early, then exits 0. Regression: its command
    /// line did not name the workdir, so the stop did not know it and Ctrl-C waited out
    /// the window.
    #[test]
    fn the_window_script_sends_the_end_signal_when_the_capture_stops_it() {
        use crate::capture::armed_stop::stop_script;
        use std::process::{Command, Stdio};
        let mut target = Command::new("sh")
            .args([
                "-c",
                "n=0; trap 'n=$((n+1)); echo $n' USR2; while :; do sleep 0.05; done",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir.path().display().to_string();
        let argv = window_argv(target.id(), 12, Duration::from_secs(30), true, &workdir);
        let start = format!(
            "echo $$ > {}/{}; exec \"$@\"",
            workdir,
            crate::capture::record_script::RECORDER_PIDFILE
        );
        let mut window = Command::new("sh");
        window.args(["-c", &start, "sh"]).args(&argv);
        // As in a container's exec, SIGINT starts at its default: a test run from a
        // shell's background job inherits it ignored, and a shell cannot trap a signal
        // ignored when it started (the stop then waited out the whole window).
        // SAFETY: `signal` is async-signal-safe, as `pre_exec` requires.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut window, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let mut window = window.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let stop = Command::new("sh")
            .args(["-c", &stop_script(&workdir)])
            .status()
            .unwrap();
        assert!(stop.success(), "the stop did not know the recorder");
        let status = window.wait().unwrap();
        assert!(status.success(), "{status:?}");
        // Before the 30 s window would have ended by itself: the stop takes under a second
        // on a quiet host, but waits up to 50 rounds of `sleep 0.1` for the handler to be
        // set. (Bounds of 3 s and 10 s, then this one, each failed once in a suite run as
        // a background job, with SIGINT ignored: see the spawn above.)
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "the stop was not prompt"
        );
        std::thread::sleep(Duration::from_millis(300));
        let _ = target.kill();
        let out = target.wait_with_output().unwrap();
        let lines = String::from_utf8_lossy(&out.stdout);
        assert_eq!(lines.lines().collect::<Vec<_>>(), ["1", "2"], "{lines}");
    }
}
