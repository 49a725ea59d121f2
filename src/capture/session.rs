//! The steps every capture window shares, whatever the engine: a private temporary
//! directory in the container, the recording command run under a progress bar with its pid
//! in a pidfile, Ctrl-C (the first stops the recorder early, which still writes its output;
//! a second aborts), and clean-up that leaves no recorder and no file behind.

use super::gate;
use super::liveness::{Stop, Watch, PROCESS_CHECK, PROCESS_CHECK_FOLLOWED};
use crate::docker::exec::ROOT;
use crate::docker::pipe::CHANNEL_CHUNKS;
use crate::docker::{ContainerShell, ExecOutput, Shell};
use crate::engines::perf::first_error_line;
use crate::error::{Error, Result};
use crate::signals::Interrupts;
use crate::store::Stem;
use crate::text::quote;
use crate::ui::progress;
use crate::units::human_duration;
use bytes::Bytes;
use chrono::{DateTime, Local, SecondsFormat};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A private directory in the container's /tmp for the recorder's output and its pid.
pub async fn make_workdir(shell: &Shell) -> Result<String> {
    let out = shell
        .run(&["mktemp", "-d", "/tmp/devprof.XXXXXXXX"])
        .await?;
    let dir = out.stdout.trim().to_string();
    if !out.success() || !dir.starts_with("/tmp/devprof.") {
        return Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "create a temporary directory in /tmp".into(),
            detail: first_error_line(&out.stderr),
        });
    }
    Ok(dir)
}

/// Longest the clean-up exec may take.
const CLEANUP_LIMIT: Duration = Duration::from_secs(20);

/// Stops a recorder that may still run from `workdir` and removes the directory. The pid
/// in the pidfile is signalled only while that process's command line still names
/// `workdir` (the recorder writes there), never a process that reused the pid. Any other
/// perf whose command line names `workdir` (a `perf script` reading its data, left when
/// the stream that read it was dropped at a Ctrl-C) is killed too; the match is on the
/// program name (`perf*`) so that this very shell, whose command line names the
/// directory as well, is never one of them.
pub async fn cleanup_workdir(shell: &Shell, workdir: &str) {
    let script = format!(
        "p=$(cat {wd}/perf.pid 2>/dev/null); \
         c=$(tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null); \
         case \"$c\" in *{wd}*) mine=1;; *) mine=;; esac; \
         if [ -n \"$p\" ] && [ -n \"$mine\" ] && kill -0 \"$p\" 2>/dev/null; then \
           kill -INT \"$p\" 2>/dev/null; i=0; \
           while kill -0 \"$p\" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; \
           kill -KILL \"$p\" 2>/dev/null; \
         fi; \
         for d in /proc/[0-9]*; do \
           case \"$(cat $d/comm 2>/dev/null)\" in perf*) ;; *) continue;; esac; \
           case \"$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\" in *{wd}*) kill -KILL \"${{d#/proc/}}\" 2>/dev/null;; esac; \
         done; rm -rf {wd}",
        wd = quote(workdir)
    );
    match tokio::time::timeout(CLEANUP_LIMIT, shell.sh(&script)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => eprintln!(
            "warning: could not clean {workdir} in {}: {e}",
            shell.container()
        ),
        Err(_) => eprintln!(
            "warning: cleaning {workdir} in {} took over {} s; gave up",
            shell.container(),
            CLEANUP_LIMIT.as_secs()
        ),
    }
}

/// How the recording window went.
pub struct Recording {
    pub output: ExecOutput,
    /// The window recorded: up to Ctrl-C when there was one, else the requested length
    /// (the exec also spans the recorder's start-up and its writing of its output).
    pub window: Duration,
    /// How long the whole recorder run took.
    pub elapsed: Duration,
    pub interrupted: bool,
    /// When the process exited during the window (its container still running), the
    /// time from the start of the window.
    pub process_exited: Option<Duration>,
    /// When the recorder was seen running (its first output line reached devprof) and when
    /// it ended, by this host's clock.
    pub started_at: DateTime<Local>,
    pub stopped_at: DateTime<Local>,
}

impl Recording {
    /// Writes the window's real start and stop instants into `manifest`.
    pub fn stamp(&self, manifest: &mut crate::store::Manifest) {
        manifest.window_started_at = Some(instant_text(&self.started_at));
        manifest.window_stopped_at = Some(instant_text(&self.stopped_at));
        manifest.session = gate::session_name();
    }
}

/// The line the record script prints right before it becomes the recorder: its arrival
/// is the start of the window as seen from here.
const START_MARKER: &str = "devprof-recorder-started";

