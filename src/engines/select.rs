//! Which engine records a process, chosen in this one place: from the settings' engine
//! spec and what was found about the process (its runtime, async-profiler's presence, what
//! perf answered ahead), one engine value (`AnyEngine`), with the one that stands in for it
//! when it is not available. What each engine starts ahead of the window is asked here
//! too (`Ahead`). Adding an engine: its folder, a variant of `settings::EngineSpec`, and
//! one arm in `select` and in `AnyEngine`.

use super::asprof::{release, AsprofEngine, AsprofMode, AsprofSource};
use super::perf::{self, PerfEngine};
use super::pprof::{PprofEngine, PprofKind};
use super::pyspy::PySpyEngine;
use super::{
    CollectJob, Collected, Engine, InWorkdir, Reach, Reached, RecordCommand, RecordJob, Tool,
};
use crate::docker::probe::ContainerFacts;
use crate::docker::target::ProcInfo;
use crate::docker::Shell;
use crate::error::{Error, Result};
use crate::runtime::{jvm, python_perf_trampolines, ProcessFacts, Runtime};
use crate::settings::{AsprofOptions, CallGraph, CaptureMode, EngineSpec, PythonOptions};
use crate::ui::Reporter;
use std::time::Duration;

pub use super::perf::ahead::{Primer, RecorderLine};
pub use super::perf::face::{
    bring_home, failure, go_resolver, is_mlock_error, record_report, EventsRecording, GoResolver,
    PerfReady, RecordReport, FOLDING_STARTED,
};
pub use super::perf::NATIVE_FOLD;

/// What the doctor, the compose override and the image check ask of the engines' tools
/// directly: which perf runs in a container, how its version and trial read, and where
/// async-profiler is.
pub mod diagnosis {
    pub use crate::engines::asprof::cpu_event;
    pub use crate::engines::asprof::release::{
        find_in_container as find_asprof, ignored_home_note,
    };
    pub use crate::engines::perf::{
        diagnose_denial, find_perf, major_minor, parse_stat_csv, EventStatus, PerfTool,
    };
}

/// What a capture asks of the container beside its probes, for the engine that will most
/// likely record: execs that would otherwise come one after another.
pub enum Ahead {
    Nothing,
    Perf(perf::ahead::PerfAhead),
}

impl Ahead {
    /// What `spec` asks ahead where the recorder runs as `mode` allows: perf's version,
    /// access trial and workdir (with `primer`, its recorder too) where perf most likely
    /// records in the container itself.
    pub fn for_spec(spec: &EngineSpec, mode: CaptureMode, primer: Option<Primer>) -> Ahead {
        match (spec, mode) {
            (_, CaptureMode::Sidecar) => Ahead::Nothing,
            (EngineSpec::Auto { .. } | EngineSpec::Perf, _) => {
                Ahead::Perf(perf::ahead::PerfAhead { primer })
            }
            _ => Ahead::Nothing,
        }
    }

    /// The container's probe, with what this asks ahead in the same exec.
    pub async fn probe(&self, shell: &Shell) -> Result<ContainerFacts> {
        match self {
            Ahead::Nothing => ContainerFacts::probe(shell).await,
            Ahead::Perf(_) => ContainerFacts::probe_for_perf(shell).await,
        }
    }

    /// The process's probe, with the engine's questions (and its recorder) beside it.
    pub async fn beside_process(
        &self,
        at: Reached<'_>,
        report: &Reporter,
    ) -> (Result<ProcessFacts>, Started) {
        match self {
            Ahead::Nothing => (
                ProcessFacts::probe(at.shell, at.process).await,
                Started::default(),
            ),
            Ahead::Perf(ahead) => {
                let (facts, started) = ahead.beside_process(at, report).await;
                let started = Started {
                    workdir: started.workdir,
                    asked: Asked(started.asked),
                };
                (facts, started)
            }
        }
    }
}

/// What came of asking ahead: the workdir made (as its maker printed it), and the answers
/// only the engine reads.
#[derive(Default)]
pub struct Started {
    pub workdir: Option<String>,
    pub asked: Asked,
}

/// The engine's answers asked ahead, for the engine chosen for the process.
#[derive(Default)]
pub struct Asked(Option<perf::Asked>);

