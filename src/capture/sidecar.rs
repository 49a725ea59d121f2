//! Sidecar mode: profiling a container that has no perf or may not use it, without
//! restarting or changing it. A short-lived container from the profiler image joins the
//! target's PID namespace (`pid: container:<target>`) with the least privileges that let
//! perf record there, tried in order; the target's binaries are read through
//! /proc/<pid>/root. The sidecar is labelled, removes itself when its lifetime ends, and
//! devprof removes it as soon as the capture is over.

use super::{choose_process, Located, Target};
use crate::docker::probe::ContainerFacts;
use crate::docker::target::{ContainerInfo, ProcessSelector};
use crate::docker::SidecarSpec;
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::text::first_line;
use std::time::Duration;

/// A running sidecar and the privileges it was given.
#[derive(Debug, Clone)]
pub struct Sidecar {
    pub info: ContainerInfo,
    pub privileges: String,
}

/// One step of the privilege ladder.
struct Tier {
    cap_add: &'static [&'static str],
    seccomp_unconfined: bool,
    privileged: bool,
    why: &'static str,
}

/// Least privilege first. PERFMON is enough on engines that know it; SYS_ADMIN stands in
/// where they don't; the default seccomp profile allows perf_event_open with SYS_ADMIN
/// only, so unconfined seccomp comes next; privileged is the last resort.
const LADDER: &[Tier] = &[
    Tier {
        cap_add: &["PERFMON", "SYS_PTRACE", "SYSLOG", "IPC_LOCK"],
        seccomp_unconfined: false,
        privileged: false,
        why: "CAP_PERFMON",
    },
    Tier {
        cap_add: &["PERFMON", "SYS_PTRACE", "SYSLOG", "IPC_LOCK"],
        seccomp_unconfined: true,
        privileged: false,
        why: "CAP_PERFMON with seccomp unconfined",
    },
    Tier {
        cap_add: &["SYS_ADMIN", "SYS_PTRACE", "SYSLOG", "IPC_LOCK"],
        seccomp_unconfined: false,
        privileged: false,
        why: "CAP_SYS_ADMIN (the engine rejects PERFMON, or PERFMON was not enough)",
    },
    Tier {
        cap_add: &["SYS_ADMIN", "SYS_PTRACE", "SYSLOG", "IPC_LOCK"],
        seccomp_unconfined: true,
        privileged: false,
        why: "CAP_SYS_ADMIN with seccomp unconfined",
    },
    Tier {
        cap_add: &[],
        seccomp_unconfined: false,
        privileged: true,
        why: "privileged (nothing less let perf record)",
    },
];

/// Longest a sidecar lives, after the capture window, if devprof itself dies.
const SPARE_LIFETIME: Duration = Duration::from_secs(15 * 60);

pub async fn start<E: Engine>(
    engine: &E,
    located: &Located,
    selector: &ProcessSelector,
    image: &str,
    needs_tracefs: bool,
) -> Result<Target<E::Ready>> {
    let docker = &located.docker;
    let container = &located.container;
    let image = image.to_string();
    if !docker.has_image(&image).await {
        return Err(Error::ProfilerImageMissing {
            container: container.name.clone(),
            image,
        });
    }
    let mut refusals: Vec<String> = Vec::new();
    // An engine that needs less than perf tries its minimum first.
    let minimum = engine.sidecar_minimum().map(|(cap_add, why)| Tier {
        cap_add,
        seccomp_unconfined: false,
        privileged: false,
        why,
    });
    for tier in minimum.iter().chain(LADDER) {
        let spec = SidecarSpec {
            image: image.clone(),
            target_id: container.id.clone(),
            cap_add: tier.cap_add.iter().map(|c| c.to_string()).collect(),
            security_opt: if tier.seccomp_unconfined {
                vec!["seccomp=unconfined".into()]
            } else {
                Vec::new()
            },
            privileged: tier.privileged,
            binds: if needs_tracefs {
                vec!["/sys/kernel/tracing:/sys/kernel/tracing".into()]
            } else {
                Vec::new()
            },
            lifetime: SPARE_LIFETIME + Duration::from_secs(6 * 3600),
        };
        let info = match docker.start_sidecar(&spec).await {
            Ok(info) => info,
            Err(e) => {
                refusals.push(format!("{}: {}", tier.why, first_line(&e.to_string())));
                continue;
            }
        };
        let shell = docker.shell(&info);
        match try_tier(engine, &shell, container, selector, &image).await {
            Ok((facts, process, ready)) => {
                if tier.privileged || tier.cap_add.contains(&"SYS_ADMIN") {
                    eprintln!("note: the sidecar needed {}", tier.why);
                }
                return Ok(Target {
                    shell,
                    container: container.clone(),
                    facts,
                    process,
                    process_facts: located.process_facts.clone(),
                    runtime: located.runtime,
                    ready,
                    sidecar: Some(Sidecar {
                        info,
                        privileges: privileges_text(tier),
                    }),
                });
            }
            Err(e) => {
                docker.remove_container(&info.id).await;
                match e {
                    Error::PerfDenied { .. } => {
                        refusals.push(format!("{}: {}", tier.why, first_line(&e.to_string())))
                    }
                    other => return Err(other),
                }
            }
        }
    }
    Err(Error::PerfFailed {
        container: container.name.clone(),
        step: "profiler sidecar".into(),
        detail: format!(
            "perf could not record from a sidecar at any privilege level:\n    {}",
            refusals.join("\n    ")
        ),
    })
}

/// Whether the engine may record the process from this sidecar.
async fn try_tier<E: Engine>(
    engine: &E,
    shell: &crate::docker::Shell,
    container: &ContainerInfo,
    selector: &ProcessSelector,
    image: &str,
) -> Result<(ContainerFacts, crate::docker::target::ProcInfo, E::Ready)> {
    let facts = ContainerFacts::probe(shell).await?;
    let process = choose_process(&facts, selector, &container.name)?;
    let ready = engine
        .prepare(shell, &facts, &process)
        .await
        .map_err(|e| match e {
            Error::PerfMissing { .. } => Error::PerfFailed {
                container: container.name.clone(),
                step: "profiler sidecar".into(),
                detail: format!(
                    "the profiler image {image} has no working perf; rebuild it with `devprof build`"
                ),
            },
            Error::ToolMissing { tool, .. } => Error::PerfFailed {
                container: container.name.clone(),
                step: "profiler sidecar".into(),
                detail: format!(
                    "the profiler image {image} has no {tool}; rebuild it (scripts/runtime-images.sh builds it with py-spy)"
                ),
            },
            other => other,
        })?;
    Ok((facts, process, ready))
}

fn privileges_text(tier: &Tier) -> String {
    let mut parts: Vec<String> = Vec::new();
    if tier.privileged {
        parts.push("privileged".into());
    } else {
        parts.push(format!("cap_add {}", tier.cap_add.join(",")));
        if tier.seccomp_unconfined {
            parts.push("seccomp=unconfined".into());
        }
    }
    parts.join(", ")
}
