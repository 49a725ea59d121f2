//! Everything that talks to the Docker Engine: connecting, listing containers, running
//! commands inside them with streamed output, and bringing files out through the archive
//! API. The rest of devprof sees plain data (`ContainerInfo`, `ExecOutput`) and the
//! `ContainerShell` trait, never bollard types.

use crate::archive;
use crate::error::{Error, Result};
use crate::pipe;
use crate::target::ContainerInfo;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";
/// How long connecting may take before the daemon counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Captures and downloads may run long; bollard's own default (2 min) is too short.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(6 * 3600);
/// Standard error kept from one exec; enough for perf's diagnostics.
const STDERR_LIMIT: usize = 256 * 1024;

#[derive(Clone)]
pub struct Docker {
    client: bollard::Docker,
    address: String,
}

/// What a command run in a container printed, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    /// None when the engine did not report one (the command was killed with the exec).
    pub exit_code: Option<i64>,
}

impl ExecOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

impl Docker {
    /// Connects to DOCKER_HOST (or the default socket), checks the daemon answers and
    /// settles on an API version both sides speak.
    pub async fn connect() -> Result<Self> {
        let address = std::env::var("DOCKER_HOST").unwrap_or_else(|_| DEFAULT_HOST.to_string());
        let unreachable = |reason: String| Error::DaemonUnreachable {
            address: address.clone(),
            reason,
        };
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

    async fn start_exec(
        &self,
        container: &str,
        argv: &[&str],
    ) -> Result<(String, StartExecResults)> {
        let exec = self
            .client
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(argv.iter().map(|s| s.to_string()).collect()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| api_error(&format!("exec in {container}"), e))?;
        let started = self
            .client
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(|e| api_error(&format!("start exec in {container}"), e))?;
        Ok((exec.id, started))
    }

    /// The exit code of a finished exec. The engine may report `running` for a moment
    /// after the output stream closed, so ask a few times.
    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>> {
        for _ in 0..50 {
            let info = self
                .client
                .inspect_exec(exec_id)
                .await
                .map_err(|e| api_error("inspect exec", e))?;
            if info.running != Some(true) {
                return Ok(info.exit_code);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(None)
    }

    /// Runs `argv` in the container; standard output goes chunk by chunk into `sink`
    /// (never held whole), standard error is collected (bounded).
    pub async fn exec_streaming(
        &self,
        container: &str,
        argv: &[&str],
        sink: mpsc::Sender<Bytes>,
    ) -> Result<ExecOutput> {
        let (exec_id, started) = self.start_exec(container, argv).await?;
        let mut stderr = Vec::new();
        if let StartExecResults::Attached { mut output, .. } = started {
            let mut sink = Some(sink);
            while let Some(frame) = output.next().await {
                match frame
                    .map_err(|e| api_error(&format!("read exec output in {container}"), e))?
                {
                    bollard::container::LogOutput::StdOut { message } => {
                        // A closed sink means the reader stopped; drain the rest so the
                        // process is not blocked on a full pipe.
                        if let Some(tx) = &sink {
                            if tx.send(message).await.is_err() {
                                sink = None;
                            }
                        }
                    }
                    bollard::container::LogOutput::StdErr { message } => {
                        let room = STDERR_LIMIT.saturating_sub(stderr.len());
                        stderr.extend_from_slice(&message[..message.len().min(room)]);
                    }
                    _ => {}
                }
            }
        }
        Ok(ExecOutput {
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            exit_code: self.exec_exit_code(&exec_id).await?,
        })
    }

    /// Runs `argv` in the container and collects everything it prints.
    pub async fn exec(&self, container: &str, argv: &[&str]) -> Result<ExecOutput> {
        let (tx, mut rx) = mpsc::channel::<Bytes>(pipe::CHANNEL_CHUNKS);
        let collect = async {
            let mut out = Vec::new();
            while let Some(chunk) = rx.recv().await {
                out.extend_from_slice(&chunk);
            }
            out
        };
        let (result, stdout) = tokio::join!(self.exec_streaming(container, argv, tx), collect);
        let mut output = result?;
        output.stdout = String::from_utf8_lossy(&stdout).into_owned();
        Ok(output)
    }

    /// Copies `source` (a file or directory in the container) into `dest_dir` through the
    /// archive API. Entries are renamed by `rename` (None skips one); any entry that would
    /// land outside `dest_dir` fails the whole download. Returns the files written.
    pub async fn download<F>(
        &self,
        container: &str,
        source: &str,
        dest_dir: &Path,
        rename: F,
    ) -> Result<Vec<PathBuf>>
    where
        F: FnMut(&Path) -> Option<PathBuf> + Send + 'static,
    {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(source)
            .build();
        let mut stream = self
            .client
            .download_from_container(container, Some(options));
        let (tx, reader) = pipe::channel();
        let dest = dest_dir.to_path_buf();
        let container_name = container.to_string();
        let extractor = tokio::task::spawn_blocking(move || {
            archive::extract(reader, &dest, rename).map_err(|e| e.into_error(&container_name))
        });
        let mut fetch_error = None;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => {
                    if tx.send(bytes).await.is_err() {
                        break; // the extractor stopped (it reports why)
                    }
                }
                Err(e) => {
                    fetch_error = Some(api_error(&format!("copy {source} out of {container}"), e));
                    break;
                }
            }
        }
        drop(tx);
        let extracted = extractor
            .await
            .map_err(|e| Error::io("archive extraction", std::io::Error::other(e)))?;
        match (fetch_error, extracted) {
            (Some(e), Ok(files)) => {
                for f in files {
                    let _ = std::fs::remove_file(f);
                }
                Err(e)
            }
            (_, result) => result,
        }
    }
}

fn api_error(action: &str, e: bollard::errors::Error) -> Error {
    Error::Docker {
        action: action.to_string(),
        reason: e.to_string(),
    }
}

/// Running commands in one container. Capture recipes are written against this trait so
/// their decisions can be exercised with scripted answers.
pub trait ContainerShell: Sync {
    fn container(&self) -> &str;
    fn run(&self, argv: &[&str]) -> impl Future<Output = Result<ExecOutput>> + Send;
    fn sh(&self, script: &str) -> impl Future<Output = Result<ExecOutput>> + Send {
        async move { self.run(&["sh", "-c", script]).await }
    }
}

/// A container reached through the Docker API.
#[derive(Clone)]
pub struct Shell {
    docker: Docker,
    container: String,
}

impl Shell {
    pub fn docker(&self) -> &Docker {
        &self.docker
    }
}

impl ContainerShell for Shell {
    fn container(&self) -> &str {
        &self.container
    }

