//! Everything that talks to the Docker Engine lives in this folder: connecting and listing
//! containers (here), running commands inside them with streamed output (`exec`), bringing
//! files out through the archive API with safe extraction (`archive`, over the bounded
//! `pipe`), sidecar, trial and throw-away containers (`containers`), image builds and
//! inspection (`image`), the one-exec probe of what a container offers (`probe`), the
//! pure rules that pick the target container and process (`target`), and the one reader of
//! what scripts print in a container, in a form its processes cannot forge (`wire`). The rest of devprof
//! sees plain data and the `ContainerShell` trait, never bollard types.

pub mod archive;
pub mod binary;
pub mod containers;
pub mod endpoint;
pub mod exec;
mod exec_output;
pub mod image;
pub mod logs;
pub mod pipe;
pub mod probe;
pub mod ssh;
pub mod standby;
pub mod target;
pub mod trust;
pub mod wire;
pub mod workdir;

/// The user devprof's own commands run as in a container (probes, perf, clean-up): root,
/// whatever USER the image sets, because reading another user's /proc entries and opening
/// perf events need it. Tools that attach to a runtime run as the process's user instead.
pub const ROOT: &str = "0:0";

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
    /// The endpoint's `/version` answer, asked once when connecting: Podman takes about
    /// half a second to give it (it asks its runtimes for their versions every time).
    endpoint: std::sync::Arc<EndpointVersion>,
    /// An ssh engine's private socket: it lives as long as any handle to the engine.
    _ssh: Option<std::sync::Arc<ssh::SshBridge>>,
}

/// The endpoint's product, version and kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointVersion {
    pub version: String,
    pub api_version: String,
    pub kernel: String,
    pub flavour: Flavour,
}

impl EndpointVersion {
    fn of(v: &bollard::models::SystemVersion) -> Self {
        let components: Vec<&str> = v
            .components
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        EndpointVersion {
            version: v.version.clone().unwrap_or_default(),
            api_version: v.api_version.clone().unwrap_or_default(),
            kernel: v.kernel_version.clone().unwrap_or_default(),
            flavour: Flavour::of(v.platform.as_ref().map(|p| p.name.as_str()), &components),
        }
    }
}

/// The API version an engine speaks when it is older than bollard's default (what
/// bollard's own negotiation settles on, from the `/version` answer already in hand).
fn older_api(api_version: Option<&str>) -> Option<bollard::ClientVersion> {
    let (major, minor) = api_version?.trim().split_once('.')?;
    let server = bollard::ClientVersion {
        major_version: major.parse().ok()?,
        minor_version: minor.parse().ok()?,
    };
    (server < *bollard::API_DEFAULT_VERSION).then_some(server)
}

/// Which product serves the Docker API at an endpoint: where they differ (default
/// resource limits, where images come from), devprof says so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavour {
    #[default]
    Docker,
    Podman,
}

impl Flavour {
    /// Podman's compatible API names itself in its components ("Podman Engine") and
    /// platform; Docker's never mentions Podman.
    pub fn of(platform: Option<&str>, components: &[&str]) -> Flavour {
        let podman = |name: &str| name.to_ascii_lowercase().contains("podman");
        if platform.is_some_and(podman) || components.iter().any(|c| podman(c)) {
            Flavour::Podman
        } else {
            Flavour::Docker
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Flavour::Docker => "Docker",
            Flavour::Podman => "Podman",
        }
    }

    /// How an image that exists elsewhere (Docker's storage, where `devprof build` and
    /// scripts/testbed-up.sh put it) reaches this endpoint.
    pub fn image_fix(self, image: &str) -> String {
        match self {
            Flavour::Docker => crate::error::profiler_image_fix(image),
            Flavour::Podman => format!(
                "Podman keeps its own images: copy it from Docker with `docker save {image} | podman load` \
                 (as the user whose Podman serves this endpoint; scripts/podman-up.sh does this), or build it with `podman build`"
            ),
        }
    }
}

/// The compose project and service of a container: docker compose's labels, else
/// podman-compose's own.
pub fn compose_labels(
    labels: &std::collections::HashMap<String, String>,
) -> (Option<String>, Option<String>) {
    let first = |keys: [&str; 2]| keys.iter().find_map(|k| labels.get(*k).cloned());
    (
        first(["com.docker.compose.project", "io.podman.compose.project"]),
        first(["com.docker.compose.service", "io.podman.compose.service"]),
    )
}

