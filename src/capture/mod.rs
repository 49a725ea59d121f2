//! Capture sessions: which container and process, where the engine runs (inside the
//! container, or in a sidecar beside it), the recording window, and a container left clean
//! whatever happens. The kinds are recipes over these parts: `cpu` (any engine), `offcpu`
//! (perf tracepoints), `heap` (jemalloc dumps, no engine). Analysis is in `profile`, files
//! in `store`, the engines in `engines`.

pub mod alignment;
pub mod armed_stop;
pub mod clocks;
pub mod command;
pub mod cpu;
pub mod gate;
pub mod heap;
pub mod jit;
pub mod kept;
pub mod liveness;
pub mod manifest;
pub mod markers;
pub mod multi;
pub mod offcpu;
pub mod record_script;
pub mod repeat;
pub mod run;
pub mod session;
pub mod sidecar;
pub mod stat;
pub mod sysctl;

use crate::docker::probe::ContainerFacts;
use crate::docker::target::{
    busiest, candidates, parse_cpu_sample, resolve_container, ContainerInfo, CpuSample, ProcInfo,
    ProcessSelector, CPU_SAMPLE_SCRIPT,
};
use crate::docker::{ContainerShell, Docker, Shell};
use crate::engines::{perf, Engine, Reach};
use crate::error::{Error, Result};
use crate::runtime::{self, ProcessFacts, Runtime};
use crate::settings::{CaptureMode, Placement};
use crate::symbols::binary::GoBinary;
use crate::text::first_line;
use record_script::{EVENTS_OPEN_MARKER, READY_MARKER};
use std::sync::Arc;

/// The recorder's pidfile in a capture's workdir, written by the shell that becomes the
/// recorder; the window's stop and the clean-up signal only the pid it names.
pub const RECORDER_PIDFILE: &str = "recorder.pid";

/// What a finished capture produced, whatever its kind: its manifest, the files it wrote
/// (with their sizes) and what the user should hear about it.
#[derive(Debug)]
pub struct Captured {
    pub manifest: crate::store::Manifest,
    pub manifest_path: std::path::PathBuf,
    pub files: Vec<(std::path::PathBuf, u64)>,
    pub warnings: Vec<String>,
}

/// A container and the process in it, found (no engine involved yet).
pub struct Located {
    pub docker: Docker,
    pub container: ContainerInfo,
    /// Commands run in the container itself.
    pub shell: Shell,
    pub facts: ContainerFacts,
    pub process: ProcInfo,
    /// What /proc says about the process: executable, user, environment, libraries.
    pub process_facts: ProcessFacts,
    pub runtime: Runtime,
    /// A Go program's executable as read once (version, names of a stripped binary).
    pub go: Option<Arc<GoBinary>>,
    /// perf's version and access trial, asked beside the process's probe (`Ahead::Perf`).
    pub perf_answer: Option<perf::Asked>,
    /// A workdir made beside the process's probe (`Ahead::Perf`), or beside the engine's
    /// `prepare`; shared with the target placed from this, which takes it for its window.
    /// What is left in it unused is removed by `reclaim_early_workdir`.
    pub early_workdir: EarlyWorkdir,
}

/// A workdir made before it is needed, taken by the first window; shared by the `Located`
/// and the `Target` placed in its container.
pub type EarlyWorkdir = Arc<std::sync::Mutex<Option<String>>>;

