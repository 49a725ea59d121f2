//! The recording is the expensive part of a capture: once perf.data reached the host it is
//! never deleted because a later step failed (the fold, `perf script`, the summary, a
//! deadline, the target stopping or being paused). The manifest lists it with what failed
//! and the command that analyses it again, and the error says the same.

use super::session::ARTIFACT_EXTENSIONS;
use crate::error::Error;
use crate::settings::CallGraph;
use crate::store::{Manifest, Stem};
use crate::text::first_line;

/// How a kept recording is analysed again, by the commands devprof offers.
pub enum Again<'a> {
    /// A CPU capture: folded (and drawn) from perf.data.
    Fold {
        call_graph: CallGraph,
        container: &'a str,
    },
    /// An off-CPU capture: its events summarized from perf.data, locally.
    Summarize,
}

impl Again<'_> {
    /// The command line, for this stem's files.
    pub fn command(&self, stem: &Stem) -> String {
        let data = stem.path("data").display().to_string();
        let out = format!(
            "--svg {} -o {}",
            stem.path("svg").display(),
            stem.path("folded").display()
        );
        match self {
            Again::Fold {
                call_graph: CallGraph::FramePointer,
                ..
            } => format!("devprof fold {data} --symfs ROOT {out}"),
            Again::Fold {
                call_graph: CallGraph::Dwarf,
                ..
            } => format!("perf script -i {data} --symfs ROOT | devprof fold - {out}"),
            Again::Summarize => format!("devprof summarize {data}"),
        }
    }

    /// What the command's placeholders stand for.
    pub fn hint(&self) -> String {
        match self {
            Again::Fold { container, .. } => format!(
                " (ROOT: a copy of {container}'s files, for the names of its binaries' frames: \
                 `mkdir ROOT && docker export {container} | tar -x -C ROOT`)"
            ),
            Again::Summarize => " (event counts without stacks)".to_string(),
        }
    }
}

/// Whether the recording reached the host whole (a download lands under another name and
/// is renamed once complete).
pub fn on_host(stem: &Stem) -> bool {
    std::fs::symlink_metadata(stem.path("data")).is_ok_and(|m| m.is_file())
}

/// Ctrl-C while the recording, already home, is being read (`step`): what is home stays,
/// with a manifest saying what happened; the partial intermediates go. Returns the error to
/// end the capture with.
pub fn keep_on_interrupt(stem: &Stem, mut manifest: Manifest, step: &str) -> Error {
    manifest.notes.push(format!(
        "interrupted while {step}; the .data file holds the whole recording"
    ));
    let kept: Vec<&str> = ["data"]
        .into_iter()
        .filter(|ext| stem.path(ext).is_file())
        .collect();
    manifest.record_stem_files(stem, &kept);
    let _ = std::fs::remove_file(stem.path("script"));
    let _ = std::fs::remove_file(stem.path("timeline"));
    match manifest.write(stem) {
        Ok(_) => Error::Interrupted,
        Err(e) => e,
    }
}

/// After `failure`: keeps the recording when it reached the host (half-written artifacts
/// go; the manifest lists the recording with what failed and how to analyse it again),
/// else removes every file of the stem. Returns the error to report.
pub fn keep_or_discard(stem: &Stem, manifest: Manifest, failure: Error, again: &Again) -> Error {
    if !on_host(stem) {
        stem.discard(ARTIFACT_EXTENSIONS);
        return failure;
    }
    keep(stem, manifest, failure, again)
}

/// Keeps `<stem>.data` after `failure` (see `keep_or_discard`).
pub fn keep(stem: &Stem, mut manifest: Manifest, failure: Error, again: &Again) -> Error {
    for ext in ARTIFACT_EXTENSIONS.iter().filter(|ext| **ext != "data") {
        let _ = std::fs::remove_file(stem.path(ext));
    }
    let command = again.command(stem);
    let hint = again.hint();
    manifest.notes.push(format!(
        "the analysis failed ({}); the recording is kept: re-analyse it with `{command}`{hint}",
        first_line(&failure.to_string())
    ));
    manifest.files.clear();
    manifest.record_stem_files(stem, &["data"]);
    let listed = match manifest.write(stem) {
        Ok(path) => path.display().to_string(),
        Err(e) => format!("no manifest: {e}"),
    };
    Error::RecordingKept {
        source: Box::new(failure),
        data: stem.path("data").display().to_string(),
        manifest: listed,
        command,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Local;

    /// Regression: a perf.data already on the host was deleted when `perf script`, the
    /// native fold, the summary or a deadline failed after it.
    #[test]
    fn a_failed_fold_keeps_the_recording_with_a_note_and_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "perf", Local::now()).unwrap();
        std::fs::write(stem.path("data"), b"PERFILE2").unwrap();
        std::fs::write(stem.path("timeline"), b"half").unwrap();
        let failure = Error::PerfFailed {
            container: "demo-seq".into(),
            step: "perf script".into(),
            detail: "boom".into(),
        };
        let again = Again::Fold {
            call_graph: CallGraph::FramePointer,
            container: "demo-seq",
        };
        let err = keep_or_discard(&stem, Manifest::default(), failure, &again);
        assert!(stem.path("data").is_file());
        assert!(!stem.path("timeline").exists());
        let text = err.to_string();
        assert!(
            text.contains("perf failed in container 'demo-seq' (perf script): boom"),
            "{text}"
        );
        assert!(text.contains("the recording is kept"), "{text}");
        assert!(
            text.contains(&format!("devprof fold {}", stem.path("data").display())),
            "{text}"
        );
        assert_eq!(err.exit_code(), crate::exit::PROFILER);
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(stem.path("json")).unwrap()).unwrap();
        let files: Vec<&str> = manifest["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert!(
            files.contains(&stem.file_name("data").as_str()),
            "{files:?}"
        );
        let notes = manifest["notes"].to_string();
        assert!(
            notes.contains("re-analyse it with `devprof fold"),
            "{notes}"
        );
    }

    #[test]
    fn without_a_recording_on_the_host_everything_goes() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "offcpu", Local::now()).unwrap();
        std::fs::write(stem.path("data.part"), b"PERF").unwrap();
        let failure = Error::Interrupted;
        let err = keep_or_discard(&stem, Manifest::default(), failure, &Again::Summarize);
        assert!(matches!(err, Error::Interrupted));
        assert!(!stem.path("json").exists() && !stem.path("data.part").exists());
    }
}
