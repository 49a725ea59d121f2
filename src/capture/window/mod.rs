//! The window every capture shares, whatever the engine: the recording command run in the
//! capture's workdir under a progress bar with its pid in a pidfile (`recorder`), released
//! with a session's other recorders, the target watched, the log's markers followed,
//! Ctrl-C (the first stops the recorder early, which still writes its output; a second
//! aborts), and how it went (`recording`).

mod recorder;
mod recording;
mod state;

use super::armed_stop::{instant_on_wall_clock, ArmedStop, RELEASE_LEAD};
use super::context::CaptureCtx;
use super::gate::{self, Seat};
use super::liveness::{Watch, PROCESS_CHECK, PROCESS_CHECK_FOLLOWED};
use super::record_script::without_control_lines;
use crate::docker::{ExecOutput, Shell};
use crate::error::{Error, Result};
use crate::signals::Interrupts;
use crate::store::Stem;
use crate::ui::Reporter;
use bytes::Bytes;
use chrono::{DateTime, Local};
use recorder::Recorder;
use state::WindowState;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub use recording::{instant_text, Recording};

/// How long the recorder may run past the window (start-up, writing its output) before it
/// is asked to stop, and how long after that before it is given up on.
pub fn grace(window: Duration) -> (Duration, Duration) {
    (
        Duration::from_secs(30) + window / 10,
        Duration::from_secs(15),
    )
}

/// Shells for the commands after the window (the reads, the clean-up; and the copy of a
/// perf recording, by `cat`: a perf recorder is the one enabled on release), started before
/// its end in a window of at least `STANDBY_MIN_WINDOW` (their starts' CPU is the window's).
const STANDBY_LEAD: Duration = Duration::from_secs(1);
const STANDBY_MIN_WINDOW: Duration = Duration::from_secs(5);

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
    /// `argv` is `perf record ... -- sleep SECONDS`: it is started before the window (in a
    /// session, before the gate) with its events disabled and enabled through a control
    /// fifo when released, so that its start-up (seconds on a loaded host) is paid before
    /// the window, not in it; an armed stop ends it in a session, its own script's timer
    /// alone.
    pub enable_on_release: bool,
    /// The recorder ends by itself when its window is over and a stop signal would lose
    /// what it recorded (`Engine::recorder_stops_itself`): no armed stop ends it.
    pub stops_itself: bool,
}

/// Runs `window.argv` in the container with a progress bar over `duration`. The first
/// Ctrl-C asks the recorder to stop (it still writes its output); a second one aborts,
/// discarding `stem`'s files.
pub async fn record(
    shell: &Shell,
    workdir: &str,
    window: &Window<'_>,
    ctx: &mut CaptureCtx,
    stem: &Stem,
) -> Result<Recording> {
    let session = ctx.session_name();
    let CaptureCtx {
        seat,
        interrupts,
        report,
        marks,
        ..
    } = ctx;
    let mut recorder = Recorder::start(shell, workdir, window, seat.as_ref());
    let opened = open(
        &mut recorder,
        shell,
        workdir,
        window,
        seat,
        interrupts,
        report,
    )
    .await?;
    // Markers: the target's log stream is followed over the window (capture/markers.rs).
    let follower =
        super::markers::follow(marks.as_deref(), shell.docker(), window.watch.container());
    let mut state = WindowState::open(shell, workdir, window, stem, report);
    state.started_at = opened.released_at;
    let output = over_window(&mut state, &mut recorder, shell, window, interrupts).await?;
    let Recorder {
        chunks,
        controlled,
        timed,
        ..
    } = recorder;
    let mut recording = state.close(output, chunks, follower).await?;
    recording.session = session;
    // A recorder told to stop samples no more; what it does after (py-spy and
    // async-profiler write their output) is not its window.
    if let Some(stop) = opened.armed_stop_at {
        recording.stopped_at = recording.stopped_at.min(stop);
    }
    // A timed recorder's timer starts as it says it starts (the window's start here).
    if timed {
        if let Ok(duration) = chrono::Duration::from_std(window.duration) {
            recording.stopped_at = recording.stopped_at.min(recording.started_at + duration);
        }
    }
    if controlled {
        recording.output.stderr = without_control_lines(&recording.output.stderr);
    }
    drop(opened);
    Ok(recording)
}

/// The window as it opened: when the recorder was released, and the stop armed for its
/// end (held until the window is over: dropped, it is withdrawn).
struct Opened {
    released_at: Option<DateTime<Local>>,
    /// The instant the armed stop tells the recorder to stop, on this host's wall clock.
    armed_stop_at: Option<DateTime<Local>>,
    _armed: Option<ArmedStop>,
    _stop_at: tokio::sync::watch::Sender<Option<tokio::time::Instant>>,
}

