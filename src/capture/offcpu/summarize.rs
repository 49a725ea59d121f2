//! An off-CPU recording summarized once it is home: perf.data copied out, its events
//! streamed through the one-pass aggregator (`perf script` in the container, or perf.data
//! read here in fast mode), under the target's watch and Ctrl-C, and written down.

use super::write::Outputs;
use super::{again, PerfTarget, Summarizing};
use crate::capture::context::CaptureCtx;
use crate::capture::jit;
use crate::capture::lifecycle::{Run, Written};
use crate::capture::liveness::{collect_limit, within};
use crate::capture::manifest::{manifest_for, ManifestBase};
use crate::capture::window::Recording;
use crate::docker::ExecOutput;
use crate::engines::select::{bring_home, go_resolver, record_report, PerfReady};
use crate::error::{Error, Result};
use crate::profile::offcpu::events::{perf_event_name, CheckedEvents};
use crate::profile::offcpu::script::for_each_record_resolved;
use crate::profile::offcpu::summary::{Aggregator, Mode, Outcome, Summary};
use crate::profile::perfdata;
use crate::profile::perfscript::FrameResolver;
use crate::profile::timeline::TimelineWriter;
use crate::settings::{OffcpuSettings, SummaryMode};
use crate::store::{self, GraphRecord, Manifest};
use crate::text::first_error_line;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What devprof prints on stderr (without a terminal) as the summary starts.
pub const SUMMARY_STARTED: &str = "summary started";

/// Brings the recording home, summarizes it and writes the files; returns what the
/// capture wrote.
pub(super) async fn summarized(
    run: &Run<'_, PerfReady>,
    checked: &CheckedEvents,
    settings: &OffcpuSettings,
    recording: Recording,
    mut notes: Vec<String>,
    record_argv: Vec<String>,
    ctx: &mut CaptureCtx,
) -> Result<Written> {
    let (target, stem) = (run.target, &run.stem);
    let data_in_container = PerfReady::data_path(run.workdir());
    let mut timings = BTreeMap::new();
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let report = record_report(&recording.output.stderr);
    let t = Instant::now();
    // Copy-out and the summary share one deadline, as in a CPU capture.
    let deadline = Instant::now() + collect_limit(settings.duration);
    let home = bring_home(
        &target.shell,
        &data_in_container,
        &recording.output.stderr,
        stem,
        &ctx.report,
    );
    within(
        deadline.saturating_duration_since(Instant::now()),
        &target.container.name,
        "copy-out of perf.data",
        home,
    )
    .await
    .inspect_err(|_| stem.discard(&["data"]))?;
    timings.insert("download".to_string(), t.elapsed().as_millis() as u64);

    let mode = summary_mode(target, settings, report.samples, &mut notes).await;
    let t = Instant::now();
    let fields = "comm,pid,tid,time,event,trace,ip,sym,dso";
    let switches = checked.events.iter().any(|e| e == "sched:sched_switch");
    let mut extra = vec!["--no-inline"];
    if switches {
        extra.push("--show-switch-events");
    }
    let symfs = target.symfs();
    let script_argv = target.ready.script(
        run.workdir(),
        &data_in_container,
        fields,
        &extra,
        symfs.as_deref(),
    );
    let summarizing = Summarizing {
        run,
        checked,
        mode,
        deadline,
        recording: &recording,
        settings,
    };
    let (aggregator, script_out) = summarizing.summarize(script_argv, &mut notes, ctx).await?;
    let lost = record_report(&script_out.stderr)
        .lost_chunks
        .or(report.lost_chunks);
    let Outcome {
        summary,
        events_folded,
        off_cpu_folded,
        over_time,
    } = aggregator.finish(recording.window.as_secs_f64(), lost);
    timings.insert("summarize".to_string(), t.elapsed().as_millis() as u64);
    let warnings = summarizing.warnings(&summary, &script_out, report.samples, lost)?;

    let t = Instant::now();
    let outputs = Outputs {
        summary: &summary,
        events_folded: &events_folded,
        off_cpu_folded: off_cpu_folded.as_ref(),
        over_time: &over_time,
    };
    let (extensions, summary_text) = outputs.write(&summarizing, &notes)?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let mut manifest = summarizing.manifest();
    manifest.events = checked.events.clone();
    manifest.call_graph = settings.call_graph.perf_arg().into();
    manifest.config = Some(settings.config.source.clone());
    manifest.perf.record_command = record_argv;
    manifest.sample_count = summary.total_events;
    manifest.perf_reported_samples = report.samples;
    manifest.lost_chunks = lost;
    manifest.top_functions = events_folded.top_self(10);
    manifest.timings_ms = timings;
    manifest.notes = notes.into_iter().chain(warnings.iter().cloned()).collect();
    manifest.offcpu = Some(summary);
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
        unit: store::units::EVENTS.into(),
    });
    if extensions.contains(&"offcpu.folded") {
        manifest.graphs.push(GraphRecord {
            svg: stem.file_name("offcpu.svg"),
            folded: stem.file_name("offcpu.folded"),
            view: "off-CPU time (sched_switch)".into(),
            unit: store::units::OFF_CPU_US.into(),
        });
    }
    Ok(Written {
        manifest,
        extensions,
        warnings,
        text: Some(summary_text),
        again: again(),
    })
}

