//! One capture's lifecycle, whatever its kind, owned by one driver (`run`): the target
//! found (with what its engine asks ahead), placed (in its container or a sidecar), the
//! workdir, the stem in the store, the window, the work on the recording under the
//! target's watch and Ctrl-C, the manifest and the files, and everything released, on
//! success, error, panic and Ctrl-C. A kind is a `Recipe`: it says only what differs
//! (its prefix, where its process is reached from, its window, and what it makes of the
//! recording).

use super::context::{CaptureCtx, Step};
use super::kept::{self, Again};
use super::liveness::{set_up, Stop, Watch};
use super::target::{locate, Located, Target, TargetSpec};
use super::window::{record, Recording, Window};
use super::workdir::Workdir;
use crate::docker::target::ProcessSelector;
use crate::engines::{Ahead, RecorderFacts};
use crate::error::{Error, Result};
use crate::store::{self, Manifest, Stem, ARTIFACT_EXTENSIONS};
use chrono::Local;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What a finished capture produced, whatever its kind: its manifest, the files it wrote
/// (with their sizes), what the user should hear about it, and the kind's own summary for
/// people where it has one (the off-CPU summary, the heap report).
#[derive(Debug)]
pub struct Captured {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
    pub text: Option<String>,
}

/// What a recipe made of its recording: the manifest (listing the files it wrote beside
/// the stem under names of their own), the extensions of the files it wrote at the stem,
/// what the user should hear, its summary for people, and how the recording is analysed
/// again should writing it down fail.
pub struct Written {
    pub manifest: Manifest,
    pub extensions: Vec<&'static str>,
    pub warnings: Vec<String>,
    pub text: Option<String>,
    pub again: Again,
}

/// A capture's window: what the recorder runs (as whom), for how long, how it is shown,
/// and how the recorder behaves (from its engine).
#[derive(Debug, Clone, Default)]
pub struct WindowPlan {
    pub argv: Vec<String>,
    pub duration: Duration,
    /// The progress bar's label.
    pub label: String,
    /// Printed above the bar before the window opens.
    pub notes: Vec<String>,
    /// Who runs the recorder (`uid:gid`); None: root.
    pub user: Option<String>,
    pub facts: RecorderFacts,
    /// `argv` runs a command (or a fetch) to its end: `duration` is only a limit.
    pub until_command_ends: bool,
}

/// What a capture records and where its files go: the target as the user named it, the
/// store, and the prefix of its files there (`perf`, `offcpu`, `stat`, `heap`).
#[derive(Debug, Clone)]
pub struct CaptureSpec {
    pub prefix: &'static str,
    pub target: TargetSpec,
    pub store: PathBuf,
}

impl CaptureSpec {
    pub fn new(
        prefix: &'static str,
        target: &str,
        process: &ProcessSelector,
        store: &Path,
    ) -> Self {
        CaptureSpec {
            prefix,
            target: TargetSpec {
                name: target.to_string(),
                process: process.clone(),
            },
            store: store.to_path_buf(),
        }
    }
}

/// A kind of capture: what it records and what it makes of it. The driver (`run`) calls
/// these in order; each step has a default where most kinds need nothing. Its futures
/// need not be `Send`: a capture runs on its command's task (a session polls its captures
/// side by side on one).
#[allow(async_fn_in_trait)]
pub trait Recipe {
    /// What reaches the placed process: an engine's `Ready`, or the recipe's own facts.
    type Ready: Send + Sync;

    /// What it records and where its files go.
    fn spec(&self) -> &CaptureSpec;

    /// What its engine asks of the container ahead of the window.
    fn ahead(&self, _ctx: &CaptureCtx) -> Ahead {
        Ahead::Nothing
    }

    /// Where the found process is reached from: its engine placed (`place`), or the
    /// container's own shell. What was made ahead and not used is released here.
    async fn place(&mut self, located: Located, ctx: &CaptureCtx) -> Result<Target<Self::Ready>>;