/// Waits for the recorder's shell to run and, in a session, for the gate; then releases
/// the recorder, with a stop armed for the window's end where one is needed.
async fn open(
    recorder: &mut Recorder,
    shell: &Shell,
    workdir: &str,
    window: &Window<'_>,
    seat: &mut Option<Seat>,
    interrupts: &mut Interrupts,
    report: &Reporter,
) -> Result<Opened> {
    // Ready only once the recorder's shell runs: the last capture to arrive opens the
    // gate, and an exec still being started then would start late.
    tokio::select! {
        _ = &mut recorder.running => {}
        _ = interrupts.next() => {
            recorder.task.abort();
            return Err(Error::Interrupted);
        }
    }
    report.mark("recorder started, waiting");
    // In a session every recorder is stopped at the same instant, the gate's opening plus
    // the window, by a stop armed before the gate (its exec started then, not in the
    // instant every recorder is released): the recorders' own timers would end each
    // window one start-up later than the other.
    // A controlled recorder alone (its perf's own timer outlasts the window by far) is
    // stopped by its script's timer, started as it enables perf: an armed stop's exec
    // would start while perf starts up, and take its CPU.
    let controlled = recorder.controlled;
    let (stop_at, stop_when) = tokio::sync::watch::channel(None);
    let armed = ((gate::in_session(seat.as_ref()) || controlled)
        && !recorder.timed
        && !window.until_command_ends
        && !window.stops_itself)
        .then(|| {
            let clock = seat
                .as_ref()
                .map(Seat::endpoint_clock_offset)
                .unwrap_or_default();
            ArmedStop::arm(shell, workdir, stop_when, clock, controlled)
        });
    let opened = tokio::select! {
        opened = gate::wait_for_start(seat.as_mut()) => opened,
        _ = interrupts.next() => {
            recorder.task.abort();
            return Err(Error::Interrupted);
        }
    };
    if let Some(go) = recorder.go.take() {
        let _ = go.send(());
    }
    report.mark("window opened");
    // In a session the window starts when the recorder's task released it, on this host's
    // clock (a perf recorder's events are enabled then); alone, when its shell says so.
    let released_at = match (opened, recorder.released.take()) {
        (Some(_), Some(released)) => Some(released.await.unwrap_or_else(|_| Local::now())),
        _ => None,
    };
    let stop_instant = match opened {
        Some(at) => Some(at + RELEASE_LEAD + window.duration),
        // Alone, the release goes at once: the window is the duration from now.
        None if controlled => Some(Instant::now() + window.duration),
        None => None,
    };
    let armed_stop_at = stop_instant
        .filter(|_| armed.is_some())
        .map(instant_on_wall_clock);
    if let Some(end) = stop_instant {
        stop_at.send_replace(Some(tokio::time::Instant::from(end)));
    }
    Ok(Opened {
        released_at,
        armed_stop_at,
        _armed: armed,
        _stop_at: stop_at,
    })
}

/// The open window, until the recorder ends: its output read as it comes, Ctrl-C, the
/// target's watch, the deadlines, and the shells for after the window started in its
/// last second.
async fn over_window(
    state: &mut WindowState<'_>,
    recorder: &mut Recorder,
    shell: &Shell,
    window: &Window<'_>,
    interrupts: &mut Interrupts,
) -> Result<ExecOutput> {
    let (grace, last_grace) = grace(window.duration);
    let soft_deadline = tokio::time::sleep(window.duration + grace);
    tokio::pin!(soft_deadline);
    let process_check = match (window.until_command_ends, window.ends_with_target) {
        (true, _) => None,
        (false, true) => Some(PROCESS_CHECK_FOLLOWED),
        (false, false) => Some(PROCESS_CHECK),
    };
    let stopped = window.watch.until_stopped(state.started, process_check);
    tokio::pin!(stopped);
    let mut watching = true;
    // The commands after the window start at once on shells started in its last second.
    let standbys_due = tokio::time::sleep(window.duration.saturating_sub(STANDBY_LEAD));
    tokio::pin!(standbys_due);
    let mut standbys_started = window.until_command_ends || window.duration < STANDBY_MIN_WINDOW;
    let task = &mut recorder.task;
    let chunks: &mut mpsc::Receiver<Bytes> = &mut recorder.chunks;
    loop {
        tokio::select! {
            joined = &mut *task => {
                return joined.map_err(|e| Error::io("recorder task", std::io::Error::other(e)))?;
            }
            Some(chunk) = chunks.recv() => state.received(&chunk),
            _ = interrupts.next() => state.interrupted(task).await?,
            stop = &mut stopped, if watching => {
                watching = false;
                state.target_stopped(stop, task).await?;
            }
            _ = &mut soft_deadline, if state.hard_deadline.is_none() => {
                state.overran(last_grace).await;
            }
            _ = &mut standbys_due, if !standbys_started => {
                standbys_started = true;
                shell.start_standbys(2 + usize::from(window.enable_on_release));
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                state.tick(task, grace + last_grace)?;
            }
        }
    }
}
