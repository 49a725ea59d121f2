//! What perf starts ahead of a capture's window, beside the container's and the process's
//! probes: each perf's version and the workdir (in the container's probe), the access
//! trial, and, where the capture says what it will record, the recorder itself (primed:
//! `perf record` with its events disabled, on the probe's standby shell), whose start then
//! stands for the trial. The window takes the primed recorder only if its own command line
//! is the very same.

use super::{
    check_access, likely_access, perf_candidates, version_and_trial, Asked, PerfEngine, PerfReady,
    PerfTool,
};
use crate::docker::probe::ContainerFacts;
use crate::docker::target::ProcInfo;
use crate::docker::{workdir, ContainerShell, Shell};
use crate::engines::{Engine, Reached, RecordJob, RecorderFacts};
use crate::error::Result;
use crate::runtime::{self, ProcessFacts, Runtime};
use crate::settings::CallGraph;
use crate::ui::Reporter;
use std::sync::Arc;
use std::time::Duration;

/// Longest perf's answers asked ahead may take (its trial counts for 0.1 s at most).
const AHEAD_LIMIT: Duration = Duration::from_secs(10);

/// Longest a capture waits for its primed recorder to be ready before it asks the trial
/// instead: well within the 5 s a primed recorder may wait to be taken.
const PRIMED_READY_LIMIT: Duration = Duration::from_secs(3);

/// perf's questions asked ahead, and the recorder to prime, if the capture says.
pub struct PerfAhead {
    pub primer: Option<Primer>,
}

/// The recorder a capture will start, for the probe's standby to start before the trial
/// answers (perf's start-up, 0.2-0.4 s on a loaded host, then runs beside the process's
/// probe and the trial instead of after them).
pub struct Primer {
    pub duration: Duration,
    pub frequency: u32,
    pub call_graph: CallGraph,
    /// Under auto, a process whose name says JVM or Python is left alone (another engine
    /// most likely records it).
    pub auto: bool,
    /// The recorder's exec command line around perf's, as the window will start it.
    pub wrap: Arc<dyn Fn(RecorderLine<'_>) -> Vec<String> + Send + Sync>,
    /// The lines the window's script prints: once perf opened its events, and once it is
    /// ready to be released.
    pub events_open: &'static str,
    pub ready: &'static str,
}

/// A recorder's command line as the window wraps it.
pub struct RecorderLine<'a> {
    pub argv: &'a [String],
    pub workdir: &'a str,
    pub duration: Duration,
    pub facts: RecorderFacts,
}

/// What perf asked ahead came to.
#[derive(Default)]
pub struct Started {
    pub workdir: Option<String>,
    pub asked: Option<Asked>,
}

impl PerfAhead {
    /// The process's probe, perf's answers and the workdir side by side; with a primer,
    /// the recorder started first, on the container probe's standby.
    pub async fn beside_process(
        &self,
        at: Reached<'_>,
        report: &Reporter,
    ) -> (Result<ProcessFacts>, Started) {
        let (shell, facts, process) = (at.shell, at.facts, at.process);
        let perf_here = !facts.perf_candidates.is_empty();
        let probed_workdir = facts.perf_ahead.workdir.as_deref().and_then(workdir::made);
        let primed = match (&self.primer, &probed_workdir) {
            (Some(primer), Some(workdir)) if perf_here => {
                prime_recorder(shell, primer, facts, process.pid, workdir, report).await
            }
            _ => false,
        };
        let asked = async {
            // Where the container has no perf, a perf capture fails in `prepare` (and auto
            // moves to a sidecar): nothing is made in it (the probe made no workdir either).
            if !perf_here {
                return (None, None);
            }
            let answer = self.answer(shell, facts, process, primed, report);
            let workdir = async {
                match &probed_workdir {
                    Some(made) => Some(made.clone()),
                    None => workdir::make(shell).await.ok(),
                }
            };
            tokio::join!(answer, workdir)
        };
        // Where perf records in the container and no recorder was started ahead, the
        // process's probe stays as a shell the recorder (as root) starts on.
        let probed = async {
            if perf_here && !primed {
                ProcessFacts::probe_standing_by(shell, process).await
            } else {
                ProcessFacts::probe(shell, process).await
            }
        };
        let (process_facts, (asked, workdir)) = tokio::join!(probed, asked);
        (process_facts, Started { workdir, asked })
    }

