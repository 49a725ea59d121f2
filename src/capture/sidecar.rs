//! Sidecar mode: profiling a container that has no perf or may not use it, without
//! restarting or changing it. A short-lived container from the profiler image joins the
//! target's PID namespace (`pid: container:<target>`) with the least privileges that let
//! perf record there, tried in order; the target's binaries are read through
//! /proc/<pid>/root. The sidecar is labelled, removes itself when its lifetime ends, and
//! devprof removes it as soon as the capture is over.

use super::context::CaptureCtx;
use super::target::{choose_process, Located, Sidecar, Target};
use crate::docker::probe::ContainerFacts;
use crate::docker::target::{ContainerInfo, ProcessSelector};
use crate::docker::trust::{short_id, untrusted_fix, Refusal};
use crate::docker::SidecarSpec;
use crate::engines::{Engine, Reached};
use crate::error::{Error, Result};
use crate::settings::Placement;
use crate::text::first_line;
use std::time::Duration;

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

/// How long a sidecar outlives the capture window (perf script, copy-out) if devprof
/// itself dies; then it removes itself.
pub const SPARE_LIFETIME: Duration = Duration::from_secs(15 * 60);

/// Places the engine in a sidecar beside `located`, trying the rights of `LADDER` in turn;
/// Ctrl-C ends it at any step, and every sidecar it made goes.
pub async fn start<E: Engine>(
    engine: &E,
    located: &Located,
    placement: &Placement,
    needs_tracefs: bool,
    ctx: &CaptureCtx,
) -> Result<Target<E::Ready>> {
    let made = Made::default();
    let mut interrupts = ctx.interrupts.clone();
    let placed = tokio::select! {
        placed = climb(engine, located, placement, needs_tracefs, ctx, &made) => placed,
        _ = interrupts.next() => Err(Error::Interrupted),
    };
    if placed.is_err() {
        located.docker.remove_sidecars_named(&made.names()).await;
    }
    placed
}

/// The names of the sidecars one placement made, known before each is created.
#[derive(Default)]
struct Made(std::sync::Mutex<Vec<String>>);

