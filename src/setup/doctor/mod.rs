//! `devprof doctor`: why a profile of a container would come out empty, hex-only or
//! denied. The facts are gathered here, through `docker` (the container's configuration,
//! the probe every capture makes, a 100 ms perf_event_open trial, the process's
//! environment and maps, its binary copied out and read by `elf`); `checks` turns them
//! into the checklist, purely.

pub mod checks;
pub mod facts;

use crate::docker::binary;
use crate::docker::probe::ContainerFacts;
use crate::docker::target::{resolve_container, select_process};
use crate::docker::trust::{short_id, untrusted_fix, Refusal};
use crate::docker::{ContainerShell, Docker};
use crate::engines::diagnosis::{self, EventStatus};
use crate::error::Error;
use crate::runtime::facts::script_argv0;
use crate::settings::setup::DoctorSettings;
use crate::text::{first_error_line, is_permission_error};
use facts::{DoctorFacts, ImageUnusable, ProcessExtras, Trial};

/// Gathers what it can; each step needs the one before (no daemon, no container, ...).
pub async fn gather(settings: &DoctorSettings) -> DoctorFacts {
    let mut facts = DoctorFacts {
        target: settings.target.clone(),
        ..Default::default()
    };
    let docker = match Docker::connect().await {
        Ok(d) => d,
        Err(e) => {
            facts.daemon = Some(Err(first_line(&e.to_string())));
            return facts;
        }
    };
    facts.daemon = Some(Ok(docker.address().to_string()));
    facts.endpoint = Some(docker.endpoint_version().clone());
    // `/info` takes Podman over half a second: asked beside the container's checks.
    let (rootless, ()) = tokio::join!(
        docker.rootless(),
        gather_container(&docker, settings, &mut facts)
    );
    facts.rootless = rootless;
    facts
}

/// The container's part of the facts: from its name to its process, perf and binary.
async fn gather_container(docker: &Docker, settings: &DoctorSettings, facts: &mut DoctorFacts) {
    let container = match docker
        .containers()
        .await
        .and_then(|all| resolve_container(&settings.target, &all))
    {
        Ok(c) => c,
        Err(e) => {
            facts.container = Some(Err(e.to_string()));
            return;
        }
    };
    facts.container = Some(Ok(container.clone()));
    facts.mode = Some(settings.placement.mode);
    let image = settings.placement.profiler_image.clone();
    facts.sidecar_image = Some(match docker.trusted_image(&image).await {
        Ok(Ok(_)) => Ok(image),
        Ok(Err(Refusal::Missing)) => Err(ImageUnusable {
            why: format!("the profiler image {image} is not on this engine"),
            fix: docker.flavour().image_fix(&image),
        }),
        Ok(Err(Refusal::Untrusted { id })) => Err(ImageUnusable {
            why: format!(
                "the profiler image {image} (image {}) is not one devprof trusts on {}",
                short_id(&id),
                docker.address()
            ),
            fix: untrusted_fix(&image),
        }),
        Err(e) => Err(ImageUnusable {
            why: format!(
                "the profiler image {image} could not be looked at: {}",
                first_line(&e.to_string())
            ),
            fix: "check the engine and the trust list (`devprof trust --list`)".into(),
        }),
    });
    facts.config = docker.container_config(&container.id).await.ok();
    let image = facts
        .config
        .as_ref()
        .map(|c| c.image.clone())
        .filter(|i| !i.is_empty())
        .unwrap_or_else(|| container.image.clone());
    facts.perfmon_known = docker.trial_cap_add(&image, &["PERFMON"]).await.ok();

    let shell = docker.shell(&container);
    let probe = match ContainerFacts::probe(&shell).await {
        Ok(p) => p,
        Err(e) => {
            facts.process = Some(Err(first_line(&e.to_string())));
            return;
        }
    };
    let process = select_process(&probe.processes, &settings.process).map_err(|what| {
        let listing: Vec<String> = probe
            .processes
            .iter()
            .take(8)
            .map(|p| format!("{} {}", p.pid, p.cmdline))
            .collect();
        format!("{what} (processes: {})", listing.join("; "))
    });
    facts.perf = Some(match diagnosis::find_perf(&shell, &probe).await {
        Ok(tool) => Ok(tool),
        Err(Error::PerfMissing { .. }) => Err(format!(
            "not installed in the container (no {})",
            crate::error::PERF_SEARCH
        )),
        Err(e) => Err(first_line(&e.to_string())),
    });
    facts.probe = Some(probe);

    if let Ok(p) = &process {
        let pid = p.pid.to_string();
        if let Some(Ok(tool)) = &facts.perf {
            facts.trial = Some(trial(&shell, &tool.path, &pid).await);
        }
        if let Ok(out) = shell
            .run(&[
                "sh",
                "-c",
                &facts::extras_script(),
                "sh",
                &pid,
                script_argv0(p),
            ])
            .await
        {
            let extras = ProcessExtras::parse(&out.stdout);
            let exe = extras.process.exe.clone();
            facts.binary = Some(if exe.starts_with('/') {
                let report = binary::read_from_container(docker, &container.name, &exe).await;
                (exe, report)
            } else {
                (format!("/proc/{pid}/exe"), Err("the process's executable cannot be read (no readlink in the container, or not allowed)".into()))
            });
            if checks::runtime_of(Some(p), &extras) == crate::runtime::Runtime::Jvm {
                facts.asprof = Some(diagnosis::find_asprof(&shell).await);
            }
            facts.extras = Some(extras);
        }
    }
    facts.process = Some(process);
}

/// A 100 ms `perf stat` on the process: does perf_event_open work there?
async fn trial<S: ContainerShell>(shell: &S, perf_path: &str, pid: &str) -> Trial {
    let argv = [
        perf_path,
        "stat",
        "-x,",
        "-e",
        "cpu-clock",
        "-p",
        pid,
        "--",
        "sleep",
        "0.1",
    ];
    match shell.run(&argv).await {
        Ok(out) if out.success() => {
            let ms = diagnosis::parse_stat_csv(&out.stderr)
                .into_iter()
                .find_map(|(name, status)| match status {
                    EventStatus::Counted(v) if name.starts_with("cpu-clock") => Some(v),
                    _ => None,
                })
                .unwrap_or(0.0);
            Trial::Allowed(ms)
        }
        Ok(out) if is_permission_error(&out.stderr) => Trial::Denied(first_error_line(&out.stderr)),
        Ok(out) => Trial::Failed(first_error_line(&out.stderr)),
        Err(e) => Trial::Failed(first_line(&e.to_string())),
    }
}

fn first_line(text: &str) -> String {
    crate::text::first_line(text).to_string()
}
