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

use super::manifest::identity;
use super::sidecar::SPARE_LIFETIME;
use super::Located;
use crate::docker::target::ContainerInfo;
use crate::docker::{ContainerShell, SidecarSpec};
use crate::docker::{Docker, Shell};
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::pprof::{self, Profile};
use crate::render::{write_folded_file, write_svg_file, SvgSpec};
use crate::runtime::go as go_endpoint;
use crate::runtime::GO_PPROF_FIX;
use crate::signals::Interrupts;
use crate::store::{self, GraphRecord, Manifest, Stem};
use crate::text::first_line;
use crate::units::{human_bytes, human_duration, thousands};
use chrono::Local;
use std::path::PathBuf;
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
    fn sample_type(self) -> &'static str {
        match self {
            PprofKind::Cpu { .. } => "samples",
            PprofKind::Heap { allocated: false } => "inuse_space",
            PprofKind::Heap { allocated: true } => "alloc_space",
        }
    }
}

/// A finished pprof capture.
#[derive(Debug)]
pub struct PprofOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
    /// The endpoint the profile came from.
    pub url: String,
    /// Bytes (heap) or samples (cpu) in the profile's chosen value.
    pub total: u64,
}

/// The container that reaches the target's network: started beside it, removed after.
struct Fetcher {
    docker: Docker,
    info: ContainerInfo,
    shell: Shell,
}

