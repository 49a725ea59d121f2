//! `--repeat K`: one recorded window cut into K back-to-back parts by sample time, so that
//! a capture set measures its own window-to-window noise. Cutting one perf recording
//! rather than recording K times leaves no gap between the parts and starts the recorder
//! once; each part gets its own folded stacks and timeline, listed in the manifest.

use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::stacks;
use crate::profile::timeline::{Sample, Timeline};
use crate::render::write_folded_file;
use crate::store::{Manifest, PartRecord, Stem};
use std::path::{Path, PathBuf};

/// The most windows a set may be cut into.
pub const MAX_PARTS: u32 = crate::settings::capture::MAX_REPEAT_PARTS;

/// Cuts the capture of `manifest_path` into `k` parts, writes their files, lists them in
/// the manifest and writes it again. Returns the files written.
pub fn cut(manifest: &mut Manifest, manifest_path: &Path, k: u32) -> Result<Vec<(PathBuf, u64)>> {
    let stem = Stem::of_manifest(manifest_path).ok_or_else(|| {
        Error::Usage(format!(
            "{} is not a capture's manifest",
            manifest_path.display()
        ))
    })?;
    let timeline_name = stem.file_name("timeline");
    if !manifest.files.iter().any(|f| f.name == timeline_name) {
        return Err(Error::Usage(format!(
            "--repeat cuts the window by sample time and needs the per-sample timeline, which only \
             the perf engine writes ({} recorded this one); the capture is kept as one window: {}",
            if manifest.engine.is_empty() { "another engine" } else { manifest.engine.as_str() },
            manifest_path.display()
        )));
    }
    let timeline = read_timeline(&stem)?;
    let windows = timeline.split_even(k as usize);
    let first = timeline.span_ns().map_or(0, |(first, _)| first);
    let mut files = Vec::new();
    let mut parts = Vec::new();
    for (i, window) in windows.iter().enumerate() {
        let index = i as u32 + 1;
        let folded_ext = format!("part{index}.folded");
        let timeline_ext = format!("part{index}.timeline");
        let folded = write_samples(
            &timeline,
            &window.samples,
            &stem,
            &folded_ext,
            &timeline_ext,
        )?;
        files.extend(manifest.record_stem_files(&stem, &[&folded_ext, &timeline_ext]));
        let duration_s = (window.end_ns - window.start_ns) as f64 / 1e9;
        let samples = folded.total();
        parts.push(PartRecord {
            index,
            start_s: (window.start_ns - first) as f64 / 1e9,
            duration_s,
            samples,
            cpu_cores: cores(samples, duration_s, manifest.frequency_hz),
            folded: stem.file_name(&folded_ext),
            timeline: stem.file_name(&timeline_ext),
        });
    }
    manifest.notes.push(format!(
        "a capture set: the window cut into {} back-to-back parts of {:.2} s by sample time (one recording)",
        parts.len(),
        parts.first().map_or(0.0, |p| p.duration_s)
    ));
    manifest.parts = parts;
    manifest.write(&stem)?;
    Ok(files)
}

/// The capture's whole timeline (`<stem>.timeline`).
pub(super) fn read_timeline(stem: &Stem) -> Result<Timeline> {
    let path = stem.path("timeline");
    let file =
        std::fs::File::open(&path).map_err(|e| Error::io(format!("open {}", path.display()), e))?;
    Timeline::read(std::io::BufReader::new(file))
        .map_err(|e| Error::io(format!("read {}", path.display()), e))
}

/// Writes some of a timeline's samples as a folded file and a timeline of their own
/// (`<stem>.<folded_ext>`, `<stem>.<timeline_ext>`); returns the folded stacks.
pub(super) fn write_samples(
    timeline: &Timeline,
    samples: &[Sample],
    stem: &Stem,
    folded_ext: &str,
    timeline_ext: &str,
) -> Result<Folded> {
    // The same repair as the whole capture's folded file, so the pieces add up to it.
    let (folded, _) = stacks::repair(&Folded::from_pairs(timeline.totals_of(samples).into_iter()));
    write_folded_file(&folded, &stem.path(folded_ext))?;
    let path = stem.path(timeline_ext);
    let out = std::fs::File::create(&path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    timeline
        .write_part(samples, std::io::BufWriter::new(out))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))?;
    Ok(folded)
}

/// CPU used in cores: samples over the samples one busy core would give.
pub fn cores(samples: u64, duration_s: f64, frequency_hz: u32) -> f64 {
    if duration_s <= 0.0 || frequency_hz == 0 {
        return 0.0;
    }
    samples as f64 / (duration_s * f64::from(frequency_hz))
}
