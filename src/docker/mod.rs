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
pub mod ssh;
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
    /// An ssh engine's private socket: it lives as long as any handle to the engine.
    _ssh: Option<std::sync::Arc<ssh::SshBridge>>,
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
        let mut bridge = None;
        let client = if let Some(tls) = endpoint.tls.as_ref() {
            let paths = tls.paths().map_err(unreachable)?;
            // bollard reads DOCKER_TLS_VERIFY itself only in connect_with_host; the files
            // are named here so that a context's own material is used.
            bollard::Docker::connect_with_ssl(
                &address,
                &paths.key,
                &paths.cert,
                &paths.ca,
                REQUEST_TIMEOUT.as_secs(),
                bollard::API_DEFAULT_VERSION,
            )
            .map_err(|e| unreachable(tls_reason(&with_causes(&e), &paths)))?
        } else if address.starts_with("ssh://") {
            let target = ssh::SshTarget::parse(&address).map_err(unreachable)?;
            let started = ssh::SshBridge::start(target)
                .map_err(|e| unreachable(format!("cannot open the ssh bridge socket: {e}")))?;
            let client = bollard::Docker::connect_with_unix(
                &started.address(),
                REQUEST_TIMEOUT.as_secs(),
                bollard::API_DEFAULT_VERSION,
            )
            .map_err(|e| unreachable(e.to_string()))?;
            bridge = Some(std::sync::Arc::new(started));
            client
        } else if endpoint::is_network(&address) {
            // Not connect_with_host: it would switch to TLS on any DOCKER_TLS_VERIFY, "0" too.
            bollard::Docker::connect_with_http(
                &address,
                REQUEST_TIMEOUT.as_secs(),
                bollard::API_DEFAULT_VERSION,
            )
            .map_err(|e| unreachable(e.to_string()))?
        } else {
            bollard::Docker::connect_with_host(&address).map_err(|e| unreachable(e.to_string()))?
        }
        .with_timeout(REQUEST_TIMEOUT);
        let answer = tokio::time::timeout(CONNECT_TIMEOUT, async {
            client.ping().await?;
            client.negotiate_version().await
        })
        .await
        .map_err(|_| unreachable(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())))?;
        if let (Err(_), Some(b)) = (&answer, &bridge) {
            // ssh's stderr may still be on its way when its stdout has already closed.
            for _ in 0..10 {
                if !b.ssh_said().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let negotiated = answer.map_err(|e| {
            let mut reason = with_causes(&e);
            if let Some(paths) = endpoint.tls.as_ref().and_then(|t| t.paths().ok()) {
                reason = tls_reason(&reason, &paths);
            }
            if let Some(b) = &bridge {
                let said = b.ssh_said();
                if !said.is_empty() {
                    reason = format!("{reason}; ssh said: {said}");
                }
            }
            unreachable(reason)
        })?;
        Ok(Docker {
            client: negotiated,
            address,
            _ssh: bridge,
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

/// An error with the causes under it: hyper's own text ("client error (Connect)") hides
/// the one that says what went wrong (an unknown issuer, a refused connection).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// A TLS failure with the file that most likely explains it.
fn tls_reason(error: &str, paths: &endpoint::TlsPaths) -> String {
    let hint = if error.contains("UnknownIssuer") || error.contains("invalid peer certificate") {
        format!(
            "the engine's certificate is not signed by {} (wrong CA for this engine?)",
            paths.ca.display()
        )
    } else if error.contains("certificate") || error.contains("handshake") {
        format!(
            "the TLS handshake failed; check {}, {} and {}",
            paths.ca.display(),
            paths.cert.display(),
            paths.key.display()
        )
    } else {
        return error.to_string();
    };
    format!("{error}: {hint}")
}

pub(crate) fn api_error(action: &str, e: bollard::errors::Error) -> Error {
    Error::Docker {
        action: action.to_string(),
        reason: e.to_string(),
    }
}
