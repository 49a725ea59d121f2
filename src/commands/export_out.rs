//! Where an export goes (standard output, a file written whole, or a default name) and the
//! reads every export shares; used by single-capture and session exports alike.

use crate::error::{Error, Result};
use crate::profile::timeline::Timeline;
use crate::settings::store::{ExportOutput, ExportSettings};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes an export where `settings` says: standard output, a file, or
/// `./<default_stem>.<extension>`.
pub fn write_export(settings: &ExportSettings, bytes: &[u8], default_stem: &str) -> Result<()> {
    match &settings.output {
        ExportOutput::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)
                .and_then(|()| out.flush())
                .or_else(crate::ui::output::reader_gone)
                .map_err(|e| Error::io("write the export to standard output", e))
        }
        ExportOutput::File(path) => write_whole(path, bytes),
        ExportOutput::Default => {
            let path = PathBuf::from(format!("{default_stem}.{}", settings.format.extension()));
            write_whole(&path, bytes)
        }
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
    eprintln!("wrote {} ({} bytes)", path.display(), bytes.len());
    Ok(())
}
