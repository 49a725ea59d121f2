//! `devprof export CAPTURE --format pprof|speedscope|firefox|collapsed [-o FILE]`: a capture
//! in the format of a tool users already have. The capture's folded stacks, timeline and
//! manifest are read here; the writers in `export/` are pure.

use crate::cli::ExportArgs;
use crate::error::{Error, Result};
use crate::export::{firefox_json, pprof_gz, Source, Unit};
use crate::profile::timeline::Timeline;
use crate::settings::store::{ExportFormat, ExportOutput, ExportSettings};
use crate::store::catalog::Capture;
use crate::store::loader;
use std::io::Write;
use std::path::{Path, PathBuf};

pub fn run(args: ExportArgs, output_dir: PathBuf) -> Result<()> {
    let settings = ExportSettings::from_args(args, output_dir)?;
    let (folded_path, capture) = loader::find_capture(&settings.capture, &settings.output_dir)?;
    let folded = loader::read(&folded_path)?;
    let off_cpu_time = folded_path.to_string_lossy().ends_with(".offcpu.folded");
    let kind = capture.as_ref().map_or("", |c| c.manifest.kind.as_str());
    let unit = match kind {
        "heap" => Unit::BYTES,
        "offcpu" if off_cpu_time => Unit::OFF_CPU,
        "offcpu" => Unit::EVENTS,
        _ => Unit::SAMPLES,
    };
    // The timeline holds the samples of the capture's main folded file (the event counts
    // of an off-CPU capture, not its off-CPU time).
    let timeline = match capture
        .as_ref()
        .and_then(|c| c.file_with_extension("timeline"))
    {
        Some(path) if !off_cpu_time && path.is_file() => Some(read_timeline(&path)?),
        _ => None,
    };
    let name = capture.as_ref().map_or_else(
        || file_stem(&folded_path),
        |c| format!("{} {}", c.container, c.name()),
    );
    let manifest = capture.as_ref().map(|c| &c.manifest);
    let source = Source {
        folded: &folded,
        timeline: timeline.as_ref(),
        unit,
        name,
        start_unix_ns: capture
            .as_ref()
            .and_then(|c| c.created.timestamp_nanos_opt())
            .unwrap_or(0),
        duration_ns: manifest.map_or(0, |m| (m.duration_recorded_s * 1e9) as i64),
        period_ns: manifest
            .filter(|m| m.kind == "cpu" && m.frequency_hz > 0)
            .map(|m| 1_000_000_000 / i64::from(m.frequency_hz)),
        program: manifest.map_or_else(String::new, |m| m.process.exe.clone()),
    };
    let timed = matches!(
        settings.format,
        ExportFormat::Speedscope | ExportFormat::Firefox
    );
    if timed && timeline.is_none() && kind == "cpu" {
        eprintln!(
            "warning: {} has no .timeline: samples are exported without their times and threads",
            folded_path.display()
        );
    }
    let bytes = match settings.format {
        ExportFormat::Pprof => {
            pprof_gz(&source).map_err(|e| Error::io("compress the pprof profile", e))?
        }
        ExportFormat::Speedscope => json_bytes(&crate::export::speedscope_json(&source)),
        ExportFormat::Firefox => json_bytes(&firefox_json(&source)),
        ExportFormat::Collapsed => {
            let mut out = Vec::new();
            folded
                .write_to(&mut out)
                .map_err(|e| Error::io("write collapsed stacks", e))?;
            out
        }
    };
    match &settings.output {
        ExportOutput::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)
                .and_then(|()| out.flush())
                .map_err(|e| Error::io("write the export to standard output", e))
        }
        ExportOutput::File(path) => write_whole(path, &bytes),
        ExportOutput::Default => {
            let stem = capture
                .as_ref()
                .map_or_else(|| file_stem(&folded_path), Capture::name);
            let path = PathBuf::from(format!("{stem}.{}", settings.format.extension()));
            write_whole(&path, &bytes)
        }
    }
}

fn read_timeline(path: &Path) -> Result<Timeline> {
    let file =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    Timeline::read(std::io::BufReader::new(file))
        .map_err(|e| Error::io(format!("read the timeline {}", path.display()), e))
}

fn json_bytes(value: &serde_json::Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn file_stem(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('.').next())
        .unwrap_or("profile")
        .to_string()
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it, renamed.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let partial = PathBuf::from(format!("{}.partial", path.display()));
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(Error::io(format!("write {}", path.display()), e));
    }
    eprintln!("wrote {} ({} bytes)", path.display(), bytes.len());
    Ok(())
}
