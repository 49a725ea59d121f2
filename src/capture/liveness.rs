//! Watching the target while a capture runs. A container that stops takes perf with it
//! (in exec mode perf runs inside it; a sidecar shares its pid namespace), and a Docker
//! exec stream into a container that went away may never end; so every phase that waits
//! on the target also waits on this watch, and a stopped target ends the wait with a
//! message that says so, never with a guess about privileges.

use crate::docker::target::ContainerInfo;
use crate::docker::{ContainerShell, Docker, Shell};
use crate::error::{Error, Result};
use std::future::Future;
use std::time::{Duration, Instant};

/// How often the container's state is asked for when the engine cannot be asked to say
/// when it stops (it broke off the wait).
const POLL: Duration = Duration::from_secs(1);
/// How often it is asked for while the engine's wait is open: for a connection that dies
/// without an error (a proxy dropping an idle TCP or ssh stream). An inspect costs the
/// engine about 2.6 ms.
const BACKSTOP_POLL: Duration = Duration::from_secs(30);
/// How often the process is checked, for a recorder that does not end when its target
/// does. Each check is an exec in the container, which costs the engine about 75 ms of CPU
/// (measured on the test VM): every 2 s, that was 4% of a core taken from the node.
pub const PROCESS_CHECK: Duration = Duration::from_secs(10);
/// How often it is checked for a recorder that ends when its target exits (perf record
/// -p): such a recorder also follows the children the target forks, and goes on while
/// one outlives it; the check then ends the window within a minute.
pub const PROCESS_CHECK_FOLLOWED: Duration = Duration::from_secs(60);
/// Longest one liveness check of the process may take (an exec into a dying container
/// may hang).
const CHECK_LIMIT: Duration = Duration::from_secs(3);
/// How long the engine may take to report a container stopped after its processes died.
const SETTLE: Duration = Duration::from_secs(3);

/// How the target stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The container stopped or was removed: everything in it, perf included, is gone.
    Container {
        exit_code: Option<i64>,
        at: Duration,
    },
    /// The process exited while its container runs on: what perf recorded can be kept.
    Process { at: Duration },
    /// The container was paused (`docker pause`): every process in it is frozen, and the
    /// engine runs nothing in it until it is unpaused.
    Paused { at: Duration },
}

/// The target container and process, watched through the Docker API and `shell` (the
/// container itself, or the sidecar that shares its pid namespace).
pub struct Watch {
    docker: Docker,
    container: ContainerInfo,
    shell: Shell,
    pid: u32,
    /// The recorder runs in the target container itself (exec mode): it is frozen when the
    /// container is paused, and the container's shell then runs nothing.
    in_target: bool,
}

impl Watch {
    /// `in_target`: `shell` is the target container itself, not a sidecar beside it.
    pub fn new(container: &ContainerInfo, shell: &Shell, pid: u32, in_target: bool) -> Self {
        Watch {
            docker: shell.docker().clone(),
            container: container.clone(),
            shell: shell.clone(),
            pid,
            in_target,
        }
    }

    /// A watch over the container alone, for the set-up, before a process is chosen.
    pub fn over_container(container: &ContainerInfo, shell: &Shell) -> Self {
        Watch::new(container, shell, 0, false)
    }

