//! The steps every capture window shares, whatever the engine: a private temporary
//! directory in the container, the recording command run under a progress bar with its pid
//! in a pidfile, Ctrl-C (the first stops the recorder early, which still writes its output;
//! a second aborts), and clean-up that leaves no recorder and no file behind.

use super::armed_stop::{
    instant_on_wall_clock, release_line, stop_recorder, ArmedStop, RELEASE_LEAD,
};
use super::gate;
use super::liveness::{Stop, Watch, PROCESS_CHECK, PROCESS_CHECK_FOLLOWED};
use super::record_script::{
    recorder_pid_fn, without_control_lines, RecorderStart, READY_MARKER, START_MARKER,
};
use crate::docker::exec::ROOT;
use crate::docker::pipe::CHANNEL_CHUNKS;
use crate::docker::{ContainerShell, ExecOutput, Shell};
use crate::error::{Error, Result};
use crate::signals::Interrupts;
use crate::store::Stem;
use crate::text::quote;
use crate::ui::progress;
use crate::units::human_duration;
use bytes::Bytes;
use chrono::{DateTime, Local, SecondsFormat};
use indicatif::ProgressBar;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Removes a workdir nothing ran in (made early, then not used): `rmdir`, which removes
/// only an empty directory, not `cleanup_workdir`'s search for processes.
pub async fn remove_unused_workdir(shell: &Shell, workdir: &str) {
    let removed = tokio::time::timeout(CLEANUP_LIMIT, shell.run(&["rmdir", "--", workdir])).await;
    if !matches!(removed, Ok(Ok(ref out)) if out.success()) {
        cleanup_workdir(shell, workdir).await;
    }
}

/// Longest the clean-up exec may take.
const CLEANUP_LIMIT: Duration = Duration::from_secs(20);