/// Takes the workdir out of `slot`, if one is there.
fn take_workdir(slot: &EarlyWorkdir) -> Option<String> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Removes the early workdir no window took (the capture failed, or chose another engine,
/// before its window).
pub async fn reclaim_early_workdir(shell: &Shell, slot: &EarlyWorkdir) {
    if let Some(workdir) = take_workdir(slot) {
        session::remove_unused_workdir(shell, &workdir).await;
    }
}

/// Runs `body` on `located`; then, whatever happened (a panic too), removes the workdir
/// made ahead that no window took (the capture chose another engine, or failed before its
/// window).
pub async fn reclaiming<T>(
    located: Located,
    body: impl AsyncFnOnce(Located) -> Result<T>,
) -> Result<T> {
    let (shell, slot) = (located.shell.clone(), located.early_workdir.clone());
    let result = catching(Box::pin(body(located))).await;
    // A recorder started ahead that no window took, with any standby left, goes too.
    shell.release_standbys();
    reclaim_early_workdir(&shell, &slot).await;
    resume(result)
}

/// Longest perf's answers asked ahead may take (its trial counts for 0.1 s at most).
const AHEAD_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Longest a capture waits for its primed recorder to be ready before it asks the trial
/// instead: well within the 5 s a primed recorder may wait to be taken.
const PRIMED_READY_LIMIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What `locate` asks of the container beside the process's probe, for the engine the
/// capture will most likely use: execs that would otherwise come one after another.
#[derive(Clone)]
pub enum Ahead {
    Nothing,
    /// perf's version and access trial, and the workdir (where the container has a perf);
    /// with a primer, the recorder too, started before the trial answers.
    Perf(Option<Primer>),
}

/// The recorder's exec command line (`sh -c SCRIPT`) a capture would start with `perf`
/// sampling what `ContainerFacts` make likely, for the process `pid`, in the workdir; None
/// where it starts none alone.
pub type Primer =
    Arc<dyn Fn(perf::PerfTool, &ContainerFacts, u32, &str) -> Option<Vec<String>> + Send + Sync>;

impl Ahead {
    /// perf's answers and the workdir, unless perf records from a sidecar (`mode`).
    pub fn perf_in(mode: CaptureMode) -> Ahead {
        Self::perf_primed(mode, None)
    }

    /// `perf_in`, with the recorder `primer` makes started ahead.
    pub fn perf_primed(mode: CaptureMode, primer: Option<Primer>) -> Ahead {
        match mode {
            CaptureMode::Sidecar => Ahead::Nothing,
            _ => Ahead::Perf(primer),
        }
    }

    fn is_perf(&self) -> bool {
        matches!(self, Ahead::Perf(_))
    }
}

impl Located {
    /// The found process, ready for an engine (`ready`, what its `prepare` found): recorded
    /// from the container's own shell, or from a sidecar's that sees the same process.
    fn into_target<R>(
        self,
        ready: R,
        sidecar: Option<(Shell, sidecar::Sidecar)>,
        sysctls: Option<sysctl::SavedSysctls>,
    ) -> Target<R> {
        // A workdir made in the container is no sidecar's.
        let (shell, sidecar, early_workdir) = match sidecar {
            Some((shell, sidecar)) => (shell, Some(sidecar), EarlyWorkdir::default()),
            None => (self.shell, None, self.early_workdir),
        };
        Target {
            shell,
            container: self.container,
            facts: self.facts,
            process: self.process,
            process_facts: self.process_facts,
            runtime: self.runtime,
            go: self.go,
            ready,
            sidecar,
            sysctls,
            early_workdir,
            cleaned_workdir: Default::default(),
        }
    }
}

/// Connects, resolves the container and chooses the process.
pub async fn locate(target: &str, selector: &ProcessSelector) -> Result<Located> {
    locate_ahead(target, selector, Ahead::Nothing).await
}

/// `locate`, asking `ahead` of the container beside the process's probe.
pub async fn locate_ahead(
    target: &str,
    selector: &ProcessSelector,
    ahead: Ahead,
) -> Result<Located> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(target, &containers)?;
    let shell = docker.shell(&container);
    // For perf the probe asks perf's version and makes the workdir too, and its exec stays
    // as a standby for the next command as root (the recorder, where it is primed).
    let for_perf = ahead.is_perf();
    let facts = if for_perf {
        ContainerFacts::probe_for_perf(&shell).await?
    } else {
        ContainerFacts::probe(&shell).await?
    };
    crate::ui::phases::mark("container probed");
    let process = match choose_process(&shell, &facts, selector, &container.name).await {
        Ok(process) => process,
        Err(e) => {
            reclaim_probed_workdir(&shell, &facts).await;
            return Err(e);
        }
    };
    let perf_here = for_perf && !facts.perf_candidates.is_empty();
    let probed_workdir = facts.perf_ahead.workdir.as_deref().and_then(made_workdir);
    let primed = match (&ahead, &probed_workdir) {
        (Ahead::Perf(Some(primer)), Some(workdir)) if perf_here => {
            prime_recorder(&shell, primer, &facts, process.pid, workdir).await
        }
        _ => false,
    };
    let asked = async {
        // Where the container has no perf, a perf capture fails in `prepare` (and auto
        // moves to a sidecar): nothing is made in it (the probe made no workdir either).
        if !perf_here {
            return (None, None);
        }
        // Bounded: an engine other than perf may be chosen once the probe is read, and
        // must not wait on a perf that hangs. Unanswered in time, `prepare` asks.
        let answer = async {
            // A primed recorder that opened its events answers what the trial would, where
            // the trial could answer only that (`perf::answered_by_recorder`): one exec and
            // one perf start less. Where it did not, the trial judges.
            if let Some(answered) = primed
                .then(|| perf::answered_by_recorder(&shell, &facts))
                .flatten()
            {
                let printed = shell
                    .standbys()
                    .primed_ready(READY_MARKER, PRIMED_READY_LIMIT)
                    .await;
                let events_open = printed.is_some_and(|printed| {
                    printed
                        .split(|&b| b == b'\n')
                        .any(|line| line == EVENTS_OPEN_MARKER.as_bytes())
                });
                if events_open {
                    crate::ui::phases::mark("recorder ready ahead, its access proven");
                    return Some(answered);
                }
            }
            tokio::time::timeout(AHEAD_LIMIT, perf::ask_ahead(&shell, &facts, process.pid))
                .await
                .ok()
                .flatten()
        };
        let workdir = async {
            match &probed_workdir {
                Some(made) => Some(made.clone()),
                None => make_workdir(&shell).await.ok(),
            }
        };
        tokio::join!(answer, workdir)
    };
    // Where perf records in the container and no recorder was started ahead, the
    // process's probe stays as a shell the recorder (as root) starts on.
    let probed = async {
        if perf_here && !primed {
            ProcessFacts::probe_standing_by(&shell, &process).await
        } else {
            ProcessFacts::probe(&shell, &process).await
        }
    };
    let (process_facts, (perf_answer, workdir)) = tokio::join!(probed, asked);
    let early_workdir = EarlyWorkdir::new(std::sync::Mutex::new(workdir));
    let process_facts = match process_facts {
        Ok(facts) => facts,
        Err(e) => {
            shell.release_standbys();
            reclaim_early_workdir(&shell, &early_workdir).await;
            return Err(e);
        }
    };
    crate::ui::phases::mark("process probed");
    let mut runtime = runtime::of_process(&process, &process_facts);
    // Read from the container itself (the archive API needs no rights in the process, and
    // no tools in the container: where it has no grep, this is what tells Go apart).
    let read_go = runtime == Runtime::Go || runtime::maybe_go(runtime, &process_facts);
    let go = match (read_go, process_facts.executable()) {
        (true, Some(exe)) => {
            crate::docker::binary::go_binary_from_container(&docker, &container.id, exe).await
        }
        _ => None,
    }
    .map(Arc::new);
    if go.is_some() {
        runtime = Runtime::Go;
    }
    Ok(Located {
        docker,
        container,
        shell,
        facts,
        process,
        process_facts,
        runtime,
        go,
        perf_answer,
        early_workdir,
    })
}

