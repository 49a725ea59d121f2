//! perf as an engine: finding it (`tool`), checking it may record the process and choosing
//! the event (`access`), reading what it printed (`report`), and here the CPU recipe's
//! steps: `perf record -g` for the window, perf.data brought home, and folded: natively
//! (`native`: perf.data read and named by devprof, frame-pointer captures) or by
//! `perf script` streamed out of the container straight into the folder.

pub mod access;
pub mod ahead;
pub mod face;
mod home;
mod kernel;
mod native;
pub mod report;
pub mod tool;

pub use crate::text::first_error_line;
pub use access::{
    check_access, diagnose_denial, failure, is_mlock_error, likely_access, parse_stat_csv,
    version_and_trial, Access, EventStatus,
};
pub use home::bring_home;
pub use native::NATIVE as NATIVE_FOLD;
pub use report::parse_record_report;
pub use tool::{find_perf, major_minor, perf_candidates, PerfTool};

use super::{CollectJob, Collected, Engine, InWorkdir, Reached, RecordCommand, RecordJob, Tool};
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::perfscript::fold_perf_script_resolved;
use crate::profile::perfscript::name::frame_names;
use crate::profile::perfscript::parse::StackLine;
use crate::profile::perfscript::FrameResolver;
use crate::profile::timeline::TimelineWriter;
use crate::runtime::perf_map;
use crate::settings::FoldPath;
use crate::symbols::binary::GoBinary;
use std::path::Path;
use std::time::{Duration, Instant};

/// On-CPU sampling with `perf record -g`.
#[derive(Default)]
pub struct PerfEngine {
    /// perf's version and access trial, asked before `prepare` (beside the process's
    /// probe, `ahead::ask_ahead`): the first `prepare` through the container's own shell
    /// takes it instead of asking again.
    answered: std::sync::Mutex<Option<Asked>>,
    /// This host's kept kernel symbols, read while the window runs (`stage`).
    kernel: kernel::KernelPreload,
}

/// An answer, and the container whose perf gave it.
#[derive(Debug)]
pub struct Asked {
    container: String,
    answer: PerfAnswer,
}

/// What the perf tried first answered to its version query and access trial, in one exec
/// (`version_and_trial`); None: it did not answer.
pub type PerfAnswer = Result<Option<(PerfTool, Access)>>;

impl PerfEngine {
    /// An engine whose first `prepare` in the answer's container takes it (None: asks
    /// then).
    pub fn answered(answered: Option<Asked>) -> Self {
        PerfEngine {
            answered: std::sync::Mutex::new(answered),
            kernel: Default::default(),
        }
    }

    /// The answer asked ahead, once, and only in the container that gave it (a sidecar's
    /// perf is another perf, with other rights).
    fn take_answer(&self, container: &str) -> Option<PerfAnswer> {
        let mut answered = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        match answered.take() {
            Some(asked) if asked.container == container => Some(asked.answer),
            _ => None,
        }
    }
}

/// A perf that may record the process, and the event it samples.
#[derive(Debug, Clone)]
pub struct PerfReady {
    pub perf: PerfTool,
    pub access: Access,
}

/// What devprof prints on stderr (without a terminal) as `perf script` starts.
pub const FOLDING_STARTED: &str = "folding started (perf script)";

/// perf.data's name in the workdir.
pub(super) const DATA_NAME: &str = "perf.data";

impl Engine for PerfEngine {
    type Ready = PerfReady;