    /// perf's version and access trial. Bounded: an engine other than perf may be chosen
    /// once the probe is read, and must not wait on a perf that hangs; unanswered in time,
    /// `prepare` asks.
    async fn answer(
        &self,
        shell: &Shell,
        facts: &ContainerFacts,
        process: &ProcInfo,
        primed: bool,
        report: &Reporter,
    ) -> Option<Asked> {
        // A primed recorder that opened its events answers what the trial would, where
        // the trial could answer only that (`answered_by_recorder`): one exec and one
        // perf start less. Where it did not, the trial judges.
        let primer = self.primer.as_ref().filter(|_| primed);
        if let Some((primer, answered)) = primer.zip(answered_by_recorder(shell, facts)) {
            let printed = shell
                .standbys()
                .primed_ready(primer.ready, PRIMED_READY_LIMIT)
                .await;
            let events_open = printed.is_some_and(|printed| {
                printed
                    .split(|&b| b == b'\n')
                    .any(|line| line == primer.events_open.as_bytes())
            });
            if events_open {
                report.mark("recorder ready ahead, its access proven");
                return Some(answered);
            }
        }
        tokio::time::timeout(AHEAD_LIMIT, ask_ahead(shell, facts, process.pid))
            .await
            .ok()
            .flatten()
    }
}

/// Starts the recorder `primer` makes on the probe's standby, before the trial answers;
/// true when it started. Only where the probe answered perf's version.
async fn prime_recorder(
    shell: &Shell,
    primer: &Primer,
    facts: &ContainerFacts,
    pid: u32,
    workdir: &str,
    report: &Reporter,
) -> bool {
    let Some(argv) = primed_argv(primer, facts, pid, workdir) else {
        return false;
    };
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let primed = shell.standbys().prime(&argv).await;
    if primed {
        report.mark("recorder started ahead");
    }
    primed
}

/// The recorder's exec command line `primer` starts for the process `pid` in `workdir`,
/// with `perf` sampling what `facts` make likely; None where it starts none.
fn primed_argv(
    primer: &Primer,
    facts: &ContainerFacts,
    pid: u32,
    workdir: &str,
) -> Option<Vec<String>> {
    let perf = tool_ahead(facts)?;
    let process = facts.processes.iter().find(|p| p.pid == pid)?;
    let guess = runtime::of_program(process.program(), &Default::default());
    if primer.auto && matches!(guess, Runtime::Jvm | Runtime::Python) {
        return None;
    }
    let job = RecordJob {
        pid,
        workdir: workdir.to_string(),
        duration: primer.duration,
        frequency: primer.frequency,
        call_graph: primer.call_graph,
        ..Default::default()
    };
    let argv = likely_record_argv(perf, facts, &job);
    Some((primer.wrap)(RecorderLine {
        argv: &argv,
        workdir,
        duration: primer.duration,
        facts: PerfEngine::default().recorder_facts(),
    }))
}

/// perf's version and access trial for `pid`, asked of the perf tried first where the
/// container has one; None where it has none.
pub async fn ask_ahead(shell: &Shell, facts: &ContainerFacts, pid: u32) -> Option<Asked> {
    let first = perf_candidates(facts).into_iter().next()?;
    // Where the probe asked the version already, only the trial is left to ask.
    let answer = match tool_ahead(facts) {
        Some(perf) => check_access(shell, &perf.path, facts, pid)
            .await
            .map(|access| Some((perf, access))),
        None => version_and_trial(shell, &first, facts, pid).await,
    };
    Some(Asked {
        container: shell.container().to_string(),
        answer,
    })
}

/// What the access trial would answer where a recorder started ahead, sampling
/// `likely_access`'s event, opens its events on the process: only where the trial could
/// answer nothing else, with no PMU in sysfs naming cycles (where one does, the trial also
/// asks whether cycles count, and is asked). None where the recorder's start cannot
/// stand for the trial.
fn answered_by_recorder(shell: &Shell, facts: &ContainerFacts) -> Option<Asked> {
    if facts.pmu_cycles {
        return None;
    }
    Some(Asked {
        container: shell.container().to_string(),
        answer: Ok(Some((tool_ahead(facts)?, likely_access(facts)))),
    })
}

/// The perf tried first, as its answer to the version query a probe asked ahead read
/// (`ContainerFacts::probe_for_perf`); None where the probe did not ask or it did not
/// answer.
fn tool_ahead(facts: &ContainerFacts) -> Option<PerfTool> {
    let first = perf_candidates(facts).into_iter().next()?;
    let answer = facts.perf_ahead.version_answer(&first)?;
    PerfTool::from_build_options(&first, answer)
}

/// The command line of the perf CPU recorder `job` asks for, sampling what the trial most
/// likely answers (`likely_access`): the recorder a capture may start before the trial
/// answers, and takes only if its own command line is the same.
fn likely_record_argv(perf: PerfTool, facts: &ContainerFacts, job: &RecordJob) -> Vec<String> {
    let ready = PerfReady {
        perf,
        access: likely_access(facts),
    };
    PerfEngine::default().record_command(&ready, job).argv
}
