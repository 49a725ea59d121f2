//! Capture sessions: which container and process, where the engine runs (inside the
//! container, or in a sidecar beside it), the recording window, and a container left clean
//! whatever happens. The kinds are recipes over these parts: `cpu` (any engine), `offcpu`
//! (perf tracepoints), `heap` (jemalloc dumps, no engine). Analysis is in `profile`, files
//! in `store`, the engines in `engines`.

pub mod cpu;
pub mod heap;
pub mod jit;
pub mod manifest;
pub mod offcpu;
pub mod session;
pub mod sidecar;

use crate::docker::probe::ContainerFacts;
use crate::docker::target::{
    resolve_container, select_process, ContainerInfo, ProcInfo, ProcessSelector,
};
use crate::docker::{Docker, Shell};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::runtime::{self, ProcessFacts, Runtime};
use crate::settings::{CaptureMode, Placement};
use crate::text::first_line;

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
}

/// Connects, resolves the container and chooses the process.
pub async fn locate(target: &str, selector: &ProcessSelector) -> Result<Located> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(target, &containers)?;
    let shell = docker.shell(&container);
    let facts = ContainerFacts::probe(&shell).await?;
    let process = choose_process(&facts, selector, &container.name)?;
    let process_facts = ProcessFacts::probe(&shell, process.pid).await?;
    let runtime = runtime::of_process(&process, &process_facts);
    Ok(Located {
        docker,
        container,
        shell,
        facts,
        process,
        process_facts,
        runtime,
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
    /// What the engine's `prepare` found.
    pub ready: R,
    pub sidecar: Option<sidecar::Sidecar>,
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

    /// Removes the sidecar, if any. Always called, whatever happened.
    pub async fn release(&self) {
        if let Some(sidecar) = &self.sidecar {
            self.shell.docker().remove_container(&sidecar.info.id).await;
        }
    }
}

/// Finds the target and a place where `engine` may record it: inside the container (exec),
/// or in a sidecar beside it, as `mode` allows.
pub async fn find_target<E: Engine>(
    engine: &E,
    located: Located,
    selector: &ProcessSelector,
    placement: &Placement,
    needs_tracefs: bool,
) -> Result<Target<E::Ready>> {
    let mode = placement.mode;
    if mode != CaptureMode::Sidecar {
        match engine
            .prepare(&located.shell, &located.facts, &located.process)
            .await
        {
            Ok(ready) => {
                return Ok(Target {
                    shell: located.shell,
                    container: located.container,
                    facts: located.facts,
                    process: located.process,
                    process_facts: located.process_facts,
                    runtime: located.runtime,
                    ready,
                    sidecar: None,
                })
            }
            Err(e @ (Error::PerfMissing { .. } | Error::PerfDenied { .. }))
                if mode == CaptureMode::Auto =>
            {
                eprintln!(
                    "note: {}; profiling from a sidecar container instead",
                    first_line(&e.to_string())
                );
            }
            Err(e) => return Err(e),
        }
    }
    sidecar::start(
        engine,
        &located,
        selector,
        &placement.profiler_image,
        needs_tracefs,
    )
    .await
}

/// The process `selector` means, or an error listing the container's processes.
pub fn choose_process(
    facts: &ContainerFacts,
    selector: &ProcessSelector,
    container: &str,
) -> Result<ProcInfo> {
    select_process(&facts.processes, selector).map_err(|what| {
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
    })
}
