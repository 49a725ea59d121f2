//! The off-CPU recipe: check the config's events against the container's kernel, record
//! them with call chains (and switch records for off-CPU time), bring perf.data home,
//! stream `perf script` through the one-pass aggregator, and write the summary, the
//! event-count flamegraph and, with sched_switch, the off-CPU time flamegraph.

mod events;

use super::kept::Again;
use super::manifest::{manifest_for, subtitle, ManifestBase, Sampling};
use super::run::{perf_placed, Run};
use super::session::Recording;
use super::{catching, jit, resume, Target};
use crate::docker::ExecOutput;
use crate::engines::perf::{self, bring_home, record_tail, symfs_args, PerfEngine, PerfReady};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::offcpu::events::{is_tracepoint, perf_event_name, CheckedEvents};
use crate::profile::offcpu::script::for_each_record_resolved;
use crate::profile::offcpu::series::OverTime;
use crate::profile::offcpu::summary::{Aggregator, Mode, Outcome, Summary};
use crate::profile::offcpu::text::render_text;
use crate::profile::perfdata;
use crate::profile::perfscript::FrameResolver;
use crate::profile::timeline::TimelineWriter;
use crate::render::{plot, write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::settings::{OffcpuSettings, SummaryMode};
use crate::signals::Interrupts;
use crate::store::{self, GraphRecord, Manifest};
use crate::ui::progress;
use crate::units::{human_duration, thousands};
use events::{checked_events, ring_buffer, trial_events, unmount_tracefs};
use inferno::flamegraph::color::{BasicPalette, Palette};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A target perf may record.
type PerfTarget = Target<PerfReady>;

/// What devprof prints on stderr (without a terminal) as the summary starts.
pub const SUMMARY_STARTED: &str = "summary started";

#[derive(Debug)]
pub struct OffcpuOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub summary_text: String,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

impl From<OffcpuOutcome> for super::Captured {
    fn from(o: OffcpuOutcome) -> Self {
        super::Captured {
            manifest: o.manifest,
            manifest_path: o.manifest_path,
            files: o.files,
            warnings: o.warnings,
        }
    }
}

pub async fn run_offcpu(
    settings: &OffcpuSettings,
    interrupts: &mut Interrupts,
) -> Result<OffcpuOutcome> {
    let wants_tracepoints = settings.config.events.iter().any(|e| is_tracepoint(e));
    perf_placed(
        &settings.target,
        &settings.process,
        &settings.placement,
        wants_tracepoints,
        async |target| capture_with(target, settings, interrupts).await,
    )
    .await
}

async fn capture_with(
    target: &PerfTarget,
    settings: &OffcpuSettings,
    interrupts: &mut Interrupts,
) -> Result<OffcpuOutcome> {
    let access = &target.ready.access;
    let mut notes: Vec<String> = access
        .notes
        .iter()
        .filter(|n| !n.contains("cycles"))
        .cloned()
        .collect();
    if let Some(go) = &target.go {
        notes.push(crate::runtime::go_names_note(go.stripped).to_string());
    }
    let mut mounted = None;
    let result = catching(async {
        let checked = checked_events(target, settings, &mut notes, &mut mounted).await?;
        trial_events(target, &checked.events).await?;
        if interrupts.pending() {
            return Err(Error::Interrupted);
        }
        target
            .in_workdir(
                async |workdir| {
                    record_and_summarize(target, &checked, notes, workdir, settings, interrupts)
                        .await
                },
                async |_| {},
            )
            .await
    })
    .await;
    // What devprof mounted goes, once nothing of the capture runs in the container (a
    // stopped container took the mount with it; a paused one runs nothing).
    if let Some(mounted) = mounted {
        let watch = target.watch();
        let stopped =
            matches!(&result, Ok(Err(e)) if matches!(e.cause(), Error::TargetStopped { .. }));
        if !stopped && watch.in_target() && watch.paused().await {
            let name = &target.container.name;
            eprintln!(
                "warning: left tracefs mounted at /sys/kernel/tracing in {name} (paused); after `docker unpause {name}`: \
                 `docker exec {name} umount /sys/kernel/tracing`"
            );
        } else if !stopped {
            unmount_tracefs(target, mounted).await;
        }
    }
    resume(result)
}

async fn record_and_summarize(
    target: &PerfTarget,
    checked: &CheckedEvents,
    mut notes: Vec<String>,
    workdir: &str,
    settings: &OffcpuSettings,
    interrupts: &mut Interrupts,
) -> Result<OffcpuOutcome> {
    let shell = &target.shell;
    let buffer = ring_buffer(target, workdir).await;
    if buffer.is_none() {
        notes.push(
            "perf may not map a larger ring buffer here; bursts of events may be lost".into(),
        );
    }
    let run = Run::new(target, workdir, &settings.output_dir, "offcpu")?;
    let stem = &run.stem;
    let data_in_container = format!("{workdir}/perf.data");
    let mut timings = BTreeMap::new();
    let (recording, record_argv) = record_events(
        &run,
        checked,
        buffer.as_deref(),
        &mut notes,
        settings,
        interrupts,
    )
    .await?;
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let report = perf::parse_record_report(&recording.output.stderr);

    let t = Instant::now();
    // Copy-out and the summary share one deadline, as in a CPU capture.
    let deadline = Instant::now() + super::liveness::collect_limit(settings.duration);
    super::liveness::within(
        deadline.saturating_duration_since(Instant::now()),
        &target.container.name,
        "copy-out of perf.data",
        bring_home(shell, &data_in_container, &recording.output.stderr, stem),
    )
    .await
    .inspect_err(|_| stem.discard(&["data"]))?;
    timings.insert("download".to_string(), t.elapsed().as_millis() as u64);

    let mode = summary_mode(target, settings, report.samples, &mut notes).await;
    let t = Instant::now();
    let script_argv = script_argv(target, workdir, &data_in_container, checked);
    let summarizing = Summarizing {
        run: &run,
        checked,
        mode,
        deadline,
        recording: &recording,
        settings,
    };
    let (aggregator, script_out) = summarizing
        .summarize(script_argv, &mut notes, interrupts)
        .await?;
    let lost = perf::parse_record_report(&script_out.stderr)
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
    let written = Written {
        summary: &summary,
        events_folded: &events_folded,
        off_cpu_folded: off_cpu_folded.as_ref(),
        over_time: &over_time,
    };
    let (extensions, summary_text) = written.write(&summarizing, &notes)?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let mut manifest = offcpu_manifest(target, settings, &recording);
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
    let mut files = manifest.record_stem_files(stem, &extensions);
    let manifest_path = manifest.write(stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(OffcpuOutcome {
        manifest,
        manifest_path,
        summary_text,
        files,
        warnings,
    })
}

/// The window: every event counted (-c 1) with its call chain. Returns the recording and
/// perf's command line as it ran.
async fn record_events(
    run: &Run<'_, PerfReady>,
    checked: &CheckedEvents,
    buffer: Option<&str>,
    notes: &mut Vec<String>,
    settings: &OffcpuSettings,
    interrupts: &mut Interrupts,
) -> Result<(Recording, Vec<String>)> {
    let target = run.target;
    let workdir = run.workdir;
    let switches = checked.events.iter().any(|e| e == "sched:sched_switch");
    let perf_tool = &target.ready.perf;
    let mut record_argv = perf_tool.record_in(workdir);
    for event in &checked.events {
        record_argv.extend(["-e".into(), event.clone()]);
    }
    record_argv.extend([
        "-c".into(),
        "1".into(),
        "-g".into(),
        "--call-graph".into(),
        settings.call_graph.perf_arg().into(),
    ]);
    if let Some(size) = buffer {
        record_argv.extend(["-m".into(), size.to_string()]);
    }
    if switches {
        // Switch-in records: the end of each off-CPU interval.
        record_argv.push("--switch-events".into());
    }
    // Event times on a clock that maps to the engine's log timestamps (markers).
    record_argv.extend(perf_tool.clock_args(&checked.events));
    record_argv.extend(record_tail(
        perf_tool,
        target.process.pid,
        &format!("{workdir}/perf.data"),
        settings.duration,
    ));
    let label = format!(
        "recording {} ({} events from {})",
        target.container.name,
        checked.events.len(),
        settings.config.name
    );
    // perf record -p ends when the process does.
    let mut window = run.window(&record_argv, settings.duration, &label, notes, true);
    window.enable_on_release = true;
    let recording = run.record(&window, interrupts).await?;
    if buffer.is_none() || !perf::is_mlock_error(&recording.output.stderr) {
        return Ok((recording, record_argv));
    }
    // Other perf sessions of the same user took the locked-memory budget between the
    // trial and the start: record with perf's default ring buffer instead.
    if let Some(at) = record_argv.iter().position(|a| a == "-m") {
        record_argv.drain(at..at + 2);
    }
    notes.push("the locked-memory budget for perf ring buffers is in use by other sessions; recording with the default buffer".into());
    let mut window = run.window(&record_argv, settings.duration, &label, &[], true);
    window.enable_on_release = true;
    let recording = run.record(&window, interrupts).await?;
    Ok((recording, record_argv))
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

/// `perf script` over the recording, with the fields the aggregator reads.
fn script_argv(
    target: &PerfTarget,
    workdir: &str,
    data_in_container: &str,
    checked: &CheckedEvents,
) -> Vec<String> {
    let mut script_argv = target.ready.perf.in_workdir(workdir, "script");
    script_argv.extend([
        "-i".into(),
        data_in_container.to_string(),
        "-F".into(),
        "comm,pid,tid,time,event,trace,ip,sym,dso".into(),
        "--no-inline".into(),
    ]);
    if checked.events.iter().any(|e| e == "sched:sched_switch") {
        script_argv.push("--show-switch-events".into());
    }
    script_argv.extend(symfs_args(target.symfs().as_deref()));
    script_argv
}

/// The summary of a recording that is home: what it needs, and what follows from it.
struct Summarizing<'a, 'r> {
    run: &'a Run<'r, PerfReady>,
    checked: &'a CheckedEvents,
    mode: Mode,
    /// Shared with the copy-out.
    deadline: Instant,
    recording: &'a Recording,
    settings: &'a OffcpuSettings,
}

impl Summarizing<'_, '_> {
    fn manifest(&self) -> Manifest {
        offcpu_manifest(self.run.target, self.settings, self.recording)
    }

    /// The events streamed through the one-pass aggregator, under the target's watch and
    /// Ctrl-C; whatever stops it keeps the recording.
    async fn summarize(
        &self,
        script_argv: Vec<String>,
        notes: &mut Vec<String>,
        interrupts: &mut Interrupts,
    ) -> Result<(Aggregator, ExecOutput)> {
        let (run, mode, stem) = (self.run, self.mode, &self.run.stem);
        let shell = &run.target.shell;
        let container = &run.target.container.name;
        let spinner = progress::spinner(match mode {
            Mode::Full => "symbolizing and summarizing events (perf script)",
            Mode::Fast => "summarizing events (reading perf.data, fast mode)",
        });
        // Without a terminal there is no spinner: one line says the summary began.
        if spinner.is_hidden() {
            eprintln!("{container}: {SUMMARY_STARTED}");
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
        let resolver = perf::go_resolver(run.target.go.as_ref(), false);
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
        let summarizing = super::liveness::within(
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
                &Again::Summarize,
                || self.manifest(),
                || spinner.finish_and_clear(),
                interrupts,
            )
            .await?;
        if !script_out.success() {
            // `perf script` ended because the target stopped (or froze with it): that is the
            // error, not a summary of what it printed until then.
            let failed = Error::PerfFailed {
                container: container.clone(),
                step: "summary (perf script)".into(),
                detail: perf::first_error_line(&script_out.stderr),
            };
            let failed = run.explain(failed, "summary").await;
            if !matches!(failed, Error::PerfFailed { .. }) {
                return Err(run.keep(self.manifest(), failed, &Again::Summarize));
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
                    format!("perf script failed: {}", perf::first_error_line(&script_out.stderr))
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
            return Err(run.keep(self.manifest(), none, &Again::Summarize));
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

/// What the summary made, to be written beside the recording.
struct Written<'a> {
    summary: &'a Summary,
    events_folded: &'a Folded,
    off_cpu_folded: Option<&'a Folded>,
    over_time: &'a OverTime,
}

impl Written<'_> {
    /// The event-count flamegraph and heatmap, the off-CPU time flamegraph, the summary
    /// text and the plots. Returns the extensions of every file and the summary text.
    fn write(
        &self,
        summarizing: &Summarizing<'_, '_>,
        notes: &[String],
    ) -> Result<(Vec<&'static str>, String)> {
        let Summarizing {
            run,
            recording,
            settings,
            ..
        } = summarizing;
        let (target, stem) = (run.target, &run.stem);
        let container = &target.container.name;
        let summary = self.summary;
        let mut extensions = vec!["data", "timeline", "folded", "svg", "txt"];
        write_folded_file(self.events_folded, &stem.path("folded"))?;
        let title = format!(
            "{container} — events of {} — {} — {} events",
            settings.config.name,
            human_duration(recording.window),
            thousands(summary.total_events)
        );
        let sub = subtitle(target, Sampling::EveryEvent, settings.call_graph);
        write_heatmap_file(&stem.path("timeline"), &title, "events", &stem.path("html"))?;
        extensions.push("html");
        write_svg_file(
            self.events_folded,
            &SvgSpec {
                title,
                subtitle: Some(sub.clone()),
                count_name: store::units::EVENTS.into(),
                palette: Palette::Basic(BasicPalette::Io),
            },
            &stem.path("svg"),
        )?;
        if let Some(off) = self.off_cpu_folded.filter(|f| !f.is_empty()) {
            write_folded_file(off, &stem.path("offcpu.folded"))?;
            write_svg_file(
                off,
                &SvgSpec {
                    title: format!(
                        "{container} — off-CPU time — {} — {:.2} s blocked in all threads",
                        human_duration(recording.window),
                        off.total() as f64 / 1e6
                    ),
                    subtitle: Some(sub),
                    count_name: store::units::OFF_CPU_US.into(),
                    palette: Palette::Basic(BasicPalette::Blue),
                },
                &stem.path("offcpu.svg"),
            )?;
            extensions.extend(["offcpu.folded", "offcpu.svg"]);
        }
        let summary_text = summary_text(summarizing, summary, notes);
        std::fs::write(stem.path("txt"), &summary_text)
            .map_err(|e| Error::io(format!("write {}", stem.path("txt").display()), e))?;
        // Off-CPU time per thread and I/O bandwidth over the window, beside the summary.
        for (extension, svg) in plot::offcpu_plots(container, summary, self.over_time) {
            std::fs::write(stem.path(extension), svg)
                .map_err(|e| Error::io(format!("write {}", stem.path(extension).display()), e))?;
            extensions.push(extension);
        }
        if settings.keep_script {
            extensions.push("script");
        }
        Ok((extensions, summary_text))
    }
}

/// The summary for people, as printed and saved to `offcpu-….txt`.
fn summary_text(summarizing: &Summarizing<'_, '_>, summary: &Summary, notes: &[String]) -> String {
    let Summarizing {
        run,
        recording,
        settings,
        ..
    } = summarizing;
    let target = run.target;
    let header = format!(
        "{} (pid {} {}): off-CPU events from {} ({}), {} window{}",
        target.container.name,
        target.process.pid,
        target.process.cmdline,
        settings.config.name,
        settings.config.source,
        human_duration(recording.window),
        if recording.interrupted {
            ", stopped early by Ctrl-C"
        } else {
            ""
        }
    );
    let mut summary_text = render_text(summary, &header);
    summary_text.insert_str(
        header.len() + 1,
        &format!("via {}\n", target.mode_description()),
    );
    if !notes.is_empty() {
        summary_text.push_str("\nnotes:\n");
        for note in notes {
            summary_text.push_str(&format!("  - {note}\n"));
        }
    }
    summary_text
}

/// The timeline file beside the event-count flamegraph, written as the events stream in,
/// on the clock of the recording beside it (`<stem>.data`).
fn timeline_writer(
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
    recording: &super::session::Recording,
) -> Manifest {
    let mut manifest = manifest_for(
        target,
        ManifestBase {
            kind: "offcpu",
            typed_target: &settings.target,
            engine: PerfEngine::default().name(),
            tool: PerfEngine::default().tool(&target.ready),
            window: recording.window,
            requested: settings.duration,
            interrupted: recording.interrupted,
        },
    );
    recording.stamp(&mut manifest);
    manifest
}
