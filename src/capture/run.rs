//! One capture's lifecycle, whatever its kind: the target placed (in its container or a
//! sidecar), a workdir there, a stem in the store, the window, the work on the recording
//! under the target's watch and Ctrl-C, and everything released, on success, error, panic
//! and Ctrl-C. The kinds (`cpu`, `offcpu`, `stat`, `heap`) are recipes over these steps.

use super::kept::{self, Again};
use super::liveness::{Stop, Watch};
use super::make_workdir;
use super::session::{cleanup_workdir, record, Recording, Window};
use super::{
    catching, find_target, locate_ahead, reclaiming, resume, workdir_cleanable, Ahead, Located,
    Target,
};
use crate::docker::target::ProcessSelector;
use crate::engines::perf::{PerfEngine, PerfReady};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::settings::Placement;
use crate::signals::Interrupts;
use crate::store::{self, Manifest, Stem};
use chrono::Local;
use std::future::Future;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Places `located` for `engine` (exec or sidecar, as `placement` allows) and runs `body`
/// on it; then, whatever happened (an error or a panic too), the sysctls lowered for it
/// are restored and no sidecar stays behind.
pub async fn placed<E: Engine, T>(
    engine: &E,
    located: Located,
    placement: &Placement,
    needs_tracefs: bool,
    body: impl AsyncFnOnce(&Target<E::Ready>) -> Result<T>,
) -> Result<T> {
    let target = find_target(engine, located, placement, needs_tracefs).await?;
    target.hold(body).await
}

/// A perf capture placed: the process located with perf's version and access trial and the
/// workdir asked for beside its probe (unless perf records from a sidecar), perf placed
/// for it as `placement` allows, `body` run on it; then a workdir made ahead that no window
/// took is removed.
pub async fn perf_placed<T>(
    target: &str,
    selector: &ProcessSelector,
    placement: &Placement,
    needs_tracefs: bool,
    body: impl AsyncFnOnce(&Target<PerfReady>) -> Result<T>,
) -> Result<T> {
    let located = locate_ahead(target, selector, Ahead::perf_in(placement.mode)).await?;
    reclaiming(located, async |mut located| {
        let engine = PerfEngine::answered(located.perf_answer.take());
        placed(&engine, located, placement, needs_tracefs, body).await
    })
    .await
}

impl<R> Target<R> {
    /// Runs `body` on this target; then, whatever happened (an error or a panic too), the
    /// sysctls lowered for it are restored and no sidecar stays behind.
    pub async fn hold<T>(self, body: impl AsyncFnOnce(&Target<R>) -> Result<T>) -> Result<T> {
        // Boxed: a capture's future is large, and a session polls several side by side on
        // one thread's stack.
        let result = catching(Box::pin(body(&self))).await;
        self.release().await;
        resume(result)
    }

    /// Runs `body` with a private workdir in the container; afterwards `finish` (an
    /// engine's own stop) runs and the workdir goes with any recorder still running from
    /// it: no temp file and no process stay behind. Skipped when the container stopped
    /// (it took them with it) or stays paused (it runs nothing).
    pub async fn in_workdir<T>(
        &self,
        body: impl AsyncFnOnce(&str) -> Result<T>,
        finish: impl AsyncFnOnce(&str),
    ) -> Result<T> {
        let workdir = match self.take_early_workdir() {
            Some(made) => made,
            None => make_workdir(&self.shell).await?,
        };
        crate::ui::phases::mark("workdir made");
        let result = catching(Box::pin(body(&workdir))).await;
        let cleaned = self
            .cleaned_workdir
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if cleaned.as_deref() != Some(workdir.as_str())
            && workdir_cleanable(&self.watch(), &workdir, &result).await
        {
            finish(&workdir).await;
            cleanup_workdir(&self.shell, &workdir).await;
        }
        resume(result)
    }

    /// Cleans `workdir` now (`finish`, the engine's own stop, first), for a recipe whose
    /// work in it is done while it still works on the host: `in_workdir` then leaves it.
    pub async fn clean_workdir_now(&self, workdir: &str, finish: impl Future<Output = ()>) {
        finish.await;
        cleanup_workdir(&self.shell, workdir).await;
        self.shell.release_standbys();
        *self
            .cleaned_workdir
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(workdir.to_string());
    }
}

/// A capture from its window to its files: the placed target, its workdir, the stem its
/// files go under, and the watch over the target from the window's start.
pub struct Run<'a, R> {
    pub target: &'a Target<R>,
    pub workdir: &'a str,
    pub stem: Stem,
    pub watch: Watch,
    /// When the first window opened: a stop of the target after it ends the capture.
    started: OnceLock<Instant>,
}