/// The line the record script prints once it runs and waits to be released.
const READY_MARKER: &str = "devprof-recorder-ready";

/// An instant in manifests: RFC 3339 with milliseconds.
pub fn instant_text(at: &DateTime<Local>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// How long the recorder may run past the window (start-up, writing its output) before it
/// is asked to stop, and how long after that before it is given up on.
pub fn grace(window: Duration) -> (Duration, Duration) {
    (
        Duration::from_secs(30) + window / 10,
        Duration::from_secs(15),
    )
}

/// What to record and how to show it.
#[derive(Clone, Copy)]
pub struct Window<'a> {
    /// The recorder's command line, e.g. `perf record ... -- sleep N`.
    pub argv: &'a [String],
    pub duration: Duration,
    /// The progress bar's label.
    pub label: &'a str,
    /// Printed above the bar before the window opens.
    pub notes: &'a [String],
    /// Who runs the recorder (`uid:gid`); None: root.
    pub user: Option<&'a str>,
    /// The target, watched during the window.
    pub watch: &'a Watch,
    /// `argv` runs a command to its end (`cpu -- CMD`): no fixed window (`duration` is only
    /// a limit), the target process may come and go, and Ctrl-C stops the command, after
    /// which perf ends by itself.
    pub until_command_ends: bool,
    /// The recorder ends by itself when the target process exits (perf record): the
    /// process is then checked rarely during the window (each check costs the engine an
    /// exec).
    pub ends_with_target: bool,
}

pub use crate::store::ARTIFACT_EXTENSIONS;

