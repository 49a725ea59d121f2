//! The CPU recipe: `perf record -g` on the target process, perf.data home, `perf script`
//! streamed into the folder, then the folded stacks, the flamegraph and the manifest.

use super::{
    cleanup_workdir, download_data, ensure_data_written, find_target, make_workdir, record,
    stream_script, truncate, Target, Window,
};
use crate::error::{Error, Result};
use crate::fold::{self, Folded};
use crate::perf;
use crate::progress;
use crate::render::{self, SvgSpec};
use crate::settings::CpuSettings;
use crate::signals::Interrupts;
use crate::store::{self, ContainerRecord, Manifest, PerfRecord, ProcessRecord, Stem};
use crate::units::thousands;
use chrono::Local;
use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    let target = find_target(&settings.target, &settings.process, settings.mode, false).await?;
    let result = capture_with(&target, settings, interrupts).await;
    // Always, success or not: no sidecar stays behind.
    target.release().await;
    result
}

async fn capture_with(
    target: &Target,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    let workdir = make_workdir(&target.shell).await?;
    let result = record_and_analyse(target, &target.access, &workdir, settings, interrupts).await;
    // Always, success or not: no perf process and no temp file stay in the container.
    cleanup_workdir(&target.shell, &workdir).await;
    result
}

async fn record_and_analyse(
    target: &Target,
    access: &perf::Access,
    workdir: &str,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let shell = &target.shell;
    let container = &target.container.name;
    let stem = Stem::reserve(
        &store::container_dir(&settings.output_dir, container),
        "perf",
        Local::now(),
    )?;
    let data_in_container = format!("{workdir}/perf.data");
    let mut timings = BTreeMap::new();

    let mut record_argv: Vec<String> = vec![
        target.perf.path.clone(),
        "record".into(),
        "-g".into(),
        "--call-graph".into(),
        settings.call_graph.perf_arg().into(),
        "-F".into(),
        settings.frequency.to_string(),
        "-e".into(),
        access.event.clone(),
    ];
    record_argv.extend(record_tail(target, &data_in_container, settings.duration));

    let label = format!(
        "recording {container} ({} Hz {})",
        settings.frequency, access.event
    );
    let window = Window {
        argv: &record_argv,
        duration: settings.duration,
        label: &label,
        notes: &access.notes,
    };
    let recording = record(shell, workdir, &window, interrupts, &stem).await?;
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let report = perf::parse_record_report(&recording.output.stderr);
    ensure_data_written(shell, &data_in_container, &recording, &stem).await?;

    let t = Instant::now();
    download_data(shell, &data_in_container, &stem).await?;
    timings.insert("download".to_string(), t.elapsed().as_millis() as u64);

    let mut manifest = base_manifest(
        target,
        settings,
        &access.event,
        recording.window,
        recording.interrupted,
    );
    manifest.notes.extend(access.notes.iter().cloned());
    manifest.perf.record_command = record_argv;

    // perf script, streamed into the folder.
    let t = Instant::now();
    let spinner = progress::spinner("symbolizing and folding stacks (perf script)");
    let mut script_argv: Vec<String> = vec![
        target.perf.path.clone(),
        "script".into(),
        "-i".into(),
        data_in_container.clone(),
        "-F".into(),
        "comm,pid,tid,time,event,ip,sym,dso".into(),
        if settings.inline {
            "--inline"
        } else {
            "--no-inline"
        }
        .into(),
    ];
    script_argv.extend(symfs_args(target));
    let keep = settings.keep_script.then(|| stem.path("script"));
    let streamed = tokio::select! {
        streamed = stream_script(shell, &script_argv, keep, |reader| fold::fold_perf_script(reader)) => streamed,
        _ = interrupts.next() => {
            spinner.finish_and_clear();
            // perf.data is already home: keep it, with a manifest saying what happened.
            manifest.notes.push("interrupted while folding; the .data file holds the whole recording".into());
            manifest.record_stem_files(&stem, &["data"]);
            let _ = std::fs::remove_file(stem.path("script"));
            manifest.write(&stem)?;
            return Err(Error::Interrupted);
        }
    };
    spinner.finish_and_clear();
    let (folded, script_out): (Folded, _) = match streamed {
        Ok((folded, out)) if out.success() || !folded.is_empty() => (folded, out),
        Ok((_, out)) => {
            stem.discard(&["data", "script"]);
            return Err(Error::PerfFailed {
                container: container.clone(),
                step: "perf script".into(),
                detail: perf::first_error_line(&out.stderr),
            });
        }
        Err(e) => {
            stem.discard(&["data", "script"]);
            return Err(e);
        }
    };
    timings.insert("fold".to_string(), t.elapsed().as_millis() as u64);

    let samples = folded.total();
    if samples == 0 {
        stem.discard(&["data", "script"]);
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: match report.samples {
                Some(0) => Some("perf recorded 0 samples".into()),
                Some(n) => Some(format!(
                    "perf recorded {n} samples but none had a stack; {}",
                    perf::first_error_line(&script_out.stderr)
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
    write_folded(&folded, &stem.path("folded"))?;
    let spec = SvgSpec::cpu(
        format!(
            "{container} — CPU ({}) — {} — {} samples",
            access.event,
            crate::duration::human(recording.window),
            thousands(samples)
        ),
        Some(subtitle(
            target,
            settings.frequency,
            settings.call_graph.perf_arg(),
        )),
    );
    write_svg(&folded, &spec, &stem.path("svg"))?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let unsymbolized = folded.unsymbolized_share();
    manifest.sample_count = samples;
    manifest.perf_reported_samples = report.samples;
    manifest.lost_chunks = perf::parse_record_report(&script_out.stderr)
        .lost_chunks
        .or(report.lost_chunks);
    manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms = timings;

    let mut extensions = vec!["data", "folded", "svg"];
    if settings.keep_script {
        extensions.push("script");
    }
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

/// In sidecar mode perf reads the target's binaries under its /proc/<pid>/root.
pub fn symfs_args(target: &Target) -> Vec<String> {
    match target.symfs() {
        Some(root) => vec!["--symfs".into(), root],
        None => Vec::new(),
    }
}

/// The end every `perf record` shares: `[-z] -p PID -o FILE -- sleep SECONDS`, recording
/// the target process for the window, compressed where this perf can.
pub fn record_tail(target: &Target, output: &str, duration: Duration) -> Vec<String> {
    let mut tail: Vec<String> = Vec::new();
    if target.perf.supports_zstd {
        tail.push("-z".into());
    }
    tail.extend([
        "-p".into(),
        target.process.pid.to_string(),
        "-o".into(),
        output.to_string(),
        "--".into(),
        "sleep".into(),
        format!("{}", duration.as_secs_f64()),
    ]);
    tail
}

pub fn subtitle(target: &Target, frequency: u32, call_graph: &str) -> String {
    format!(
        "pid {} {} · {} Hz · {} call graphs · {}",
        target.process.pid,
        truncate(&target.process.cmdline, 80),
        frequency,
        call_graph,
        Local::now().format("%Y-%m-%d %H:%M:%S")
    )
}

pub fn write_folded(folded: &Folded, path: &std::path::Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    folded
        .write_to(BufWriter::new(file))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

pub fn write_svg(folded: &Folded, spec: &SvgSpec, path: &std::path::Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    render::write_svg(folded, spec, BufWriter::new(file))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

pub fn base_manifest(
    target: &Target,
    settings: &CpuSettings,
    event: &str,
    window: Duration,
    interrupted: bool,
) -> Manifest {
    let mut manifest = manifest_for(
        target,
        "cpu",
        &settings.target,
        window,
        settings.duration,
        interrupted,
    );
    manifest.events = vec![event.to_string()];
    manifest.frequency_hz = settings.frequency;
    manifest.call_graph = settings.call_graph.perf_arg().into();
    manifest
}

/// The fields every capture's manifest shares.
pub fn manifest_for(
    target: &Target,
    kind: &str,
    typed_target: &str,
    window: Duration,
    requested: Duration,
    interrupted: bool,
) -> Manifest {
    Manifest {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: kind.into(),
        created: Local::now().to_rfc3339(),
        target: typed_target.to_string(),
        container: ContainerRecord {
            name: target.container.name.clone(),
            id: target.container.id.clone(),
            image: target.container.image.clone(),
        },
        process: ProcessRecord {
            pid: target.process.pid,
            command_line: target.process.cmdline.clone(),
        },
        perf: PerfRecord {
            path: target.perf.path.clone(),
            version: target.perf.version.clone(),
            record_command: Vec::new(),
        },
        capture_mode: Some(target.mode_description()),
        duration_requested_s: requested.as_secs_f64(),
        duration_recorded_s: (window.as_secs_f64() * 1000.0).round() / 1000.0,
        interrupted,
        ..Default::default()
    }
}
