//! Containers devprof makes itself: profiler sidecars beside a target, trial containers
//! that ask the engine whether it accepts a setting, and throw-away containers for looking
//! inside an image; plus what `docker inspect` says about a container.

use super::target::ContainerInfo;
use super::{api_error, Docker};
use crate::error::Result;
use std::time::Duration;

/// A short-lived profiler container beside a target (`pid: container:<target>`).
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarSpec {
    pub image: String,
    /// The target container's id: the sidecar joins its PID namespace.
    pub target_id: String,
    pub cap_add: Vec<String>,
    pub security_opt: Vec<String>,
    pub privileged: bool,
    /// Host paths bind-mounted (`/sys/kernel/tracing:/sys/kernel/tracing`).
    pub binds: Vec<String>,
    /// The sidecar removes itself after this long even if devprof is killed.
    pub lifetime: Duration,
    /// Also join the target's network namespace (`network_mode: container:<target>`), to
    /// reach endpoints it serves on its loopback interface.
    pub share_network: bool,
}

/// The resource limits of every container devprof creates. Set rather than left to the
/// endpoint: Podman gives each container a default of 1048576 open files, which a kernel
/// or parent whose hard limit is lower refuses ("error setting rlimit type 7: operation
/// not permitted"), and the container never starts. These are below any usual hard limit
/// and above what perf needs (one descriptor per thread and CPU it records).
pub const OPEN_FILES_LIMIT: i64 = 16384;
pub const PROCESSES_LIMIT: i64 = 16384;

fn own_limits() -> Vec<bollard::models::ResourcesUlimits> {
    [("nofile", OPEN_FILES_LIMIT), ("nproc", PROCESSES_LIMIT)]
        .into_iter()
        .map(|(name, limit)| bollard::models::ResourcesUlimits {
            name: Some(name.into()),
            soft: Some(limit),
            hard: Some(limit),
        })
        .collect()
}

/// The label every devprof sidecar carries (`devprof clean --containers` looks for it).
pub const SIDECAR_LABEL: &str = "devprof.sidecar";
/// Who made a sidecar and until when it is needed, so `clean --containers` removes only
/// the sidecars of captures that are over: the creator's host name and pid, and the unix
/// time after which it is spare.
pub const CREATOR_HOST_LABEL: &str = "devprof.creator.host";
pub const CREATOR_PID_LABEL: &str = "devprof.creator.pid";
pub const EXPIRES_LABEL: &str = "devprof.expires";

/// This machine's host name (the kernel's), for sidecar labels.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// `labels`, and who made the container (this host and process), for clean-up.
fn made_here<const N: usize>(
    labels: [(&str, String); N],
) -> std::collections::HashMap<String, String> {
    labels
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain([
            (CREATOR_HOST_LABEL.to_string(), host_name()),
            (
                CREATOR_PID_LABEL.to_string(),
                std::process::id().to_string(),
            ),
        ])
        .collect()
}

/// A name no other container devprof makes has: several sidecars of one target run at
/// once (`profile --kinds cpu,offcpu`), so the target's short id and this process's pid
/// are followed by a counter. `clean --containers` finds sidecars by their label; the name
/// only has to say what the container is.
pub fn sidecar_name(target_id: &str) -> String {
    format!(
        "devprof-sidecar-{}-{}-{}",
        &target_id[..target_id.len().min(12)],
        std::process::id(),
        next_serial()
    )
}

/// A number that grows with every container this process names.
fn next_serial() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether a container is running, and how it ended when it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub running: bool,
    /// Paused (`docker pause`): running, but every process in it frozen.
    pub paused: bool,
    /// Docker's word: running, exited, dead, removing, ...; `removed` when it is gone.
    pub status: String,
    pub exit_code: Option<i64>,
}

/// Longest the engine may take to remove a container (it stops it first).
const REMOVE_LIMIT: Duration = Duration::from_secs(30);