impl<'a, R> Run<'a, R> {
    /// Reserves the capture's stem, `<output_dir>/<container>/<prefix>-<time>`.
    pub fn new(
        target: &'a Target<R>,
        workdir: &'a str,
        output_dir: &Path,
        prefix: &str,
    ) -> Result<Self> {
        let stem = Stem::reserve(
            &store::container_dir(output_dir, &target.container.name),
            prefix,
            Local::now(),
        )?;
        Ok(Run {
            target,
            workdir,
            stem,
            watch: target.watch(),
            started: OnceLock::new(),
        })
    }

    /// A capture of what is already in the container (a heap capture's existing dumps):
    /// a stem and the work after it, with no window and so no workdir.
    pub fn without_window(target: &'a Target<R>, output_dir: &Path, prefix: &str) -> Result<Self> {
        Self::new(target, "", output_dir, prefix)
    }

    /// A window of `duration` running `argv` as root, shown as `label`; the other choices
    /// are the recipe's to set on what this returns.
    pub fn window<'w>(
        &'w self,
        argv: &'w [String],
        duration: Duration,
        label: &'w str,
        notes: &'w [String],
        ends_with_target: bool,
    ) -> Window<'w> {
        Window {
            argv,
            duration,
            label,
            notes,
            user: None,
            watch: &self.watch,
            until_command_ends: false,
            ends_with_target,
            enable_on_release: false,
            stops_itself: false,
        }
    }

    /// Records `window` (`session::record`); the first call opens the capture's watch.
    pub async fn record(
        &self,
        window: &Window<'_>,
        interrupts: &mut Interrupts,
    ) -> Result<Recording> {
        let mut recording = self.record_leaving_markers(window, interrupts).await?;
        recording.settle_markers().await;
        Ok(recording)
    }

    /// `record`, the window's markers still being drained from the log stream: the
    /// caller settles them (`Recording::settle_markers`) once it has used the wait.
    pub async fn record_leaving_markers(
        &self,
        window: &Window<'_>,
        interrupts: &mut Interrupts,
    ) -> Result<Recording> {
        debug_assert!(!self.workdir.is_empty(), "a window needs a workdir");
        self.started.get_or_init(Instant::now);
        Box::pin(record(
            &self.target.shell,
            self.workdir,
            window,
            interrupts,
            &self.stem,
        ))
        .await
    }

    /// When the window opened.
    fn started(&self) -> Instant {
        *self.started.get_or_init(Instant::now)
    }

    /// Runs `work` on the recording once it is home (`step` names it in errors, `doing`
    /// in the manifest after Ctrl-C), raced against the target becoming unusable and
    /// Ctrl-C. Whatever ends it early, the recording stays (`kept`) with the manifest
    /// `manifest` makes. `done` runs as soon as the race is over (a spinner cleared).
    #[allow(clippy::too_many_arguments)]
    pub async fn after_window<T>(
        &self,
        work: impl Future<Output = Result<T>>,
        step: &str,
        doing: &str,
        again: &Again<'_>,
        manifest: impl FnOnce() -> Manifest,
        done: impl FnOnce(),
        interrupts: &mut Interrupts,
    ) -> Result<T> {
        let started = self.started();
        let ended = tokio::select! {
            result = work => Ended::Done(result),
            stop = self.watch.until_unusable(started) => Ended::Unusable(stop),
            _ = interrupts.next() => Ended::Interrupted,
        };
        done();
        match ended {
            Ended::Done(Ok(value)) => Ok(value),
            Ended::Done(Err(e)) => Err(self.keep(manifest(), self.explain(e, step).await, again)),
            Ended::Unusable(stop) => {
                let e = self.watch.stop_error(stop, step);
                Err(self.keep(manifest(), e, again))
            }
            // What is already home stays, with a manifest saying what happened.
            Ended::Interrupted => Err(kept::keep_on_interrupt(
                &self.stem,
                manifest(),
                doing,
                again,
            )),
        }
    }

    /// `failure` of `step` after the window, or the target's stop when that is why.
    pub async fn explain(&self, failure: Error, step: &str) -> Error {
        self.watch.explain(self.started(), failure, step).await
    }

    /// Once the recording is home, no failure after it deletes it (`kept`).
    pub fn keep(&self, manifest: Manifest, failure: Error, again: &Again) -> Error {
        kept::keep_or_discard(&self.stem, manifest, failure, again)
    }
}

/// How the work after the window ended.
enum Ended<T> {
    Done(Result<T>),
    Unusable(Stop),
    Interrupted,
}
