//! What a capture is given besides its settings, built once by its command (or by the
//! session, once per capture) and passed down explicitly: the endpoint it talks to, the
//! marker rules, its seat in a session, the reporter, and Ctrl-C. Nothing a capture needs
//! travels in a global or a task-local.

use super::gate::Seat;
use crate::docker::Docker;
use crate::error::{Error, Result};
use crate::profile::markers::MarkPlan;
use crate::signals::Interrupts;
use crate::ui::Reporter;
use std::sync::Arc;

/// One capture's inputs beside its settings.
pub struct CaptureCtx {
    /// The docker context of the capture's endpoint (`TARGET@CONTEXT` in a session); None:
    /// the endpoint the environment names.
    pub endpoint: Option<String>,
    /// The rules that turn the target's log lines into markers; None: no log is followed.
    pub marks: Option<Arc<MarkPlan>>,
    /// Its place in a `devprof profile` session, if it runs in one.
    pub seat: Option<Seat>,
    pub report: Reporter,
    pub interrupts: Interrupts,
    /// A failure injected at one step of the lifecycle (debug builds, for the tests that
    /// prove each step leaves the container clean).
    pub fault: Option<Step>,
    /// A point of the set-up to pause at (debug builds, for the tests that stop the target
    /// or press Ctrl-C at each point).
    pub pause: Option<String>,
}

/// The points of a capture's set-up a test may pause at (`DEVPROF_TEST_PAUSE=<point>`):
/// in a sidecar, after it is created, started, its first exec (the probe), the process
/// chosen, the engine checked; in the target itself, after the probe, the process chosen,
/// the engine checked.
pub const PAUSE_POINTS: [&str; 8] = [
    "sidecar:created",
    "sidecar:started",
    "sidecar:probed",
    "sidecar:process",
    "sidecar:engine",
    "exec:probed",
    "exec:process",
    "exec:engine",
];

/// The variable a test sets to pause at one point of the set-up.
pub const PAUSE_VARIABLE: &str = "DEVPROF_TEST_PAUSE";

/// How long a pause lasts (a Ctrl-C ends it sooner): long enough for a test to act.
const PAUSE: std::time::Duration = std::time::Duration::from_secs(4);

/// The point `DEVPROF_TEST_PAUSE` names, in a debug build; None otherwise.
fn pause_from_environment() -> Option<String> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var(PAUSE_VARIABLE)
        .ok()
        .filter(|p| PAUSE_POINTS.contains(&p.trim()))
}

/// The steps of a capture's lifecycle, in order (`capture::lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Locate,
    Place,
    Workdir,
    Window,
    Analysis,
}

impl Step {
    pub const ALL: [Step; 5] = [
        Step::Locate,
        Step::Place,
        Step::Workdir,
        Step::Window,
        Step::Analysis,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Locate => "locate",
            Step::Place => "place",
            Step::Workdir => "workdir",
            Step::Window => "window",
            Step::Analysis => "analysis",
        }
    }

    fn parse(text: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == text)
    }
}

/// The variable a test sets to make one step fail (`DEVPROF_TEST_FAULT=window`). Read only
/// by debug builds: a release binary never fails on purpose.
pub const FAULT_VARIABLE: &str = "DEVPROF_TEST_FAULT";

/// The step `DEVPROF_TEST_FAULT` names, in a debug build; None otherwise.
pub fn fault_from_environment() -> Option<Step> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var(FAULT_VARIABLE)
        .ok()
        .and_then(|v| Step::parse(v.trim()))
}

impl CaptureCtx {
    /// A capture alone: the environment's endpoint, no session.
    pub fn new(report: Reporter, interrupts: Interrupts, marks: Option<MarkPlan>) -> Self {
        CaptureCtx {
            endpoint: None,
            marks: marks.map(Arc::new),
            seat: None,
            report,
            interrupts,
            fault: fault_from_environment(),
            pause: pause_from_environment(),
        }
    }

    /// Pauses here when a test asked for this point: says so on stderr, then waits a few
    /// seconds or until Ctrl-C (which the next check then sees).
    pub async fn pause_point(&self, point: &'static str) {
        if self.pause.as_deref() != Some(point) {
            return;
        }
        crate::say!("devprof-test: paused at {point}");
        let mut interrupts = self.interrupts.clone();
        tokio::select! {
            _ = tokio::time::sleep(PAUSE) => {}
            _ = interrupts.next() => {}
        }
    }

    /// Connects to the capture's endpoint.
    pub async fn connect(&self) -> Result<Docker> {
        Docker::connect_to(self.endpoint.as_deref()).await
    }

    /// The session this capture belongs to, for its manifest.
    pub fn session_name(&self) -> Option<String> {
        self.seat.as_ref().map(|s| s.session.clone())
    }

    /// Fails here when a test asked this step to fail.
    pub fn step(&self, step: Step) -> Result<()> {
        match self.fault {
            Some(fault) if fault == step => Err(Error::Injected { step: step.name() }),
            _ => Ok(()),
        }
    }

    /// Ends the capture now when Ctrl-C came before anything was made for it.
    pub fn not_interrupted(&self) -> Result<()> {
        if self.interrupts.pending() {
            return Err(Error::Interrupted);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_names_one_step_of_the_lifecycle() {
        for step in Step::ALL {
            assert_eq!(Step::parse(step.name()), Some(step));
        }
        assert_eq!(Step::parse("teardown"), None);
        assert_eq!(Step::parse(""), None);
    }
}
