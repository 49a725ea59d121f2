//! Which container and which process a capture records, found once (`locate`), and the
//! target it becomes once placed (`Target`): reached from the container's own shell, or
//! from a sidecar's that sees the same process. What the engine asked ahead of its window
//! (the workdir among it) is owned here until the capture takes it.

use super::context::CaptureCtx;
use super::liveness::{self, set_up, Watch};
use super::sysctl::{self, SavedSysctls};
use super::workdir::Workdir;
use crate::docker::probe::ContainerFacts;
use crate::docker::target::{
    busiest, candidates, parse_cpu_sample, resolve_container, ContainerInfo, CpuSample, ProcInfo,
    ProcessSelector, CPU_SAMPLE_SCRIPT,
};
use crate::docker::{ContainerShell, Docker, Shell};
use crate::engines::{Ahead, Asked, Reached};
use crate::error::{Error, Result};
use crate::runtime::{self, ProcessFacts, Runtime};
use crate::symbols::binary::GoBinary;
use std::sync::Arc;

/// A running sidecar beside the target, and the privileges it was given.
#[derive(Debug, Clone)]
pub struct Sidecar {
    pub info: ContainerInfo,
    pub privileges: String,
}

/// The target as the user named it, and how its process is chosen.
#[derive(Debug, Clone)]
pub struct TargetSpec {
    /// A container name, an id prefix or a compose service, as typed.
    pub name: String,
    pub process: ProcessSelector,
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
    /// What the engine asked ahead, for the engine chosen for the process.
    pub asked: Asked,
    /// A workdir made in the container ahead of the window.
    pub workdir: Option<Workdir>,
}

impl Located {
    /// Gives up what was made ahead for a capture that will not record from the
    /// container's own shell (a sidecar records, or the capture failed first): the
    /// recorder primed on a standby, and the workdir.
    pub async fn release_ahead(&mut self) {
        self.shell.release_standbys();
        if let Some(workdir) = self.workdir.take() {
            workdir.remove_unused(&self.shell).await;
        }
    }

    /// The found process, ready for an engine (`ready`, what its `prepare` found):
    /// recorded from the container's own shell (keeping what was made ahead in it), or
    /// from a sidecar's that sees the same process.
    pub fn into_target<R>(
        self,
        ready: R,
        sidecar: Option<(Shell, Sidecar)>,
        sysctls: Option<SavedSysctls>,
    ) -> Target<R> {
        let (shell, sidecar, workdir) = match sidecar {
            Some((shell, sidecar)) => (shell, Some(sidecar), None),
            None => (self.shell, None, self.workdir),
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
            workdir,
        }
    }
}

impl Located {
    /// The process as a sidecar beside it sees it (`facts` and `process` from its own
    /// probe), ready for the engine there.
    pub fn beside<R>(
        &self,
        shell: Shell,
        facts: ContainerFacts,
        process: ProcInfo,
        ready: R,
        sidecar: Sidecar,
    ) -> Target<R> {
        Target {
            shell,
            container: self.container.clone(),
            facts,
            process,
            process_facts: self.process_facts.clone(),
            runtime: self.runtime,
            go: self.go.clone(),
            ready,
            sidecar: Some(sidecar),
            sysctls: None,
            workdir: None,
        }
    }
}

/// Connects, resolves the container and chooses the process, asking `ahead` of the
/// container beside its probes. Whatever fails, nothing made ahead stays in the container.
pub async fn locate(ctx: &CaptureCtx, spec: &TargetSpec, ahead: &Ahead) -> Result<Located> {
    let docker = ctx.connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(&spec.name, &containers)?;
    let shell = docker.shell(&container);
    // From here every step runs in the container: raced against its stopping.
    let watch = Watch::over_container(&container, &shell);
    set_up(
        &watch,
        located_in(ctx, spec, ahead, docker, container, shell),
    )
    .await
}

