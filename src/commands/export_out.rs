//! Where an export goes (standard output, a file written whole, or a default name) and the
//! reads every export shares; used by single-capture and session exports alike.

use crate::error::{Error, Result};
use crate::profile::timeline::Timeline;
use crate::settings::store::{ExportFormat, ExportOutput, ExportSettings};
use std::path::{Path, PathBuf};

/// Writes an export where `settings` says: standard output, a file, or `default` (beside
/// the capture in the store, or in the current directory). Returns the file written.
pub fn write_export(
    settings: &ExportSettings,
    bytes: &[u8],
    default: &Path,
) -> Result<Option<PathBuf>> {
    match &settings.output {
        ExportOutput::Stdout => crate::ui::term::data(bytes)
            .map(|()| None)
            .map_err(|e| Error::io("write the export to standard output", e)),
        ExportOutput::File(path) => write_whole(path, bytes).map(|()| Some(path.clone())),
        ExportOutput::Default => write_whole(default, bytes).map(|()| Some(default.to_path_buf())),
    }
}

/// The name of an export beside its capture in the store: `<capture>.<format's extension>`,
/// but `<capture>.pprof.pb.gz` for pprof, as a capture by Go's pprof keeps its own profile
/// as `<capture>.pb.gz`.
pub fn store_export_name(capture: &str, format: ExportFormat) -> String {
    match format {
        ExportFormat::Pprof => format!("{capture}.pprof.{}", format.extension()),
        other => format!("{capture}.{}", other.extension()),
    }
}

pub fn read_timeline(path: &Path) -> Result<Timeline> {
    let file =
        std::fs::File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    Timeline::read(std::io::BufReader::new(file))
        .map_err(|e| Error::io(format!("read the timeline {}", path.display()), e))
}

pub fn json_bytes(value: &serde_json::Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it, renamed.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let partial = PathBuf::from(format!("{}.partial", path.display()));
    let written = std::fs::write(&partial, bytes).and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(Error::io(format!("write {}", path.display()), e));
    }
    crate::say!("wrote {} ({} bytes)", path.display(), bytes.len());
    Ok(())
}