    fn name(&self) -> &'static str {
        PerfReady::ENGINE
    }

    async fn prepare<'a>(&'a self, at: Reached<'a>) -> Result<PerfReady> {
        let (shell, facts, process) = (at.shell, at.facts, at.process);
        // The perf tried first answers its version and runs the trial in one exec (maybe
        // already, beside the process's probe); where it does not answer, each candidate
        // is asked, and the one that answers tried.
        let asked = match self.take_answer(shell.container()) {
            Some(answer) => Some(answer),
            None => ahead::ask_ahead(shell, facts, process.pid)
                .await
                .map(|asked| asked.answer),
        };
        let ready = match asked {
            Some(answer) => answer?,
            None => None,
        };
        let (perf, access) = match ready {
            Some(ready) => ready,
            None => {
                let perf = find_perf(shell, facts).await?;
                let access = check_access(shell, &perf.path, facts, process.pid).await?;
                (perf, access)
            }
        };
        Ok(PerfReady { perf, access })
    }

    fn recorder_ends_with_target(&self) -> bool {
        true
    }

    fn recorder_enables_on_release(&self) -> bool {
        true
    }

    fn reads_perf_maps(&self) -> bool {
        true
    }

    fn tool(&self, ready: &PerfReady) -> Tool {
        ready.tool()
    }

    async fn stage<'a>(&'a self, at: InWorkdir<'a, PerfReady>) -> Result<()> {
        let job = at.job;
        // The native fold's kernel names, read while the window runs.
        if let Some(cache) = &job.symbol_cache {
            self.kernel.start(cache.clone());
        }
        Ok(())
    }

    fn event(&self, ready: &PerfReady) -> String {
        ready.access.event.clone()
    }

    fn notes(&self, ready: &PerfReady) -> Vec<String> {
        ready.access.notes.clone()
    }

    fn record_command(&self, ready: &PerfReady, job: &RecordJob) -> RecordCommand {
        let mut argv = record_head(ready, job);
        argv.extend(record_tail(
            &ready.perf,
            job.pid,
            &format!("{}/{DATA_NAME}", job.workdir),
            job.duration,
        ));
        RecordCommand { argv, user: None }
    }

    fn command_record(&self, ready: &PerfReady, job: &RecordJob) -> Option<Vec<String>> {
        let mut argv = record_head(ready, job);
        if ready.perf.supports_zstd {
            argv.push("-z".into());
        }
        argv.extend(["-o".into(), format!("{}/{DATA_NAME}", job.workdir)]);
        Some(argv)
    }

    async fn collect<'a>(
        &'a self,
        ready: &'a PerfReady,
        job: &'a CollectJob<'a>,
    ) -> Result<Collected> {
        let data_in_container = format!("{}/{DATA_NAME}", job.workdir);
        let report = parse_record_report(&job.recorded.stderr);
        let started = Instant::now();
        // What the native fold asks of the container is read while perf.data comes out.
        // perf follows the perf map whatever it is (a link to /dev/zero, a FIFO): one that
        // is no regular file within the limit is not handed to it, and the capture is then
        // folded natively. It is judged by that same read where the native fold comes
        // first, else by a check of its own, beside the copy-out too.
        let wanted = native::wanted(job);
        let prefetch = async {
            if wanted {
                native::prefetch(job).await
            } else {
                native::Prefetched::default()
            }
        };
        let check = async {
            if wanted {
                None
            } else {
                perf_map::perf_map_refused(job.shell, job.pid, job.symfs.as_deref()).await
            }
        };
        let (home, prefetched, checked) = tokio::join!(
            bring_home(
                job.shell,
                &data_in_container,
                &job.recorded.stderr,
                job.stem,
                job.report,
            ),
            prefetch,
            check
        );
        home?;
        job.report.mark("recording copied out");
        let mut timings_ms = vec![("download", started.elapsed().as_millis() as u64)];
        let mut notes = Vec::new();
        let perf_map_refused = if wanted {
            prefetched.perf_map_refused(job.pid)
        } else {
            checked
        };
        let warnings: Vec<String> = perf_map_refused
            .iter()
            .map(|why| {
                format!("{why}: perf would follow it, so it is not read; folded natively, JIT frames stay unnamed")
            })
            .collect();
        let native_only = job.fold == FoldPath::Native || perf_map_refused.is_some();
        if wanted || native_only {
            let started = Instant::now();
            match native::fold(job, prefetched, &self.kernel).await {
                Ok((fold, jit_notes)) if native_only || native::trusted(&fold) => {
                    timings_ms.push(("fold", started.elapsed().as_millis() as u64));
                    notes.extend(jit_notes);
                    notes.extend(native::notes(&fold));
                    return Ok(Collected {
                        folded: fold.folded,
                        raw_files: with_perf_map(vec!["data", "timeline"], job),
                        reported_samples: report.samples,
                        lost_chunks: report.lost_chunks,
                        stderr: job.recorded.stderr.clone(),
                        timings_ms,
                        fold_path: Some(native::NATIVE),
                        notes,
                        warnings,
                        ..Collected::default()
                    });
                }
                Ok((fold, _)) => notes.push(format!(
                    "the native fold could not name {:.1}% of the samples as perf would (JIT code or files it could not fetch: {}); folded with perf script instead",
                    fold.doubtful_share() * 100.0,
                    fold.missing_modules.join(", ")
                )),
                Err(e) if native_only => {
                    // The recording stays: the capture keeps it for another try.
                    let _ = std::fs::remove_file(job.stem.path("timeline"));
                    return Err(e);
                }
                Err(e) => notes.push(format!(
                    "the native fold failed ({e}); folded with perf script instead"
                )),
            }
        }
        by_script(ready, job, &report, timings_ms, notes, warnings).await
    }
}

