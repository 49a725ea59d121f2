//! The CPU recipe, the same for every engine: find the target and a place where the engine
//! may record it, record for the window, let the engine turn its output into folded stacks,
//! then write the folded stacks, the flamegraph and the manifest.

use super::manifest::{manifest_for, subtitle, ManifestBase, Sampling};
use super::session::{cleanup_workdir, make_workdir, record, Window};
use super::{find_target, locate, Located, Target};
use crate::engines::perf::PerfEngine;
use crate::engines::{CollectJob, Collected, Engine, RecordCommand, RecordJob};
use crate::error::{Error, Result};
use crate::render::{write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::runtime::Runtime;
use crate::settings::{CpuSettings, EngineChoice};
use crate::signals::Interrupts;
use crate::store::{self, Manifest, Stem};
use crate::units::{human_duration, thousands};
use chrono::Local;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Fewer samples than this and the flamegraph is mostly noise.
pub const LOW_SAMPLE_WARNING: u64 = 1000;
/// Above this share of unnamed frames the flamegraph is mostly hex.
pub const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// What a finished capture produced.
#[derive(Debug)]
pub struct CpuOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

pub async fn run_cpu(settings: &CpuSettings, interrupts: &mut Interrupts) -> Result<CpuOutcome> {
    let located = locate(&settings.target, &settings.process).await?;
    match choose_engine(settings.engine, located.runtime) {
        EngineKind::Perf => run_with(&PerfEngine, located, settings, interrupts).await,
    }
}

/// The engines a CPU capture can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EngineKind {
    Perf,
}

/// The engine `choice` means for a process of `runtime`.
fn choose_engine(choice: EngineChoice, _runtime: Runtime) -> EngineKind {
    match choice {
        EngineChoice::Auto | EngineChoice::Perf => EngineKind::Perf,
    }
}

/// The capture with one engine, from finding where it may record to the manifest.
pub async fn run_with<E: Engine>(
    engine: &E,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let target = find_target(
        engine,
        located,
        &settings.process,
        &settings.placement,
        false,
    )
    .await?;
    let result = capture_with(engine, &target, settings, interrupts).await;
    // Always, success or not: no sidecar stays behind.
    target.release().await;
    result
}

async fn capture_with<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    let workdir = make_workdir(&target.shell).await?;
    let result = record_and_analyse(engine, target, &workdir, settings, interrupts).await;
    // Always, success or not: no recorder process and no temp file stay in the container.
    cleanup_workdir(&target.shell, &workdir).await;
    result
}

