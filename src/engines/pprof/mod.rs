//! Go's own profiles: a Go service's net/http/pprof endpoint, reached from beside the
//! target on its network (`Reach::Network`: the capture places a sidecar from the profiler
//! image with `network_mode: container:<target>`, so an endpoint on the target's loopback
//! is reached and no port needs publishing), found from the listening sockets of the
//! target's network and a probe of `/debug/pprof/`, or named with `--pprof-url`. The
//! profile (`profile.proto`, gzip) is kept as `<stem>.pb.gz` and folded into the store's
//! usual `.folded`/`.svg`/manifest.
//!
//! The recorder is curl, which the profiler image installs: the Go images devprof meets
//! (distroless, scratch, alpine without curl) often have no HTTP client of their own, and
//! one fetcher for every target keeps the path the same. A CPU profile's window is the
//! runtime's: it opens when the request arrives and the answer comes when it closes, so
//! the recorder ends by itself and a stop signal would lose the profile.
//!
//! Everything around the fetch (placement, the session's gate, the window, Ctrl-C, the
//! target's watch, the stem) is the capture lifecycle's, as for every engine.

/// The most bytes a fetched profile may have (gzip-compressed, as served; Go's are a
/// few MB): the process serving it decides its size, devprof reads no more than this.
const MAX_FETCHED_PROFILE: u64 = 64 << 20;

/// Where the fetch leaves the profile in the fetcher's workdir.
const FETCHED_FILE: &str = "profile.pb.gz";

/// How long the runtime may take past its window to answer.
const ANSWER_SLACK_S: u64 = 30;

/// Go's CPU sampling rate (SIGPROF every 10 ms) unless the program changed it; the
/// profile read after the window says the rate it really used.
const GO_DEFAULT_HZ: u32 = 100;

use super::{CollectJob, Collected, Engine, Reach, Reached, RecordCommand, RecordJob, Tool};
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::pprof::{self, Profile};
use crate::runtime::go as go_endpoint;
use crate::runtime::GO_PPROF_FIX;
use crate::text::{first_line, printable};
use std::time::Instant;

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
    pub fn sample_type(self) -> &'static str {
        match self {
            PprofKind::Cpu { .. } => "samples",
            PprofKind::Heap { allocated: false } => "inuse_space",
            PprofKind::Heap { allocated: true } => "alloc_space",
        }
    }
}

/// The Go runtime's own profiler, read over its net/http/pprof endpoint.
#[derive(Debug, Clone)]
pub struct PprofEngine {
    pub kind: PprofKind,
    /// The endpoint's base URL as given (`--pprof-url`); None: found.
    pub url: Option<String>,
    /// The target container's name, for messages (the fetcher beside it has its own).
    pub container: String,
}

/// The endpoint found before the window, and the fetcher's curl.
pub struct Ready {
    pub base: String,
    curl: String,
    container: String,
    pid: u32,
    /// The program's name, the root of every folded stack.
    program: String,
}

impl Ready {
    /// The URL of the profile this engine fetches.
    pub fn profile_url(&self, kind: PprofKind) -> String {
        match kind {
            PprofKind::Cpu { seconds } => go_endpoint::cpu_url(&self.base, seconds),
            PprofKind::Heap { .. } => go_endpoint::heap_url(&self.base),
        }
    }
}

/// A profile fetched, decoded and folded, not yet written.
struct Fetched {
    pub url: String,
    pub profile: Profile,
    pub folded: Folded,
    /// How long bringing it home took.
    pub download_ms: u64,
}

impl Engine for PprofEngine {
    type Ready = Ready;