impl Fetcher {
    async fn start(located: &Located, image: &str, window: Duration) -> Result<Fetcher> {
        let docker = located.docker.clone();
        if !docker.has_image(image).await {
            return Err(Error::PerfFailed {
                container: located.container.name.clone(),
                step: "pprof fetch".into(),
                detail: format!(
                    "the profiler image {image}, whose curl fetches the profile inside the container's network, is missing; \
                     build it from dockerfiles/profiler.Dockerfile (scripts/testbed-up.sh does) or name another with --profiler-image"
                ),
            });
        }
        let spec = SidecarSpec {
            image: image.to_string(),
            target_id: located.container.id.clone(),
            // Reading the target's /proc/<pid>/net and speaking HTTP need no privileges.
            cap_add: Vec::new(),
            security_opt: Vec::new(),
            privileged: false,
            binds: Vec::new(),
            lifetime: window + SPARE_LIFETIME,
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
                container: located.container.name.clone(),
                step: "pprof fetch".into(),
                detail: format!(
                    "the profiler image {image} has no curl, which fetches the profile inside the container's network; build it from dockerfiles/profiler.Dockerfile (which installs curl) or name another with --profiler-image"
                ),
            });
        }
        Ok(fetcher)
    }

    async fn remove(&self) {
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
    async fn endpoint(&self, located: &Located, given: Option<&str>) -> Result<String> {
        let missing = |detail: String| Error::PprofMissing {
            container: located.container.name.clone(),
            pid: located.process.pid,
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
        let pid = located.process.pid;
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
                let mut bytes = Vec::new();
                reader.read_to_end(&mut bytes)?;
                Ok(bytes)
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

/// Fetches the profile of `kind` from the Go process `located` found, and writes the
/// capture: `.pb.gz` as served, `.folded`, `.svg` and the manifest. Nothing is written
/// before the profile is home and decoded.
pub async fn run_pprof(
    located: Located,
    kind: PprofKind,
    given_url: Option<&str>,
    profiler_image: &str,
    typed_target: &str,
    output_dir: &std::path::Path,
    interrupts: &mut Interrupts,
) -> Result<PprofOutcome> {
    let window = match kind {
        PprofKind::Cpu { seconds } => Duration::from_secs(seconds),
        PprofKind::Heap { .. } => Duration::ZERO,
    };
    let fetcher = Fetcher::start(&located, profiler_image, window).await?;
    let result = tokio::select! {
        r = fetch_and_write(&fetcher, &located, kind, given_url, typed_target, output_dir) => r,
        _ = interrupts.next() => Err(Error::Interrupted),
    };
    // Always: no fetcher stays behind.
    fetcher.remove().await;
    result
}

async fn fetch_and_write(
    fetcher: &Fetcher,
    located: &Located,
    kind: PprofKind,
    given_url: Option<&str>,
    typed_target: &str,
    output_dir: &std::path::Path,
) -> Result<PprofOutcome> {
    let container = &located.container.name;
    let base = fetcher.endpoint(located, given_url).await?;
    let url = match kind {
        PprofKind::Cpu { seconds } => go_endpoint::cpu_url(&base, seconds),
        PprofKind::Heap { .. } => go_endpoint::heap_url(&base),
    };
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
    let root = located.process.program().to_string();
    let folded = profile.fold(index, &root);
    if folded.total() == 0 {
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: Some(format!("the Go runtime's profile from {url} holds no {sample_type}")),
            hint: match kind {
                PprofKind::Cpu { .. } => format!(
                    "pid {} may be idle over the window; record longer or put load on it",
                    located.process.pid
                ),
                PprofKind::Heap { .. } => "the heap profile fills after the first garbage collection; try again in a moment".to_string(),
            },
        });
    }

    // The profile is home and readable: from here on files are written.
    let prefix = match kind {
        PprofKind::Cpu { .. } => "perf",
        PprofKind::Heap { .. } => "heap",
    };
    let stem = Stem::reserve(
        &store::container_dir(output_dir, container),
        prefix,
        Local::now(),
    )?;
    let written = write_capture(
        located,
        kind,
        &profile,
        &folded,
        &bytes,
        &url,
        &stem,
        typed_target,
        fetched_ms,
    );
    match written {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            stem.discard(PPROF_EXTENSIONS);
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn write_capture(
    located: &Located,
    kind: PprofKind,
    profile: &Profile,
    folded: &Folded,
    bytes: &[u8],
    url: &str,
    stem: &Stem,
    typed_target: &str,
    fetched_ms: u64,
) -> Result<PprofOutcome> {
    let container = &located.container.name;
    std::fs::write(stem.path("pb.gz"), bytes)
        .map_err(|e| Error::io(format!("write {}", stem.path("pb.gz").display()), e))?;
    write_folded_file(folded, &stem.path("folded"))?;
    let total = folded.total();
    let duration = Duration::from_nanos(profile.duration_nanos.max(0) as u64);
    let spec = match kind {
        PprofKind::Cpu { .. } => {
            let title = format!(
                "{container} — CPU (Go runtime pprof) — {} — {} samples",
                human_duration(duration),
                thousands(total)
            );
            SvgSpec::cpu(title, None)
        }
        PprofKind::Heap { allocated } => {
            let title = format!(
                "{container} — Go heap, {} — {}",
                if allocated {
                    "allocated since start (alloc_space)"
                } else {
                    "in use (inuse_space)"
                },
                human_bytes(total)
            );
            let mut spec = SvgSpec::cpu(title, None);
            spec.count_name = "bytes".into();
            spec.palette = inferno::flamegraph::color::Palette::Basic(
                inferno::flamegraph::color::BasicPalette::Mem,
            );
            spec
        }
    };
    let mut spec = spec;
    if let PprofKind::Cpu { .. } = kind {
        spec.subtitle = Some(format!(
            "{} — pid {} — Go's SIGPROF sampling ({} Hz)",
            located.process.program(),
            located.process.pid,
            hz(profile)
        ));
    }
    write_svg_file(folded, &spec, &stem.path("svg"))?;

    let mut manifest = identity(
        match kind {
            PprofKind::Cpu { .. } => "cpu",
            PprofKind::Heap { .. } => "heap",
        },
        typed_target,
        &located.container,
        &located.process,
        &located.process_facts,
        located.runtime,
    );
    if let Some(go) = &located.go {
        manifest.runtime_version = go.version.clone();
    }
    manifest.engine = "pprof".into();
    manifest.perf.path = url.to_string();
    manifest.perf.version = "net/http/pprof".into();
    manifest.capture_mode = Some(
        "Go runtime's net/http/pprof, fetched inside the container's network namespace".into(),
    );
    manifest.events = vec![match kind {
        // Go samples CPU time with SIGPROF timers; `samples` counts them.
        PprofKind::Cpu { .. } => "cpu (Go runtime)".to_string(),
        PprofKind::Heap { .. } => kind.sample_type().to_string(),
    }];
    manifest.duration_recorded_s = duration.as_secs_f64();
    if let PprofKind::Cpu { seconds } = kind {
        manifest.duration_requested_s = seconds as f64;
        manifest.frequency_hz = hz(profile);
    }
    manifest.sample_count = total;
    manifest.unsymbolized_share = (folded.unsymbolized_share() * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms.insert("fetch".into(), fetched_ms);
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
    });
    manifest.notes.push(format!(
        "profile from {url}; the original is kept as {}",
        stem.file_name("pb.gz")
    ));
    if let PprofKind::Heap { allocated } = kind {
        manifest.heap = Some(crate::profile::heap::HeapRecord {
            measure: if allocated { "allocated" } else { "in-use" }.into(),
            how: format!(
                "Go runtime heap profile from {url} ({})",
                kind.sample_type()
            ),
            total_bytes: total,
            total_objects: profile
                .value_index(if allocated {
                    "alloc_objects"
                } else {
                    "inuse_objects"
                })
                .map(|i| profile.fold(i, "").total())
                .unwrap_or(0),
            stacks: folded.stacks.len(),
            top_self: folded.top_self(25),
            top_inclusive: crate::profile::top::by_inclusive(folded, 25)
                .into_iter()
                .map(|r| (r.name, r.samples))
                .collect(),
            ..Default::default()
        });
    }
    let mut files = manifest.record_stem_files(stem, PPROF_EXTENSIONS);
    let manifest_path = manifest.write(stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(PprofOutcome {
        manifest,
        manifest_path,
        files,
        warnings: Vec::new(),
        url: url.to_string(),
        total,
    })
}

/// Go's CPU sampling rate from the profile's period (10 ms: 100 Hz).
fn hz(profile: &Profile) -> u32 {
    match profile.period_type.as_ref() {
        Some((kind, unit)) if kind == "cpu" && unit == "nanoseconds" && profile.period > 0 => {
            (1_000_000_000 / profile.period) as u32
        }
        _ => 0,
    }
}