/// Starts the recorder `primer` makes on the probe's standby, before the trial answers;
/// true when it started. Only where the probe answered perf's version.
async fn prime_recorder(
    shell: &Shell,
    primer: &Primer,
    facts: &ContainerFacts,
    pid: u32,
    workdir: &str,
) -> bool {
    let Some(perf) = perf::tool_ahead(facts) else {
        return false;
    };
    let Some(argv) = primer(perf, facts, pid, workdir) else {
        return false;
    };
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let primed = shell.standbys().prime(&argv).await;
    if primed {
        crate::ui::phases::mark("recorder started ahead");
    }
    primed
}

/// Removes the workdir a probe made ahead when the capture ends before taking it.
async fn reclaim_probed_workdir(shell: &Shell, facts: &ContainerFacts) {
    shell.release_standbys();
    if let Some(workdir) = facts.perf_ahead.workdir.as_deref().and_then(made_workdir) {
        session::remove_unused_workdir(shell, &workdir).await;
    }
}

/// A private directory in the container's /tmp for the recorder's output and its pid.
pub async fn make_workdir(shell: &Shell) -> Result<String> {
    let out = shell
        .run(&["mktemp", "-d", "/tmp/devprof.XXXXXXXX"])
        .await?;
    match made_workdir(&out.stdout) {
        Some(dir) if out.success() => Ok(dir),
        _ => Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "create a temporary directory in /tmp".into(),
            detail: crate::text::first_error_line(&out.stderr),
        }),
    }
}