    /// Waits until the container stops or is removed (a pause does not count: a set-up
    /// step's own deadline bounds it).
    pub async fn until_container_gone(&self, started: Instant) -> Stop {
        self.until_container_stops(started, false).await
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The target container (also in sidecar mode, where the shell is the sidecar's).
    pub fn container(&self) -> &ContainerInfo {
        &self.container
    }

    /// Whether the recorder runs in the target container (exec mode).
    pub fn in_target(&self) -> bool {
        self.in_target
    }

    /// `Some` when the container is not running now, or is paused. Errors of the API
    /// itself count as running: the deadlines still bound the wait.
    pub async fn container_stopped(&self, started: Instant) -> Option<Stop> {
        match tokio::time::timeout(CHECK_LIMIT, self.docker.container_state(&self.container.id))
            .await
        {
            Ok(Ok(state)) if !state.running => Some(Stop::Container {
                exit_code: state.exit_code,
                at: started.elapsed(),
            }),
            Ok(Ok(state)) if state.paused => Some(Stop::Paused {
                at: started.elapsed(),
            }),
            _ => None,
        }
    }

    /// Whether the container is paused now (unknown counts as not).
    pub async fn paused(&self) -> bool {
        matches!(
            tokio::time::timeout(CHECK_LIMIT, self.docker.container_state(&self.container.id)).await,
            Ok(Ok(state)) if state.running && state.paused
        )
    }

    /// After a capture ended by a pause: waits up to `limit` for the container to be
    /// unpaused (devprof never unpauses what someone else paused). True when it was.
    pub async fn until_unpaused(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            if !self.paused().await {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Whether the process still exists (unknown counts as alive).
    pub async fn process_alive(&self) -> bool {
        let dir = format!("/proc/{}", self.pid);
        match tokio::time::timeout(CHECK_LIMIT, self.shell.run(&["test", "-d", &dir])).await {
            Ok(Ok(out)) => out.exit_code != Some(1),
            _ => true,
        }
    }

    /// After the window: waits until the container stops, or is paused while the work left
    /// (perf script, clean-up) runs in it (exec mode). A sidecar works on in a paused target.
    pub async fn until_unusable(&self, started: Instant) -> Stop {
        if self.in_target {
            self.until_stopped(started, None).await
        } else {
            self.until_container_stops(started, false).await
        }
    }

    /// Waits until the container stops or is paused, or (with `process_check`, how often to
    /// look) the process exits.
    pub async fn until_stopped(&self, started: Instant, process_check: Option<Duration>) -> Stop {
        let process_exit = async {
            let Some(every) = process_check else {
                return std::future::pending().await;
            };
            loop {
                tokio::time::sleep(every).await;
                if !self.process_alive().await {
                    // The container may have stopped between the two questions.
                    return self
                        .container_stopped(started)
                        .await
                        .unwrap_or(Stop::Process {
                            at: started.elapsed(),
                        });
                }
            }
        };
        tokio::select! {
            stop = self.until_container_stops(started, true) => stop,
            stop = process_exit => stop,
        }
    }

    /// The engine is asked to answer when the container stops (and, with `pause`, when it
    /// is paused: a paused container still counts as running), so the window costs it
    /// nothing; its state is also polled: once soon (a pause before the engine listened),
    /// then slowly while the waits are open, every second once the engine broke one off.
    async fn until_container_stops(&self, started: Instant, pause: bool) -> Stop {
        let waited = self.docker.wait_not_running(&self.container.id);
        tokio::pin!(waited);
        let paused = self.docker.wait_paused(&self.container.id);
        tokio::pin!(paused);
        let mut waiting = true;
        let mut watching_pause = pause;
        let mut poll = POLL;
        loop {
            tokio::select! {
                answer = &mut waited, if waiting => match answer {
                    Ok(exit_code) => {
                        return Stop::Container {
                            exit_code,
                            at: started.elapsed(),
                        }
                    }
                    Err(_) => waiting = false,
                },
                answer = &mut paused, if watching_pause => match answer {
                    Ok(()) => return Stop::Paused { at: started.elapsed() },
                    Err(_) => watching_pause = false,
                },
                _ = tokio::time::sleep(poll) => {
                    match self.container_stopped(started).await {
                        Some(Stop::Paused { .. }) if !pause => {}
                        Some(stop) => return stop,
                        None => {}
                    }
                }
            }
            poll = if waiting && (watching_pause || !pause) {
                BACKSTOP_POLL
            } else {
                POLL
            };
        }
    }

    /// After a command in the target ended badly: whether it was because the container
    /// stopped (the engine reports that a moment after the processes died).
    pub async fn settle(&self, started: Instant) -> Option<Stop> {
        let until = Instant::now() + SETTLE;
        loop {
            if let Some(stop) = self.container_stopped(started).await {
                return Some(stop);
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// After a recorder that follows the process ended before the window's end: whether
    /// the process is gone, or the error for the stop of its whole container (a sidecar's
    /// perf ends cleanly as its target dies, before the engine reports the stop).
    pub async fn process_gone(&self, started: Instant) -> Result<bool> {
        if self.process_alive().await {
            return Ok(false);
        }
        match self.settle(started).await {
            Some(Stop::Container { exit_code, at }) => Err(self.stopped_error(exit_code, at)),
            _ => Ok(true),
        }
    }

    /// After a step in the target failed: the target's stop (or, with the recorder in
    /// it, its pause) when that is why, else `failure` as it is.
    pub async fn explain(&self, started: Instant, failure: Error, step: &str) -> Error {
        match self.settle(started).await {
            Some(stop @ Stop::Container { .. }) => self.stop_error(stop, step),
            Some(stop @ Stop::Paused { .. }) if self.in_target => self.stop_error(stop, step),
            _ => failure,
        }
    }

    /// The error for a container that stopped during the window (perf with it).
    pub fn stopped_error(&self, exit_code: Option<i64>, at: Duration) -> Error {
        Error::TargetStopped {
            container: self.container.name.clone(),
            exit_code,
            at_secs: at.as_secs(),
            step: "capture".into(),
            lost: true,
        }
    }

    /// The error for a container paused during `step`.
    pub fn paused_error(&self, at: Duration, step: &str) -> Error {
        Error::PausedDuringCapture {
            container: self.container.name.clone(),
            at_secs: at.as_secs(),
            step: step.to_string(),
        }
    }

    /// The error for how the target stopped after the window, while `step` ran (what
    /// reached the host by then is the caller's to keep).
    pub fn stop_error(&self, stop: Stop, step: &str) -> Error {
        match stop {
            Stop::Container { exit_code, at } => Error::TargetStopped {
                container: self.container.name.clone(),
                exit_code,
                at_secs: at.as_secs(),
                step: step.to_string(),
                lost: false,
            },
            Stop::Paused { at } => self.paused_error(at, step),
            Stop::Process { .. } => Error::Interrupted,
        }
    }
}

/// Longest a capture's set-up may take (finding the process, a sidecar started and its
/// rights climbed, the engine checked): each step is short; this bounds an engine or an
/// exec that stops answering.
pub const SET_UP_LIMIT: Duration = Duration::from_secs(180);

/// Runs a step of the set-up raced against the target container stopping (an exec into a
/// container that went away, or into a sidecar the engine removed with it, may never
/// end), under `SET_UP_LIMIT`. A stop is reported as the target stopping, by its name.
pub async fn set_up<T>(watch: &Watch, work: impl Future<Output = Result<T>>) -> Result<T> {
    let started = Instant::now();
    let name = watch.container().name.clone();
    tokio::select! {
        result = within(SET_UP_LIMIT, &name, "set-up", work) => result,
        stop = watch.until_container_gone(started) => Err(watch.stop_error(stop, "set-up")),
    }
}

/// How long bringing a capture home (copy-out, `perf script` streamed through the folder)
/// may take for a window of `window`: the data grows with the window, so does the limit.
/// Generous: it is there for a stream that hangs, not to hurry a big capture.
pub fn collect_limit(window: Duration) -> Duration {
    Duration::from_secs(300) + window * 10
}

/// Runs `step` with a deadline: past `limit` it is dropped (which ends its Docker streams)
/// and the error names the step, the container and the limit.
pub async fn within<T>(
    limit: Duration,
    container: &str,
    step: &str,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(Error::PerfFailed {
            container: container.to_string(),
            step: step.to_string(),
            detail: format!(
                "gave up after {} s (devprof's limit for this step); the container or the Docker engine stopped answering — check `docker ps` and the engine's log, then run again",
                limit.as_secs()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_that_never_ends_is_given_up_at_its_limit_naming_it() {
        let started = Instant::now();
        let never = std::future::pending::<Result<()>>();
        let err = within(Duration::from_millis(200), "demo-seq", "perf script", never)
            .await
            .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        let text = err.to_string();
        assert!(
            text.contains("demo-seq")
                && text.contains("perf script")
                && text.contains("gave up after 0 s"),
            "{text}"
        );
        let done = within(Duration::from_secs(5), "c", "s", async { Ok(7) })
            .await
            .unwrap();
        assert_eq!(done, 7);
    }

    #[test]
    fn the_collect_limit_grows_with_the_window() {
        assert_eq!(
            collect_limit(Duration::from_secs(0)),
            Duration::from_secs(300)
        );
        assert_eq!(
            collect_limit(Duration::from_secs(60)),
            Duration::from_secs(900)
        );
    }
}