impl Docker {
    /// Connects to DOCKER_HOST (or the default socket), checks the daemon answers and
    /// settles on an API version both sides speak.
    pub async fn connect() -> Result<Self> {
        Self::connect_to(None).await
    }

    /// Connects to the docker context `context` (DOCKER_HOST does not override a context
    /// named here), or with None to the endpoint the environment names.
    pub async fn connect_to(context: Option<&str>) -> Result<Self> {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let env = |k: &str| match (context, k) {
            (Some(_), "DOCKER_HOST") => None,
            (Some(name), "DOCKER_CONTEXT") => Some(name.to_string()),
            _ => std::env::var(k).ok(),
        };
        let endpoint = endpoint::resolve(&env, home.as_deref()).map_err(|reason| {
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
        let bridge = if address.starts_with("ssh://") {
            let target = ssh::SshTarget::parse(&address).map_err(unreachable)?;
            let started = ssh::SshBridge::start(target)
                .map_err(|e| unreachable(format!("cannot open the ssh bridge socket: {e}")))?;
            Some(std::sync::Arc::new(started))
        } else {
            None
        };
        // A client speaking `version` of the API; made again when the engine speaks an
        // older one than bollard's default (any scheme bollard only reaches through
        // connect_with_host stays on the default).
        let speaking = |version: &bollard::ClientVersion| -> Result<bollard::Docker> {
            Ok(if let Some(tls) = endpoint.tls.as_ref() {
                let paths = tls.paths().map_err(unreachable)?;
                // bollard reads DOCKER_TLS_VERIFY itself only in connect_with_host; the files
                // are named here so that a context's own material is used.
                bollard::Docker::connect_with_ssl(
                    &address,
                    &paths.key,
                    &paths.cert,
                    &paths.ca,
                    REQUEST_TIMEOUT.as_secs(),
                    version,
                )
                .map_err(|e| unreachable(tls_reason(&with_causes(&e), &paths)))?
            } else if let Some(bridge) = &bridge {
                bollard::Docker::connect_with_unix(
                    &bridge.address(),
                    REQUEST_TIMEOUT.as_secs(),
                    version,
                )
                .map_err(|e| unreachable(e.to_string()))?
            } else if endpoint::is_network(&address) {
                // Not connect_with_host: it would switch to TLS on any DOCKER_TLS_VERIFY, "0" too.
                bollard::Docker::connect_with_http(&address, REQUEST_TIMEOUT.as_secs(), version)
                    .map_err(|e| unreachable(e.to_string()))?
            } else if address.starts_with("unix://") {
                bollard::Docker::connect_with_unix(&address, REQUEST_TIMEOUT.as_secs(), version)
                    .map_err(|e| unreachable(e.to_string()))?
            } else {
                bollard::Docker::connect_with_host(&address)
                    .map_err(|e| unreachable(e.to_string()))?
            }
            .with_timeout(REQUEST_TIMEOUT))
        };
        let client = speaking(bollard::API_DEFAULT_VERSION)?;
        let answer = tokio::time::timeout(CONNECT_TIMEOUT, async {
            client.ping().await?;
            client.version().await
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
        let version = answer.map_err(|e| {
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
        let client = match older_api(version.api_version.as_deref()) {
            Some(older) => speaking(&older)?,
            None => client,
        };
        Ok(Docker {
            client,
            address,
            endpoint: std::sync::Arc::new(EndpointVersion::of(&version)),
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
                let (project, service) = compose_labels(&labels);
                ContainerInfo {
                    id: c.id.unwrap_or_default(),
                    name: c
                        .names
                        .and_then(|n| n.into_iter().next())
                        .map(|n| n.trim_start_matches('/').to_string())
                        .unwrap_or_default(),
                    image: c.image.unwrap_or_default(),
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                    service,
                    project,
                    labels,
                }
            })
            .collect())
    }

    pub fn shell(&self, container: &ContainerInfo) -> Shell {
        Shell {
            docker: self.clone(),
            container: container.name.clone(),
            standbys: Default::default(),
        }
    }

    /// The endpoint's product, version and kernel, as it answered when connecting.
    pub fn endpoint_version(&self) -> &EndpointVersion {
        &self.endpoint
    }

    /// Whether the endpoint runs its containers rootless (in a user namespace), as its
    /// `/info` says; false when it cannot be asked.
    pub async fn rootless(&self) -> bool {
        self.client.info().await.is_ok_and(|info| {
            says_rootless(
                info.security_options.as_deref().unwrap_or(&[]),
                info.docker_root_dir.as_deref().unwrap_or(""),
            )
        })
    }

    /// The endpoint's product; Docker when it cannot be asked.
    pub fn flavour(&self) -> Flavour {
        self.endpoint.flavour
    }
}

/// Whether an endpoint's `/info` says that it runs rootless: Docker names it among the
/// security options (`["name=seccomp,profile=builtin", "name=rootless", ...]`); Podman
/// 4.3's compatible API does not (its `Rootless: true` is outside Docker's schema), but
/// keeps its storage, as rootless Docker does, in the user's data directory
/// (`~/.local/share/containers/storage`), where a rootful endpoint never does.
fn says_rootless(options: &[String], data_root: &str) -> bool {
    options
        .iter()
        .any(|o| o.split(',').any(|part| part == "name=rootless"))
        || data_root.contains("/.local/share/")
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_engine_older_than_bollards_default_api_is_spoken_to_in_its_own() {
        // Podman 4.3 answers 1.41; Docker 28.2 answers 1.50.
        let older = older_api(Some("1.41")).unwrap();
        assert_eq!((older.major_version, older.minor_version), (1, 41));
        assert!(older_api(Some("1.50")).is_some());
        let default = bollard::API_DEFAULT_VERSION;
        let same = format!("{}.{}", default.major_version, default.minor_version);
        assert!(older_api(Some(&same)).is_none());
        assert!(older_api(Some("1.999")).is_none());
        assert!(older_api(Some("garbage")).is_none());
        assert!(older_api(None).is_none());
    }

    #[test]
    fn an_endpoint_says_rootless_in_its_security_options() {
        let options = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Docker's and Podman's words, as /info gives them.
        let rootful = "/var/lib/docker";
        assert!(says_rootless(
            &options(&[
                "name=seccomp,profile=builtin",
                "name=rootless",
                "name=cgroupns"
            ]),
            rootful
        ));
        assert!(says_rootless(
            &options(&["name=seccomp,profile=default,name=rootless"]),
            rootful
        ));
        assert!(!says_rootless(
            &options(&[
                "name=apparmor",
                "name=seccomp,profile=builtin",
                "name=cgroupns"
            ]),
            rootful
        ));
        assert!(!says_rootless(&[], rootful));
        // Rootless Podman 4.3, as its /info gave it on the test bed; and rootful Podman.
        let podman = options(&["name=seccomp,profile=default"]);
        assert!(says_rootless(
            &podman,
            "/home/devprof-rootless/.local/share/containers/storage"
        ));
        assert!(!says_rootless(&podman, "/var/lib/containers/storage"));
    }

    #[test]
    fn podman_is_told_apart_by_its_components() {
        // As Podman 4.3 and Docker 20.10 answer /version.
        assert_eq!(
            Flavour::of(Some("linux/amd64/debian-12"), &["Podman Engine", "Conmon"]),
            Flavour::Podman
        );
        assert_eq!(
            Flavour::of(Some(""), &["Engine", "containerd", "runc"]),
            Flavour::Docker
        );
        assert_eq!(Flavour::of(None, &[]), Flavour::Docker);
        assert!(Flavour::Podman
            .image_fix("x:1")
            .contains("docker save x:1 | podman load"));
    }

    #[test]
    fn podman_compose_labels_name_the_project_and_service() {
        let labels = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let podman = labels(&[
            ("io.podman.compose.project", "net"),
            ("io.podman.compose.service", "seq"),
        ]);
        assert_eq!(
            compose_labels(&podman),
            (Some("net".into()), Some("seq".into()))
        );
        let both = labels(&[
            ("com.docker.compose.project", "a"),
            ("io.podman.compose.project", "b"),
        ]);
        assert_eq!(compose_labels(&both), (Some("a".into()), None));
        assert_eq!(compose_labels(&HashMap::new()), (None, None));
    }
}