    fn name(&self) -> &'static str {
        "pprof"
    }

    fn reach(&self) -> Reach {
        Reach::Network
    }

    fn recorder_stops_itself(&self) -> bool {
        true
    }

    fn recorder_ends_with_target(&self) -> bool {
        // The connection closes with the process: curl ends.
        true
    }

    fn frequency(&self, _ready: &Ready, _requested: u32) -> u32 {
        GO_DEFAULT_HZ
    }

    async fn prepare<'a>(&'a self, at: Reached<'a>) -> Result<Ready> {
        let (shell, process) = (at.shell, at.process);
        let found = shell.run(&["sh", "-c", "command -v curl"]).await?;
        let curl = found.stdout.trim().to_string();
        if !found.success() || curl.is_empty() {
            return Err(Error::ToolMissing {
                container: self.container.clone(),
                tool: "curl (which fetches the profile inside the container's network)".into(),
                fix: "rebuild it from dockerfiles/profiler.Dockerfile".into(),
            });
        }
        let base = endpoint(shell, &self.container, process.pid, self.url.as_deref()).await?;
        Ok(Ready {
            base,
            curl,
            container: self.container.clone(),
            pid: process.pid,
            program: process.program().to_string(),
        })
    }

    fn broken_stacks_advice(
        &self,
        _runtime: crate::runtime::Runtime,
        _call_graph: crate::settings::CallGraph,
    ) -> Option<(String, String)> {
        // The Go runtime unwinds its own stacks: a short one is what ran.
        None
    }

    fn tool(&self, ready: &Ready) -> Tool {
        Tool {
            path: ready.profile_url(self.kind),
            version: "net/http/pprof".into(),
        }
    }

    fn event(&self, _ready: &Ready) -> String {
        match self.kind {
            // Go samples CPU time with SIGPROF timers; `samples` counts them.
            PprofKind::Cpu { .. } => "cpu (Go runtime)".to_string(),
            kind @ PprofKind::Heap { .. } => kind.sample_type().to_string(),
        }
    }

    fn notes(&self, _ready: &Ready) -> Vec<String> {
        Vec::new()
    }

    fn record_command(&self, ready: &Ready, job: &RecordJob) -> RecordCommand {
        let limit = match self.kind {
            PprofKind::Cpu { seconds } => seconds + ANSWER_SLACK_S,
            PprofKind::Heap { .. } => 60,
        };
        // The endpoint decides how much it sends: the file may not grow past the limit
        // (in 512-byte blocks, one more than the limit so that an oversized answer is
        // seen as such when read), whether or not the answer says its length.
        let blocks = (MAX_FETCHED_PROFILE / 512 + 1).to_string();
        let argv = [
            "sh",
            "-c",
            "ulimit -f \"$1\" && shift && exec \"$@\"",
            "sh",
            &blocks,
            ready.curl.as_str(),
            "-sS",
            "--fail",
            "--max-time",
            &limit.to_string(),
            "-o",
            &format!("{}/{FETCHED_FILE}", job.workdir),
            &ready.profile_url(self.kind),
        ]
        .map(str::to_string)
        .to_vec();
        RecordCommand { argv, user: None }
    }

    async fn collect<'a>(&'a self, ready: &'a Ready, job: &'a CollectJob<'a>) -> Result<Collected> {
        let Fetched {
            url,
            profile,
            folded,
            download_ms,
        } = self.fetched(ready, job).await?;
        let kept = job.stem.file_name("pb.gz");
        let (notes, sampled_hz, objects) = match self.kind {
            PprofKind::Cpu { .. } => (
                format!(
                    "profile from {url} ({} Hz, Go's SIGPROF sampling); the original is kept as {kept}",
                    hz(&profile).unwrap_or(GO_DEFAULT_HZ)
                ),
                hz(&profile),
                None,
            ),
            PprofKind::Heap { allocated } => (
                format!("profile from {url}; the original is kept as {kept}"),
                None,
                profile
                    .value_index(if allocated {
                        "alloc_objects"
                    } else {
                        "inuse_objects"
                    })
                    .map(|i| profile.total(i)),
            ),
        };
        Ok(Collected {
            reported_samples: Some(folded.total()),
            sampled_hz,
            folded,
            raw_files: vec!["pb.gz"],
            timings_ms: vec![("download", download_ms)],
            notes: vec![notes],
            source: Some(url),
            objects,
            ..Collected::default()
        })
    }
}

