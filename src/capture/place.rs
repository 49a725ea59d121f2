//! Where an engine records the found process: inside its container (exec), where the
//! engine may record there, or in a sidecar beside it, as the placement allows (climbing
//! the sidecar's rights); beside it on its network for an engine that reads what the
//! process serves. A chain's second engine stands in when the first is not available.
//! Whatever fails, what was made ahead in the container goes.

use super::context::CaptureCtx;
use super::sidecar;
use super::sysctl;
use super::target::{locate, Located, Target, TargetSpec};
use super::workdir::Workdir;
use crate::engines::{Ahead, AnyEngine, AnyReady, Chain, Engine, Reach, Reached};
use crate::error::{Error, Result};
use crate::settings::{CaptureMode, Placement};
use crate::text::first_line;

/// The first engine of `chain` placed for `located`; where it is not available (its
/// tool, or the sidecar image with it, missing), the process is found again and the next
/// one placed, never after a recording failed.
pub async fn chain(
    chain: Chain,
    located: Located,
    placement: &Placement,
    spec: &TargetSpec,
    ctx: &CaptureCtx,
) -> Result<(AnyEngine, Target<AnyReady>)> {
    let Chain { first, then } = chain;
    match engine(&first, located, placement, false, ctx).await {
        Ok(target) => Ok((first, target)),
        Err(e) if e.engine_unavailable() && then.is_some() => {
            let then = then.expect("a next engine");
            let next = then.engine?;
            crate::note!(
                "{}; recording with {} instead: {}",
                first_line(&e.to_string()),
                next.name(),
                then.because
            );
            let located = locate(ctx, spec, &Ahead::Nothing).await?;
            let target = engine(&next, located, placement, false, ctx).await?;
            Ok((next, target))
        }
        Err(e) => Err(e),
    }
}

/// Finds a place where `engine` may record the process `locate` chose: inside the
/// container (exec), or in a sidecar beside it, as the placement's mode allows.
pub async fn engine<E: Engine>(
    engine: &E,
    mut located: Located,
    placement: &Placement,
    needs_tracefs: bool,
    ctx: &CaptureCtx,
) -> Result<Target<E::Ready>> {
    if engine.reach() == Reach::Network {
        located.release_ahead().await;
        return sidecar::start_on_network(engine, located, placement, ctx).await;
    }
    if placement.mode != CaptureMode::Sidecar {
        located = match in_container(engine, located, placement, ctx).await {
            InContainer::Placed(target) => return Ok(target),
            InContainer::Beside(located) => located,
            InContainer::Failed(e, mut located) => {
                located.release_ahead().await;
                return Err(rootless_denial(&located.docker, e).await);
            }
        };
    }
    // Nothing of the container's own shell is used from a sidecar.
    located.release_ahead().await;
    match sidecar::start(engine, &located, placement, needs_tracefs, ctx).await {
        Err(e) => Err(rootless_denial(&located.docker, e).await),
        placed => placed,
    }
}

/// How trying the engine in the container itself went.
enum InContainer<R> {
    Placed(Target<R>),
    /// Auto moves it to a sidecar (no perf, no tool, or denied).
    Beside(Located),
    Failed(Error, Located),
}

/// The engine prepared in the container itself. The workdir made ahead is kept for it,
/// or made now beside `prepare` where the container has a perf (without one a perf
/// capture fails here, and auto moves to a sidecar, which leaves the target untouched).
async fn in_container<E: Engine>(
    engine: &E,
    mut located: Located,
    placement: &Placement,
    ctx: &CaptureCtx,
) -> InContainer<E::Ready> {
    let early = async {
        if located.workdir.is_some() || located.facts.perf_candidates.is_empty() {
            return None;
        }
        Workdir::make(&located.shell).await.ok()
    };
    let prepare = || engine.prepare(reached(&located));
    let (mut attempt, early) = tokio::join!(prepare(), early);
    let mut sysctls = None;
    if matches!(attempt, Err(Error::PerfDenied { .. })) && located.facts.sysctl_writable {
        if placement.allow_sysctl {
            // Nothing is lowered unless it can be restored without the target too.
            let helper = sysctl::check_helper(
                &located.docker,
                &located.container.name,
                &placement.profiler_image,
            )
            .await;
            match helper {
                Ok(helper) => sysctls = sysctl::lower(&located.shell, helper).await,
                Err(e) => return failed(e, located, early),
            }
            if let Some(saved) = &sysctls {
                attempt = prepare().await;
                if attempt.is_err() {
                    sysctl::restore(&located.shell, saved).await;
                    sysctls = None;
                }
            }
        } else {
            crate::note!(
                "{} may write the host-wide kernel.perf_event_paranoid; devprof leaves it as it is unless given --allow-sysctl",
                located.container.name
            );
        }
    }
    match attempt {
        Ok(ready) => {
            ctx.report.mark("engine prepared");
            ctx.pause_point("exec:engine").await;
            if early.is_some() {
                located.workdir = early;
            }
            InContainer::Placed(located.into_target(ready, None, sysctls))
        }
        Err(
            e @ (Error::PerfMissing { .. } | Error::ToolMissing { .. } | Error::PerfDenied { .. }),
        ) if placement.mode == CaptureMode::Auto => {
            crate::note!(
                "{}; profiling from a sidecar container instead",
                first_line(&e.to_string())
            );
            if let Some(workdir) = early {
                workdir.remove_unused(&located.shell).await;
            }
            InContainer::Beside(located)
        }
        Err(e) => failed(e, located, early),
    }
}

/// `e` ended the try, with the workdir made beside `prepare` given back to `located`.
fn failed<R>(e: Error, mut located: Located, early: Option<Workdir>) -> InContainer<R> {
    if early.is_some() {
        located.workdir = early;
    }
    InContainer::Failed(e, located)
}

/// A denial on a rootless endpoint says that the rights it lacks cannot be granted there:
/// capabilities given in a user namespace do not count for perf_event_open.
async fn rootless_denial(docker: &crate::docker::Docker, e: Error) -> Error {
    match e {
        Error::PerfDenied {
            container,
            detail,
            mut missing,
            mut fixes,
        } if docker.rootless().await => {
            missing.push(
                "a rootful container endpoint: this one runs rootless, in a user namespace, where granted capabilities \
                 (CAP_PERFMON, CAP_SYS_ADMIN) do not count for perf_event_open"
                    .into(),
            );
            fixes.push(
                "profile through a rootful endpoint (docs/podman.md), or lower kernel.perf_event_paranoid to 1 on the \
                 host and run the container with --security-opt seccomp=unconfined"
                    .into(),
            );
            Error::PerfDenied {
                container,
                detail,
                missing,
                fixes,
            }
        }
        e => e,
    }
}

/// The found process as its own container's shell reaches it.
pub fn reached(located: &Located) -> Reached<'_> {
    Reached {
        shell: &located.shell,
        facts: &located.facts,
        process: &located.process,
    }
}
