//! Profiler engines. An engine says three things about one way of profiling a process:
//! whether it can record the process from a given shell (inside the target container, or
//! in a sidecar that shares its pid namespace), the command that records it for a window,
//! and how to turn what that command wrote into folded stacks. Everything around that —
//! finding the target, the sidecar's privileges, the window with its progress bar, Ctrl-C,
//! clean-up, the store — is the capture session's (`capture`), the same for every engine.
//!
//! Adding an engine is a new module here implementing `Engine`, a variant of
//! `settings::EngineSpec` carrying its options, and one arm in `select` (which chooses the
//! engine, in one place, as one `AnyEngine` value). An engine that reads what the process
//! serves rather than the process itself (Go's pprof endpoint) says so with
//! `Reach::Network`: the capture then places it beside the target on its network, with no
//! added rights.

mod asprof;
mod perf;
mod pprof;
mod pyspy;
pub mod select;

pub use select::{
    diagnosis, select, Ahead, AnyEngine, AnyReady, Asked, Chain, Fallback, Primer, RecorderLine,
    Started, Subject, NATIVE_FOLD,
};

use crate::docker::probe::ContainerFacts;
use crate::docker::target::ProcInfo;
use crate::docker::{ExecOutput, Shell};
use crate::error::Result;
use crate::profile::folded::Folded;
use crate::runtime::ProcessFacts;
use crate::store::Stem;
use crate::ui::Reporter;
use std::future::Future;
use std::time::Duration;

/// What a capture asks an engine to record.
#[derive(Clone, Default)]
pub struct RecordJob {
    pub pid: u32,
    /// A private directory for the engine's output, in the filesystem of the shell that
    /// runs the command (the target container, or the sidecar).
    pub workdir: String,
    pub duration: Duration,
    /// Samples per second.
    pub frequency: u32,
    pub call_graph: crate::settings::CallGraph,
    /// What /proc says about the process (its user, for engines that must run as it).
    pub process: ProcessFacts,
    /// The store's symbol cache of the target's container (what an engine may read while
    /// the window runs goes there).
    pub symbol_cache: Option<std::path::PathBuf>,
    pub report: Reporter,
}

/// Where an engine is asked whether it may record: the shell it would record from (the
/// target container's, or a sidecar's), what that shell's probe found, and the process.
#[derive(Clone, Copy)]
pub struct Reached<'a> {
    pub shell: &'a Shell,
    pub facts: &'a ContainerFacts,
    pub process: &'a ProcInfo,
}

/// What an engine is given in the capture's workdir, before the window (`stage`) and
/// after it (`finish`): what its `prepare` found, the shell it records from, the job.
pub struct InWorkdir<'a, R> {
    pub ready: &'a R,
    pub shell: &'a Shell,
    pub job: &'a RecordJob,
}

impl<R> Clone for InWorkdir<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for InWorkdir<'_, R> {}

impl<'a, R> InWorkdir<'a, R> {
    /// The same, with another engine's ready (an engine that delegates to another).
    pub fn with<T>(self, ready: &'a T) -> InWorkdir<'a, T> {
        InWorkdir {
            ready,
            shell: self.shell,
            job: self.job,
        }
    }
}

/// The recording command and the user it runs as (None: root).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordCommand {
    pub argv: Vec<String>,
    pub user: Option<String>,
}

/// What the recording command left behind, for `collect`.
pub struct CollectJob<'a> {
    pub shell: &'a Shell,
    /// The target's container (its id): its files are copied out of it, also when `shell`
    /// is a sidecar's.
    pub target_container: &'a str,
    /// The Go executable as read when the target was found (a Go target only).
    pub go: Option<std::sync::Arc<crate::symbols::binary::GoBinary>>,
    /// The recorded process, as seen from `shell`.
    pub pid: u32,
    pub workdir: &'a str,
    /// How the recording command ended (its standard error carries the engine's report).
    pub recorded: &'a ExecOutput,
    /// The capture's stem in the store: raw artifacts are written next to it.
    pub stem: &'a Stem,
    /// Where the target's files are seen from the shell (`/proc/<pid>/root` in a sidecar).
    pub symfs: Option<String>,
    /// Also keep the engine's intermediate text (`perf script`) as `<stem>.script`.
    pub keep_script: bool,
    /// Resolve inlined frames.
    pub inline: bool,
    pub call_graph: crate::settings::CallGraph,
    /// How perf's samples are folded.
    pub fold: crate::settings::FoldPath,
    pub report: &'a Reporter,
}