    fn run(&self, argv: &[&str]) -> impl Future<Output = Result<ExecOutput>> + Send {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        async move {
            let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
            self.docker.exec(&self.container, &refs).await
        }
    }
}

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
}

/// The label every devprof sidecar carries (`devprof clean --containers` looks for it).
pub const SIDECAR_LABEL: &str = "devprof.sidecar";

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
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".into(), spec.lifetime.as_secs().to_string()]),
            labels: Some(
                [(SIDECAR_LABEL.to_string(), spec.target_id.clone())]
                    .into_iter()
                    .collect(),
            ),
            host_config: Some(HostConfig {
                pid_mode: Some(format!("container:{}", spec.target_id)),
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

    /// Containers carrying `label`, running or not.
    pub async fn containers_with_label(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        Ok(self
            .containers()
            .await?
            .into_iter()
            .filter(|c| c.labels.contains_key(label))
            .collect())
    }

    /// Whether an image is present locally.
    pub async fn has_image(&self, image: &str) -> bool {
        self.client.inspect_image(image).await.is_ok()
    }
}

// ---- Image builds, container and image configuration, trials (devprof build, compose,
// doctor). Plain data out; bollard types stay in here.

/// One image build through the engine's build API (the classic builder).
#[derive(Debug, Clone, Default)]
pub struct BuildRequest {
    /// Path of the Dockerfile inside the context.
    pub dockerfile: String,
    pub tag: String,
    pub build_args: std::collections::HashMap<String, String>,
    pub labels: std::collections::HashMap<String, String>,
    /// `host` lets RUN steps reach the network as the host does.
    pub network: String,
    pub no_cache: bool,
}

/// How a build ended, when the engine ran it.
#[derive(Debug, Clone, PartialEq)]
pub enum BuildEnd {
    /// The image id (`sha256:...`) when the engine reported it.
    Built(Option<String>),
    /// The engine's error message (the failing step is in the streamed log).
    Failed(String),
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

/// What `docker image inspect` says about an image.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageDetails {
    pub id: String,
    pub labels: std::collections::HashMap<String, String>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub user: String,
}

/// The engine's version and kernel.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineVersion {
    pub version: String,
    pub api_version: String,
    pub kernel: String,
}