/// Runs `window.argv` in the container with a progress bar over `duration`. The first
/// Ctrl-C asks the recorder to stop (it still writes its output); a second one aborts,
/// discarding `stem`'s files.
pub async fn record(
    shell: &Shell,
    workdir: &str,
    window: &Window<'_>,
    interrupts: &mut Interrupts,
    stem: &Stem,
) -> Result<Recording> {
    let Window {
        argv: record_argv,
        duration,
        label,
        notes,
        user,
        watch,
        until_command_ends,
        ends_with_target,
    } = *window;
    let record_script = format!(
        "echo $$ > {pidfile}; echo {READY_MARKER}; read _go || exit 0; echo {START_MARKER}; exec {cmd}",
        pidfile = quote(&format!("{workdir}/perf.pid")),
        cmd = record_argv
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The exec starts now and waits for a line on its stdin, written when the window
    // opens: in a session, when every capture is ready, so the recorders are released
    // together rather than one exec start after another.
    let docker = shell.docker().clone();
    let container = shell.container().to_string();
    let user = user.unwrap_or(ROOT).to_string();
    let (tx, mut chunks) = mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
    let (go, ready) = tokio::sync::oneshot::channel::<()>();
    let (running_tx, running) = tokio::sync::oneshot::channel::<()>();
    let mut task = tokio::spawn(async move {
        let go = async {
            if ready.await.is_err() {
                // Never told to start: the task is being aborted.
                std::future::pending::<()>().await;
            }
        };
        docker
            .exec_streaming_released(
                &container,
                Some(&user),
                &["sh", "-c", &record_script],
                READY_MARKER,
                tx,
                running_tx,
                go,
            )
            .await
    });
    // Ready only once the recorder's shell runs: the last capture to arrive opens the
    // gate, and an exec still being started then would start late.
    tokio::select! {
        _ = running => {}
        _ = interrupts.next() => {
            task.abort();
            return Err(Error::Interrupted);
        }
    }
    tokio::select! {
        _ = gate::wait_for_start() => {}
        _ = interrupts.next() => {
            task.abort();
            return Err(Error::Interrupted);
        }
    }
    let _ = go.send(());
    let started = Instant::now();
    let bar = if until_command_ends {
        progress::spinner(label)
    } else {
        progress::capture_bar(duration, label)
    };
    // Without a terminal there is no bar: one line in the log says when the window opens.
    if bar.is_hidden() {
        let opened = if until_command_ends {
            format!("{label}: started")
        } else {
            format!("{label}: {} window started", human_duration(duration))
        };
        progress::note(None, &opened);
    }
    for note in notes {
        progress::note(Some(&bar), &format!("note: {note}"));
    }
    let mut stdout: Vec<u8> = Vec::new();
    let mut started_at: Option<DateTime<Local>> = None;
    let (grace, last_grace) = grace(duration);
    let soft_deadline = tokio::time::sleep(duration + grace);
    tokio::pin!(soft_deadline);
    let mut hard_deadline: Option<Instant> = None;
    let process_check = match (until_command_ends, ends_with_target) {
        (true, _) => None,
        (false, true) => Some(PROCESS_CHECK_FOLLOWED),
        (false, false) => Some(PROCESS_CHECK),
    };
    let stopped = watch.until_stopped(started, process_check);
    tokio::pin!(stopped);
    let mut watching = true;
    let mut stop_requested: Option<Instant> = None;
    let mut process_exited: Option<Duration> = None;
    let mut output = loop {
        tokio::select! {
            joined = &mut task => {
                break joined.map_err(|e| Error::io("recorder task", std::io::Error::other(e)))??;
            }
            Some(chunk) = chunks.recv() => {
                started_at.get_or_insert_with(Local::now);
                stdout.extend_from_slice(&chunk);
            }
            _ = interrupts.next() => {
                if stop_requested.is_some() {
                    bar.abandon_with_message("aborted");
                    task.abort();
                    stem.discard(ARTIFACT_EXTENSIONS);
                    return Err(Error::Interrupted);
                }
                stop_requested = Some(Instant::now());
                if until_command_ends {
                    bar.set_message("stopping the command (Ctrl-C again aborts)");
                    super::command::stop_command(shell, workdir).await;
                } else {
                    bar.set_message("stopping the recorder (Ctrl-C again aborts)");
                }
                stop_recorder(shell, workdir).await;
            }
            stop = &mut stopped, if watching => {
                watching = false;
                match stop {
                    Stop::Container { exit_code, at } => {
                        bar.abandon_with_message("the target stopped");
                        task.abort();
                        stem.discard(ARTIFACT_EXTENSIONS);
                        return Err(watch.stopped_error(exit_code, at));
                    }
                    Stop::Process { at } => {
                        // Its container runs on: perf still writes what it recorded.
                        process_exited = Some(at);
                        bar.set_message(format!("pid {} exited; stopping the recorder", watch.pid()));
                        stop_recorder(shell, workdir).await;
                    }
                }
            }
            _ = &mut soft_deadline, if hard_deadline.is_none() => {
                hard_deadline = Some(Instant::now() + last_grace);
                bar.set_message("the recorder overran the window; stopping it");
                stop_recorder(shell, workdir).await;
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                if hard_deadline.is_some_and(|at| Instant::now() >= at) {
                    bar.abandon_with_message("the recorder did not stop");
                    task.abort();
                    stem.discard(ARTIFACT_EXTENSIONS);
                    return Err(Error::PerfFailed {
                        container: shell.container().to_string(),
                        step: "recording".into(),
                        detail: format!(
                            "the recorder was still running {} s after a {} s window and did not stop when asked",
                            (duration + grace + last_grace).as_secs(),
                            duration.as_secs()
                        ),
                    });
                }
                if !until_command_ends {
                    let tenths = (started.elapsed().as_millis() / 100) as u64;
                    bar.set_position(tenths.min(bar.length().unwrap_or(tenths)));
                }
            }
        }
    };
    let stopped_at = Local::now();
    while let Some(chunk) = chunks.recv().await {
        stdout.extend_from_slice(&chunk);
    }
    let text = String::from_utf8_lossy(&stdout);
    output.stdout = text
        .strip_prefix(START_MARKER)
        .map(|rest| rest.strip_prefix('\n').unwrap_or(rest))
        .unwrap_or(&text)
        .to_string();
    let started_at = started_at.unwrap_or(stopped_at);
    if !output.success() {
        // perf killed with its container ends the exec before the engine says why.
        if let Some(Stop::Container { exit_code, at }) = watch.settle(started).await {
            bar.abandon_with_message("the target stopped");
            stem.discard(ARTIFACT_EXTENSIONS);
            return Err(watch.stopped_error(exit_code, at));
        }
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if !until_command_ends
        && stop_requested.is_none()
        && process_exited.is_none()
        && elapsed + Duration::from_secs(1) < duration
        && !watch.process_alive().await
    {
        // perf ends by itself when every thread it follows has exited.
        process_exited = Some(elapsed);
    }
    let ended_early = match (stop_requested.map(|at| at - started), process_exited) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let window = ended_early.unwrap_or(elapsed).min(duration);
    Ok(Recording {
        output,
        window,
        elapsed,
        interrupted: stop_requested.is_some(),
        process_exited,
        started_at,
        stopped_at,
    })
}

/// Asks the recorder started from `workdir` to stop; it then writes its output and exits.
async fn stop_recorder(shell: &Shell, workdir: &str) {
    let script = format!(
        "f={pidfile}; i=0; while [ ! -s \"$f\" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
         kill -INT \"$(cat \"$f\")\" 2>/dev/null",
        pidfile = quote(&format!("{workdir}/perf.pid"))
    );
    let _ = shell.sh(&script).await;
}
