//! An open window: what happened in it so far, and its progress bar; what Ctrl-C, the
//! target stopping, an overrun and the recorder's end do to it.

use super::super::armed_stop::stop_recorder;
use super::super::liveness::Stop;
use super::super::markers::Follower;
use super::super::record_script::START_MARKER;
use super::recording::{PendingMarkers, Recording};
use super::Window;
use crate::docker::{ContainerShell, ExecOutput, Shell};
use crate::error::{Error, Result};
use crate::store::{Stem, ARTIFACT_EXTENSIONS};
use crate::ui::Reporter;
use crate::units::human_duration;
use bytes::Bytes;
use chrono::{DateTime, Local};
use indicatif::ProgressBar;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// An open window: what happened in it so far, and its progress bar.
pub(super) struct WindowState<'a> {
    shell: &'a Shell,
    report: &'a Reporter,
    workdir: &'a str,
    window: &'a Window<'a>,
    stem: &'a Stem,
    bar: ProgressBar,
    pub(super) started: Instant,
    stdout: Vec<u8>,
    pub(super) started_at: Option<DateTime<Local>>,
    /// Once the recorder overran the window: when it is given up on.
    pub(super) hard_deadline: Option<Instant>,
    stop_requested: Option<Instant>,
    process_exited: Option<Duration>,
    paused: Option<Duration>,
}

impl<'a> WindowState<'a> {
    /// The window opens now: its bar, or without a terminal one line in the log, and the
    /// notes above it.
    pub(super) fn open(
        shell: &'a Shell,
        workdir: &'a str,
        window: &'a Window<'a>,
        stem: &'a Stem,
        report: &'a Reporter,
    ) -> Self {
        let (label, duration) = (window.label, window.duration);
        let started = Instant::now();
        let bar = if window.until_command_ends {
            report.spinner(label)
        } else {
            report.capture_bar(duration, label)
        };
        // Without a terminal there is no bar: one line in the log says when the window opens.
        if bar.is_hidden() {
            let opened = if window.until_command_ends {
                format!("{label}: started")
            } else {
                format!("{label}: {} window started", human_duration(duration))
            };
            report.note(None, &opened);
        }
        for note in window.notes {
            report.note(Some(&bar), &format!("note: {note}"));
        }
        WindowState {
            shell,
            report,
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

    pub(super) fn received(&mut self, chunk: &[u8]) {
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
    pub(super) async fn interrupted<T>(&mut self, task: &tokio::task::JoinHandle<T>) -> Result<()> {
        if self.stop_requested.is_some() {
            return Err(self.abandon(task, "aborted", Error::Interrupted));
        }
        self.stop_requested = Some(Instant::now());
        if self.window.until_command_ends {
            self.bar
                .set_message("stopping the command (Ctrl-C again aborts)");
            super::super::command::stop_command(self.shell, self.workdir).await;
        } else {
            self.bar
                .set_message("stopping the recorder (Ctrl-C again aborts)");
        }
        stop_recorder(self.shell, self.workdir).await;
        Ok(())
    }

    /// The target stopped, exited or was paused during the window.
    pub(super) async fn target_stopped<T>(
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
    pub(super) async fn overran(&mut self, last_grace: Duration) {
        self.hard_deadline = Some(Instant::now() + last_grace);
        self.bar
            .set_message("the recorder overran the window; stopping it");
        stop_recorder(self.shell, self.workdir).await;
    }

    /// Every 100 ms: the bar moves, and a recorder past its last deadline is given up on
    /// (`graces`: how long past the window that is).
    pub(super) fn tick<T>(
        &mut self,
        task: &tokio::task::JoinHandle<T>,
        graces: Duration,
    ) -> Result<()> {
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
    pub(super) async fn close(
        mut self,
        mut output: ExecOutput,
        mut chunks: mpsc::Receiver<Bytes>,
        follower: Option<Follower>,
    ) -> Result<Recording> {
        let (watch, duration, stem) = (self.window.watch, self.window.duration, self.stem);
        let stopped_at = Local::now();
        self.report.mark("window (recorder ended)");
        while let Some(chunk) = chunks.recv().await {
            self.stdout.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&self.stdout);
        output.stdout = text
            .strip_prefix(START_MARKER)
            .map(|rest| rest.strip_prefix('\n').unwrap_or(rest))
            .unwrap_or(&text)
            .to_string();
        // The recorder's first output marks the window's real start; without one (a Ctrl-C
        // before it reached devprof), the window's opening here does.
        let opened_at =
            stopped_at - chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default();
        let started_at = self.started_at.unwrap_or(opened_at);
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
        // Measured between the window's real edges where the recorder was seen running,
        // so a window ended early reads what it recorded.
        let real = (stopped_at - started_at)
            .to_std()
            .ok()
            .filter(|_| self.started_at.is_some());
        // A window that ran its course is its requested length.
        let window = match ended_early {
            Some(early) => real.map_or(early, |real| early.min(real)),
            None => elapsed,
        }
        .min(duration);
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
            session: None,
        })
    }
}