/// Fast (perf.data read here, no stacks) or full (`perf script` in the container), as
/// asked, or as the number of events and the process's perf map allow.
async fn summary_mode(
    target: &PerfTarget,
    settings: &OffcpuSettings,
    samples: Option<u64>,
    notes: &mut Vec<String>,
) -> Mode {
    let mode = match settings.mode {
        SummaryMode::Fast => Mode::Fast,
        SummaryMode::Full => Mode::Full,
        SummaryMode::Auto { threshold } => {
            if samples.is_some_and(|n| n > threshold) {
                notes.push(format!(
                    "{} events is above the fast-mode threshold ({threshold}): summarized without stacks; --full forces them",
                    samples.unwrap_or_default()
                ));
                Mode::Fast
            } else {
                Mode::Full
            }
        }
    };
    // perf script follows the process's perf map whatever it is (a link to /dev/zero, a
    // FIFO): one that is no regular file within the limit is not handed to it.
    match mode {
        Mode::Full => {
            let root = target.symfs();
            match jit::perf_map_refused(&target.shell, target.process.pid, root.as_deref()).await {
                Some(why) => {
                    notes.push(format!(
                    "{why}: perf would follow it, so it is not read; summarized in fast mode (without stacks)"
                ));
                    Mode::Fast
                }
                None => Mode::Full,
            }
        }
        fast => fast,
    }
}

impl Summarizing<'_, '_> {
    pub(super) fn manifest(&self) -> Manifest {
        offcpu_manifest(self.run.target, self.settings, self.recording)
    }

    /// The events streamed through the one-pass aggregator, under the target's watch and
    /// Ctrl-C; whatever stops it keeps the recording.
    async fn summarize(
        &self,
        script_argv: Vec<String>,
        notes: &mut Vec<String>,
        ctx: &mut CaptureCtx,
    ) -> Result<(Aggregator, ExecOutput)> {
        let (run, mode, stem) = (self.run, self.mode, &self.run.stem);
        let shell = &run.target.shell;
        let container = &run.target.container.name;
        let spinner = ctx.report.spinner(match mode {
            Mode::Full => "symbolizing and summarizing events (perf script)",
            Mode::Fast => "summarizing events (reading perf.data, fast mode)",
        });
        // Without a terminal there is no spinner: one line says the summary began.
        if spinner.is_hidden() {
            crate::say!("{container}: {SUMMARY_STARTED}");
        }
        let keep = self.settings.keep_script.then(|| stem.path("script"));
        if keep.is_some() && mode == Mode::Fast {
            notes.push("fast mode reads perf.data directly: there is no perf script text to keep (--full keeps it)".into());
        }
        // Events as perf names them in its output (modifiers like `:u` dropped).
        let events: Vec<String> = self
            .checked
            .events
            .iter()
            .map(|e| perf_event_name(e))
            .collect();
        let local_data = stem.path("data");
        let timeline_path = stem.path("timeline");
        // A stripped Go executable: devprof names what perf cannot, as in a CPU capture.
        let resolver = go_resolver(run.target.go.as_ref(), false);
        let window = self.recording.window;
        let summarizing = async move {
            match mode {
                // Full: perf script in the container, where the binaries are, symbolizes.
                Mode::Full => {
                    shell
                        .stream_to(&script_argv, keep, move |reader| {
                            let resolver = resolver.as_ref().map(|r| r as &dyn FrameResolver);
                            let mut aggregator =
                                Aggregator::for_events(mode, &events).within(window);
                            let mut timeline = timeline_writer(&timeline_path)?;
                            for_each_record_resolved(reader, resolver, |r| {
                                aggregator.add_with_timeline(r, &mut timeline)
                            })?;
                            timeline.finish()?;
                            Ok(aggregator)
                        })
                        .await
                }
                // Fast: the downloaded perf.data is read directly; no unwinding, no symbols.
                Mode::Fast => summarize_fast(mode, events, window, local_data, timeline_path).await,
            }
        };
        let summarizing = within(
            self.deadline.saturating_duration_since(Instant::now()),
            container,
            "summary (perf script)",
            summarizing,
        );
        let (aggregator, script_out) = run
            .after_window(
                summarizing,
                "summary",
                "summarizing",
                &again(),
                || self.manifest(),
                || spinner.finish_and_clear(),
                ctx,
            )
            .await?;
        if !script_out.success() {
            // `perf script` ended because the target stopped (or froze with it): that is the
            // error, not a summary of what it printed until then.
            let failed = Error::PerfFailed {
                container: container.clone(),
                step: "summary (perf script)".into(),
                detail: first_error_line(&script_out.stderr),
            };
            let failed = run.explain(failed, "summary").await;
            if !matches!(failed, Error::PerfFailed { .. }) {
                return Err(run.keep(self.manifest(), failed, &again()));
            }
        }
        Ok((aggregator, script_out))
    }

