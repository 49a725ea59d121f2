//! async-profiler as an engine for JVM targets: `asprof collect` attached to the JVM as the
//! JVM's own user (the attach protocol accepts no other), per thread, writing collapsed
//! stacks that feed the same fold → render → store path as perf. Java frames get their
//! names from the JVM itself, so no perf map and no frame pointers are needed.

pub mod release;

use super::{CollectJob, Collected, Engine, InWorkdir, Reached, RecordCommand, RecordJob, Tool};
use crate::docker::archive::CopyLimit;
use crate::docker::archive::UploadFile;
use crate::docker::probe::{CAP_PERFMON, CAP_SYS_ADMIN};
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::runtime::jvm::JvmOptions;
use crate::runtime::ProcessFacts;
use crate::text::first_error_line;
use crate::text::quote;
use release::{AGENT_LIB, ASPROF_BIN};
use std::path::PathBuf;
use std::time::Instant;

/// Where async-profiler comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum AsprofSource {
    /// A release directory already in the container.
    Container(String),
    /// A release directory on this host (validated), copied in for the capture.
    Host(PathBuf),
}

/// What async-profiler samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsprofMode {
    Cpu,
    Wall,
}

/// async-profiler for one JVM process.
#[derive(Debug, Clone)]
pub struct AsprofEngine {
    pub source: AsprofSource,
    pub mode: AsprofMode,
    pub jvm: JvmOptions,
    /// What /proc says about the JVM (its user, its capabilities).
    pub process: ProcessFacts,
    /// Also keep async-profiler's own HTML flamegraph (`<stem>.html`).
    pub html: bool,
}

/// What `prepare` settled: where asprof is in the container, the event it samples, the
/// user it runs as.
#[derive(Debug, Clone)]
pub struct AsprofReady {
    /// The release directory as the container sees it.
    pub home: String,
    /// A host release to copy into `home` before the window.
    pub upload: Option<PathBuf>,
    /// The event passed to asprof, which is the one it uses (never left to its fallbacks).
    pub event: &'static str,
    pub notes: Vec<String>,
    /// `uid:gid` of the JVM.
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    pub version: String,
}

/// Collapsed stacks in the workdir.
const OUTPUT_NAME: &str = "asprof.collapsed";
/// The most of async-profiler's collapsed stacks read (tens of MiB for a long capture of a
/// busy JVM): the file lies where the JVM's user may write.
const COLLAPSED_LIMIT: u64 = 1 << 30;
/// async-profiler's own flamegraph in the workdir, with --asprof-html.
const HTML_NAME: &str = "asprof.html";
/// async-profiler's own flamegraph beside the capture (`.html` is the time heatmap).
pub const ASPROF_HTML: &str = "asprof.html";

/// The event for a CPU profile: perf_events' cpu-clock where the kernel lets the JVM's own
/// user open perf events on itself (what async-profiler checks before it falls back), else
/// ctimer (per-thread CPU-time timers, no kernel frames). Named explicitly so that the
/// manifest records the event actually used.
pub fn cpu_event(paranoid: Option<i32>, jvm_cap_eff: Option<u64>) -> (&'static str, String) {
    let has = |cap: u32| jvm_cap_eff.is_some_and(|bits| bits & (1u64 << cap) != 0);
    if paranoid.is_some_and(|p| p <= 1) || has(CAP_PERFMON) || has(CAP_SYS_ADMIN) {
        (
            "cpu-clock",
            "async-profiler samples with perf_events (cpu-clock), kernel frames included".into(),
        )
    } else {
        (
            "ctimer",
            format!(
                "perf events are closed to the JVM's user (kernel.perf_event_paranoid={}, no CAP_PERFMON), so \
                 async-profiler samples with ctimer (CPU-time timers per thread, no kernel frames); for kernel \
                 frames set kernel.perf_event_paranoid=1 on the host",
                paranoid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into())
            ),
        )
    }
}

/// async-profiler's sampling interval in nanoseconds for `hz` samples per second.
pub fn interval_ns(hz: u32) -> u64 {
    1_000_000_000 / u64::from(hz.max(1))
}

impl AsprofEngine {
    fn asprof(ready: &AsprofReady) -> String {
        format!("{}/{ASPROF_BIN}", ready.home)
    }

    /// async-profiler's own flamegraph of the same recording (a stopped profiler still
    /// holds its samples until the next start), brought home as `<stem>.html`.
    async fn keep_html(&self, ready: &AsprofReady, job: &CollectJob<'_>) -> Result<()> {
        let html = format!("{}/{HTML_NAME}", job.workdir);
        let pid = job.pid.to_string();
        let out = job
            .shell
            .run_as(
                &ready.user,
                &[
                    &Self::asprof(ready),
                    "dump",
                    "-o",
                    "flamegraph",
                    "-f",
                    &html,
                    &pid,
                ],
            )
            .await?;
        if !out.success() {
            return Err(Error::PerfFailed {
                container: job.shell.container().to_string(),
                step: "asprof dump -o flamegraph".into(),
                detail: first_error_line(&format!("{}\n{}", out.stderr, out.stdout)),
            });
        }
        let name = job.stem.file_name(ASPROF_HTML);
        job.shell
            .docker()
            .download(
                job.shell.container(),
                &html,
                job.stem.dir(),
                CopyLimit::REPORT,
                move |entry| {
                    (entry == std::path::Path::new(HTML_NAME)).then(|| PathBuf::from(&name))
                },
            )
            .await
            .map(|_| ())
    }
}