/// Folded stacks and what else the engine learned while making them.
#[derive(Debug, Default)]
pub struct Collected {
    pub folded: Folded,
    /// Extensions of the raw artifacts written next to the stem (e.g. `data`, `script`).
    pub raw_files: Vec<&'static str>,
    /// Samples the engine itself reported recording, when it says.
    pub reported_samples: Option<u64>,
    /// Chunks of samples the engine reported losing.
    pub lost_chunks: Option<u64>,
    /// The engine's diagnostics when the stacks came out empty.
    pub stderr: String,
    /// How long each step took (`download`, `fold`, ...), for the manifest.
    pub timings_ms: Vec<(&'static str, u64)>,
    /// Which path folded the samples (`native`, `perf-script`), for engines with a choice.
    pub fold_path: Option<&'static str>,
    /// What the manifest should say about how the stacks were made.
    pub notes: Vec<String>,
    /// What the user is warned of as well (and the manifest says).
    pub warnings: Vec<String>,
    /// The rate the recording itself says it sampled at, when it says (Go's profile).
    pub sampled_hz: Option<u32>,
    /// Where a profile the runtime served came from (its URL).
    pub source: Option<String>,
    /// A memory profile's count of objects, beside its bytes.
    pub objects: Option<u64>,
}

/// How an engine's recorder behaves over its window, for the window to run it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecorderFacts {
    /// It ends by itself when the process it records exits (`perf record -p`): the
    /// process is then checked rarely (each check costs an exec in the container).
    pub ends_with_target: bool,
    /// It starts with its events disabled and has them enabled when released (perf
    /// record's `-D -1 --control`): its start-up is paid before the window opens.
    pub enables_on_release: bool,
    /// It ends by itself when its window is over, and a stop signal would lose what it
    /// recorded: no armed stop ends it.
    pub stops_itself: bool,
}

/// The engine's binary, for manifests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tool {
    pub path: String,
    pub version: String,
}

/// Where an engine's recorder must run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Where it sees the process: inside its container, or in a sidecar sharing its pid
    /// namespace (the capture's placement chooses, climbing the sidecar's rights).
    Process,
    /// Beside the target, on its network too, with no added rights: the engine reads what
    /// the process serves (an HTTP endpoint), not the process itself.
    Network,
}

/// One way of recording a process. `Ready` is what `prepare` found out (the tool, the event
/// it will sample, notes for the summary) and what the other steps need.
pub trait Engine: Sync {
    type Ready: Send + Sync;

    /// The engine's name in manifests and summaries.
    fn name(&self) -> &'static str;