impl PprofEngine {
    /// After the window: the profile the recorder fetched, kept as `<stem>.pb.gz` as
    /// served, decoded and its chosen value folded.
    async fn fetched(&self, ready: &Ready, job: &CollectJob<'_>) -> Result<Fetched> {
        let url = ready.profile_url(self.kind);
        if !job.recorded.success() {
            let said = first_line(&job.recorded.stderr);
            return Err(Error::PerfFailed {
                container: ready.container.clone(),
                step: format!("pprof fetch of {url}"),
                detail: if said.is_empty() {
                    format!(
                        "curl ended without an answer (exit {}; an answer over {} MiB ends it too)",
                        job.recorded
                            .exit_code
                            .map_or("unknown".to_string(), |c| c.to_string()),
                        MAX_FETCHED_PROFILE >> 20
                    )
                } else {
                    printable(said)
                },
            });
        }
        let started = Instant::now();
        let path = format!("{}/{FETCHED_FILE}", job.workdir);
        let (bytes, out) = job
            .shell
            .stream_to(&["cat".to_string(), path], None, |reader| {
                read_at_most(reader, MAX_FETCHED_PROFILE)
            })
            .await?;
        let download_ms = started.elapsed().as_millis() as u64;
        // What the endpoint served (its sample types, its strings) is the program's: the
        // error shows it on one line.
        let invalid = |detail: String| Error::PprofInvalid {
            container: ready.container.clone(),
            url: url.clone(),
            detail: printable(&detail),
        };
        if !out.success() || bytes.is_empty() {
            return Err(invalid(format!(
                "the fetch left no profile ({})",
                first_line(&out.stderr)
            )));
        }
        let kept = job.stem.path("pb.gz");
        std::fs::write(&kept, &bytes)
            .map_err(|e| Error::io(format!("write {}", kept.display()), e))?;
        let profile = pprof::decode(&bytes).map_err(|e| invalid(e.to_string()))?;
        let sample_type = self.kind.sample_type();
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
            .fold(index, &ready.program)
            .map_err(|e| invalid(e.to_string()))?;
        if folded.total() == 0 {
            return Err(Error::NoSamples {
                container: ready.container.clone(),
                reason: Some(format!("the Go runtime's profile from {url} holds no {sample_type}")),
                hint: match self.kind {
                    PprofKind::Cpu { .. } => format!(
                        "pid {} may be idle over the window; record longer or put load on it",
                        ready.pid
                    ),
                    PprofKind::Heap { .. } => "the heap profile fills after the first garbage collection; try again in a moment".to_string(),
                },
            });
        }
        Ok(Fetched {
            url,
            profile,
            folded,
            download_ms,
        })
    }
}