/// The directory `mktemp -d /tmp/devprof.XXXXXXXX` printed, only when it is one: the
/// container's mktemp answers, and the workdir is later searched and removed as root in
/// it (never `/tmp/devprof.x/../..`).
fn made_workdir(stdout: &str) -> Option<String> {
    let dir = stdout.trim_end_matches('\n');
    let suffix = dir.strip_prefix("/tmp/devprof.")?;
    (!suffix.is_empty() && suffix.len() <= 64 && suffix.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| dir.to_string())
}

/// A target ready to record: the container, the process, and an engine that may record it.
/// In sidecar mode `shell` runs commands in the profiler container beside the target, which
/// shares its PID namespace (so pids are the same) and reaches its files through
/// /proc/<pid>/root.
pub struct Target<R> {
    pub shell: Shell,
    pub container: ContainerInfo,
    pub facts: ContainerFacts,
    pub process: ProcInfo,
    pub process_facts: ProcessFacts,
    pub runtime: Runtime,
    pub go: Option<Arc<GoBinary>>,
    /// What the engine's `prepare` found.
    pub ready: R,
    pub sidecar: Option<sidecar::Sidecar>,
    /// Host-wide sysctls lowered for this capture (`--allow-sysctl`), to restore.
    pub sysctls: Option<sysctl::SavedSysctls>,
    /// A workdir made while the process was probed or the engine prepared (an exec's wait
    /// saved before the window), taken by the first `in_workdir`; removed by `release` if
    /// none took it.
    pub early_workdir: EarlyWorkdir,
    /// The workdir a recipe cleaned as soon as it no longer needed it (beside the rest of
    /// its work), which `in_workdir` then leaves alone.
    pub cleaned_workdir: std::sync::Mutex<Option<String>>,
}

impl<R> Target<R> {
    /// Where the recorder finds the target's binaries: its own root in sidecar mode.
    pub fn symfs(&self) -> Option<String> {
        self.sidecar
            .as_ref()
            .map(|_| format!("/proc/{}/root", self.process.pid))
    }

    /// How devprof reached the process, for summaries and manifests.
    pub fn mode_description(&self) -> String {
        match &self.sidecar {
            None => "exec (the profiler runs inside the container)".to_string(),
            Some(s) => format!(
                "sidecar {} from {} with {}",
                s.info.name, s.info.image, s.privileges
            ),
        }
    }

    /// The workdir made early, once.
    pub fn take_early_workdir(&self) -> Option<String> {
        take_workdir(&self.early_workdir)
    }

    /// Watches the target container and process during the capture.
    pub fn watch(&self) -> liveness::Watch {
        liveness::Watch::new(
            &self.container,
            &self.shell,
            self.process.pid,
            self.sidecar.is_none(),
        )
    }

    /// Restores lowered sysctls and removes the sidecar, if any. Always called, whatever
    /// happened.
    pub async fn release(&self) {
        if let Some(workdir) = self.take_early_workdir() {
            session::remove_unused_workdir(&self.shell, &workdir).await;
        }
        if let Some(saved) = &self.sysctls {
            sysctl::restore(&self.shell, saved).await;
        }
        if let Some(sidecar) = &self.sidecar {
            self.shell.docker().remove_container(&sidecar.info.id).await;
        }
    }
}