impl Engine for AsprofEngine {
    type Ready = AsprofReady;

    fn name(&self) -> &'static str {
        "asprof"
    }

    async fn prepare<'a>(&'a self, at: Reached<'a>) -> Result<AsprofReady> {
        let (shell, facts, process) = (at.shell, at.facts, at.process);
        let container = shell.container().to_string();
        if self.jvm.attach_disabled {
            return Err(Error::JvmAttachDisabled {
                container,
                pid: process.pid,
                flag_source: self
                    .jvm
                    .attach_flag_source
                    .clone()
                    .unwrap_or_else(|| "its options".into()),
            });
        }
        let (Some(uid), Some(gid)) = (self.process.uid, self.process.gid) else {
            return Err(Error::PerfFailed {
                container,
                step: "asprof".into(),
                detail: format!(
                    "the user of pid {} is unknown (/proc/{}/status unreadable); async-profiler must run as the JVM's user",
                    process.pid, process.pid
                ),
            });
        };
        let user = format!("{uid}:{gid}");
        let mut notes = Vec::new();
        let (home, upload, version) = match &self.source {
            AsprofSource::Container(home) => {
                // As the JVM's user, like every other asprof run: nothing of it runs as root.
                let out = shell
                    .run_as(&user, &[&format!("{home}/{ASPROF_BIN}"), "--version"])
                    .await?;
                (home.clone(), None, out.stdout.trim().to_string())
            }
            AsprofSource::Host(dir) => {
                let lib = std::fs::read(dir.join(AGENT_LIB))
                    .map_err(|e| Error::io(format!("read {}", dir.join(AGENT_LIB).display()), e))?;
                notes.push(format!(
                    "async-profiler from {} on this host, copied into the container for the capture",
                    dir.display()
                ));
                (release::upload_dir(&lib), Some(dir.clone()), String::new())
            }
        };
        let event = match self.mode {
            AsprofMode::Wall => {
                if cfg!(target_arch = "aarch64") {
                    notes.push(
                        "wall-clock sampling is unstable on arm64; if the JVM misbehaves, profile CPU instead (without --wall)"
                            .into(),
                    );
                }
                "wall"
            }
            AsprofMode::Cpu => {
                let (event, note) = cpu_event(facts.paranoid, self.process.cap_eff);
                notes.push(note);
                event
            }
        };
        Ok(AsprofReady {
            home,
            upload,
            event,
            notes,
            user,
            uid,
            gid,
            version,
        })
    }

    fn tool(&self, ready: &AsprofReady) -> Tool {
        Tool {
            path: Self::asprof(ready),
            version: ready.version.clone(),
        }
    }

    fn event(&self, ready: &AsprofReady) -> String {
        ready.event.to_string()
    }

    fn notes(&self, ready: &AsprofReady) -> Vec<String> {
        ready.notes.clone()
    }

    async fn stage<'a>(&'a self, at: InWorkdir<'a, AsprofReady>) -> Result<()> {
        let (ready, shell, job) = (at.ready, at.shell, at.job);
        let container = shell.container().to_string();
        let failed = |step: &str, detail: String| Error::PerfFailed {
            container: container.clone(),
            step: step.into(),
            detail,
        };
        // The JVM's agent writes the collapsed stacks, and asprof its pid file, as the
        // JVM's user.
        let out = shell.run(&["chown", &ready.user, &job.workdir]).await?;
        if !out.success() {
            return Err(failed("prepare the workdir", first_error_line(&out.stderr)));
        }
        let Some(dir) = &ready.upload else {
            return Ok(());
        };
        let script = format!(
            "d={}; [ -L \"$d\" ] && exit 3; rm -rf \"$d\" && mkdir -m 755 \"$d\"",
            quote(&ready.home)
        );
        let out = shell.sh(&script).await?;
        if !out.success() {
            return Err(failed(
                "make a directory for async-profiler",
                format!("{} ({})", ready.home, first_error_line(&out.stderr)),
            ));
        }
        let spinner = job
            .report
            .spinner("copying async-profiler into the container");
        let files = [(ASPROF_BIN, 0o755), (AGENT_LIB, 0o644)].map(|(name, mode)| UploadFile {
            source: dir.join(name),
            name: name.to_string(),
            mode,
        });
        let uploaded = shell
            .docker()
            .upload_files(&container, &ready.home, &files, 0, 0)
            .await;
        spinner.finish_and_clear();
        uploaded
    }

    fn record_command(&self, ready: &AsprofReady, job: &RecordJob) -> RecordCommand {
        let seconds = job.duration.as_secs_f64().ceil().max(1.0) as u64;
        RecordCommand {
            argv: vec![
                Self::asprof(ready),
                "collect".into(),
                "-d".into(),
                seconds.to_string(),
                "-e".into(),
                ready.event.into(),
                "-i".into(),
                interval_ns(job.frequency).to_string(),
                "-t".into(),
                "-o".into(),
                "collapsed".into(),
                "-f".into(),
                format!("{}/{OUTPUT_NAME}", job.workdir),
                job.pid.to_string(),
            ],
            user: Some(ready.user.clone()),
        }
    }

    async fn finish<'a>(&'a self, at: InWorkdir<'a, AsprofReady>) {
        let (ready, shell, job) = (at.ready, at.shell, at.job);
        // asprof stops the profiler itself at the end of the window or on SIGINT; this is
        // for a recorder that was killed or aborted: no agent keeps sampling in the JVM.
        let asprof = Self::asprof(ready);
        let pid = job.pid.to_string();
        let status = shell.run_as(&ready.user, &[&asprof, "status", &pid]).await;
        if status.is_ok_and(|o| o.stdout.contains("is running")) {
            let _ = shell
                .run_as(&ready.user, &[&asprof, "stop", "-f", "/dev/null", &pid])
                .await;
        }
        if ready.upload.is_some() {
            let _ = shell.run(&["rm", "-rf", &ready.home]).await;
        }
    }

    async fn collect<'a>(
        &'a self,
        ready: &'a AsprofReady,
        job: &'a CollectJob<'a>,
    ) -> Result<Collected> {
        let output = format!("{}/{OUTPUT_NAME}", job.workdir);
        let started = Instant::now();
        // The workdir is the JVM user's: the file is read only as a regular file (not a
        // link to /dev/zero, not a FIFO), and only up to a bound.
        let streamed = job
            .shell
            .stream_file_to(&output, COLLAPSED_LIMIT, |reader| {
                Folded::from_folded_reader(reader)
            })
            .await?;
        let Some((folded, read)) = streamed else {
            job.stem.discard(&[]);
            // Missing (asprof failed, and said why) or no regular file.
            let said = first_error_line(&job.recorded.stderr);
            return Err(Error::PerfFailed {
                container: job.shell.container().to_string(),
                step: "asprof".into(),
                detail: if said.trim().is_empty() {
                    format!(
                        "{OUTPUT_NAME} is not in the workdir, or is no regular file (a link, a FIFO or a device): not read"
                    )
                } else {
                    said
                },
            });
        };
        if !read.success() {
            job.stem.discard(&[]);
            return Err(Error::PerfFailed {
                container: job.shell.container().to_string(),
                step: "asprof".into(),
                detail: first_error_line(&job.recorded.stderr),
            });
        }
        let mut raw_files = Vec::new();
        if self.html {
            self.keep_html(ready, job).await?;
            raw_files.push(ASPROF_HTML);
        }
        Ok(Collected {
            folded,
            raw_files,
            reported_samples: None,
            lost_chunks: None,
            stderr: job.recorded.stderr.clone(),
            timings_ms: vec![("fold", started.elapsed().as_millis() as u64)],
            ..Collected::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::CallGraph;
    use std::time::Duration;

    fn ready(event: &'static str) -> AsprofReady {
        AsprofReady {
            home: "/opt/async-profiler".into(),
            upload: None,
            event,
            notes: Vec::new(),
            user: "1000:1000".into(),
            uid: 1000,
            gid: 1000,
            version: "Async-profiler 4.5".into(),
        }
    }

    #[test]
    fn the_cpu_event_follows_what_the_kernel_allows_the_jvms_user() {
        assert_eq!(cpu_event(Some(1), Some(0)).0, "cpu-clock");
        assert_eq!(cpu_event(Some(2), Some(1 << CAP_PERFMON)).0, "cpu-clock");
        let (event, note) = cpu_event(Some(2), Some(0));
        assert_eq!(event, "ctimer");
        assert!(note.contains("perf_event_paranoid=2"));
        assert_eq!(cpu_event(None, None).0, "ctimer");
    }

    #[test]
    fn the_record_command_runs_asprof_as_the_jvms_user() {
        let engine = AsprofEngine {
            source: AsprofSource::Container("/opt/async-profiler".into()),
            mode: AsprofMode::Cpu,
            jvm: JvmOptions::default(),
            process: ProcessFacts::default(),
            html: false,
        };
        let job = RecordJob {
            pid: 7,
            workdir: "/tmp/devprof.abc".into(),
            duration: Duration::from_millis(9500),
            frequency: 999,
            call_graph: CallGraph::FramePointer,
            process: ProcessFacts::default(),
            ..Default::default()
        };
        let cmd = engine.record_command(&ready("ctimer"), &job);
        assert_eq!(cmd.user.as_deref(), Some("1000:1000"));
        assert_eq!(
            cmd.argv.join(" "),
            "/opt/async-profiler/bin/asprof collect -d 10 -e ctimer -i 1001001 -t -o collapsed \
             -f /tmp/devprof.abc/asprof.collapsed 7"
        );
    }
}