/// The process an engine is chosen for, as `locate` found it.
pub struct Subject<'a> {
    pub shell: &'a Shell,
    pub container: &'a str,
    pub process: &'a ProcInfo,
    pub facts: &'a ProcessFacts,
    pub runtime: Runtime,
    pub mode: CaptureMode,
    /// The window (a pprof CPU profile is asked for its length).
    pub window: Duration,
}

/// An engine, and the one that stands in for it when it is not available.
pub struct Chain {
    pub first: AnyEngine,
    pub then: Option<Fallback>,
}

/// The engine of a chain's second step (or why it cannot record either), and why it may
/// stand in.
pub struct Fallback {
    pub engine: Result<AnyEngine>,
    pub because: &'static str,
}

/// The engine `spec` asks for on `subject`, and its stand-in.
pub async fn select(spec: &EngineSpec, subject: &Subject<'_>, asked: Asked) -> Result<Chain> {
    let alone = |first| Chain { first, then: None };
    match spec {
        EngineSpec::Pprof { url } => Ok(alone(pprof_cpu(subject, url.as_deref())?)),
        EngineSpec::Asprof(_) if subject.runtime != Runtime::Jvm => Err(Error::Usage(format!(
            "--engine asprof records JVMs only: pid {} ({}) in '{}' is a {} process; use --engine perf (or auto)",
            subject.process.pid,
            subject.process.cmdline,
            subject.container,
            subject.runtime.name()
        ))),
        EngineSpec::Asprof(options) => match asprof_source(options, subject).await {
            Some(source) => Ok(alone(asprof(source, options, subject)?)),
            None => Err(Error::AsprofMissing {
                container: subject.container.to_string(),
            }),
        },
        EngineSpec::Auto { jvm, .. } if subject.runtime == Runtime::Jvm => {
            match asprof_source(jvm, subject).await {
                Some(source) => Ok(alone(asprof(source, jvm, subject)?)),
                None => Ok(alone(perf_for(jvm, subject.container, subject.runtime, asked)?)),
            }
        }
        EngineSpec::Auto { python, jvm } if subject.runtime == Runtime::Python => {
            let perf_names_python =
                python_perf_trampolines(&subject.process.cmdline, subject.facts);
            Ok(python_chain(*python, jvm, subject, true, perf_names_python))
        }
        EngineSpec::Auto { jvm, .. } => Ok(alone(perf_for(
            jvm,
            subject.container,
            subject.runtime,
            asked,
        )?)),
        EngineSpec::PySpy(python) => Ok(python_chain(
            *python,
            &AsprofOptions::default(),
            subject,
            false,
            false,
        )),
        EngineSpec::Perf => Ok(alone(perf_for(
            &AsprofOptions::default(),
            subject.container,
            subject.runtime,
            asked,
        )?)),
    }
}

/// perf, with what it answered ahead: the engine the recipes that record with perf
/// alone (off-CPU events, counters) place; they record through `PerfReady`'s face.
pub fn perf(asked: Asked) -> impl Engine<Ready = PerfReady> {
    perf_engine(asked)
}

fn perf_engine(asked: Asked) -> PerfEngine {
    PerfEngine::answered(asked.0)
}

/// A Python capture's engines: py-spy, then perf only under auto, and only where perf
/// names Python frames too (Python 3.12+ with its perf trampolines).
fn python_chain(
    python: PythonOptions,
    jvm: &AsprofOptions,
    subject: &Subject<'_>,
    auto: bool,
    perf_names_python: bool,
) -> Chain {
    python_engines(
        python,
        jvm,
        (subject.container, subject.runtime),
        auto && perf_names_python,
    )
}

/// py-spy, then perf where `perf_stands_in` (its errors naming `container` of `runtime`).
fn python_engines(
    python: PythonOptions,
    jvm: &AsprofOptions,
    (container, runtime): (&str, Runtime),
    perf_stands_in: bool,
) -> Chain {
    Chain {
        first: AnyEngine::PySpy(PySpyEngine::from(python)),
        then: perf_stands_in.then(|| Fallback {
            engine: perf_for(jvm, container, runtime, Asked::default()),
            because:
                "the process runs with Python's perf trampolines (-X perf / PYTHONPERFSUPPORT), \
                      which name its frames for perf too",
        }),
    }
}