/// Runs `work`, holding a panic in it so that the caller's clean-up (sysctls restored,
/// sidecar removed, workdir removed) still runs; `resume` then goes on with the panic.
pub async fn catching<T>(work: impl std::future::Future<Output = T>) -> std::thread::Result<T> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(work).catch_unwind().await
}

/// The result `catching` held, or the panic it held, resumed.
pub fn resume<T>(caught: std::thread::Result<T>) -> T {
    caught.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The clean-up of a capture's workdir (and the engine's `finish`), after a result
/// `catching` held: skipped when the container stopped, or stays paused.
pub async fn workdir_cleanable<T>(
    watch: &liveness::Watch,
    workdir: &str,
    caught: &std::thread::Result<Result<T>>,
) -> bool {
    match caught {
        Ok(result) => session::cleanable(watch, workdir, result).await,
        Err(_) => true,
    }
}

/// Finds the target and a place where `engine` may record it: inside the container (exec),
/// or in a sidecar beside it, as `mode` allows. The process is the one `locate` chose.
pub async fn find_target<E: Engine>(
    engine: &E,
    located: Located,
    placement: &Placement,
    needs_tracefs: bool,
) -> Result<Target<E::Ready>> {
    if engine.reach() == Reach::Network {
        return sidecar::start_on_network(engine, located, placement).await;
    }
    let mode = placement.mode;
    if mode != CaptureMode::Sidecar {
        let prepare = || engine.prepare(&located.shell, &located.facts, &located.process);
        // The capture's workdir was made beside the process's probe, or is made meanwhile
        // (it is needed once the engine is ready), where the container has a perf: without
        // one a perf capture fails here, and auto moves to a sidecar, which leaves the
        // target untouched.
        let made_ahead = take_workdir(&located.early_workdir);
        let early = async {
            match made_ahead {
                Some(workdir) => Some(workdir),
                None if located.facts.perf_candidates.is_empty() => None,
                None => make_workdir(&located.shell).await.ok(),
            }
        };
        let (mut attempt, early_workdir) = tokio::join!(prepare(), early);
        let mut sysctls = None;
        if matches!(attempt, Err(Error::PerfDenied { .. })) && located.facts.sysctl_writable {
            if placement.allow_sysctl {
                // Nothing is lowered unless it can be restored without the target too.
                let helper = match sysctl::check_helper(
                    &located.docker,
                    &located.container.name,
                    &placement.profiler_image,
                )
                .await
                {
                    Ok(helper) => helper,
                    Err(e) => {
                        if let Some(workdir) = &early_workdir {
                            session::remove_unused_workdir(&located.shell, workdir).await;
                        }
                        return Err(e);
                    }
                };
                sysctls = sysctl::lower(&located.shell, helper).await;
                if let Some(saved) = &sysctls {
                    attempt = prepare().await;
                    if attempt.is_err() {
                        sysctl::restore(&located.shell, saved).await;
                        sysctls = None;
                    }
                }
            } else {
                eprintln!(
                    "note: {} may write the host-wide kernel.perf_event_paranoid; devprof leaves it as it is unless given --allow-sysctl",
                    located.container.name
                );
            }
        }
        if attempt.is_err() {
            if let Some(workdir) = &early_workdir {
                session::remove_unused_workdir(&located.shell, workdir).await;
            }
        }
        match attempt {
            Ok(ready) => {
                let target = located.into_target(ready, None, sysctls);
                *target
                    .early_workdir
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = early_workdir;
                return Ok(target);
            }
            Err(
                e @ (Error::PerfMissing { .. }
                | Error::ToolMissing { .. }
                | Error::PerfDenied { .. }),
            ) if mode == CaptureMode::Auto => {
                eprintln!(
                    "note: {}; profiling from a sidecar container instead",
                    first_line(&e.to_string())
                );
            }
            Err(e) => return Err(rootless_denial(&located.docker, e).await),
        }
    }
    match sidecar::start(engine, &located, placement, needs_tracefs).await {
        Err(e) => Err(rootless_denial(&located.docker, e).await),
        placed => placed,
    }
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

/// How long candidates' CPU use is sampled when several processes match.
const CPU_SAMPLE_SECS: f64 = 0.5;

/// The process `selector` means, or an error listing the container's processes. When
/// several match (both sides of a pipeline, several workers), the busiest over a short
/// sample is chosen, and the candidates are listed with pid, user, CPU% and command.
pub async fn choose_process<S: ContainerShell>(
    shell: &S,
    facts: &ContainerFacts,
    selector: &ProcessSelector,
    container: &str,
) -> Result<ProcInfo> {
    let found = candidates(&facts.processes, selector).map_err(|what| {
        let listing: Vec<String> = facts
            .processes
            .iter()
            .take(15)
            .map(|p| format!("{:>6}  {}", p.pid, p.cmdline))
            .collect();
        Error::ProcessNotFound {
            container: container.to_string(),
            what,
            hint: format!("processes in the container:\n{}", listing.join("\n")),
        }
    })?;
    if found.len() == 1 {
        return Ok(found.into_iter().next().expect("one candidate"));
    }
    let samples = sample_cpu(shell, &found).await;
    let chosen = busiest(&found, &samples).unwrap_or_else(|| found[0].clone());
    let lines: Vec<String> = found
        .iter()
        .map(|p| {
            let sample = samples.iter().find(|s| s.pid == p.pid);
            format!(
                "  {} {:>6}  {:<10} {:>5}  {}",
                if p.pid == chosen.pid { "*" } else { " " },
                p.pid,
                sample
                    .and_then(|s| s.uid)
                    .map(|u| format!("uid {u}"))
                    .unwrap_or_else(|| "?".into()),
                sample
                    .map(|s| format!("{:.0}%", s.cpu_percent))
                    .unwrap_or_else(|| "?".into()),
                crate::text::truncate(&p.cmdline, 80)
            )
        })
        .collect();
    eprintln!(
        "note: {} processes in {container} match; chose pid {} ({}), the busiest over {CPU_SAMPLE_SECS} s (--pid picks another):\n  {:>8}  {:<10} {:>5}  command\n{}",
        found.len(),
        chosen.pid,
        chosen.program(),
        "pid",
        "user",
        "CPU",
        lines.join("\n"),
    );
    Ok(chosen)
}

/// The candidates' CPU use over a short sample (empty when it cannot be read).
async fn sample_cpu<S: ContainerShell>(shell: &S, procs: &[ProcInfo]) -> Vec<CpuSample> {
    let script = CPU_SAMPLE_SCRIPT.replace("INTERVAL", &CPU_SAMPLE_SECS.to_string());
    let pids: Vec<String> = procs.iter().map(|p| p.pid.to_string()).collect();
    let mut argv: Vec<&str> = vec!["sh", "-c", &script, "sh"];
    argv.extend(pids.iter().map(String::as_str));
    match shell.run(&argv).await {
        // USER_HZ is 100 on every Linux architecture Docker runs on.
        Ok(out) => parse_cpu_sample(&out.stdout, CPU_SAMPLE_SECS, 100.0),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_mktemp_makes_is_taken_as_the_workdir() {
        assert_eq!(
            made_workdir("/tmp/devprof.aB3xY9zQ\n").as_deref(),
            Some("/tmp/devprof.aB3xY9zQ")
        );
        for told in [
            "",
            "/tmp/devprof.\n",
            "/tmp/devprof.x/../../app\n",
            "/tmp/devprof.ab cd\n",
            "/tmp/devprof.ab\n/etc\n",
            "/tmp/other.aB3xY9zQ\n",
        ] {
            assert_eq!(made_workdir(told), None, "{told:?}");
        }
    }

    /// Regression: a panic during a capture unwound past its clean-up (sysctls, sidecar,
    /// workdir): the clean-up now runs first, then the panic goes on.
    #[tokio::test]
    async fn a_panic_in_a_capture_still_runs_its_clean_up() {
        let caught = catching(async {
            if std::hint::black_box(true) {
                panic!("a parser bug");
            }
            Ok::<u32, Error>(1)
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