async fn record_and_analyse<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    workdir: &str,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let container = &target.container.name;
    let ready = &target.ready;
    let event = engine.event(ready);
    let notes = engine.notes(ready);
    let stem = Stem::reserve(
        &store::container_dir(&settings.output_dir, container),
        "perf",
        Local::now(),
    )?;
    let mut timings = BTreeMap::new();

    let RecordCommand {
        argv: record_argv,
        user,
    } = engine.record_command(
        ready,
        &RecordJob {
            pid: target.process.pid,
            workdir: workdir.to_string(),
            duration: settings.duration,
            frequency: settings.frequency,
            call_graph: settings.call_graph,
            process: target.process_facts.clone(),
        },
    );
    let label = format!("recording {container} ({} Hz {event})", settings.frequency);
    let window = Window {
        argv: &record_argv,
        duration: settings.duration,
        label: &label,
        notes: &notes,
        user: user.as_deref(),
    };
    let recording = record(&target.shell, workdir, &window, interrupts, &stem).await?;
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);

    let mut manifest = manifest_for(
        target,
        ManifestBase {
            kind: "cpu",
            typed_target: &settings.target,
            engine: engine.name(),
            tool: engine.tool(ready),
            window: recording.window,
            requested: settings.duration,
            interrupted: recording.interrupted,
        },
    );
    manifest.events = vec![event.clone()];
    manifest.frequency_hz = settings.frequency;
    manifest.call_graph = settings.call_graph.perf_arg().into();
    manifest.notes.extend(notes.iter().cloned());
    manifest.perf.record_command = record_argv.clone();

    let job = CollectJob {
        shell: &target.shell,
        workdir,
        recorded: &recording.output,
        stem: &stem,
        symfs: target.symfs(),
        keep_script: settings.keep_script,
        inline: settings.inline,
    };
    let collected: Collected = tokio::select! {
        collected = engine.collect(ready, &job) => collected?,
        _ = interrupts.next() => {
            // What is already home stays, with a manifest saying what happened.
            manifest.notes.push("interrupted while folding; the .data file holds the whole recording".into());
            let kept: Vec<&str> = ["data"].into_iter().filter(|ext| stem.path(ext).is_file()).collect();
            manifest.record_stem_files(&stem, &kept);
            let _ = std::fs::remove_file(stem.path("script"));
            let _ = std::fs::remove_file(stem.path("timeline"));
            manifest.write(&stem)?;
            return Err(Error::Interrupted);
        }
    };
    for (step, ms) in &collected.timings_ms {
        timings.insert(step.to_string(), *ms);
    }
    let folded = collected.folded;

    let samples = folded.total();
    if samples == 0 {
        stem.discard(&collected.raw_files);
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: match collected.reported_samples {
                Some(0) => Some(format!("{} recorded 0 samples", engine.name())),
                Some(n) => Some(format!(
                    "{} recorded {n} samples but none had a stack; {}",
                    engine.name(),
                    crate::engines::perf::first_error_line(&collected.stderr)
                )),
                None => None,
            },
            hint: format!(
                "pid {} ({}) may be idle or may have exited; check it is busy, or pick another process with --process/--pid",
                target.process.pid, target.process.cmdline
            ),
        });
    }

    let t = Instant::now();
    write_folded_file(&folded, &stem.path("folded"))?;
    let spec = SvgSpec::cpu(
        format!(
            "{container} — CPU ({event}) — {} — {} samples",
            human_duration(recording.window),
            thousands(samples)
        ),
        Some(subtitle(
            target,
            Sampling::Frequency(settings.frequency),
            settings.call_graph,
        )),
    );
    write_svg_file(&folded, &spec, &stem.path("svg"))?;
    let mut extensions: Vec<&str> = collected.raw_files.clone();
    extensions.extend(["folded", "svg"]);
    if collected.raw_files.contains(&"timeline") {
        write_heatmap_file(
            &stem.path("timeline"),
            &spec.title,
            "samples",
            &stem.path("html"),
        )?;
        extensions.push("html");
    }
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let unsymbolized = folded.unsymbolized_share();
    manifest.sample_count = samples;
    manifest.perf_reported_samples = collected.reported_samples;
    manifest.lost_chunks = collected.lost_chunks;
    manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms = timings;

    let mut files = manifest.record_stem_files(&stem, &extensions);

    let mut warnings = Vec::new();
    if samples < LOW_SAMPLE_WARNING {
        warnings.push(format!(
            "only {samples} samples: the target was mostly idle. Put load on it while recording, record longer, or raise --frequency."
        ));
    }
    if unsymbolized > UNSYMBOLIZED_WARNING {
        warnings.push(format!(
            "{:.0}% of frames are unsymbolized: the binary lacks symbols/debuginfo or frame pointers. \
             Build with debug info and `-C force-frame-pointers=yes` (or `devprof build`), don't strip it, \
             or record with --call-graph dwarf.",
            unsymbolized * 100.0
        ));
    }
    if let Some(lost) = manifest.lost_chunks.filter(|l| *l > 0) {
        warnings.push(format!(
            "perf lost {lost} chunks of samples; lower --frequency"
        ));
    }
    manifest.notes.extend(warnings.iter().cloned());

    let manifest_path = manifest.write(&stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(CpuOutcome {
        manifest,
        manifest_path,
        files,
        warnings,
    })
}