impl Made {
    /// A new sidecar's name for `target_id`, kept.
    fn name_for(&self, target_id: &str) -> String {
        let name = crate::docker::containers::sidecar_name(target_id);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.clone());
        name
    }

    fn names(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Creates and starts a sidecar from `spec`, pausing where a test asks.
async fn made_and_started(
    located: &Located,
    spec: &SidecarSpec,
    ctx: &CaptureCtx,
    made: &Made,
) -> Result<ContainerInfo> {
    let docker = &located.docker;
    let info = docker
        .create_sidecar(spec, &made.name_for(&located.container.id))
        .await?;
    ctx.pause_point("sidecar:created").await;
    docker.start_sidecar(&info).await?;
    ctx.pause_point("sidecar:started").await;
    Ok(info)
}

/// The ladder of rights, from the least.
async fn climb<E: Engine>(
    engine: &E,
    located: &Located,
    placement: &Placement,
    needs_tracefs: bool,
    ctx: &CaptureCtx,
    made: &Made,
) -> Result<Target<E::Ready>> {
    let docker = &located.docker;
    let container = &located.container;
    let image = placement.profiler_image.clone();
    let image_id = require_image(located, &image).await?;
    let mut refusals: Vec<String> = Vec::new();
    // An engine that needs less than perf tries its minimum first.
    let minimum = engine.sidecar_minimum().map(|(cap_add, why)| Tier {
        cap_add,
        seccomp_unconfined: false,
        privileged: false,
        why,
    });
    for tier in minimum.iter().chain(LADDER) {
        if tier.privileged && !placement.allow_privileged {
            refusals.push(
                "privileged: not tried; devprof starts a privileged sidecar only with --allow-privileged"
                    .into(),
            );
            continue;
        }
        let spec = SidecarSpec {
            image: image_id.clone(),
            target_id: container.id.clone(),
            cap_add: tier.cap_add.iter().map(|c| c.to_string()).collect(),
            security_opt: if tier.seccomp_unconfined {
                vec!["seccomp=unconfined".into()]
            } else {
                Vec::new()
            },
            privileged: tier.privileged,
            binds: if needs_tracefs {
                // perf only reads tracefs (event ids and formats).
                vec!["/sys/kernel/tracing:/sys/kernel/tracing:ro".into()]
            } else {
                Vec::new()
            },
            lifetime: placement.window + SPARE_LIFETIME,
            share_network: false,
        };
        let info = match made_and_started(located, &spec, ctx, made).await {
            Ok(info) => info,
            Err(e) if refuses_rights(&e.to_string()) => {
                refusals.push(format!("{}: {}", tier.why, first_line(&e.to_string())));
                continue;
            }
            // Anything else is the endpoint failing, not a right it withholds: more rights
            // would fail the same way, so the ladder stops here.
            Err(e) => {
                return Err(Error::PerfFailed {
                    container: container.name.clone(),
                    step: "profiler sidecar".into(),
                    detail: format!(
                        "the endpoint could not start the sidecar (asked for {}); this is the endpoint's error, not a missing right: {}",
                        tier.why,
                        first_line(&e.to_string())
                    ),
                })
            }
        };
        let shell = docker.shell(&info);
        // The sidecar shares the pid namespace: the process is the one already chosen.
        let same = ProcessSelector::Pid(located.process.pid);
        match try_tier(engine, &shell, container, &same, &image, ctx).await {
            Ok((facts, process, ready)) => {
                if tier.privileged || tier.cap_add.contains(&"SYS_ADMIN") {
                    crate::note!("the sidecar needed {}", tier.why);
                }
                let sidecar = Sidecar {
                    info,
                    privileges: privileges_text(tier),
                };
                return Ok(located.beside(shell, facts, process, ready, sidecar));
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
    if !placement.allow_privileged {
        return Err(Error::PerfDenied {
            container: container.name.clone(),
            detail: format!(
                "perf could not record from a sidecar with any right short of privileged:\n    {}",
                refusals.join("\n    ")
            ),
            missing: vec!["a privileged sidecar (the only level not tried)".into()],
            fixes: vec![
                "allow it with --allow-privileged (DEVPROF_ALLOW_PRIVILEGED=true), or give the target container perf and the rights above (`devprof compose`)".into(),
            ],
        });
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

/// Places an engine of `Reach::Network` beside the target: a sidecar from the profiler
/// image that joins the target's network as well as its pids (an endpoint on its loopback
/// is reached, no port needs publishing), with no added rights: the engine reads what the
/// process serves, never the process. Its `prepare` runs there; the process is the one
/// already chosen.
pub async fn start_on_network<E: Engine>(
    engine: &E,
    located: Located,
    placement: &Placement,
    ctx: &CaptureCtx,
) -> Result<Target<E::Ready>> {
    let made = Made::default();
    let mut interrupts = ctx.interrupts.clone();
    let placed = tokio::select! {
        placed = on_network(engine, &located, placement, ctx, &made) => placed,
        _ = interrupts.next() => Err(Error::Interrupted),
    };
    match placed {
        Ok((ready, shell, sidecar)) => Ok(located.into_target(ready, Some((shell, sidecar)), None)),
        Err(e) => {
            located.docker.remove_sidecars_named(&made.names()).await;
            Err(e)
        }
    }
}

/// `start_on_network`'s sidecar, started and prepared.
async fn on_network<E: Engine>(
    engine: &E,
    located: &Located,
    placement: &Placement,
    ctx: &CaptureCtx,
    made: &Made,
) -> Result<(E::Ready, crate::docker::Shell, Sidecar)> {
    let docker = &located.docker;
    let container = &located.container;
    let image = placement.profiler_image.clone();
    let image_id = require_image(located, &image).await?;
    let spec = SidecarSpec {
        image: image_id,
        target_id: container.id.clone(),
        cap_add: Vec::new(),
        security_opt: Vec::new(),
        privileged: false,
        binds: Vec::new(),
        lifetime: placement.window + SPARE_LIFETIME,
        share_network: true,
    };
    let info = made_and_started(located, &spec, ctx, made).await?;
    let shell = docker.shell(&info);
    let ready = match engine
        .prepare(Reached {
            shell: &shell,
            facts: &located.facts,
            process: &located.process,
        })
        .await
    {
        Ok(ready) => ready,
        Err(e) => {
            docker.remove_container(&info.id).await;
            return Err(match e {
                Error::ToolMissing { tool, .. } => Error::ProfilerImageLacks {
                    container: container.name.clone(),
                    image,
                    tool,
                    fix: "rebuild it from dockerfiles/profiler.Dockerfile (scripts/testbed-up.sh does) or name another with --profiler-image".into(),
                },
                other => other,
            });
        }
    };
    ctx.pause_point("sidecar:engine").await;
    let sidecar = Sidecar {
        info,
        privileges: "no added rights, on the target's network".into(),
    };
    Ok((ready, shell, sidecar))
}

/// The ID of the profiler image every sidecar starts from, when devprof trusts it on this
/// endpoint; else an error saying how to get it or trust it.
async fn require_image(located: &Located, image: &str) -> Result<String> {
    let docker = &located.docker;
    match docker.trusted_image(image).await? {
        Ok(trusted) => Ok(trusted.id),
        Err(Refusal::Missing) => Err(Error::ProfilerImageMissing {
            container: located.container.name.clone(),
            fix: docker.flavour().image_fix(image),
            image: image.to_string(),
        }),
        Err(Refusal::Untrusted { id }) => Err(Error::ProfilerImageUntrusted {
            container: located.container.name.clone(),
            image: image.to_string(),
            id: short_id(&id).to_string(),
            endpoint: docker.address().to_string(),
            fix: untrusted_fix(image),
        }),
    }
}

/// Whether the engine may record the process from this sidecar.
async fn try_tier<E: Engine>(
    engine: &E,
    shell: &crate::docker::Shell,
    container: &ContainerInfo,
    selector: &ProcessSelector,
    image: &str,
    ctx: &CaptureCtx,
) -> Result<(ContainerFacts, crate::docker::target::ProcInfo, E::Ready)> {
    let facts = ContainerFacts::probe(shell).await?;
    ctx.pause_point("sidecar:probed").await;
    let process = choose_process(shell, &facts, selector, &container.name).await?;
    ctx.pause_point("sidecar:process").await;
    let ready = engine
        .prepare(Reached {
            shell,
            facts: &facts,
            process: &process,
        })
        .await
        .map_err(|e| match e {
            Error::PerfMissing { .. } => Error::ProfilerImageLacks {
                container: container.name.clone(),
                image: image.to_string(),
                tool: "working perf".into(),
                fix: "rebuild it with `devprof build`".into(),
            },
            Error::ToolMissing { tool, .. } => Error::ProfilerImageLacks {
                container: container.name.clone(),
                image: image.to_string(),
                tool,
                fix: "rebuild it (scripts/runtime-images.sh builds it with py-spy)".into(),
            },
            other => other,
        })?;
    ctx.pause_point("sidecar:engine").await;
    Ok((facts, process, ready))
}

/// Whether a sidecar (by its labels and state) belongs to no running capture: it stopped,
/// its lifetime is over, or the devprof that made it on this host is gone. A sidecar of a
/// live devprof, or of another host before its expiry, is kept. `alive` says whether a
/// pid on this host is a running devprof.
pub fn is_spare(
    labels: &std::collections::HashMap<String, String>,
    running: bool,
    now_secs: u64,
    this_host: &str,
    alive: impl Fn(u32) -> bool,
) -> bool {
    use crate::docker::{CREATOR_HOST_LABEL, CREATOR_PID_LABEL, EXPIRES_LABEL};
    if !running {
        return true;
    }
    let expires = labels
        .get(EXPIRES_LABEL)
        .and_then(|e| e.parse::<u64>().ok());
    let Some(expires) = expires else {
        // Made before sidecars were labelled with their creator: nothing to ask.
        return true;
    };
    if expires <= now_secs {
        return true;
    }
    let pid = labels
        .get(CREATOR_PID_LABEL)
        .and_then(|p| p.parse::<u32>().ok());
    match (labels.get(CREATOR_HOST_LABEL), pid) {
        (Some(host), Some(pid)) if host == this_host => !alive(pid),
        _ => false,
    }
}

/// Whether an endpoint's refusal to start a sidecar is about the rights it was asked for
/// (an unknown or forbidden capability, seccomp, privileged mode, an authorization plugin),
/// which a next step of the ladder may get past. Other failures (resource limits, storage,
/// namespaces, a missing image) are not denials: "operation not permitted" from setting a
/// resource limit says nothing about capabilities.
pub fn refuses_rights(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    if m.contains("rlimit") || m.contains("ulimit") {
        return false;
    }
    [
        "capabilit",
        "capadd",
        "cap_",
        "seccomp",
        "privileged",
        "authorization denied",
        "not allowed",
        "status code 403",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// Whether `pid` is a devprof running on this host (not another program that reused it).
pub fn devprof_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim().starts_with("devprof"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::{CREATOR_HOST_LABEL, CREATOR_PID_LABEL, EXPIRES_LABEL};
    use std::collections::HashMap;

    fn labels(host: &str, pid: u32, expires: u64) -> HashMap<String, String> {
        HashMap::from([
            (CREATOR_HOST_LABEL.to_string(), host.to_string()),
            (CREATOR_PID_LABEL.to_string(), pid.to_string()),
            (EXPIRES_LABEL.to_string(), expires.to_string()),
        ])
    }

    #[test]
    fn only_refused_rights_climb_the_ladder() {
        // Docker 20.10, which predates CAP_PERFMON; an authorization plugin; a daemon
        // with user namespaces that refuses privileged.
        for denial in [
            r#"Docker responded with status code 500: invalid CapAdd: unknown capability: "CAP_PERFMON""#,
            "Docker responded with status code 403: authorization denied by plugin opa: sidecar",
            "privileged mode is incompatible with user namespaces",
        ] {
            assert!(refuses_rights(denial), "{denial}");
        }
        // Podman's default limits on this kernel, a missing image, a target that is gone.
        for engine_error in [
            "Docker responded with status code 500: crun: error setting rlimit type 7: operation not permitted: OCI permission denied",
            "Docker responded with status code 404: No such image: devprof-profiler:latest",
            "Docker responded with status code 409: cannot join PID of a non running container",
        ] {
            assert!(!refuses_rights(engine_error), "{engine_error}");
        }
    }

    #[test]
    fn only_sidecars_of_finished_captures_are_spare() {
        let live = |pid: u32| pid == 42;
        // A running capture's sidecar on this host: kept.
        assert!(!is_spare(&labels("h", 42, 2000), true, 1000, "h", live));
        // Its devprof died: spare.
        assert!(is_spare(&labels("h", 43, 2000), true, 1000, "h", live));
        // Another host's, before expiry: kept (its pid means nothing here).
        assert!(!is_spare(&labels("other", 43, 2000), true, 1000, "h", live));
        // Expired, or stopped, or unlabelled: spare.
        assert!(is_spare(&labels("other", 43, 900), true, 1000, "h", live));
        assert!(is_spare(&labels("h", 42, 2000), false, 1000, "h", live));
        assert!(is_spare(&HashMap::new(), true, 1000, "h", live));
    }
}
