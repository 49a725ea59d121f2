//! `devprof export CAPTURE --format pprof|speedscope|firefox|collapsed [-o FILE]`: a capture
//! in the format of a tool users already have; `devprof export SESSION --format
//! firefox|speedscope`: every container of a `devprof profile` session in one file, on the
//! session's shared clock. CAPTURE is resolved as every store command resolves a name
//! (`store::loader::resolve`: a target's newest capture of `--kind`, cpu by default, said on
//! stderr); the export goes beside the capture in the store unless `-o` says. The captures'
//! folded stacks, timelines, markers and manifests are read here; the writers in `export/`
//! are pure.

use crate::cli::ExportArgs;
use crate::error::{Error, Result};
use crate::export::{firefox_json, pprof_gz, Source, Unit};
use crate::settings::store::{ExportFormat, ExportSettings};
use crate::store::catalog;
use crate::store::{loader, units};
use std::path::{Path, PathBuf};

pub use super::export_out::{json_bytes, read_timeline, store_export_name, write_export};

pub fn run(args: ExportArgs, output_dir: PathBuf) -> Result<()> {
    let kind = args.kind.map(|k| k.name());
    let settings = ExportSettings::from_args(args, output_dir)?;
    if let Some(session) = super::export_session::find(&settings.capture, &settings.output_dir)? {
        return super::export_session::run(&settings, &session, kind);
    }
    let resolved = loader::resolve(&settings.capture, &settings.output_dir, kind)?;
    if let Some(how) = &resolved.picked {
        crate::say!("export: {how}");
    }
    let (folded_path, capture) = (resolved.path, resolved.capture);
    let folded = loader::read(&folded_path)?;
    let kind = capture.as_ref().map_or("", |c| c.manifest.kind.as_str());
    let unit = match loader::unit_of(&folded_path, capture.as_ref()) {
        units::BYTES => Unit::BYTES,
        units::OFF_CPU_US => Unit::OFF_CPU,
        units::EVENTS => Unit::EVENTS,
        _ => Unit::SAMPLES,
    };
    let off_cpu_time = unit == Unit::OFF_CPU;
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
        crate::warn!(
            "{} has no .timeline: samples are exported without their times and threads",
            folded_path.display()
        );
    }
    let markers = match capture
        .as_ref()
        .and_then(|c| c.file_with_extension("markers"))
    {
        Some(path) => crate::profile::markers::Markers::read_path(&path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?,
        None => None,
    };
    let bytes = match settings.format {
        ExportFormat::Pprof => {
            pprof_gz(&source).map_err(|e| Error::io("compress the pprof profile", e))?
        }
        ExportFormat::Speedscope => {
            json_bytes(&crate::export::speedscope_json(&source, markers.as_ref()))
        }
        ExportFormat::Firefox => json_bytes(&firefox_json(&source, markers.as_ref())),
        ExportFormat::Collapsed => {
            let mut out = Vec::new();
            folded
                .write_to(&mut out)
                .map_err(|e| Error::io("write collapsed stacks", e))?;
            out
        }
    };
    // Beside the capture in the store, else in the current directory.
    let default = match &capture {
        Some(c) => c.dir.join(store_export_name(&c.name(), settings.format)),
        None => PathBuf::from(format!(
            "{}.{}",
            file_stem(&folded_path),
            settings.format.extension()
        )),
    };
    let written = write_export(&settings, &bytes, &default)?;
    if let (Some(path), Some(c)) = (written, &capture) {
        if path == default {
            if let Err(e) = catalog::list_beside(c, &path) {
                crate::note!(
                    "{} is not listed in {}: {e}",
                    path.display(),
                    c.manifest_path.display()
                );
            }
        }
    }
    Ok(())
}

fn file_stem(path: &Path) -> String {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('.').next())
        .unwrap_or("profile")
        .to_string()
}