/// `locate` once the container is found.
async fn located_in(
    ctx: &CaptureCtx,
    spec: &TargetSpec,
    ahead: &Ahead,
    docker: Docker,
    container: ContainerInfo,
    shell: Shell,
) -> Result<Located> {
    let facts = ahead.probe(&shell).await?;
    ctx.report.mark("container probed");
    ctx.pause_point("exec:probed").await;
    let chosen = match ctx.not_interrupted() {
        Ok(()) => choose_process(&shell, &facts, &spec.process, &container.name).await,
        Err(e) => Err(e),
    };
    let process = match chosen {
        Ok(process) => process,
        Err(e) => {
            // The probe's standby and the workdir it made, if it made one, go.
            shell.release_standbys();
            if let Some(workdir) = facts.made_workdir().and_then(Workdir::made_ahead) {
                workdir.remove_unused(&shell).await;
            }
            return Err(e);
        }
    };
    ctx.pause_point("exec:process").await;
    let at = Reached {
        shell: &shell,
        facts: &facts,
        process: &process,
    };
    let (process_facts, started) = ahead.beside_process(at, &ctx.report).await;
    let mut located = Located {
        workdir: started.workdir.as_deref().and_then(Workdir::made_ahead),
        asked: started.asked,
        process_facts: ProcessFacts::default(),
        runtime: Runtime::Native,
        go: None,
        docker,
        container,
        shell,
        facts,
        process,
    };
    let found =
        process_facts.and_then(|facts| ctx.step(super::context::Step::Locate).map(|_| facts));
    match found {
        Ok(facts) => located.process_facts = facts,
        Err(e) => {
            located.release_ahead().await;
            return Err(e);
        }
    }
    ctx.report.mark("process probed");
    located.runtime = runtime::of_process(&located.process, &located.process_facts);
    // Read from the container itself (the archive API needs no rights in the process, and
    // no tools in the container: where it has no grep, this is what tells Go apart).
    let read_go = located.runtime == Runtime::Go
        || runtime::maybe_go(located.runtime, &located.process_facts);
    located.go = match (read_go, located.process_facts.executable()) {
        (true, Some(exe)) => {
            crate::docker::binary::go_binary_from_container(
                &located.docker,
                &located.container.id,
                exe,
            )
            .await
        }
        _ => None,
    }
    .map(Arc::new);
    if located.go.is_some() {
        located.runtime = Runtime::Go;
    }
    Ok(located)
}

/// A target ready to record: the container, the process, and what reaches it (an
/// engine's `Ready`, or a recipe's own facts). In sidecar mode `shell` runs commands in
/// the profiler container beside the target, which shares its PID namespace (so pids are
/// the same) and reaches its files through /proc/<pid>/root.
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
    pub sidecar: Option<Sidecar>,
    /// Host-wide sysctls lowered for this capture (`--allow-sysctl`), to restore.
    pub sysctls: Option<SavedSysctls>,
    /// The workdir made ahead in `shell`, until the capture takes it.
    workdir: Option<Workdir>,
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

    /// The capture's workdir: the one made ahead, else one made now.
    pub async fn take_workdir(&mut self) -> Result<Workdir> {
        match self.workdir.take() {
            Some(made) => Ok(made),
            None => Workdir::make(&self.shell).await,
        }
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

    /// Gives back everything the capture took: a workdir made ahead that it never used,
    /// the standbys, lowered sysctls, the sidecar. Always called, whatever happened.
    pub async fn release(&mut self) {
        self.shell.release_standbys();
        if let Some(workdir) = self.workdir.take() {
            workdir.remove_unused(&self.shell).await;
        }
        if let Some(saved) = &self.sysctls {
            sysctl::restore(&self.shell, saved).await;
        }
        if let Some(sidecar) = &self.sidecar {
            self.shell.docker().remove_container(&sidecar.info.id).await;
        }
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
            .map(|p| format!("{:>6}  {}", p.pid, crate::text::printable(&p.cmdline)))
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
                crate::text::printable(&crate::text::truncate(&p.cmdline, 80))
            )
        })
        .collect();
    crate::note!(
        "{} processes in {container} match; chose pid {} ({}), the busiest over {CPU_SAMPLE_SECS} s (--pid picks another):\n  {:>8}  {:<10} {:>5}  command\n{}",
        found.len(),
        chosen.pid,
        crate::text::printable(chosen.program()),
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