/// perf, which records every runtime but cannot honour async-profiler's own flags.
fn perf_for(
    jvm: &AsprofOptions,
    container: &str,
    runtime: Runtime,
    asked: Asked,
) -> Result<AnyEngine> {
    if let Some(flag) = jvm.needs_asprof() {
        return Err(Error::Usage(format!(
            "{flag} needs async-profiler, which records JVMs only and was not found for '{container}' (a {} process)",
            runtime.name()
        )));
    }
    Ok(AnyEngine::Perf(perf_engine(asked)))
}

/// Where async-profiler comes from for this JVM: the release given with --asprof, else
/// one found in the container (None: neither).
async fn asprof_source(options: &AsprofOptions, subject: &Subject<'_>) -> Option<AsprofSource> {
    if let Some(dir) = &options.dir {
        return Some(AsprofSource::Host(dir.clone()));
    }
    let found = release::find_in_container(subject.shell).await;
    let named = subject.facts.env("ASYNC_PROFILER_HOME");
    if let Some(note) = release::ignored_home_note(named, found.as_deref()) {
        crate::note!("{note}");
    }
    found.map(AsprofSource::Container)
}

fn asprof(
    source: AsprofSource,
    options: &AsprofOptions,
    subject: &Subject<'_>,
) -> Result<AnyEngine> {
    if subject.mode == CaptureMode::Sidecar {
        return Err(Error::Usage(
            "async-profiler runs inside the JVM's container (the JVM loads its agent from there): \
             use --mode exec or auto with --engine asprof, or --engine perf in a sidecar"
                .into(),
        ));
    }
    Ok(AnyEngine::Asprof(AsprofEngine {
        source,
        mode: if options.wall {
            AsprofMode::Wall
        } else {
            AsprofMode::Cpu
        },
        jvm: jvm::options(subject.facts, &subject.process.cmdline),
        process: subject.facts.clone(),
        html: options.html,
    }))
}

/// `--engine pprof`: the Go runtime's own CPU profile from the service's endpoint.
fn pprof_cpu(subject: &Subject<'_>, url: Option<&str>) -> Result<AnyEngine> {
    if subject.runtime != Runtime::Go {
        return Err(Error::Usage(format!(
            "--engine pprof reads a Go program's net/http/pprof endpoint: pid {} ({}) in '{}' is a {} process; use --engine auto",
            subject.process.pid,
            subject.process.cmdline,
            subject.container,
            subject.runtime.name()
        )));
    }
    Ok(AnyEngine::Pprof(PprofEngine {
        kind: PprofKind::Cpu {
            seconds: subject.window.as_secs().max(1),
        },
        url: url.map(str::to_string),
        container: subject.container.to_string(),
    }))
}

/// A Go program's heap profile from its endpoint (`url`, or found).
pub fn go_heap(container: &str, allocated: bool, url: Option<String>) -> AnyEngine {
    AnyEngine::Pprof(PprofEngine {
        kind: PprofKind::Heap { allocated },
        url,
        container: container.to_string(),
    })
}

/// One engine, whichever was chosen.
pub enum AnyEngine {
    Perf(PerfEngine),
    PySpy(PySpyEngine),
    Asprof(AsprofEngine),
    Pprof(PprofEngine),
}

/// What the chosen engine's `prepare` found.
pub enum AnyReady {
    Perf(PerfReady),
    PySpy(<PySpyEngine as Engine>::Ready),
    Asprof(<AsprofEngine as Engine>::Ready),
    Pprof(<PprofEngine as Engine>::Ready),
}

/// Runs `$body` with the engine as `$e` and, given a ready, its own ready as `$r`.
macro_rules! each {
    ($self:expr, |$e:ident| $body:expr) => {
        match $self {
            AnyEngine::Perf($e) => $body,
            AnyEngine::PySpy($e) => $body,
            AnyEngine::Asprof($e) => $body,
            AnyEngine::Pprof($e) => $body,
        }
    };
    ($self:expr, $ready:expr, |$e:ident, $r:ident| $body:expr) => {
        match ($self, $ready) {
            (AnyEngine::Perf($e), AnyReady::Perf($r)) => $body,
            (AnyEngine::PySpy($e), AnyReady::PySpy($r)) => $body,
            (AnyEngine::Asprof($e), AnyReady::Asprof($r)) => $body,
            (AnyEngine::Pprof($e), AnyReady::Pprof($r)) => $body,
            _ => unreachable!("a ready is its own engine's"),
        }
    };
}

