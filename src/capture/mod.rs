//! Capture sessions: which container and process, where the engine runs (inside the
//! container, or in a sidecar beside it), the recording window, and a container left clean
//! whatever happens. The kinds are recipes over these parts: `cpu` (any engine), `offcpu`
//! (perf tracepoints), `heap` (jemalloc dumps, no engine). Analysis is in `profile`, files
//! in `store`, the engines in `engines`.

pub mod command;
pub mod cpu;
pub mod gate;
pub mod heap;
pub mod jit;
pub mod liveness;
pub mod manifest;
pub mod multi;
pub mod offcpu;
pub mod pprof;
pub mod session;
pub mod sidecar;
pub mod stat;

use crate::docker::probe::ContainerFacts;
use crate::docker::target::{
    busiest, candidates, parse_cpu_sample, resolve_container, ContainerInfo, CpuSample, ProcInfo,
    ProcessSelector, CPU_SAMPLE_SCRIPT,
};
use crate::docker::{ContainerShell, Docker, Shell};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::runtime::{self, ProcessFacts, Runtime};
use crate::settings::{CaptureMode, Placement};
use crate::symbols::binary::GoBinary;
use crate::text::first_line;
use std::sync::Arc;

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
}

/// Connects, resolves the container and chooses the process.
pub async fn locate(target: &str, selector: &ProcessSelector) -> Result<Located> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(target, &containers)?;
    let shell = docker.shell(&container);
    let facts = ContainerFacts::probe(&shell).await?;
    let process = choose_process(&shell, &facts, selector, &container.name).await?;
    let process_facts = ProcessFacts::probe(&shell, process.pid).await?;
    let mut runtime = runtime::of_process(&process, &process_facts);
    // Read from the container itself (the archive API needs no rights in the process, and
    // no tools in the container: where it has no grep, this is what tells Go apart).
    let read_go = runtime == Runtime::Go || runtime::maybe_go(runtime, &process_facts);
    let go = match (read_go, process_facts.executable()) {
        (true, Some(exe)) => GoBinary::from_container(&docker, &container.id, exe).await,
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
    })
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
    pub sysctls: Option<SavedSysctls>,
}

/// The host-wide perf sysctls as they were before devprof lowered them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedSysctls {
    pub paranoid: i32,
    pub kptr_restrict: i32,
}

/// Lowers kernel.perf_event_paranoid to -1 and kptr_restrict to 0 through a container
/// that may write them (they are the host's). Returns what they were, for `restore_sysctls`.
async fn lower_sysctls(shell: &Shell, facts: &ContainerFacts) -> Option<SavedSysctls> {
    let saved = SavedSysctls {
        paranoid: facts.paranoid?,
        kptr_restrict: facts.kptr_restrict?,
    };
    let out = shell
        .sh("echo -1 > /proc/sys/kernel/perf_event_paranoid && echo 0 > /proc/sys/kernel/kptr_restrict")
        .await;
    if out.as_ref().is_ok_and(|o| o.success()) {
        eprintln!(
            "note: lowered the host's kernel.perf_event_paranoid ({} -> -1) and kptr_restrict ({} -> 0) for this capture (--allow-sysctl); they are restored when it ends",
            saved.paranoid, saved.kptr_restrict
        );
        // Should a third Ctrl-C end devprof before it restores them, the user is told how.
        crate::signals::set_exit_note(Some(saved.host_command()));
        Some(saved)
    } else {
        // A half-done change is undone too.
        restore_sysctls(shell, saved).await;
        None
    }
}

impl SavedSysctls {
    /// The command that restores them on the host.
    fn host_command(&self) -> String {
        format!(
            "run on the host: sudo sysctl kernel.perf_event_paranoid={} kernel.kptr_restrict={}",
            self.paranoid, self.kptr_restrict
        )
    }
}

/// Puts the sysctls back; when the container can no longer do it, says how to.
async fn restore_sysctls(shell: &Shell, saved: SavedSysctls) {
    crate::signals::set_exit_note(None);
    let script = format!(
        "echo {} > /proc/sys/kernel/perf_event_paranoid && echo {} > /proc/sys/kernel/kptr_restrict",
        saved.paranoid, saved.kptr_restrict
    );
    let done = tokio::time::timeout(std::time::Duration::from_secs(10), shell.sh(&script)).await;
    if !matches!(done, Ok(Ok(ref o)) if o.success()) {
        eprintln!(
            "warning: could not restore the host's sysctls through {}; {}",
            shell.container(),
            saved.host_command()
        );
    }
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

    /// Watches the target container and process during the capture.
    pub fn watch(&self) -> liveness::Watch {
        liveness::Watch::new(&self.container, &self.shell, self.process.pid)
    }

    /// Restores lowered sysctls and removes the sidecar, if any. Always called, whatever
    /// happened.
    pub async fn release(&self) {
        if let Some(saved) = self.sysctls {
            restore_sysctls(&self.shell, saved).await;
        }
        if let Some(sidecar) = &self.sidecar {
            self.shell.docker().remove_container(&sidecar.info.id).await;
        }
    }
}

/// Finds the target and a place where `engine` may record it: inside the container (exec),
/// or in a sidecar beside it, as `mode` allows. The process is the one `locate` chose
/// (`_selector` chose it).
pub async fn find_target<E: Engine>(
    engine: &E,
    located: Located,
    _selector: &ProcessSelector,
    placement: &Placement,
    needs_tracefs: bool,
) -> Result<Target<E::Ready>> {
    let mode = placement.mode;
    if mode != CaptureMode::Sidecar {
        let prepare = || engine.prepare(&located.shell, &located.facts, &located.process);
        let mut attempt = prepare().await;
        let mut sysctls = None;
        if matches!(attempt, Err(Error::PerfDenied { .. })) && located.facts.sysctl_writable {
            if placement.allow_sysctl {
                sysctls = lower_sysctls(&located.shell, &located.facts).await;
                if let Some(saved) = sysctls {
                    attempt = prepare().await;
                    if attempt.is_err() {
                        restore_sysctls(&located.shell, saved).await;
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
        match attempt {
            Ok(ready) => {
                return Ok(Target {
                    shell: located.shell,
                    container: located.container,
                    facts: located.facts,
                    process: located.process,
                    process_facts: located.process_facts,
                    runtime: located.runtime,
                    go: located.go,
                    ready,
                    sidecar: None,
                    sysctls,
                })
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
            Err(e) => return Err(e),
        }
    }
    sidecar::start(engine, &located, placement, needs_tracefs).await
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