    /// Checks made before anything is made in the container or the store (events, a
    /// command to run, whether dumps can be asked for).
    async fn check(&mut self, _target: &Target<Self::Ready>, _ctx: &mut CaptureCtx) -> Result<()> {
        Ok(())
    }

    /// Whether it records over a window (and so needs a workdir); a capture of what the
    /// container already holds has none.
    fn has_window(&self) -> bool {
        true
    }

    /// Puts in the workdir what the window needs (an engine's tools).
    async fn stage(
        &mut self,
        _target: &Target<Self::Ready>,
        _workdir: &str,
        _ctx: &CaptureCtx,
    ) -> Result<()> {
        Ok(())
    }

    /// The window; None where the kind runs no recorder over one (commands run N times).
    async fn window(&mut self, run: &Run<'_, Self::Ready>) -> Result<Option<WindowPlan>>;

    /// Records the window (a kind that may record it again overrides this).
    async fn record(
        &mut self,
        run: &Run<'_, Self::Ready>,
        ctx: &mut CaptureCtx,
    ) -> Result<Option<Recording>> {
        match self.window(run).await? {
            Some(plan) => run.record_leaving_markers(&plan, ctx).await.map(Some),
            None => Ok(None),
        }
    }

    /// What it makes of the recording, once the window is over.
    async fn analyse(
        &mut self,
        run: &Run<'_, Self::Ready>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written>;

    /// After the window, before the workdir goes: nothing of the engine keeps running.
    async fn finish(&self, _target: &Target<Self::Ready>, _workdir: &str) {}

    /// Once the capture is over, whatever happened: what the recipe changed in the
    /// container is put back (`failure`: why it ended early).
    async fn release(&mut self, _target: &Target<Self::Ready>, _failure: Option<&Error>) {}
}

/// Runs `recipe` from finding its target to its files, and releases everything, whatever
/// happens (a panic too).
pub async fn run<R: Recipe>(recipe: R, ctx: &mut CaptureCtx) -> Result<Captured> {
    let located = locate(ctx, &recipe.spec().target, &recipe.ahead(ctx)).await?;
    run_located(recipe, located, ctx).await
}

/// Gives up what `located` made ahead when Ctrl-C came while it was found: nothing is
/// placed, nothing is left.
async fn still_wanted(mut located: Located, ctx: &CaptureCtx) -> Result<Located> {
    if let Err(e) = ctx.not_interrupted() {
        located.release_ahead().await;
        return Err(e);
    }
    Ok(located)
}

/// `run` for a target already found (a kind whose recipe depends on what runs there).
pub async fn run_located<R: Recipe>(
    mut recipe: R,
    located: Located,
    ctx: &mut CaptureCtx,
) -> Result<Captured> {
    ctx.report.mark("target found");
    ctx.report.step(&format!(
        "{}: process {} found ({})",
        located.container.name,
        located.process.pid,
        crate::text::truncate(&located.process.cmdline, 60)
    ));
    let located = still_wanted(located, ctx).await?;
    // Placing runs in the container or a sidecar sharing its pids: raced against the
    // target stopping, which is then reported as such, with no sidecar left.
    let watch = Watch::over_container(&located.container, &located.shell);
    let (docker, target_id) = (located.docker.clone(), located.container.id.clone());
    let mut target = match set_up(&watch, recipe.place(located, ctx)).await {
        Ok(target) => {
            ctx.report.step(&match &target.sidecar {
                Some(sidecar) => format!(
                    "{}: profiling from a sidecar beside it ({})",
                    target.container.name, sidecar.privileges
                ),
                None => format!("{}: profiling inside the container", target.container.name),
            });
            target
        }
        Err(e) => {
            if matches!(e, Error::TargetStopped { .. }) {
                docker.remove_own_sidecars_of(&target_id).await;
            }
            return Err(e);
        }
    };
    // Boxed: a capture's future is large, and a session polls several side by side on one
    // thread's stack.
    let result = catching(Box::pin(placed(&mut recipe, &mut target, ctx))).await;
    recipe.release(&target, failure(&result)).await;
    target.release().await;
    resume(result)
}

/// The capture on its placed target.
async fn placed<R: Recipe>(
    recipe: &mut R,
    target: &mut Target<R::Ready>,
    ctx: &mut CaptureCtx,
) -> Result<Captured> {
    ctx.step(Step::Place)?;
    ctx.not_interrupted()?;
    recipe.check(target, ctx).await?;
    ctx.not_interrupted()?;
    if !recipe.has_window() {
        let run = Run::new(target, None, recipe.spec())?;
        return analysed(recipe, &run, None, ctx).await;
    }
    let workdir = target.take_workdir().await?;
    ctx.report.mark("workdir made");
    let target = &*target;
    let result = catching(Box::pin(in_workdir(recipe, target, &workdir, ctx))).await;
    let finish = recipe.finish(target, workdir.path());
    workdir
        .release(&target.shell, &target.watch(), failure(&result), finish)
        .await;
    resume(result)
}

/// The window and the work after it, in the workdir.
async fn in_workdir<R: Recipe>(
    recipe: &mut R,
    target: &Target<R::Ready>,
    workdir: &Workdir,
    ctx: &mut CaptureCtx,
) -> Result<Captured> {
    ctx.step(Step::Workdir)?;
    recipe.stage(target, workdir.path(), ctx).await?;
    let run = Run::new(target, Some(workdir), recipe.spec())?;
    let recorded = recipe.record(&run, ctx).await;
    let recording = recorded
        .and_then(|r| ctx.step(Step::Window).map(|_| r))
        .inspect_err(|_| run.discard_unkept())?;
    analysed(recipe, &run, recording, ctx).await
}

/// What the recipe makes of the recording, written down with its manifest. A failure
/// here keeps a recording that is home (the recipe's steps keep it; what nothing kept
/// goes).
async fn analysed<R: Recipe>(
    recipe: &mut R,
    run: &Run<'_, R::Ready>,
    recording: Option<Recording>,
    ctx: &mut CaptureCtx,
) -> Result<Captured> {
    let written = recipe
        .analyse(run, recording, ctx)
        .await
        .inspect_err(|_| run.discard_unkept())?;
    if let Err(e) = ctx.step(Step::Analysis) {
        return Err(run.keep(written.manifest, e, &written.again));
    }
    run.finish(written)
}

/// The error a capture ended with, if it ended with one (not a panic).
fn failure<T>(result: &std::thread::Result<Result<T>>) -> Option<&Error> {
    match result {
        Ok(Err(e)) => Some(e),
        _ => None,
    }
}

/// Runs `work`, holding a panic in it so that the caller's clean-up (sysctls restored,
/// sidecar removed, workdir removed) still runs; `resume` then goes on with the panic.
pub async fn catching<T>(work: impl Future<Output = T>) -> std::thread::Result<T> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(work).catch_unwind().await
}

/// The result `catching` held, or the panic it held, resumed.
pub fn resume<T>(caught: std::thread::Result<T>) -> T {
    caught.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A capture from its window to its files: the placed target, its workdir, the stem its
/// files go under, and the watch over the target from the window's start.
pub struct Run<'a, R> {
    pub target: &'a Target<R>,
    workdir: Option<&'a Workdir>,
    pub stem: Stem,
    pub watch: Watch,
    /// When the first window opened: a stop of the target after it ends the capture.
    started: OnceLock<Instant>,
}

impl<'a, R> Run<'a, R> {
    /// Reserves the capture's stem, `<store>/<container>/<prefix>-<time>`.
    fn new(
        target: &'a Target<R>,
        workdir: Option<&'a Workdir>,
        spec: &CaptureSpec,
    ) -> Result<Self> {
        let stem = Stem::reserve(
            &store::container_dir(&spec.store, &target.container.name),
            spec.prefix,
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

    /// The workdir in the container (a capture without a window has none).
    pub fn workdir(&self) -> &str {
        self.workdir.map_or("", Workdir::path)
    }

    /// Records `plan` (`window::record`) and waits for the window's markers; the first
    /// call opens the capture's watch.
    pub async fn record(&self, plan: &WindowPlan, ctx: &mut CaptureCtx) -> Result<Recording> {
        let mut recording = self.record_leaving_markers(plan, ctx).await?;
        recording.settle_markers().await;
        Ok(recording)
    }

    /// `record`, the window's markers still being drained from the log stream: the
    /// caller settles them (`Recording::settle_markers`) once it has used the wait.
    pub async fn record_leaving_markers(
        &self,
        plan: &WindowPlan,
        ctx: &mut CaptureCtx,
    ) -> Result<Recording> {
        let workdir = self.workdir.expect("a window needs a workdir").path();
        self.started.get_or_init(Instant::now);
        let window = Window {
            argv: &plan.argv,
            duration: plan.duration,
            label: &plan.label,
            notes: &plan.notes,
            user: plan.user.as_deref(),
            watch: &self.watch,
            until_command_ends: plan.until_command_ends,
            ends_with_target: plan.facts.ends_with_target,
            enable_on_release: plan.facts.enables_on_release,
            stops_itself: plan.facts.stops_itself,
        };
        Box::pin(record(
            &self.target.shell,
            workdir,
            &window,
            ctx,
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
        again: &Again,
        manifest: impl FnOnce() -> Manifest,
        done: impl FnOnce(),
        ctx: &mut CaptureCtx,
    ) -> Result<T> {
        let started = self.started();
        let ended = tokio::select! {
            result = work => Ended::Done(result),
            stop = self.watch.until_unusable(started) => Ended::Unusable(stop),
            _ = ctx.interrupts.next() => Ended::Interrupted,
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

    /// Releases the workdir now (`finish`, the engine's own stop, first), for a recipe
    /// whose work in it is done while it still works on the host.
    pub async fn release_workdir_now(&self, finish: impl Future<Output = ()>) {
        if let Some(workdir) = self.workdir {
            workdir
                .release(&self.target.shell, &self.watch, None, finish)
                .await;
        }
        self.target.shell.release_standbys();
    }

    /// A capture that ends with nothing home and no manifest written leaves nothing in
    /// the store (not even the stem it reserved); a recording its recipe kept stays.
    fn discard_unkept(&self) {
        let kept = store::file_size(&self.stem.path("json")) > 0;
        if !kept && !self.stem.path("data").is_file() {
            self.stem.discard(ARTIFACT_EXTENSIONS);
        }
    }

    /// Writes the manifest: the capture's files listed, and the capture's outcome.
    fn finish(&self, written: Written) -> Result<Captured> {
        let Written {
            mut manifest,
            extensions,
            warnings,
            text,
            ..
        } = written;
        manifest.record_stem_files(&self.stem, &extensions);
        // Every file the manifest lists (the markers the window wrote too), then itself.
        let mut files: Vec<(PathBuf, u64)> = manifest
            .files
            .iter()
            .map(|f| (self.stem.dir().join(&f.name), f.bytes))
            .collect();
        let manifest_path = manifest.write(&self.stem)?;
        files.push((manifest_path.clone(), store::file_size(&manifest_path)));
        Ok(Captured {
            manifest,
            manifest_path,
            files,
            warnings,
            text,
        })
    }
}

/// How the work after the window ended.
enum Ended<T> {
    Done(Result<T>),
    Unusable(Stop),
    Interrupted,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a panic during a capture unwound past its clean-up (sysctls, sidecar,
    /// workdir): the clean-up now runs first, then the panic goes on.
    #[tokio::test]
    async fn a_panic_in_a_capture_still_runs_its_clean_up() {
        let caught = catching(async {
            if std::hint::black_box(true) {
                panic!("a parser bug");
            }
            Ok::<u32, crate::error::Error>(1)
        })
        .await;
        // Held, not unwound through the caller: its clean-up runs next.
        assert!(caught.is_err());
        let resumed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| resume(caught)));
        let payload = resumed.expect_err("the panic goes on after the clean-up");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a parser bug"));
        assert_eq!(resume(catching(async { 7 }).await), 7);
    }
}
