//! Go's own profiles: a Go service's net/http/pprof endpoint, reached from inside the
//! target's network namespace (a short-lived container from the profiler image with
//! `network_mode: container:<target>`, so an endpoint on the target's loopback is reached
//! and no port needs publishing), found from the process's listening sockets and a probe
//! of `/debug/pprof/`, or named with `--pprof-url`. The profile (`profile.proto`, gzip) is
//! kept as `<stem>.pb.gz` and folded into the store's usual `.folded`/`.svg`/manifest.
//!
//! The fetching container runs curl, which the profiler image installs: the Go images
//! devprof meets (distroless, scratch, alpine without curl) often have no HTTP client of
//! their own, and one fetcher for every target keeps the path the same.

//!
//! The engine fetches, decodes and writes; the capture around it (the fetcher's life, the
//! session's start gate, Ctrl-C, the stem and the manifest's identity) is `capture`'s.

mod write;

pub use write::{write_capture, PprofOutcome};

/// The most bytes a fetched profile may have (gzip-compressed, as served; Go's are a
/// few MB): the process serving it decides its size, devprof reads no more than this.
const MAX_FETCHED_PROFILE: u64 = 64 << 20;

use crate::docker::target::ContainerInfo;
use crate::docker::{ContainerShell, SidecarSpec};
use crate::docker::{Docker, Shell};
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::pprof::{self, Profile};
use crate::runtime::go as go_endpoint;
use crate::runtime::GO_PPROF_FIX;
use crate::text::first_line;
use chrono::{DateTime, Local};
use std::time::{Duration, Instant};

/// The files a pprof capture writes next to its manifest.
pub const PPROF_EXTENSIONS: &[&str] = &["pb.gz", "folded", "svg"];

/// Which profile to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PprofKind {
    /// `/debug/pprof/profile?seconds=N`: on-CPU samples (Go's 100 Hz SIGPROF sampling).
    Cpu { seconds: u64 },
    /// `/debug/pprof/heap`: in-use bytes (`inuse_space`), or everything allocated since
    /// the start (`alloc_space`).
    Heap { allocated: bool },
}

impl PprofKind {
    /// How long the runtime samples (0 for a heap profile, a snapshot).
    pub fn window(self) -> Duration {
        match self {
            PprofKind::Cpu { seconds } => Duration::from_secs(seconds),
            PprofKind::Heap { .. } => Duration::ZERO,
        }
    }

    pub fn sample_type(self) -> &'static str {
        match self {
            PprofKind::Cpu { .. } => "samples",
            PprofKind::Heap { allocated: false } => "inuse_space",
            PprofKind::Heap { allocated: true } => "alloc_space",
        }
    }
}

/// The Go process a fetch is for.
pub struct PprofTarget<'a> {
    pub container: &'a ContainerInfo,
    pub pid: u32,
    /// The program's name, the root of every folded stack.
    pub program: &'a str,
}

/// A profile fetched, decoded and folded, not yet written.
pub struct Fetched {
    pub url: String,
    /// The profile as served (gzip).
    pub bytes: Vec<u8>,
    pub profile: Profile,
    pub folded: Folded,
    pub fetched_ms: u64,
    /// When the request left (a CPU profile's window opens as the runtime receives it)
    /// and when the answer was home.
    pub requested_at: DateTime<Local>,
    pub answered_at: DateTime<Local>,
}

/// The container that reaches the target's network: started beside it, removed after.
pub struct Fetcher {
    docker: Docker,
    info: ContainerInfo,
    shell: Shell,
}