    /// What the summary's readers should hear about it; the error for a summary of nothing.
    fn warnings(
        &self,
        summary: &Summary,
        script_out: &ExecOutput,
        recorded: Option<u64>,
        lost: Option<u64>,
    ) -> Result<Vec<String>> {
        let run = self.run;
        let container = &run.target.container.name;
        let mut warnings: Vec<String> = self
            .recording
            .paused_warning(container)
            .into_iter()
            .collect();
        let script_err = script_out.stderr.to_ascii_lowercase();
        if script_err.contains("truncated") || script_err.contains("data size field is 0") {
            warnings.push("perf.data is truncated: perf was stopped before it finished writing (out of disk or killed); counts cover what was written".into());
        }
        if summary.total_events == 0 {
            let none = Error::NoSamples {
                container: container.clone(),
                reason: Some(if !script_out.success() {
                    format!("perf script failed: {}", first_error_line(&script_out.stderr))
                } else {
                    "none of the config's events fired in the window".into()
                }),
                hint: format!(
                    "the process (pid {}) did none of {} while recording; record longer or under load, or check the config",
                    run.target.process.pid,
                    self.checked.events.join(", ")
                ),
            };
            // Only a recording of nothing goes; one that could not be read is kept.
            if script_out.success() && recorded.is_none_or(|n| n == 0) {
                run.stem.discard(&["data", "script", "timeline"]);
                return Err(none);
            }
            return Err(run.keep(self.manifest(), none, &again()));
        }
        if let Some(l) = lost.filter(|l| *l > 0) {
            warnings.push(format!("perf lost {l} chunks of events: counts are lower bounds; record fewer events or a shorter window"));
        }
        Ok(warnings)
    }
}

/// Fast mode: the downloaded perf.data read here, without unwinding or symbols.
async fn summarize_fast(
    mode: Mode,
    events: Vec<String>,
    window: Duration,
    local_data: PathBuf,
    timeline_path: PathBuf,
) -> Result<(Aggregator, ExecOutput)> {
    let path = local_data.clone();
    let aggregator = tokio::task::spawn_blocking(move || -> std::io::Result<Aggregator> {
        let mut aggregator = Aggregator::for_events(mode, &events).within(window);
        let mut timeline = timeline_writer(&timeline_path)?;
        perfdata::for_each_record(&path, |r| aggregator.add_with_timeline(r, &mut timeline))?;
        timeline.finish()?;
        Ok(aggregator)
    })
    .await
    .map_err(|e| Error::io("summary task", std::io::Error::other(e)))?
    .map_err(|e| {
        Error::io(
            format!(
                "read {} in fast mode (--full summarizes it with perf script instead)",
                local_data.display()
            ),
            e,
        )
    })?;
    Ok((
        aggregator,
        ExecOutput {
            exit_code: Some(0),
            ..Default::default()
        },
    ))
}

/// The timeline file beside the event-count flamegraph, written as the events stream in,
/// on the clock of the recording beside it (`<stem>.data`).
pub(super) fn timeline_writer(
    path: &std::path::Path,
) -> std::io::Result<TimelineWriter<std::io::BufWriter<std::fs::File>>> {
    let mut writer = TimelineWriter::new(std::io::BufWriter::new(std::fs::File::create(path)?))?;
    if let Ok(Some(clock)) = crate::profile::perfdata::recording_clock(&path.with_extension("data"))
    {
        writer.set_clock(&clock);
    }
    Ok(writer)
}

fn offcpu_manifest(
    target: &PerfTarget,
    settings: &OffcpuSettings,
    recording: &Recording,
) -> Manifest {
    let mut manifest = manifest_for(
        target,
        ManifestBase {
            kind: "offcpu",
            typed_target: &settings.target,
            engine: PerfReady::ENGINE,
            tool: target.ready.tool(),
            window: recording.window,
            requested: settings.duration,
            interrupted: recording.interrupted,
        },
    );
    recording.stamp(&mut manifest);
    manifest
}
