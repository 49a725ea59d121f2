//! A capture's workdir as one value: made ahead (beside the container's probe, by the
//! engine that records there) or fresh, in the shell its recorder runs in, and released
//! once: removed with any recorder still running from it, or, where nothing ran in it,
//! with a plain `rmdir`. Skipped where the container stopped (it took the directory with
//! it) or stays paused (it runs nothing).

use super::liveness::Watch;
use super::record_script::recorder_pid_fn;
use crate::docker::{workdir, ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::text::quote;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A private directory in the container's /tmp, and whether it was released.
#[derive(Debug)]
pub struct Workdir {
    path: String,
    released: AtomicBool,
}

impl Workdir {
    /// Makes one now.
    pub async fn make(shell: &Shell) -> Result<Workdir> {
        Ok(Workdir::taken(workdir::make(shell).await?))
    }

    /// One made ahead, as its maker printed it; None unless it is one devprof asked for.
    pub fn made_ahead(printed: &str) -> Option<Workdir> {
        workdir::made(printed).map(Workdir::taken)
    }

    fn taken(path: String) -> Workdir {
        Workdir {
            path,
            released: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Removes it though nothing ran in it (made ahead, then not used): `rmdir`, which
    /// removes only an empty directory, not `clean`'s search for processes.
    pub async fn remove_unused(&self, shell: &Shell) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        let removed =
            tokio::time::timeout(CLEANUP_LIMIT, shell.run(&["rmdir", "--", &self.path])).await;
        if !matches!(removed, Ok(Ok(ref out)) if out.success()) {
            cleanup(shell, &self.path).await;
        }
    }

    /// Releases it after a window: `finish` (an engine's own stop) first, then any recorder
    /// still running from it and the directory go, unless `failure` says the container
    /// stopped or stays paused. Once: a second release does nothing.
    pub async fn release(
        &self,
        shell: &Shell,
        watch: &Watch,
        failure: Option<&Error>,
        finish: impl std::future::Future<Output = ()>,
    ) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        if cleanable(watch, &self.path, failure).await {
            finish.await;
            cleanup(shell, &self.path).await;
        }
    }
}

/// Longest the clean-up exec may take.
const CLEANUP_LIMIT: Duration = Duration::from_secs(20);

/// Stops a recorder that may still run from `workdir` and removes the directory. The pid
/// in the pidfile is signalled only when `recorder_pid_fn` accepts it. Any other process
/// whose command line names `workdir` (an engine's reader of its output, such as a `perf
/// script` left when the stream that read it was dropped at a Ctrl-C) is killed too,
/// whatever the engine; never this very shell, whose command line names it as well.
pub async fn cleanup(shell: &Shell, workdir: &str) {
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
        Ok(Err(e)) => crate::warn!("could not clean {workdir} in {}: {e}", shell.container()),
        Err(_) => crate::warn!(
            "cleaning {workdir} in {} took over {} s; gave up",
            shell.container(),
            CLEANUP_LIMIT.as_secs()
        ),
    }
}

/// How long devprof waits for a target paused during a capture to be unpaused, to clean
/// up in it (devprof never unpauses a container someone else paused).
const UNPAUSE_WAIT: Duration = Duration::from_secs(30);

/// Whether the capture's workdir can still be cleaned up in the container after `failure`:
/// not when the container stopped (it took the recorder and the directory with it); when
/// it was paused with the recorder in it, once it is unpaused (a bounded wait), else what
/// is left is said with the command that removes it.
async fn cleanable(watch: &Watch, workdir: &str, failure: Option<&Error>) -> bool {
    let Some(e) = failure else {
        return true;
    };
    match e.cause() {
        Error::TargetStopped { .. } => false,
        Error::PausedDuringCapture { container, .. } if watch.in_target() => {
            crate::note!(
                "{container} is paused; waiting up to {} s for it to be unpaused to remove {workdir} from it (devprof does not unpause it)",
                UNPAUSE_WAIT.as_secs()
            );
            if watch.until_unpaused(UNPAUSE_WAIT).await {
                return true;
            }
            crate::warn!(
                "left in {container}: {workdir} and the recorder started there (frozen with the container; \
                 it ends by itself once the container runs again, within seconds of when its window would have ended). \
                 After `docker unpause {container}`, remove the directory: `docker exec {container} rm -rf {workdir}`"
            );
            false
        }
        _ => true,
    }
}