impl Docker {
    /// Builds an image from a tar context on disk, streaming the context up and the log
    /// down: each piece of build output goes to `on_output` as it arrives.
    pub async fn build_image(
        &self,
        request: &BuildRequest,
        context: &Path,
        mut on_output: impl FnMut(&str),
    ) -> Result<BuildEnd> {
        use bollard::query_parameters::BuildImageOptionsBuilder;
        let mut options = BuildImageOptionsBuilder::default()
            .dockerfile(&request.dockerfile)
            .t(&request.tag)
            .rm(true)
            .forcerm(true)
            .nocache(request.no_cache)
            .buildargs(&request.build_args)
            .labels(&request.labels);
        if !request.network.is_empty() {
            options = options.networkmode(&request.network);
        }
        let file = tokio::fs::File::open(context)
            .await
            .map_err(|e| Error::io(format!("open the build context {}", context.display()), e))?;
        let chunks = futures_util::stream::unfold(file, |mut file| async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 1 << 20];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok::<Bytes, std::io::Error>(Bytes::from(buf)), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let mut stream = self.client.build_image(
            options.build(),
            None,
            Some(bollard::body_try_stream(chunks)),
        );
        let mut image_id = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(text) = info.stream.as_deref() {
                        on_output(text);
                    }
                    if let Some(status) = info.status.as_deref() {
                        on_output(&format!("{status}\n"));
                    }
                    if let Some(id) = info.aux.and_then(|a| a.id) {
                        image_id = Some(id);
                    }
                }
                Err(bollard::errors::Error::DockerStreamError { error }) => {
                    return Ok(BuildEnd::Failed(error));
                }
                Err(bollard::errors::Error::DockerResponseServerError { message, .. }) => {
                    return Ok(BuildEnd::Failed(message));
                }
                Err(e) => return Err(api_error(&format!("build {}", request.tag), e)),
            }
        }
        Ok(BuildEnd::Built(image_id))
    }

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

    /// An image's configuration; None when the engine does not have it.
    pub async fn image_details(&self, image: &str) -> Result<Option<ImageDetails>> {
        match self.client.inspect_image(image).await {
            Ok(i) => {
                let config = i.config.unwrap_or_default();
                Ok(Some(ImageDetails {
                    id: i.id.unwrap_or_default(),
                    labels: config.labels.unwrap_or_default(),
                    entrypoint: config.entrypoint.unwrap_or_default(),
                    cmd: config.cmd.unwrap_or_default(),
                    env: config.env.unwrap_or_default(),
                    user: config.user.unwrap_or_default(),
                }))
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(api_error(&format!("inspect image {image}"), e)),
        }
    }

    /// Tags of the images the engine has (for trials that need any image).
    pub async fn image_tags(&self) -> Result<Vec<String>> {
        let images = self
            .client
            .list_images(None::<bollard::query_parameters::ListImagesOptions>)
            .await
            .map_err(|e| api_error("list images", e))?;
        Ok(images
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .filter(|t| t != "<none>:<none>")
            .collect())
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