impl Fetcher {
    /// Starts the fetcher beside `container`; it removes itself after `lifetime` if
    /// devprof cannot.
    pub async fn start(
        docker: &Docker,
        container: &ContainerInfo,
        image: &str,
        lifetime: Duration,
    ) -> Result<Fetcher> {
        let docker = docker.clone();
        if !docker.has_image(image).await {
            return Err(Error::PerfFailed {
                container: container.name.clone(),
                step: "pprof fetch".into(),
                detail: format!(
                    "the profiler image {image}, whose curl fetches the profile inside the container's network, is missing; \
                     build it from dockerfiles/profiler.Dockerfile (scripts/testbed-up.sh does) or name another with --profiler-image"
                ),
            });
        }
        let spec = SidecarSpec {
            image: image.to_string(),
            target_id: container.id.clone(),
            // Reading the target's /proc/<pid>/net and speaking HTTP need no privileges.
            cap_add: Vec::new(),
            security_opt: Vec::new(),
            privileged: false,
            binds: Vec::new(),
            lifetime,
            share_network: true,
        };
        let info = docker.start_sidecar(&spec).await?;
        let shell = docker.shell(&info);
        let fetcher = Fetcher {
            docker,
            info,
            shell,
        };
        let has_curl = fetcher
            .shell
            .run(&["sh", "-c", "command -v curl"])
            .await
            .is_ok_and(|o| o.success());
        if !has_curl {
            fetcher.remove().await;
            return Err(Error::PerfFailed {
                container: container.name.clone(),
                step: "pprof fetch".into(),
                detail: format!(
                    "the profiler image {image} has no curl, which fetches the profile inside the container's network; build it from dockerfiles/profiler.Dockerfile (which installs curl) or name another with --profiler-image"
                ),
            });
        }
        Ok(fetcher)
    }

    pub async fn remove(&self) {
        self.docker.remove_container(&self.info.id).await;
    }

