//! The recorder's exec: started before the window with the script that writes its pid,
//! says it is ready and waits for its release on stdin (in a session, the instant the
//! gate opens plus the lead, by its container's clock).

use super::super::armed_stop::{instant_on_wall_clock, release_line, RELEASE_LEAD};
use super::super::gate::{self, Seat};
use super::super::record_script::{RecorderStart, READY_MARKER};
use super::Window;
use crate::docker::exec::ROOT;
use crate::docker::pipe::CHANNEL_CHUNKS;
use crate::docker::{ContainerShell, ExecOutput, Shell};
use crate::error::Result;
use bytes::Bytes;
use chrono::{DateTime, Local};
use tokio::sync::mpsc;

/// The recorder's exec, started and waiting for the window to open.
pub(super) struct Recorder {
    pub(super) task: tokio::task::JoinHandle<Result<ExecOutput>>,
    /// Its standard output as it arrives.
    pub(super) chunks: mpsc::Receiver<Bytes>,
    /// Sent when the window opens: the recorder starts then.
    pub(super) go: Option<tokio::sync::oneshot::Sender<()>>,
    /// Told once the recorder's shell runs.
    pub(super) running: tokio::sync::oneshot::Receiver<()>,
    /// Started before the gate with its events disabled (`Window::enable_on_release`).
    pub(super) controlled: bool,
    /// Controlled alone: its own script stops it once the window is over.
    pub(super) timed: bool,
    /// In a session: when the recorder's task released it, as the gate opened.
    pub(super) released: Option<tokio::sync::oneshot::Receiver<DateTime<Local>>>,
}

impl Recorder {
    /// Starts the exec now; it waits for a line on its stdin, written when the window
    /// opens: in a session, when every capture is ready, so the recorders are released
    /// together rather than one exec start after another.
    pub(super) fn start(
        shell: &Shell,
        workdir: &str,
        window: &Window<'_>,
        seat: Option<&Seat>,
    ) -> Recorder {
        let plan = RecorderStart {
            argv: window.argv,
            workdir,
            duration: window.duration,
            enable_on_release: window.enable_on_release,
            until_command_ends: window.until_command_ends,
            stops_itself: window.stops_itself,
            in_session: gate::in_session(seat),
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
        let opening = seat.and_then(Seat::opening);
        let endpoint_clock = seat.map(Seat::endpoint_clock_offset).unwrap_or_default();
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
            go: Some(go),
            running,
            controlled,
            timed,
            released,
        }
    }
}
