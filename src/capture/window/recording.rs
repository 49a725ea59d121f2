//! How a recording window went: the recorder's output, the window's real edges, how it
//! ended, and the markers of the target's log over it.

use crate::capture::markers::MarkersOutcome;
use crate::docker::ExecOutput;
use chrono::{DateTime, Local, SecondsFormat};
use std::time::Duration;

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
    pub markers: Option<MarkersOutcome>,
    /// The log stream's drain after the window (up to a second for lines still on their
    /// way), left running while the recording is copied out and folded.
    pub(super) pending_markers: Option<PendingMarkers>,
    /// The session the capture belongs to, for its manifest.
    pub(super) session: Option<String>,
}

/// A drain of the log stream in progress; dropped unfinished, it stops (an abandoned
/// capture writes no markers file after its files are gone).
pub(super) struct PendingMarkers(pub(super) tokio::task::JoinHandle<MarkersOutcome>);

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
        manifest.session = self.session.clone();
        self.stamp_markers(manifest);
    }

    /// Lists the markers file in `manifest` with the notes about it, once settled.
    pub fn stamp_markers(&self, manifest: &mut crate::store::Manifest) {
        if let Some(markers) = &self.markers {
            if let Some(path) = &markers.path {
                if let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
                    manifest.record_file(dir, &name.to_string_lossy());
                    manifest.markers_kept = Some(markers.count);
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
