//! Everything that talks to the Docker Engine lives in this folder: connecting and listing
//! containers (here), running commands inside them with streamed output (`exec`), bringing
//! files out through the archive API with safe extraction (`archive`, over the bounded
//! `pipe`), sidecar, trial and throw-away containers (`containers`), image builds and
//! inspection (`image`), the one-exec probe of what a container offers (`probe`), and the
//! pure rules that pick the target container and process (`target`). The rest of devprof
//! sees plain data and the `ContainerShell` trait, never bollard types.

pub mod archive;
pub mod containers;
pub mod endpoint;
pub mod exec;
pub mod image;
pub mod pipe;
pub mod probe;
pub mod target;

pub use containers::{
    ContainerConfig, ContainerState, SidecarSpec, CREATOR_HOST_LABEL, CREATOR_PID_LABEL,
    EXPIRES_LABEL, SIDECAR_LABEL,
};
pub use exec::{ContainerShell, ExecOutput, Shell};
pub use image::{BuildEnd, BuildRequest, ImageDetails};

use crate::error::{Error, Result};
use bollard::query_parameters::ListContainersOptionsBuilder;
use std::time::Duration;
use target::ContainerInfo;

/// How long connecting may take before the daemon counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Captures and downloads may run long; bollard's own default (2 min) is too short.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

#[derive(Clone)]
pub struct Docker {
    client: bollard::Docker,
    address: String,
}

/// The engine's version and kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineVersion {
    pub version: String,
    pub api_version: String,
    pub kernel: String,
}

impl Docker {
    /// Connects to DOCKER_HOST (or the default socket), checks the daemon answers and
    /// settles on an API version both sides speak.
    pub async fn connect() -> Result<Self> {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let endpoint =
            endpoint::resolve(&|k| std::env::var(k).ok(), home.as_deref()).map_err(|reason| {
                Error::DaemonUnreachable {
                    address: "(docker context)".into(),
                    reason,
                }
            })?;
        let address = endpoint.host.clone();
        let unreachable = |reason: String| Error::DaemonUnreachable {
            address: format!("{} (from {})", endpoint.host, endpoint.source),
            reason,
        };
        if endpoint.tls {
            // bollard's TLS needs its `ssl` feature (rustls), which this build leaves out;
            // connecting in plain HTTP to a TLS port would fail obscurely, or worse succeed.
            return Err(unreachable(
                "this engine is reached over TLS (DOCKER_TLS_VERIFY, https:// or a context with TLS material),                  which this build of devprof does not speak; reach it through an SSH tunnel                  (`ssh -L 2375:/var/run/docker.sock HOST`, then DOCKER_HOST=tcp://127.0.0.1:2375) or a unix socket"
                    .into(),
            ));
        }
        if address.starts_with("ssh://") {
            return Err(unreachable(
                "ssh:// engines need bollard's ssh feature, which this build leaves out; forward the socket instead:                  `ssh -L 2375:/var/run/docker.sock HOST`, then DOCKER_HOST=tcp://127.0.0.1:2375"
                    .into(),
            ));
        }
        let client = bollard::Docker::connect_with_host(&address)
            .map_err(|e| unreachable(e.to_string()))?
            .with_timeout(REQUEST_TIMEOUT);
        let negotiated = tokio::time::timeout(CONNECT_TIMEOUT, async {
            client.ping().await?;
            client.negotiate_version().await
        })
        .await
        .map_err(|_| unreachable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?
        .map_err(|e| unreachable(e.to_string()))?;
        Ok(Docker {
            client: negotiated,
            address,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    /// Every container the engine knows, running or not.
    pub async fn containers(&self) -> Result<Vec<ContainerInfo>> {
        let options = ListContainersOptionsBuilder::default().all(true).build();
        let list = self
            .client
            .list_containers(Some(options))
            .await
            .map_err(|e| api_error("list containers", e))?;
        Ok(list
            .into_iter()
            .map(|c| {
                let labels = c.labels.unwrap_or_default();
                ContainerInfo {
                    id: c.id.unwrap_or_default(),
                    name: c
                        .names
                        .and_then(|n| n.into_iter().next())
                        .map(|n| n.trim_start_matches('/').to_string())
                        .unwrap_or_default(),
                    image: c.image.unwrap_or_default(),
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                    service: labels.get("com.docker.compose.service").cloned(),
                    project: labels.get("com.docker.compose.project").cloned(),
                    labels,
                }
            })
            .collect())
    }

    pub fn shell(&self, container: &ContainerInfo) -> Shell {
        Shell {
            docker: self.clone(),
            container: container.name.clone(),
        }
    }

    pub async fn engine_version(&self) -> Result<EngineVersion> {
        let v = self
            .client
            .version()
            .await
            .map_err(|e| api_error("engine version", e))?;
        Ok(EngineVersion {
            version: v.version.unwrap_or_default(),
            api_version: v.api_version.unwrap_or_default(),
            kernel: v.kernel_version.unwrap_or_default(),
        })
    }
}

pub(crate) fn api_error(action: &str, e: bollard::errors::Error) -> Error {
    Error::Docker {
        action: action.to_string(),
        reason: e.to_string(),
    }
}