impl Engine for AnyEngine {
    type Ready = AnyReady;

    fn name(&self) -> &'static str {
        each!(self, |e| e.name())
    }

    async fn prepare<'a>(&'a self, at: Reached<'a>) -> Result<AnyReady> {
        match self {
            AnyEngine::Perf(e) => e.prepare(at).await.map(AnyReady::Perf),
            AnyEngine::PySpy(e) => e.prepare(at).await.map(AnyReady::PySpy),
            AnyEngine::Asprof(e) => e.prepare(at).await.map(AnyReady::Asprof),
            AnyEngine::Pprof(e) => e.prepare(at).await.map(AnyReady::Pprof),
        }
    }

    fn reach(&self) -> Reach {
        each!(self, |e| e.reach())
    }

    fn recorder_stops_itself(&self) -> bool {
        each!(self, |e| e.recorder_stops_itself())
    }

    fn frequency(&self, ready: &AnyReady, requested: u32) -> u32 {
        each!(self, ready, |e, r| e.frequency(r, requested))
    }

    fn sidecar_minimum(&self) -> Option<(&'static [&'static str], &'static str)> {
        each!(self, |e| e.sidecar_minimum())
    }

    fn recorder_ends_with_target(&self) -> bool {
        each!(self, |e| e.recorder_ends_with_target())
    }

    fn recorder_enables_on_release(&self) -> bool {
        each!(self, |e| e.recorder_enables_on_release())
    }

    fn reads_perf_maps(&self) -> bool {
        each!(self, |e| e.reads_perf_maps())
    }

    async fn stage<'a>(&'a self, at: InWorkdir<'a, AnyReady>) -> Result<()> {
        each!(self, at.ready, |e, r| e.stage(at.with(r)).await)
    }

    async fn finish<'a>(&'a self, at: InWorkdir<'a, AnyReady>) {
        each!(self, at.ready, |e, r| e.finish(at.with(r)).await)
    }

    fn broken_stacks_advice(
        &self,
        runtime: Runtime,
        call_graph: CallGraph,
    ) -> Option<(String, String)> {
        each!(self, |e| e.broken_stacks_advice(runtime, call_graph))
    }

    fn tool(&self, ready: &AnyReady) -> Tool {
        each!(self, ready, |e, r| e.tool(r))
    }

    fn event(&self, ready: &AnyReady) -> String {
        each!(self, ready, |e, r| e.event(r))
    }

    fn notes(&self, ready: &AnyReady) -> Vec<String> {
        each!(self, ready, |e, r| e.notes(r))
    }

    fn record_command(&self, ready: &AnyReady, job: &RecordJob) -> RecordCommand {
        each!(self, ready, |e, r| e.record_command(r, job))
    }

    fn command_record(&self, ready: &AnyReady, job: &RecordJob) -> Option<Vec<String>> {
        each!(self, ready, |e, r| e.command_record(r, job))
    }

    async fn collect<'a>(
        &'a self,
        ready: &'a AnyReady,
        job: &'a CollectJob<'a>,
    ) -> Result<Collected> {
        each!(self, ready, |e, r| e.collect(r, job).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_follows_py_spy_only_under_auto_where_perf_names_python() {
        let chain = |perf_stands_in| {
            let c = python_engines(
                PythonOptions::default(),
                &AsprofOptions::default(),
                ("c", Runtime::Python),
                perf_stands_in,
            );
            let then = c.then.map(|t| t.engine.map_or("error", |e| e.name()));
            (c.first.name(), then)
        };
        assert_eq!(chain(true), ("py-spy", Some("perf")));
        // Named, or where perf cannot name Python frames, py-spy alone records.
        assert_eq!(chain(false), ("py-spy", None));
        // The flags only async-profiler honours keep perf from standing in.
        let wall = AsprofOptions {
            wall: true,
            ..Default::default()
        };
        let c = python_engines(
            PythonOptions::default(),
            &wall,
            ("c", Runtime::Python),
            true,
        );
        assert!(c.then.unwrap().engine.is_err());
    }
}