/// The recording folded by `perf script` in the container, streamed through the folder
/// (where the native fold was not wanted, or could not name what perf would).
async fn by_script(
    ready: &PerfReady,
    job: &CollectJob<'_>,
    report: &report::RecordReport,
    mut timings_ms: Vec<(&'static str, u64)>,
    notes: Vec<String>,
    warnings: Vec<String>,
) -> Result<Collected> {
    let data_in_container = format!("{}/{DATA_NAME}", job.workdir);
    let started = Instant::now();

    let spinner = job
        .report
        .spinner("symbolizing and folding stacks (perf script)");
    // Without a terminal there is no spinner: one line says the fold began.
    if spinner.is_hidden() {
        crate::say!("{}: {FOLDING_STARTED}", job.shell.container());
    }
    let script_argv = ready.script(
        job.workdir,
        &data_in_container,
        "comm,pid,tid,time,event,ip,sym,dso",
        &[if job.inline {
            "--inline"
        } else {
            "--no-inline"
        }],
        job.symfs.as_deref(),
    );
    let keep = job.keep_script.then(|| job.stem.path("script"));
    let timeline_path = job.stem.path("timeline");
    let resolver = go_resolver(job.go.as_ref(), job.inline);
    let clock = crate::profile::perfdata::recording_clock(&job.stem.path("data"))
        .ok()
        .flatten();
    let streamed = job
        .shell
        .stream_to(&script_argv, keep, move |reader| {
            let resolver = resolver.as_ref().map(|r| r as &dyn FrameResolver);
            fold_with_timeline(reader, &timeline_path, resolver, clock.as_ref())
        })
        .await;
    spinner.finish_and_clear();
    timings_ms.push(("fold", started.elapsed().as_millis() as u64));
    let (folded, script_out) = match streamed {
        Ok((folded, out)) if out.success() || !folded.is_empty() => (folded, out),
        // The recording stays: the capture keeps it for another try.
        Ok((_, out)) => {
            return Err(Error::PerfFailed {
                container: job.shell.container().to_string(),
                step: "perf script".into(),
                detail: first_error_line(&out.stderr),
            });
        }
        Err(e) => return Err(e),
    };
    let mut raw_files = vec!["data", "timeline"];
    if job.keep_script {
        raw_files.push("script");
    }
    Ok(Collected {
        folded,
        raw_files: with_perf_map(raw_files, job),
        reported_samples: report.samples,
        lost_chunks: parse_record_report(&script_out.stderr)
            .lost_chunks
            .or(report.lost_chunks),
        stderr: script_out.stderr,
        timings_ms,
        fold_path: Some(native::PERF_SCRIPT),
        notes,
        warnings,
        ..Collected::default()
    })
}

/// `raw_files` and the recorded process's perf map, when the native fold kept one (it
/// is listed whichever fold the capture kept: it is what names the JIT code again).
fn with_perf_map(mut raw_files: Vec<&'static str>, job: &CollectJob<'_>) -> Vec<&'static str> {
    if job.stem.path(native::PERF_MAP).is_file() {
        raw_files.push(native::PERF_MAP);
    }
    raw_files
}

/// Folds `perf script` text and writes its timeline to `path` on the way, with the
/// recording's clock when it is known.
pub fn fold_with_timeline(
    reader: &mut dyn std::io::BufRead,
    path: &Path,
    resolver: Option<&dyn FrameResolver>,
    clock: Option<&crate::profile::timeline::Clock>,
) -> std::io::Result<crate::profile::folded::Folded> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut timeline = TimelineWriter::new(file)?;
    if let Some(clock) = clock {
        timeline.set_clock(clock);
    }
    let folded = fold_perf_script_resolved(reader, &mut timeline, resolver)?;
    timeline.finish()?;
    Ok(folded)
}