    /// HTTP status of `url` (0 when nothing answers).
    async fn status(&self, url: &str) -> u16 {
        self.shell
            .run(&[
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "--max-time",
                "3",
                "-w",
                "%{http_code}",
                url,
            ])
            .await
            .ok()
            .and_then(|o| o.stdout.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The endpoint's base URL: the one given, else the first listening socket of the
    /// process that serves `/debug/pprof/`.
    pub async fn endpoint(&self, target: &PprofTarget<'_>, given: Option<&str>) -> Result<String> {
        let missing = |detail: String| Error::PprofMissing {
            container: target.container.name.clone(),
            pid: target.pid,
            detail,
            fix: GO_PPROF_FIX.to_string(),
        };
        if let Some(base) = given {
            let status = self.status(&go_endpoint::index_url(base)).await;
            return match status {
                200 => Ok(base.to_string()),
                0 => Err(missing(format!("nothing answers at {base} (--pprof-url)"))),
                code => Err(missing(format!(
                    "{} answers HTTP {code}, not net/http/pprof's index (--pprof-url)",
                    go_endpoint::index_url(base)
                ))),
            };
        }
        let pid = target.pid;
        let out = self
            .shell
            .run(&[
                "sh",
                "-c",
                &format!("cat /proc/{pid}/net/tcp /proc/{pid}/net/tcp6 2>/dev/null"),
            ])
            .await?;
        let candidates = go_endpoint::candidates(&go_endpoint::listeners(&out.stdout));
        let mut tried = Vec::new();
        for base in &candidates {
            let status = self.status(&go_endpoint::index_url(base)).await;
            if status == 200 {
                return Ok(base.clone());
            }
            tried.push(format!("{base} ({})", describe_status(status)));
        }
        Err(missing(if tried.is_empty() {
            "the process listens on no TCP port".to_string()
        } else {
            format!(
                "no listening port serves /debug/pprof/ (tried {})",
                tried.join(", ")
            )
        }))
    }

    /// The profile's bytes, as served.
    async fn fetch(&self, url: &str, timeout: Duration) -> Result<Vec<u8>> {
        let argv: Vec<String> = vec![
            "curl".into(),
            "-sS".into(),
            "--fail".into(),
            "--max-time".into(),
            timeout.as_secs().max(1).to_string(),
            "-o".into(),
            "-".into(),
            url.into(),
        ];
        let (bytes, out) = self
            .shell
            .stream_to(&argv, None, |reader| {
                read_at_most(reader, MAX_FETCHED_PROFILE)
            })
            .await?;
        if !out.success() || bytes.is_empty() {
            return Err(Error::PerfFailed {
                container: self.shell.container().to_string(),
                step: format!("pprof fetch of {url}"),
                detail: first_line(&out.stderr).to_string(),
            });
        }
        Ok(bytes)
    }
}

fn describe_status(status: u16) -> String {
    match status {
        0 => "no answer".to_string(),
        code => format!("HTTP {code}"),
    }
}

/// The profile's URL for `kind` at the endpoint `base`.
pub fn profile_url(base: &str, kind: PprofKind) -> String {
    match kind {
        PprofKind::Cpu { seconds } => go_endpoint::cpu_url(base, seconds),
        PprofKind::Heap { .. } => go_endpoint::heap_url(base),
    }
}

/// Fetches the profile of `kind` from `url` under a progress bar, decodes it and folds its
/// chosen value. Nothing is written.
pub async fn fetch_profile(
    fetcher: &Fetcher,
    target: &PprofTarget<'_>,
    kind: PprofKind,
    url: String,
) -> Result<Fetched> {
    let container = &target.container.name;
    let requested_at = Local::now();
    let started = Instant::now();
    let bytes = match kind {
        PprofKind::Cpu { seconds } => {
            let bar = crate::ui::progress::capture_bar(
                Duration::from_secs(seconds),
                &format!("recording {container} (Go runtime, net/http/pprof)"),
            );
            let fetched = fetcher.fetch(&url, Duration::from_secs(seconds + 30)).await;
            bar.finish_and_clear();
            fetched?
        }
        PprofKind::Heap { .. } => {
            let spinner = crate::ui::progress::spinner("fetching the heap profile");
            let fetched = fetcher.fetch(&url, Duration::from_secs(60)).await;
            spinner.finish_and_clear();
            fetched?
        }
    };
    let answered_at = Local::now();
    let fetched_ms = started.elapsed().as_millis() as u64;
    let invalid = |detail: String| Error::PprofInvalid {
        container: container.clone(),
        url: url.clone(),
        detail,
    };
    let profile = pprof::decode(&bytes).map_err(|e| invalid(e.to_string()))?;
    let sample_type = kind.sample_type();
    let index = profile.value_index(sample_type).ok_or_else(|| {
        invalid(format!(
            "it has no {sample_type} values (it has {})",
            profile
                .sample_types
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let folded = profile
        .fold(index, target.program)
        .map_err(|e| invalid(e.to_string()))?;
    if folded.total() == 0 {
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: Some(format!("the Go runtime's profile from {url} holds no {sample_type}")),
            hint: match kind {
                PprofKind::Cpu { .. } => format!(
                    "pid {} may be idle over the window; record longer or put load on it",
                    target.pid
                ),
                PprofKind::Heap { .. } => "the heap profile fills after the first garbage collection; try again in a moment".to_string(),
            },
        });
    }
    Ok(Fetched {
        url,
        bytes,
        profile,
        folded,
        fetched_ms,
        requested_at,
        answered_at,
    })
}

/// Reads `reader` to its end, an error (not the whole of it) past `limit` bytes.
fn read_at_most<R: std::io::Read + ?Sized>(reader: &mut R, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    (&mut *reader).take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "the profile is larger than {} MiB; not read further",
            limit >> 20
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetched_profile_past_its_budget_is_refused_not_read_whole() {
        let mut endless = std::io::repeat(7);
        let e = read_at_most(&mut endless, 3 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 3 MiB"), "{e}");
        let mut small: &[u8] = b"profile";
        assert_eq!(read_at_most(&mut small, 3 << 20).unwrap(), b"profile");
    }
}
