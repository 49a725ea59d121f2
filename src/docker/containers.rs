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

/// Whether a container is running, and how it ended when it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    pub running: bool,
    /// Docker's word: running, exited, dead, removing, ...; `removed` when it is gone.
    pub status: String,
    pub exit_code: Option<i64>,
}

impl Docker {
    /// Creates and starts a sidecar; it idles (`sleep`) until commands are run in it.
    pub async fn start_sidecar(&self, spec: &SidecarSpec) -> Result<ContainerInfo> {
        use bollard::models::{ContainerCreateBody, HostConfig};
        use bollard::query_parameters::CreateContainerOptionsBuilder;
        let name = format!(
            "devprof-sidecar-{}-{}",
            &spec.target_id[..spec.target_id.len().min(12)],
            std::process::id()
        );
        let expires = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            + spec.lifetime;
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".into(), spec.lifetime.as_secs().to_string()]),
            labels: Some(
                [
                    (SIDECAR_LABEL.to_string(), spec.target_id.clone()),
                    (CREATOR_HOST_LABEL.to_string(), host_name()),
                    (
                        CREATOR_PID_LABEL.to_string(),
                        std::process::id().to_string(),
                    ),
                    (EXPIRES_LABEL.to_string(), expires.as_secs().to_string()),
                ]
                .into_iter()
                .collect(),
            ),
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
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .client
            .create_container(Some(options), body)
            .await
            .map_err(|e| api_error(&format!("create sidecar from {}", spec.image), e))?;
        if let Err(e) = self.client.start_container(&created.id, None).await {
            self.remove_container(&created.id).await;
            return Err(api_error(&format!("start sidecar from {}", spec.image), e));
        }
        Ok(ContainerInfo {
            id: created.id,
            name,
            image: spec.image.clone(),
            state: "running".into(),
            service: None,
            project: None,
            labels: Default::default(),
        })
    }

    /// Removes a container, running or not; failures are reported, not fatal.
    pub async fn remove_container(&self, id: &str) {
        use bollard::query_parameters::RemoveContainerOptionsBuilder;
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        if let Err(e) = self.client.remove_container(id, Some(options)).await {
            let text = e.to_string();
            // Auto-removal may have won the race.
            if !text.contains("No such container")
                && !text.contains("already in progress")
                && !text.contains("404")
            {
                eprintln!("warning: could not remove container {id}: {text}");
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

    /// A container's state now; a container that no longer exists counts as stopped.
    pub async fn container_state(&self, container: &str) -> Result<ContainerState> {
        match self.client.inspect_container(container, None).await {
            Ok(c) => {
                let state = c.state.unwrap_or_default();
                Ok(ContainerState {
                    running: state.running == Some(true),
                    status: state.status.map(|s| s.to_string()).unwrap_or_default(),
                    exit_code: state.exit_code,
                })
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(ContainerState {
                running: false,
                status: "removed".into(),
                exit_code: None,
            }),
            Err(e) => Err(api_error(&format!("inspect container {container}"), e)),
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
            "devprof-trial-{}-{}",
            std::process::id(),
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
        use bollard::query_parameters::CreateContainerOptionsBuilder;
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
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let created = self
            .client
            .create_container(Some(options), body)
            .await
            .map_err(|e| api_error(&format!("create a container from {image}"), e))?;
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