/// HTTP status of `url` from the fetcher (0 when nothing answers).
async fn status(shell: &Shell, url: &str) -> u16 {
    shell
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
/// target's network that serves `/debug/pprof/`.
async fn endpoint(shell: &Shell, container: &str, pid: u32, given: Option<&str>) -> Result<String> {
    let missing = |detail: String| Error::PprofMissing {
        container: container.to_string(),
        pid,
        detail,
        fix: GO_PPROF_FIX.to_string(),
    };
    if let Some(base) = given {
        let status = status(shell, &go_endpoint::index_url(base)).await;
        return match status {
            200 => Ok(base.to_string()),
            0 => Err(missing(format!("nothing answers at {base} (--pprof-url)"))),
            code => Err(missing(format!(
                "{} answers HTTP {code}, not net/http/pprof's index (--pprof-url)",
                go_endpoint::index_url(base)
            ))),
        };
    }
    // The fetcher is in the target's network namespace: its own /proc/net lists the
    // sockets /proc/<pid>/net would.
    let out = shell
        .run(&["sh", "-c", "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null"])
        .await?;
    let candidates = go_endpoint::candidates(&go_endpoint::listeners(&out.stdout));
    let mut tried = Vec::new();
    for base in &candidates {
        let status = status(shell, &go_endpoint::index_url(base)).await;
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

fn describe_status(status: u16) -> String {
    match status {
        0 => "no answer".to_string(),
        code => format!("HTTP {code}"),
    }
}

/// Go's CPU sampling rate from the profile's period (10 ms: 100 Hz).
pub fn hz(profile: &Profile) -> Option<u32> {
    match profile.period_type.as_ref() {
        Some((kind, unit)) if kind == "cpu" && unit == "nanoseconds" && profile.period > 0 => {
            Some((1_000_000_000 / profile.period) as u32)
        }
        _ => None,
    }
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

    fn ready() -> Ready {
        Ready {
            base: "http://127.0.0.1:6060".into(),
            curl: "/usr/bin/curl".into(),
            container: "demo-go".into(),
            pid: 7,
            program: "demo-go".into(),
        }
    }

    fn job(workdir: &str) -> RecordJob {
        RecordJob {
            pid: 7,
            workdir: workdir.into(),
            duration: std::time::Duration::from_secs(10),
            frequency: 999,
            call_graph: crate::settings::CallGraph::FramePointer,
            process: crate::runtime::ProcessFacts::default(),
            ..Default::default()
        }
    }

    #[test]
    fn the_runtimes_window_is_fetched_into_the_workdir_by_a_recorder_that_ends_by_itself() {
        let engine = PprofEngine {
            kind: PprofKind::Cpu { seconds: 10 },
            url: None,
            container: "demo-go".into(),
        };
        assert_eq!(engine.reach(), Reach::Network);
        assert!(engine.recorder_stops_itself());
        // Go samples at its own rate, whatever was asked.
        assert_eq!(engine.frequency(&ready(), 999), GO_DEFAULT_HZ);
        let RecordCommand { argv, user } = engine.record_command(&ready(), &job("/tmp/w"));
        assert_eq!(user, None);
        // curl runs with its output file bounded.
        assert_eq!(
            argv[..3],
            ["sh", "-c", "ulimit -f \"$1\" && shift && exec \"$@\""]
        );
        assert_eq!(argv[4], (MAX_FETCHED_PROFILE / 512 + 1).to_string());
        assert_eq!(argv[5], "/usr/bin/curl");
        let after = |flag: &str| argv[argv.iter().position(|a| a == flag).unwrap() + 1].clone();
        assert_eq!(after("-o"), "/tmp/w/profile.pb.gz");
        // The runtime answers when its 10 s are over: the limit leaves it room.
        assert_eq!(after("--max-time"), "40");
        assert_eq!(
            argv.last().unwrap(),
            "http://127.0.0.1:6060/debug/pprof/profile?seconds=10"
        );
        assert!(argv.contains(&"--fail".to_string()));
        let heap = PprofEngine {
            kind: PprofKind::Heap { allocated: true },
            ..engine
        };
        let RecordCommand { argv, .. } = heap.record_command(&ready(), &job("/tmp/w"));
        assert_eq!(
            argv.last().unwrap(),
            "http://127.0.0.1:6060/debug/pprof/heap"
        );
        assert_eq!(heap.event(&ready()), "alloc_space");
    }

    #[test]
    fn a_fetched_profile_past_its_budget_is_refused_not_read_whole() {
        let mut endless = std::io::repeat(7);
        let e = read_at_most(&mut endless, 3 << 20).unwrap_err();
        assert!(e.to_string().contains("larger than 3 MiB"), "{e}");
        let mut small: &[u8] = b"profile";
        assert_eq!(read_at_most(&mut small, 3 << 20).unwrap(), b"profile");
    }
}