/// Names the frames perf left `[unknown]` in a stripped Go executable, from its pclntab.
pub struct GoResolver {
    pub binary: std::sync::Arc<GoBinary>,
    /// `--inline`: inlined calls as frames of their own, and file:line; names only
    /// otherwise.
    pub inline: bool,
}

impl FrameResolver for GoResolver {
    fn resolve(&self, module: &str, address: u64) -> Option<Vec<String>> {
        if module != self.binary.path {
            return None;
        }
        // perf prints an unnamed frame's address as an offset in the mapped file.
        let symbols = self.binary.symbols.as_ref()?.lock().ok()?;
        let address = symbols.address_of_offset(address)?;
        if !self.inline {
            return symbols.function_at(address).map(|name| vec![name]);
        }
        // Named as the native fold names the same chain: outermost first, inlined `_[i]`.
        let chain = symbols.inline_chain(address)?;
        let line = StackLine {
            pc: "",
            symbol: &chain,
            module,
        };
        let mut names = Vec::new();
        frame_names(&line, false, &mut names);
        (!names.is_empty()).then_some(names)
    }
}

/// A resolver for the recorded process when its executable is a Go binary without a
/// symbol table (perf names nothing in it); None otherwise. Every capture kind whose
/// stacks come from `perf script` names them through this one; `inline` adds file:line and
/// inlined calls.
pub fn go_resolver(go: Option<&std::sync::Arc<GoBinary>>, inline: bool) -> Option<GoResolver> {
    go.filter(|go| go.symbols.is_some())
        .cloned()
        .map(|binary| GoResolver { binary, inline })
}

/// `--symfs ROOT` when the target's binaries are seen under another root (a sidecar reads
/// them through /proc/<pid>/root).
pub fn symfs_args(symfs: Option<&str>) -> Vec<String> {
    match symfs {
        Some(root) => vec!["--symfs".into(), root.to_string()],
        None => Vec::new(),
    }
}

/// `perf record -g --call-graph ... -F ... -e EVENT`: how a CPU capture samples.
fn record_head(ready: &PerfReady, job: &RecordJob) -> Vec<String> {
    let mut argv = ready.perf.record_in(&job.workdir);
    argv.extend([
        "-g".into(),
        "--call-graph".into(),
        job.call_graph.perf_arg().into(),
        "-F".into(),
        job.frequency.to_string(),
        "-e".into(),
        ready.access.event.clone(),
    ]);
    // Sample times on a clock that maps to the engine's log timestamps (markers).
    argv.extend(ready.perf.clock_args(&[&ready.access.event]));
    argv
}

/// The end every `perf record` shares: `[-z] -p PID -o FILE -- sleep SECONDS`, recording
/// the target process for the window, compressed where this perf can.
pub(super) fn record_tail(
    perf: &PerfTool,
    pid: u32,
    output: &str,
    duration: Duration,
) -> Vec<String> {
    let mut tail: Vec<String> = Vec::new();
    if perf.supports_zstd {
        tail.push("-z".into());
    }
    tail.extend([
        "-p".into(),
        pid.to_string(),
        "-o".into(),
        output.to_string(),
        "--".into(),
        "sleep".into(),
        format!("{}", duration.as_secs_f64()),
    ]);
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked_in(container: &str) -> Option<Asked> {
        Some(Asked {
            container: container.into(),
            answer: Ok(None),
        })
    }

    /// The answer asked beside the process's probe serves the first `prepare` in its own
    /// container, once: a retry (after the sysctls were lowered) asks again, and a
    /// sidecar's perf, another perf with other rights, never takes it.
    #[test]
    fn an_answer_asked_ahead_is_taken_once_and_only_in_its_container() {
        let engine = PerfEngine::answered(asked_in("node"));
        assert!(matches!(engine.take_answer("node"), Some(Ok(None))));
        assert!(engine.take_answer("node").is_none());
        let engine = PerfEngine::answered(asked_in("node"));
        assert!(engine.take_answer("devprof-sidecar-node").is_none());
        assert!(engine.take_answer("node").is_none());
        assert!(PerfEngine::default().take_answer("node").is_none());
    }
}