/// Stops a recorder that may still run from `workdir` and removes the directory. The pid
/// in the pidfile is signalled only when `recorder_pid_fn` accepts it. Any other process
/// whose command line names `workdir` (an engine's reader of its output, such as a `perf
/// script` left when the stream that read it was dropped at a Ctrl-C) is killed too,
/// whatever the engine; never this very shell, whose command line names it as well.
pub async fn cleanup_workdir(shell: &Shell, workdir: &str) {
    let script = format!(
        "{recorder}if recorder && kill -0 \"$p\" 2>/dev/null; then \
           kill -INT \"$p\" 2>/dev/null; i=0; \
           while kill -0 \"$p\" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; \
           kill -KILL \"$p\" 2>/dev/null; \
         fi; \
         for d in /proc/[0-9]*; do \
           [ \"${{d#/proc/}}\" = $$ ] && continue; \
           case \"$(tr '\\0' ' ' < $d/cmdline 2>/dev/null)\" in *{wd}*) kill -KILL \"${{d#/proc/}}\" 2>/dev/null;; esac; \
         done; rm -rf {wd}",
        recorder = recorder_pid_fn(workdir),
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

/// How long devprof waits for a target paused during a capture to be unpaused, to clean
/// up in it (devprof never unpauses a container someone else paused).
const UNPAUSE_WAIT: Duration = Duration::from_secs(30);

/// Whether the capture's workdir can still be cleaned up in the container after `result`:
/// not when the container stopped (it took the recorder and the directory with it); when
/// it was paused with the recorder in it, once it is unpaused (a bounded wait), else what
/// is left is said with the command that removes it.
pub async fn cleanable<T>(watch: &Watch, workdir: &str, result: &Result<T>) -> bool {
    let Err(e) = result else {
        return true;
    };
    match e.cause() {
        Error::TargetStopped { .. } => false,
        Error::PausedDuringCapture { container, .. } if watch.in_target() => {
            eprintln!(
                "note: {container} is paused; waiting up to {} s for it to be unpaused to remove {workdir} from it (devprof does not unpause it)",
                UNPAUSE_WAIT.as_secs()
            );
            if watch.until_unpaused(UNPAUSE_WAIT).await {
                return true;
            }
            eprintln!(
                "warning: left in {container}: {workdir} and the recorder started there (frozen with the container; \
                 it ends by itself once the container runs again, within seconds of when its window would have ended). \
                 After `docker unpause {container}`, remove the directory: `docker exec {container} rm -rf {workdir}`"
            );
            false
        }
        _ => true,
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
    /// When the target was paused during the window (sidecar mode: the recorder beside it
    /// was stopped then and wrote what it had), the time from the start of the window.
    pub paused: Option<Duration>,
    /// When the recorder was seen running (its first output line reached devprof) and when
    /// it ended, by this host's clock.
    pub started_at: DateTime<Local>,
    pub stopped_at: DateTime<Local>,
    /// Markers from the target's log lines over the window (`<stem>.markers`), when this
    /// run has marker rules for it; None until `settle_markers`.
    pub markers: Option<super::markers::MarkersOutcome>,
    /// The log stream's drain after the window (up to a second for lines still on their
    /// way), left running while the recording is copied out and folded.
    pending_markers: Option<PendingMarkers>,
}

/// A drain of the log stream in progress; dropped unfinished, it stops (an abandoned
/// capture writes no markers file after its files are gone).
struct PendingMarkers(tokio::task::JoinHandle<super::markers::MarkersOutcome>);

impl Drop for PendingMarkers {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Recording {
    /// Waits for the markers of the window (their drain began when the recorder ended).
    pub async fn settle_markers(&mut self) {
        if let Some(mut pending) = self.pending_markers.take() {
            self.markers = (&mut pending.0).await.ok();
        }
    }

    /// What the capture's summary and manifest say about a pause during the window.
    pub fn paused_warning(&self, container: &str) -> Option<String> {
        self.paused.map(|at| {
            format!(
                "{container} was paused (`docker pause`) at T+{} s: its processes were frozen from then on, so the profile covers the window until then",
                at.as_secs()
            )
        })
    }

    /// Writes the window's real start and stop instants into `manifest`.
    pub fn stamp(&self, manifest: &mut crate::store::Manifest) {
        manifest.window_started_at = Some(instant_text(&self.started_at));
        manifest.window_stopped_at = Some(instant_text(&self.stopped_at));
        manifest.session = gate::session_name();
        self.stamp_markers(manifest);
    }

    /// Lists the markers file in `manifest` with the notes about it, once settled.
    pub fn stamp_markers(&self, manifest: &mut crate::store::Manifest) {
        if let Some(markers) = &self.markers {
            if let Some(path) = &markers.path {
                if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
                    manifest.record_file(dir, &name.to_string_lossy());
                }
            }
            manifest.notes.extend(markers.notes.iter().cloned());
        }
    }
}

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
    let Recorder {
        mut task,
        mut chunks,
        go,
        running,
        controlled,
        timed,
        released,
    } = Recorder::start(shell, workdir, window);
    // Ready only once the recorder's shell runs: the last capture to arrive opens the
    // gate, and an exec still being started then would start late.
    tokio::select! {
        _ = running => {}
        _ = interrupts.next() => {
            task.abort();
            return Err(Error::Interrupted);
        }
    }
    crate::ui::phases::mark("recorder started, waiting");
    // In a session every recorder is stopped at the same instant, the gate's opening plus
    // the window, by a stop armed before the gate (its exec started then, not in the
    // instant every recorder is released): the recorders' own timers would end each
    // window one start-up later than the other.
    // A controlled recorder alone (its perf's own timer outlasts the window by far) is
    // stopped by its script's timer, started as it enables perf: an armed stop's exec
    // would start while perf starts up, and take its CPU.
    let (stop_at, stop_when) = tokio::sync::watch::channel(None);
    let armed = ((gate::in_session() || controlled)
        && !timed
        && !window.until_command_ends
        && !window.stops_itself)
        .then(|| {
            ArmedStop::arm(
                shell,
                workdir,
                stop_when,
                gate::endpoint_clock_offset(),
                controlled,
            )
        });
    let opened = tokio::select! {
        opened = gate::wait_for_start() => opened,
        _ = interrupts.next() => {
            task.abort();
            return Err(Error::Interrupted);
        }
    };
    let _ = go.send(());
    crate::ui::phases::mark("window opened");
    // In a session the window starts when the recorder's task released it, on this host's
    // clock (a perf recorder's events are enabled then); alone, when its shell says so.
    let released_at = match (opened, released) {
        (Some(_), Some(released)) => Some(released.await.unwrap_or_else(|_| Local::now())),
        _ => None,
    };
    let stop_instant = match opened {
        Some(at) => Some(at + RELEASE_LEAD + window.duration),
        // Alone, the release goes at once: the window is the duration from now.
        None if controlled => Some(Instant::now() + window.duration),
        None => None,
    };
    // The instant the armed stop tells the recorder to stop, on this host's wall clock.
    let armed_stop_at = stop_instant
        .filter(|_| armed.is_some())
        .map(instant_on_wall_clock);
    if let Some(end) = stop_instant {
        stop_at.send_replace(Some(tokio::time::Instant::from(end)));
    }
    // Markers: the target's log stream is followed over the window (capture/markers.rs).
    let follower = super::markers::follow(shell.docker(), window.watch.container());
    let mut state = WindowState::open(shell, workdir, window, stem);
    state.started_at = released_at;
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
    let output = loop {
        tokio::select! {
            joined = &mut task => {
                break joined.map_err(|e| Error::io("recorder task", std::io::Error::other(e)))??;
            }
            Some(chunk) = chunks.recv() => state.received(&chunk),
            _ = interrupts.next() => state.interrupted(&task).await?,
            stop = &mut stopped, if watching => {
                watching = false;
                state.target_stopped(stop, &task).await?;
            }
            _ = &mut soft_deadline, if state.hard_deadline.is_none() => {
                state.overran(last_grace).await;
            }
            _ = &mut standbys_due, if !standbys_started => {
                standbys_started = true;
                shell.start_standbys(2 + usize::from(window.enable_on_release));
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                state.tick(&task, grace + last_grace)?;
            }
        }
    };
    let mut recording = state.close(output, chunks, follower).await?;
    // A recorder told to stop samples no more; what it does after (py-spy and
    // async-profiler write their output) is not its window.
    if let Some(stop) = armed_stop_at {
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
    Ok(recording)
}

/// The recorder's exec, started and waiting for the window to open.
struct Recorder {
    task: tokio::task::JoinHandle<Result<ExecOutput>>,
    /// Its standard output as it arrives.
    chunks: mpsc::Receiver<Bytes>,
    /// Sent when the window opens: the recorder starts then.
    go: tokio::sync::oneshot::Sender<()>,
    /// Told once the recorder's shell runs.
    running: tokio::sync::oneshot::Receiver<()>,
    /// Started before the gate with its events disabled (`Window::enable_on_release`).
    controlled: bool,
    /// Controlled alone: its own script stops it once the window is over.
    timed: bool,
    /// In a session: when the recorder's task released it, as the gate opened.
    released: Option<tokio::sync::oneshot::Receiver<DateTime<Local>>>,
}

impl Recorder {
    /// Starts the exec now; it waits for a line on its stdin, written when the window
    /// opens: in a session, when every capture is ready, so the recorders are released
    /// together rather than one exec start after another.
    fn start(shell: &Shell, workdir: &str, window: &Window<'_>) -> Recorder {
        let plan = RecorderStart {
            argv: window.argv,
            workdir,
            duration: window.duration,
            enable_on_release: window.enable_on_release,
            until_command_ends: window.until_command_ends,
            stops_itself: window.stops_itself,
            in_session: gate::in_session(),
        }
        .plan();
        let (controlled, timed) = (plan.controlled, plan.timed);
        let docker = shell.docker().clone();
        let container = shell.container().to_string();
        let standbys = shell.standbys().clone();
        let user = window.user.unwrap_or(ROOT).to_string();
        let (tx, chunks) = mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let (running_tx, running) = tokio::sync::oneshot::channel::<()>();
        // In a session this task waits for the gate itself: the captures' own futures may
        // be polled one after another, each with work to do once the gate opens.
        let opening = gate::opening();
        let endpoint_clock = gate::endpoint_clock_offset();
        let (released_tx, released) = tokio::sync::oneshot::channel::<DateTime<Local>>();
        let released = opening.is_some().then_some(released);
        let task = tokio::spawn(async move {
            let go = async {
                match opening {
                    Some(opening) => {
                        // Every recorder starts at the gate's opening plus the lead, by
                        // its container's clock: the line may take a while to get there.
                        let opened = opening.await;
                        let start = instant_on_wall_clock(opened + RELEASE_LEAD);
                        let _ = released_tx.send(start);
                        release_line(start + endpoint_clock)
                    }
                    None => {
                        if ready.await.is_err() {
                            // Never told to start: the task is being aborted.
                            std::future::pending::<()>().await;
                        }
                        "go".to_string()
                    }
                }
            };
            docker
                .exec_streaming_released(
                    &container,
                    Some(&user),
                    &plan.exec_argv(),
                    READY_MARKER,
                    tx,
                    running_tx,
                    go,
                    Some(&standbys),
                )
                .await
        });
        Recorder {
            task,
            chunks,
            go,
            running,
            controlled,
            timed,
            released,
        }
    }
}

/// An open window: what happened in it so far, and its progress bar.
struct WindowState<'a> {
    shell: &'a Shell,
    workdir: &'a str,
    window: &'a Window<'a>,
    stem: &'a Stem,
    bar: ProgressBar,
    started: Instant,
    stdout: Vec<u8>,
    started_at: Option<DateTime<Local>>,
    /// Once the recorder overran the window: when it is given up on.
    hard_deadline: Option<Instant>,
    stop_requested: Option<Instant>,
    process_exited: Option<Duration>,
    paused: Option<Duration>,
}

impl<'a> WindowState<'a> {
    /// The window opens now: its bar, or without a terminal one line in the log, and the
    /// notes above it.
    fn open(shell: &'a Shell, workdir: &'a str, window: &'a Window<'a>, stem: &'a Stem) -> Self {
        let (label, duration) = (window.label, window.duration);
        let started = Instant::now();
        let bar = if window.until_command_ends {
            progress::spinner(label)
        } else {
            progress::capture_bar(duration, label)
        };
        // Without a terminal there is no bar: one line in the log says when the window opens.
        if bar.is_hidden() {
            let opened = if window.until_command_ends {
                format!("{label}: started")
            } else {
                format!("{label}: {} window started", human_duration(duration))
            };
            progress::note(None, &opened);
        }
        for note in window.notes {
            progress::note(Some(&bar), &format!("note: {note}"));
        }
        WindowState {
            shell,
            workdir,
            window,
            stem,
            bar,
            started,
            stdout: Vec::new(),
            started_at: None,
            hard_deadline: None,
            stop_requested: None,
            process_exited: None,
            paused: None,
        }
    }

    fn received(&mut self, chunk: &[u8]) {
        self.started_at.get_or_insert_with(Local::now);
        self.stdout.extend_from_slice(chunk);
    }

    /// The window ends with `error`: the recorder's exec dropped and the stem's files gone.
    fn abandon<T>(
        &self,
        task: &tokio::task::JoinHandle<T>,
        message: &'static str,
        error: Error,
    ) -> Error {
        self.bar.abandon_with_message(message);
        task.abort();
        self.stem.discard(ARTIFACT_EXTENSIONS);
        error
    }

    /// Ctrl-C: the first stops the recorder (or the command), a second aborts.
    async fn interrupted<T>(&mut self, task: &tokio::task::JoinHandle<T>) -> Result<()> {
        if self.stop_requested.is_some() {
            return Err(self.abandon(task, "aborted", Error::Interrupted));
        }
        self.stop_requested = Some(Instant::now());
        if self.window.until_command_ends {
            self.bar
                .set_message("stopping the command (Ctrl-C again aborts)");
            super::command::stop_command(self.shell, self.workdir).await;
        } else {
            self.bar
                .set_message("stopping the recorder (Ctrl-C again aborts)");
        }
        stop_recorder(self.shell, self.workdir).await;
        Ok(())
    }

    /// The target stopped, exited or was paused during the window.
    async fn target_stopped<T>(
        &mut self,
        stop: Stop,
        task: &tokio::task::JoinHandle<T>,
    ) -> Result<()> {
        let watch = self.window.watch;
        match stop {
            Stop::Container { exit_code, at } => {
                let e = watch.stopped_error(exit_code, at);
                return Err(self.abandon(task, "the target stopped", e));
            }
            Stop::Process { at } => {
                // Its container runs on: perf still writes what it recorded.
                self.process_exited = Some(at);
                self.bar
                    .set_message(format!("pid {} exited; stopping the recorder", watch.pid()));
            }
            Stop::Paused { at } if watch.in_target() => {
                // The recorder is frozen with the container: it can neither be
                // stopped nor write its output until someone unpauses it.
                let e = watch.paused_error(at, "recording window");
                return Err(self.abandon(task, "the target was paused", e));
            }
            Stop::Paused { at } => {
                // A sidecar's recorder is not frozen: it writes what it recorded.
                self.paused = Some(at);
                self.bar
                    .set_message("the target was paused; stopping the recorder");
            }
        }
        stop_recorder(self.shell, self.workdir).await;
        Ok(())
    }

    /// The recorder ran past the window and its grace: it is asked to stop, and given
    /// `last_grace` more.
    async fn overran(&mut self, last_grace: Duration) {
        self.hard_deadline = Some(Instant::now() + last_grace);
        self.bar
            .set_message("the recorder overran the window; stopping it");
        stop_recorder(self.shell, self.workdir).await;
    }

    /// Every 100 ms: the bar moves, and a recorder past its last deadline is given up on
    /// (`graces`: how long past the window that is).
    fn tick<T>(&mut self, task: &tokio::task::JoinHandle<T>, graces: Duration) -> Result<()> {
        let duration = self.window.duration;
        if self.hard_deadline.is_some_and(|at| Instant::now() >= at) {
            let e = Error::PerfFailed {
                container: self.shell.container().to_string(),
                step: "recording".into(),
                detail: format!(
                    "the recorder was still running {} s after a {} s window and did not stop when asked",
                    (duration + graces).as_secs(),
                    duration.as_secs()
                ),
            };
            return Err(self.abandon(task, "the recorder did not stop", e));
        }
        if !self.window.until_command_ends {
            let tenths = (self.started.elapsed().as_millis() / 100) as u64;
            self.bar
                .set_position(tenths.min(self.bar.length().unwrap_or(tenths)));
        }
        Ok(())
    }

    /// The recorder ended with `output`: the rest of its output read, markers written, and
    /// how the window went.
    async fn close(
        mut self,
        mut output: ExecOutput,
        mut chunks: mpsc::Receiver<Bytes>,
        follower: Option<super::markers::Follower>,
    ) -> Result<Recording> {
        let (watch, duration, stem) = (self.window.watch, self.window.duration, self.stem);
        let stopped_at = Local::now();
        crate::ui::phases::mark("window (recorder ended)");
        while let Some(chunk) = chunks.recv().await {
            self.stdout.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&self.stdout);
        output.stdout = text
            .strip_prefix(START_MARKER)
            .map(|rest| rest.strip_prefix('\n').unwrap_or(rest))
            .unwrap_or(&text)
            .to_string();
        let started_at = self.started_at.unwrap_or(stopped_at);
        let pending_markers = follower.map(|f| {
            let stem = stem.clone();
            PendingMarkers(tokio::spawn(
                async move { f.finish(stopped_at, &stem).await },
            ))
        });
        if !output.success() {
            // perf killed with its container ends the exec before the engine says why.
            if let Some(Stop::Container { exit_code, at }) = watch.settle(self.started).await {
                self.bar.abandon_with_message("the target stopped");
                stem.discard(ARTIFACT_EXTENSIONS);
                return Err(watch.stopped_error(exit_code, at));
            }
        }
        self.bar.finish_and_clear();
        let elapsed = self.started.elapsed();
        let mut process_exited = self.process_exited;
        if !self.window.until_command_ends
            && self.stop_requested.is_none()
            && process_exited.is_none()
            && elapsed + Duration::from_secs(1) < duration
            && watch
                .process_gone(self.started)
                .await
                .inspect_err(|_| stem.discard(ARTIFACT_EXTENSIONS))?
        {
            // perf ends by itself when every thread it follows has exited.
            process_exited = Some(elapsed);
        }
        let ended_early = [
            self.stop_requested.map(|at| at - self.started),
            process_exited,
            self.paused,
        ]
        .into_iter()
        .flatten()
        .min();
        let window = ended_early.unwrap_or(elapsed).min(duration);
        Ok(Recording {
            output,
            window,
            elapsed,
            interrupted: self.stop_requested.is_some(),
            process_exited,
            paused: self.paused,
            started_at,
            stopped_at,
            markers: None,
            pending_markers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::armed_stop::stop_script;
    use crate::capture::RECORDER_PIDFILE;

    /// Runs the stop script on this host against a pidfile holding `pid_text`, with a
    /// process whose command line names the workdir (the recorder) and one that does not
    /// (a bystander); `kill` is a function that only writes down what it was asked to
    /// signal (a check gone wrong must not signal this host's processes). Returns those
    /// arguments.
    fn stop_with_pidfile(pid_text: impl Fn(u32, u32) -> String) -> (Vec<String>, u32) {
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir
            .path()
            .join("devprof.test")
            .to_string_lossy()
            .into_owned();
        std::fs::create_dir(&workdir).unwrap();
        // A shell whose command line names the workdir stands in for the recorder.
        let mut recorder = std::process::Command::new("sh")
            .args(["-c", "sleep 30", "sh", &format!("{workdir}/perf.data")])
            .spawn()
            .unwrap();
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(
            format!("{workdir}/{RECORDER_PIDFILE}"),
            pid_text(recorder.id(), bystander.id()),
        )
        .unwrap();
        let log = dir.path().join("kills");
        let script = format!(
            "kill() {{ printf '%s\\n' \"$*\" >> {}; }}; {}",
            quote(&log.to_string_lossy()),
            stop_script(&workdir).replace("[ $i -lt 50 ]", "[ $i -lt 3 ]")
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let recorder_pid = recorder.id();
        for child in [&mut recorder, &mut bystander] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kills = std::fs::read_to_string(&log).unwrap_or_default();
        (kills.lines().map(String::from).collect(), recorder_pid)
    }

    #[test]
    fn stop_recorder_signals_only_the_recorder_the_pidfile_names() {
        let (kills, recorder) = stop_with_pidfile(|r, _| format!("{r}\n"));
        assert_eq!(kills, [format!("-INT {recorder}")]);
        // What the target's user may write there instead: nothing is signalled.
        let never = |text: &dyn Fn(u32, u32) -> String| stop_with_pidfile(text).0;
        assert_eq!(
            never(&|_, b| b.to_string()),
            Vec::<String>::new(),
            "a foreign pid"
        );
        assert_eq!(
            never(&|_, _| "-1".into()),
            Vec::<String>::new(),
            "every process"
        );
        assert_eq!(
            never(&|_, _| "0".into()),
            Vec::<String>::new(),
            "the process group"
        );
        assert_eq!(never(&|r, _| format!("0{r}")), Vec::<String>::new());
        assert_eq!(never(&|r, _| format!("{r} -1")), Vec::<String>::new());
        assert_eq!(never(&|_, _| String::new()), Vec::<String>::new());
    }

    #[test]
    fn stop_and_cleanup_share_one_check_of_the_pidfile() {
        let check = recorder_pid_fn("/tmp/devprof.x");
        assert!(stop_script("/tmp/devprof.x").starts_with(&check));
        // cleanup_workdir's script is built around the same function.
        assert!(!check.contains("kill"));
    }
}