impl Docker {
    /// Creates a sidecar named `name` (`sidecar_name`); started (`start_sidecar`), it idles
    /// (`sleep`) until commands are run in it.
    pub async fn create_sidecar(&self, spec: &SidecarSpec, name: &str) -> Result<ContainerInfo> {
        use bollard::models::{ContainerCreateBody, HostConfig};
        let expires = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            + spec.lifetime;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".into(), spec.lifetime.as_secs().to_string()]),
            labels: Some(made_here([
                (SIDECAR_LABEL, spec.target_id.clone()),
                (EXPIRES_LABEL, expires.as_secs().to_string()),
            ])),
            host_config: Some(HostConfig {
                pid_mode: Some(format!("container:{}", spec.target_id)),
                network_mode: spec
                    .share_network
                    .then(|| format!("container:{}", spec.target_id)),
                cap_add: (!spec.cap_add.is_empty()).then(|| spec.cap_add.clone()),
                security_opt: (!spec.security_opt.is_empty()).then(|| spec.security_opt.clone()),
                privileged: Some(spec.privileged),
                binds: (!spec.binds.is_empty()).then(|| spec.binds.clone()),
                auto_remove: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = self
            .create_named(name, body, &format!("sidecar from {}", spec.image))
            .await?;
        Ok(ContainerInfo {
            id: created.id,
            name: name.to_string(),
            image: spec.image.clone(),
            state: "running".into(),
            service: None,
            project: None,
            labels: Default::default(),
        })
    }

    /// Starts a sidecar `create_sidecar` made; one that does not start is removed.
    pub async fn start_sidecar(&self, sidecar: &ContainerInfo) -> Result<()> {
        if let Err(e) = self.client.start_container(&sidecar.id, None).await {
            self.remove_container(&sidecar.id).await;
            return Err(api_error(
                &format!("start sidecar from {}", sidecar.image),
                e,
            ));
        }
        Ok(())
    }

    /// Removes the sidecars this process made for the target `target_id` (a capture given
    /// up while it set one up: the target stopped, or Ctrl-C); the names are known before
    /// the containers are, so a create cut short leaves nothing either.
    pub async fn remove_sidecars_named(&self, names: &[String]) {
        for name in names {
            self.remove_container(name).await;
        }
    }

    /// Creates a container named `name`; `what` says what it is in the error.
    async fn create_named(
        &self,
        name: &str,
        body: bollard::models::ContainerCreateBody,
        what: &str,
    ) -> Result<bollard::models::ContainerCreateResponse> {
        use bollard::query_parameters::CreateContainerOptionsBuilder;
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let mut body = body;
        let host_config = body.host_config.get_or_insert_with(Default::default);
        if host_config.ulimits.is_none() {
            host_config.ulimits = Some(own_limits());
        }
        self.client
            .create_container(Some(options), body)
            .await
            .map_err(|e| api_error(&format!("create {what}"), e))
    }

    /// Removes a container, running or not; failures are reported, not fatal.
    pub async fn remove_container(&self, id: &str) {
        use bollard::query_parameters::RemoveContainerOptionsBuilder;
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        let removed = tokio::time::timeout(
            REMOVE_LIMIT,
            self.client.remove_container(id, Some(options)),
        )
        .await
        .unwrap_or_else(|_| {
            Err(bollard::errors::Error::IOError {
                err: std::io::Error::other(format!(
                    "the engine did not remove it within {} s",
                    REMOVE_LIMIT.as_secs()
                )),
            })
        });
        if let Err(e) = removed {
            let text = e.to_string();
            if text.contains("already in progress") {
                // Auto-removal won the race (a sidecar whose target died): it is gone
                // once the engine says so, not when it started removing it.
                self.until_removed(id).await;
            } else if !text.contains("No such container") && !text.contains("404") {
                let line = format!("warning: could not remove container {id}: {text}");
                eprintln!("{}", crate::text::terminal(&line));
            }
        }
    }

    /// Waits (at most 10 s) until the engine no longer knows the container.
    async fn until_removed(&self, id: &str) {
        for _ in 0..50 {
            match self.container_state(id).await {
                Ok(state) if state.status == "removed" => return,
                Err(_) => return,
                Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Returns when the container is not running (at once if it is not now), with its exit
    /// code; None when it no longer exists. One long request that the engine answers when
    /// the container stops, so watching a capture's target costs the engine nothing while
    /// the window runs (an inspect costs it about 2.6 ms). Err when the engine broke the
    /// request off for another reason (a dropped connection): then ask `container_state`.
    pub async fn wait_not_running(&self, container: &str) -> Result<Option<i64>> {
        use bollard::query_parameters::WaitContainerOptionsBuilder;
        use futures_util::StreamExt;
        let options = WaitContainerOptionsBuilder::default()
            .condition("not-running")
            .build();
        let mut answers = self.client.wait_container(container, Some(options));
        match answers.next().await {
            Some(Ok(answer)) => Ok(Some(answer.status_code)),
            // bollard turns a non-zero exit code into an error.
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => {
                Ok(Some(code))
            }
            Some(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                ..
            })) => Ok(None),
            Some(Err(e)) => Err(api_error(&format!("wait for container {container}"), e)),
            None => Err(crate::error::Error::Docker {
                action: format!("wait for container {container}"),
                reason: "the engine closed the request without an answer".into(),
            }),
        }
    }

    /// Returns when the engine reports the container paused (`docker pause`) from now on.
    /// Err when the engine broke the request off: then ask `container_state`.
    pub async fn wait_paused(&self, container: &str) -> Result<()> {
        use bollard::query_parameters::EventsOptionsBuilder;
        use futures_util::StreamExt;
        let filters = std::collections::HashMap::from([
            ("type", vec!["container"]),
            ("container", vec![container]),
            ("event", vec!["pause"]),
        ]);
        let options = EventsOptionsBuilder::default().filters(&filters).build();
        let mut events = self.client.events(Some(options));
        match events.next().await {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(api_error(&format!("watch container {container}"), e)),
            None => Err(crate::error::Error::Docker {
                action: format!("watch container {container}"),
                reason: "the engine closed the event stream".into(),
            }),
        }
    }

    /// A container's state now; a container that no longer exists counts as stopped.
    pub async fn container_state(&self, container: &str) -> Result<ContainerState> {
        match self.client.inspect_container(container, None).await {
            Ok(c) => {
                let state = c.state.unwrap_or_default();
                Ok(ContainerState {
                    running: state.running == Some(true),
                    paused: state.paused == Some(true),
                    status: state.status.map(|s| s.to_string()).unwrap_or_default(),
                    exit_code: state.exit_code,
                })
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(ContainerState {
                running: false,
                paused: false,
                status: "removed".into(),
                exit_code: None,
            }),
            Err(e) => Err(api_error(&format!("inspect container {container}"), e)),
        }
    }

    /// Removes the sidecars this process made for the target `target_id`, once the target
    /// stopped during their set-up: they shared its pids and died with it, and the engine
    /// removes them itself; this is the backstop for one it has not.
    pub async fn remove_own_sidecars_of(&self, target_id: &str) {
        let own = std::process::id().to_string();
        let Ok(sidecars) = self.containers_with_label(SIDECAR_LABEL).await else {
            return;
        };
        for sidecar in sidecars {
            if sidecar.labels.get(SIDECAR_LABEL).map(String::as_str) == Some(target_id)
                && sidecar.labels.get(CREATOR_PID_LABEL) == Some(&own)
            {
                self.remove_container(&sidecar.id).await;
            }
        }
    }

    /// Containers carrying `label`, running or not.
    pub async fn containers_with_label(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        Ok(self
            .containers()
            .await?
            .into_iter()
            .filter(|c| c.labels.contains_key(label))
            .collect())
    }
}

/// The label of the short-lived container that writes the host's perf sysctls.
pub const SYSCTL_HELPER_LABEL: &str = "devprof.sysctl-helper";

/// Longest a sysctl helper may take, from creation to exit.
const SYSCTL_HELPER_LIMIT: Duration = Duration::from_secs(20);

impl Docker {
    /// Runs `script` (sh) to its end in a throw-away container from `image` that may write
    /// the host's /proc/sys: CAP_SYS_ADMIN and an unconfined /proc (no masked or read-only
    /// paths, as `--security-opt systempaths=unconfined`; AppArmor's default profile denies
    /// those writes too), not privileged; no network. Ok(true) when the script exited 0. The
    /// container is removed whatever happens.
    pub async fn run_sysctl_helper(&self, image: &str, script: &str) -> Result<bool> {
        use bollard::models::{ContainerCreateBody, HostConfig};
        let name = format!("devprof-sysctl-{}-{}", std::process::id(), next_serial());
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            entrypoint: Some(vec!["sh".into(), "-c".into(), script.to_string()]),
            cmd: Some(vec![]),
            user: Some("0".into()),
            labels: Some(made_here([(SYSCTL_HELPER_LABEL, "1".to_string())])),
            host_config: Some(HostConfig {
                cap_add: Some(vec!["SYS_ADMIN".into()]),
                security_opt: Some(vec!["apparmor=unconfined".into()]),
                masked_paths: Some(Vec::new()),
                readonly_paths: Some(Vec::new()),
                network_mode: Some("none".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = self
            .create_named(&name, body, &format!("a sysctl helper from {image}"))
            .await?;
        let ran = async {
            self.client
                .start_container(&created.id, None)
                .await
                .map_err(|e| api_error(&format!("start a sysctl helper from {image}"), e))?;
            self.wait_not_running(&created.id).await
        };
        let outcome = tokio::time::timeout(SYSCTL_HELPER_LIMIT, ran).await;
        self.remove_container(&created.id).await;
        match outcome {
            Ok(Ok(code)) => Ok(code == Some(0)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(crate::error::Error::Docker {
                action: format!("run a sysctl helper from {image}"),
                reason: format!(
                    "it did not finish within {} s",
                    SYSCTL_HELPER_LIMIT.as_secs()
                ),
            }),
        }
    }
}

/// What `docker inspect` says about a container's profiling-relevant configuration.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ContainerConfig {
    pub id: String,
    pub name: String,
    pub image: String,
    pub cap_add: Vec<String>,
    pub cap_drop: Vec<String>,
    pub security_opt: Vec<String>,
    pub privileged: bool,
    pub pid_mode: String,
    /// Container paths with something mounted on them.
    pub mount_targets: Vec<String>,
    pub env: Vec<String>,
    pub labels: std::collections::HashMap<String, String>,
}

impl Docker {
    /// A container's configuration (capabilities, seccomp, privileged, mounts).
    pub async fn container_config(&self, container: &str) -> Result<ContainerConfig> {
        let c = self
            .client
            .inspect_container(container, None)
            .await
            .map_err(|e| api_error(&format!("inspect container {container}"), e))?;
        let host = c.host_config.unwrap_or_default();
        let config = c.config.unwrap_or_default();
        Ok(ContainerConfig {
            id: c.id.unwrap_or_default(),
            name: c
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            image: config.image.clone().unwrap_or_default(),
            cap_add: host.cap_add.unwrap_or_default(),
            cap_drop: host.cap_drop.unwrap_or_default(),
            security_opt: host.security_opt.unwrap_or_default(),
            privileged: host.privileged.unwrap_or(false),
            pid_mode: host.pid_mode.unwrap_or_default(),
            mount_targets: c
                .mounts
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.destination)
                .collect(),
            env: config.env.unwrap_or_default(),
            labels: config.labels.unwrap_or_default(),
        })
    }

    /// Whether the engine accepts these added capabilities: creates (never starts) a
    /// container from `image` with them and removes it. `Err(message)` is the engine's
    /// refusal (e.g. `invalid CapAdd: unknown capability: "CAP_PERFMON"`).
    pub async fn trial_cap_add(
        &self,
        image: &str,
        caps: &[&str],
    ) -> Result<std::result::Result<(), String>> {
        use bollard::models::{ContainerCreateBody, HostConfig};
        use bollard::query_parameters::CreateContainerOptionsBuilder;
        let name = format!(
            "devprof-trial-{}-{}-{}",
            std::process::id(),
            next_serial(),
            caps.join("-").to_lowercase()
        );
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            entrypoint: Some(vec!["true".into()]),
            labels: Some(
                [("devprof.trial".to_string(), "1".to_string())]
                    .into_iter()
                    .collect(),
            ),
            host_config: Some(HostConfig {
                cap_add: Some(caps.iter().map(|c| c.to_string()).collect()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        match self.client.create_container(Some(options), body).await {
            Ok(created) => {
                self.remove_container(&created.id).await;
                Ok(Ok(()))
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 400 | 500,
                message,
            }) => Ok(Err(message)),
            Err(e) => Err(api_error(&format!("trial container from {image}"), e)),
        }
    }

    /// Starts a throw-away container from `image` that idles (`sleep`), to look inside the
    /// image (perf, the binary). The caller removes it with `remove_container`.
    pub async fn start_idle_container(&self, image: &str, name: &str) -> Result<ContainerInfo> {
        use bollard::models::ContainerCreateBody;
        let body = ContainerCreateBody {
            image: Some(image.to_string()),
            entrypoint: Some(vec!["sleep".into(), "600".into()]),
            cmd: Some(vec![]),
            labels: Some(
                [("devprof.check".to_string(), image.to_string())]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        };
        let created = self
            .create_named(name, body, &format!("a container from {image}"))
            .await?;
        if let Err(e) = self.client.start_container(&created.id, None).await {
            self.remove_container(&created.id).await;
            return Err(api_error(&format!("start a container from {image}"), e));
        }
        Ok(ContainerInfo {
            id: created.id,
            name: name.to_string(),
            image: image.to_string(),
            state: "running".into(),
            service: None,
            project: None,
            labels: Default::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the second sidecar of one target (`profile --kinds cpu,offcpu
    /// --mode sidecar`) was refused by the engine at every tier: same name as the first.
    #[test]
    fn two_sidecars_of_one_target_get_different_names() {
        let id = "0123456789abcdef0123";
        let first = sidecar_name(id);
        let second = sidecar_name(id);
        assert_ne!(first, second);
        let prefix = format!("devprof-sidecar-0123456789ab-{}-", std::process::id());
        assert!(
            first.starts_with(&prefix) && second.starts_with(&prefix),
            "{first} {second}"
        );
    }
}
