//! An engine's recording made into folded stacks once its window is over (copied out,
//! folded, or fetched and decoded), under a deadline, the target's watch and Ctrl-C:
//! whatever stops it keeps a recording that is home.

use super::context::CaptureCtx;
use super::kept::Again;
use super::lifecycle::Run;
use super::liveness::within;
use super::window::Recording;
use crate::engines::{AnyEngine, AnyReady, CollectJob, Collected, Engine};
use crate::error::Result;
use crate::settings::{CallGraph, FoldPath};
use crate::store::Manifest;
use std::time::Duration;

/// How the engine is asked to make its stacks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Folding {
    /// Also keep the engine's intermediate text (`perf script`) as `<stem>.script`.
    pub keep_script: bool,
    /// Resolve inlined frames.
    pub inline: bool,
    pub call_graph: CallGraph,
    pub fold: FoldPath,
    /// The names of a stripped Go binary come from its tables (the engine reads the binary).
    pub names_go: bool,
}

/// The step as errors name it (`name`; `within`: what its deadline names), and as the
/// manifest names it after Ctrl-C (`doing`).
pub struct Step {
    pub name: &'static str,
    pub within: &'static str,
    pub doing: &'static str,
    /// What it may take at most.
    pub limit: Duration,
}

/// `engine`'s recording of `run`, as folded stacks; a failure past the window keeps the
/// recording (`again`) with `manifest`.
pub async fn collect(
    engine: &AnyEngine,
    run: &Run<'_, AnyReady>,
    recording: &Recording,
    (folding, step, again): (Folding, Step, &Again),
    manifest: &Manifest,
    ctx: &mut CaptureCtx,
) -> Result<Collected> {
    let target = run.target;
    let report = ctx.report.clone();
    // The engine judges a runtime's perf map before perf may read it (perf's collect).
    let job = CollectJob {
        shell: &target.shell,
        target_container: &target.container.id,
        go: target.go.clone().filter(|_| folding.names_go),
        pid: target.process.pid,
        workdir: run.workdir(),
        recorded: &recording.output,
        stem: &run.stem,
        symfs: target.symfs(),
        keep_script: folding.keep_script,
        inline: folding.inline,
        call_graph: folding.call_graph,
        fold: folding.fold,
        report: &report,
    };
    let container = &target.container.name;
    let collecting = within(
        step.limit,
        container,
        step.within,
        engine.collect(&target.ready, &job),
    );
    let manifest = || manifest.clone();
    run.after_window(
        collecting,
        step.name,
        step.doing,
        again,
        manifest,
        || {},
        ctx,
    )
    .await
}
