//! The off-CPU recipe: check the config's events against the container's kernel, record
//! them with call chains (and switch records for off-CPU time), bring perf.data home,
//! stream `perf script` through the one-pass aggregator, and write the summary, the
//! event-count flamegraph and, with sched_switch, the off-CPU time flamegraph.

mod events;

use super::manifest::{manifest_for, subtitle, ManifestBase, Sampling};
use super::session::{cleanup_workdir, make_workdir, record, Window};
use super::{find_target, locate, Target};
use crate::docker::ExecOutput;
use crate::engines::perf::{
    self, download_data, ensure_data_written, record_tail, symfs_args, PerfEngine, PerfReady,
};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::profile::offcpu::events::{is_tracepoint, perf_event_name, CheckedEvents};
use crate::profile::offcpu::script::for_each_record_resolved;
use crate::profile::offcpu::summary::{Aggregator, Mode, Outcome};
use crate::profile::offcpu::text::render_text;
use crate::profile::perfdata;
use crate::profile::perfscript::FrameResolver;
use crate::profile::timeline::TimelineWriter;
use crate::render::{write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::settings::{OffcpuSettings, SummaryMode};
use crate::signals::Interrupts;
use crate::store::{self, Manifest, Stem};
use crate::ui::progress;
use crate::units::{human_duration, thousands};
use chrono::Local;
use events::{checked_events, ring_buffer, trial_events};
use inferno::flamegraph::color::{BasicPalette, Palette};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// A target perf may record.
type PerfTarget = Target<PerfReady>;

#[derive(Debug)]
pub struct OffcpuOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub summary_text: String,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

pub async fn run_offcpu(
    settings: &OffcpuSettings,
    interrupts: &mut Interrupts,
) -> Result<OffcpuOutcome> {
    let wants_tracepoints = settings.config.events.iter().any(|e| is_tracepoint(e));
    let located = locate(&settings.target, &settings.process).await?;
    let target = find_target(
        &PerfEngine,
        located,
        &settings.process,
        &settings.placement,
        wants_tracepoints,
    )
    .await?;
    let result = capture_with(&target, settings, interrupts).await;
    target.release().await;
    result
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
    let checked = checked_events(target, settings, &mut notes).await?;
    trial_events(target, &checked.events).await?;
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    let workdir = make_workdir(&target.shell).await?;
    let result =
        record_and_summarize(target, &checked, notes, &workdir, settings, interrupts).await;
    if !matches!(result, Err(Error::TargetStopped { .. })) {
        cleanup_workdir(&target.shell, &workdir).await;
    }
    result
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
    let container = &target.container.name;
    let switches = checked.events.iter().any(|e| e == "sched:sched_switch");
    let buffer = ring_buffer(target, workdir).await;
    if buffer.is_none() {
        notes.push(
            "perf may not map a larger ring buffer here; bursts of events may be lost".into(),
        );
    }
    let stem = Stem::reserve(
        &store::container_dir(&settings.output_dir, container),
        "offcpu",
        Local::now(),
    )?;
    let data_in_container = format!("{workdir}/perf.data");
    let mut timings = BTreeMap::new();

    // Every event counted (-c 1), with its call chain.
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
    if let Some(size) = &buffer {
        record_argv.extend(["-m".into(), size.clone()]);
    }
    if switches {
        // Switch-in records: the end of each off-CPU interval.
        record_argv.push("--switch-events".into());
    }
    record_argv.extend(record_tail(
        perf_tool,
        target.process.pid,
        &data_in_container,
        settings.duration,
    ));

    let label = format!(
        "recording {container} ({} events from {})",
        checked.events.len(),
        settings.config.name
    );
    let watch = target.watch();
    let window = Window {
        argv: &record_argv,
        duration: settings.duration,
        label: &label,
        notes: &notes,
        user: None,
        watch: &watch,
        until_command_ends: false,
        // perf record -p ends when the process does.
        ends_with_target: true,
    };
    let mut recording = record(shell, workdir, &window, interrupts, &stem).await?;
    if buffer.is_some() && perf::is_mlock_error(&recording.output.stderr) {
        // Other perf sessions of the same user took the locked-memory budget between the
        // trial and the start: record with perf's default ring buffer instead.
        if let Some(at) = record_argv.iter().position(|a| a == "-m") {
            record_argv.drain(at..at + 2);
        }
        notes.push("the locked-memory budget for perf ring buffers is in use by other sessions; recording with the default buffer".into());
        let window = Window {
            argv: &record_argv,
            duration: settings.duration,
            label: &label,
            notes: &[],
            user: None,
            watch: &watch,
            until_command_ends: false,
            ends_with_target: true,
        };
        recording = record(shell, workdir, &window, interrupts, &stem).await?;
    }
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let report = perf::parse_record_report(&recording.output.stderr);
    ensure_data_written(shell, &data_in_container, &recording.output.stderr, &stem).await?;

    let t = Instant::now();
    // Copy-out and the summary share one deadline, as in a CPU capture.
    let deadline = Instant::now() + super::liveness::collect_limit(settings.duration);
    let container = target.container.name.clone();
    super::liveness::within(
        deadline.saturating_duration_since(Instant::now()),
        &container,
        "copy-out of perf.data",
        download_data(shell, &data_in_container, &stem),
    )
    .await
    .inspect_err(|_| stem.discard(&["data"]))?;
    timings.insert("download".to_string(), t.elapsed().as_millis() as u64);

    let mode = match settings.mode {
        SummaryMode::Fast => Mode::Fast,
        SummaryMode::Full => Mode::Full,
        SummaryMode::Auto { threshold } => {
            if report.samples.is_some_and(|n| n > threshold) {
                notes.push(format!(
                    "{} events is above the fast-mode threshold ({threshold}): summarized without stacks; --full forces them",
                    report.samples.unwrap_or_default()
                ));
                Mode::Fast
            } else {
                Mode::Full
            }
        }
    };
    let mut script_argv = perf_tool.in_workdir(workdir, "script");
    script_argv.extend([
        "-i".into(),
        data_in_container.clone(),
        "-F".into(),
        "comm,pid,tid,time,event,trace,ip,sym,dso".into(),
        "--no-inline".into(),
    ]);
    if switches {
        script_argv.push("--show-switch-events".into());
    }
    script_argv.extend(symfs_args(target.symfs().as_deref()));

    let t = Instant::now();
    let spinner = progress::spinner(match mode {
        Mode::Full => "symbolizing and summarizing events (perf script)",
        Mode::Fast => "summarizing events (reading perf.data, fast mode)",
    });
    let keep = settings.keep_script.then(|| stem.path("script"));
    if keep.is_some() && mode == Mode::Fast {
        notes.push("fast mode reads perf.data directly: there is no perf script text to keep (--full keeps it)".into());
    }
    // Events as perf names them in its output (modifiers like `:u` dropped).
    let events: Vec<String> = checked.events.iter().map(|e| perf_event_name(e)).collect();
    let local_data = stem.path("data");
    let timeline_path = stem.path("timeline");
    // A stripped Go executable: devprof names what perf cannot, as in a CPU capture.
    let resolver = perf::go_resolver(target.go.as_ref(), false);
    let summarizing = async move {
        match mode {
            // Full: perf script in the container, where the binaries are, symbolizes.
            Mode::Full => {
                shell
                    .stream_to(&script_argv, keep, move |reader| {
                        let resolver = resolver.as_ref().map(|r| r as &dyn FrameResolver);
                        let mut aggregator = Aggregator::for_events(mode, &events);
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
            Mode::Fast => {
                let path = local_data.clone();
                let aggregator =
                    tokio::task::spawn_blocking(move || -> std::io::Result<Aggregator> {
                        let mut aggregator = Aggregator::for_events(mode, &events);
                        let mut timeline = timeline_writer(&timeline_path)?;
                        perfdata::for_each_record(&path, |r| {
                            aggregator.add_with_timeline(r, &mut timeline)
                        })?;
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
        }
    };
    let summarizing = super::liveness::within(
        deadline.saturating_duration_since(Instant::now()),
        &container,
        "summary (perf script)",
        summarizing,
    );
    let streamed = tokio::select! {
        streamed = summarizing => streamed,
        _ = interrupts.next() => {
            spinner.finish_and_clear();
            let mut manifest = offcpu_manifest(target, settings, &recording);
            manifest.notes.push("interrupted while summarizing; the .data file holds the whole recording".into());
            manifest.record_stem_files(&stem, &["data"]);
            let _ = std::fs::remove_file(stem.path("script"));
            let _ = std::fs::remove_file(stem.path("timeline"));
            manifest.write(&stem)?;
            return Err(Error::Interrupted);
        }
    };
    spinner.finish_and_clear();
    let (aggregator, script_out) = match streamed {
        Ok(done) => done,
        Err(e) => {
            stem.discard(&["data", "script", "timeline"]);
            return Err(e);
        }
    };
    let lost = perf::parse_record_report(&script_out.stderr)
        .lost_chunks
        .or(report.lost_chunks);
    let Outcome {
        summary,
        events_folded,
        off_cpu_folded,
    } = aggregator.finish(recording.window.as_secs_f64(), lost);
    timings.insert("summarize".to_string(), t.elapsed().as_millis() as u64);

    let mut warnings = Vec::new();
    let script_err = script_out.stderr.to_ascii_lowercase();
    if script_err.contains("truncated") || script_err.contains("data size field is 0") {
        warnings.push("perf.data is truncated: perf was stopped before it finished writing (out of disk or killed); counts cover what was written".into());
    }
    if summary.total_events == 0 {
        stem.discard(&["data", "script", "timeline"]);
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: Some(if !script_out.success() {
                format!("perf script failed: {}", perf::first_error_line(&script_out.stderr))
            } else {
                "none of the config's events fired in the window".into()
            }),
            hint: format!(
                "the process (pid {}) did none of {} while recording; record longer or under load, or check the config",
                target.process.pid,
                checked.events.join(", ")
            ),
        });
    }
    if let Some(l) = lost.filter(|l| *l > 0) {
        warnings.push(format!("perf lost {l} chunks of events: counts are lower bounds; record fewer events or a shorter window"));
    }

    // Artifacts.
    let t = Instant::now();
    let mut extensions = vec!["data", "timeline", "folded", "svg", "txt"];
    write_folded_file(&events_folded, &stem.path("folded"))?;
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
        &events_folded,
        &SvgSpec {
            title,
            subtitle: Some(sub.clone()),
            count_name: "events".into(),
            palette: Palette::Basic(BasicPalette::Io),
        },
        &stem.path("svg"),
    )?;
    if let Some(off) = off_cpu_folded.as_ref().filter(|f| !f.is_empty()) {
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
                count_name: "us off-CPU".into(),
                palette: Palette::Basic(BasicPalette::Blue),
            },
            &stem.path("offcpu.svg"),
        )?;
        extensions.extend(["offcpu.folded", "offcpu.svg"]);
    }
    let header = format!(
        "{container} (pid {} {}): off-CPU events from {} ({}), {} window{}",
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
    let mut summary_text = render_text(&summary, &header);
    summary_text.insert_str(
        header.len() + 1,
        &format!("via {}\n", target.mode_description()),
    );
    if !notes.is_empty() {
        summary_text.push_str("\nnotes:\n");
        for note in &notes {
            summary_text.push_str(&format!("  - {note}\n"));
        }
    }
    std::fs::write(stem.path("txt"), &summary_text)
        .map_err(|e| Error::io(format!("write {}", stem.path("txt").display()), e))?;
    if settings.keep_script {
        extensions.push("script");
    }
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
    let mut files = manifest.record_stem_files(&stem, &extensions);
    let manifest_path = manifest.write(&stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(OffcpuOutcome {
        manifest,
        manifest_path,
        summary_text,
        files,
        warnings,
    })
}

/// The timeline file beside the event-count flamegraph, written as the events stream in.
fn timeline_writer(
    path: &std::path::Path,
) -> std::io::Result<TimelineWriter<std::io::BufWriter<std::fs::File>>> {
    TimelineWriter::new(std::io::BufWriter::new(std::fs::File::create(path)?))
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
            engine: PerfEngine.name(),
            tool: PerfEngine.tool(&target.ready),
            window: recording.window,
            requested: settings.duration,
            interrupted: recording.interrupted,
        },
    );
    recording.stamp(&mut manifest);
    manifest
}