    /// Checks, before the window, that this engine can record the process from where it is
    /// `at`. A denial is `Error::PerfDenied` so that a sidecar can try with more rights.
    fn prepare<'a>(
        &'a self,
        at: Reached<'a>,
    ) -> impl Future<Output = Result<Self::Ready>> + Send + 'a;

    /// Where the recorder runs (`Reach::Process` unless the engine only speaks to the
    /// process over its network).
    fn reach(&self) -> Reach {
        Reach::Process
    }

    /// Whether the recorder must end on its own: a stop signal would lose what it
    /// recorded (an HTTP fetch the runtime answers when its own window closes), so no
    /// armed stop ends it; it is stopped only on Ctrl-C or when it overruns.
    fn recorder_stops_itself(&self) -> bool {
        false
    }

    /// The rate this engine samples at when `requested` was asked (an engine with a rate
    /// of its own says that one).
    fn frequency(&self, _ready: &Self::Ready, requested: u32) -> u32 {
        requested
    }

    /// The fewest capabilities a sidecar needs for this engine, tried before the perf
    /// ladder (None: the engine needs what perf needs).
    fn sidecar_minimum(&self) -> Option<(&'static [&'static str], &'static str)> {
        None
    }

    /// Whether the recording command ends by itself when the process it records exits
    /// (`perf record -p` does): then the process is checked once a minute during the
    /// window rather than every 10 s (each check costs an exec in the container).
    fn recorder_ends_with_target(&self) -> bool {
        false
    }

    /// Whether the recorder can start with its events disabled and have them enabled when
    /// released (perf record's `-D -1 --control`): a session then pays its start-up before
    /// the window opens.
    fn recorder_enables_on_release(&self) -> bool {
        false
    }

    /// How its recorder behaves over the window.
    fn recorder_facts(&self) -> RecorderFacts {
        RecorderFacts {
            ends_with_target: self.recorder_ends_with_target(),
            enables_on_release: self.recorder_enables_on_release(),
            stops_itself: self.recorder_stops_itself(),
        }
    }

    /// Whether the engine names JIT-compiled code through the runtime's perf map
    /// (/tmp/perf-<pid>.map), which the capture then asks the runtime to write before the
    /// engine reads its samples.
    fn reads_perf_maps(&self) -> bool {
        false
    }

    /// After the capture's workdir exists, before the window: puts in place what the
    /// recording command needs there (tools copied in, ownership for an engine that runs
    /// as the process's user).
    fn stage<'a>(
        &'a self,
        _at: InWorkdir<'a, Self::Ready>,
    ) -> impl Future<Output = Result<()>> + Send + 'a {
        async { Ok(()) }
    }

    /// Always after the window, success or not, before the workdir is removed: makes sure
    /// nothing of the engine keeps running in the target (an agent that samples on).
    fn finish<'a>(
        &'a self,
        _at: InWorkdir<'a, Self::Ready>,
    ) -> impl Future<Output = ()> + Send + 'a {
        async {}
    }

    /// Why this engine's stacks break in a program of `runtime` and what to do, for the
    /// summary and manifest (None: its stacks cannot break, so a short one is no warning).
    fn broken_stacks_advice(
        &self,
        runtime: crate::runtime::Runtime,
        call_graph: crate::settings::CallGraph,
    ) -> Option<(String, String)> {
        Some(crate::profile::stacks::unwinder_advice(
            runtime.name(),
            call_graph == crate::settings::CallGraph::Dwarf,
        ))
    }

    /// The binary that records, for the manifest.
    fn tool(&self, ready: &Self::Ready) -> Tool;

    /// The event sampled (`cpu-clock`, `cycles`, ...).
    fn event(&self, ready: &Self::Ready) -> String;

    /// Notes for the summary from `prepare` (fallbacks, settings changed).
    fn notes(&self, ready: &Self::Ready) -> Vec<String>;

    /// The command that records `job.pid` for `job.duration` into `job.workdir`. The session
    /// runs it with its pid in a pidfile and sends it SIGINT to end the window early; it
    /// must then still write what it recorded.
    fn record_command(&self, ready: &Self::Ready, job: &RecordJob) -> RecordCommand;

    /// The recorder's command line for a command run (`cpu -- CMD`): everything before
    /// the workload, which follows a `--`. None: this engine cannot record a command from
    /// its start.
    fn command_record(&self, _ready: &Self::Ready, _job: &RecordJob) -> Option<Vec<String>> {
        None
    }

    /// After the window: reads what the command wrote into folded stacks, streaming.
    fn collect<'a>(
        &'a self,
        ready: &'a Self::Ready,
        job: &'a CollectJob<'a>,
    ) -> impl Future<Output = Result<Collected>> + Send + 'a;
}
