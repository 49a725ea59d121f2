//! The recording is the expensive part of a capture: once it reached the host (perf.data,
//! a heap capture's dumps) it is never deleted because a later step failed (the fold,
//! `perf script`, symbols, the summary, a deadline, the target stopping or being paused).
//! The manifest lists it with what failed and the command that analyses it again, and the
//! error says the same.

use crate::error::Error;
use crate::settings::CallGraph;
use crate::store::{Manifest, Stem, ARTIFACT_EXTENSIONS};
use crate::text::{first_line, printable, shell_word};
use std::path::PathBuf;

/// How a kept recording is analysed again, by the commands devprof offers.
#[derive(Debug, Clone)]
pub enum Again {
    /// A CPU capture: folded (and drawn) from perf.data.
    Fold {
        call_graph: CallGraph,
        container: String,
    },
    /// An off-CPU capture: its events summarized from perf.data, locally.
    Summarize,
    /// A heap capture: its dumps, copied home into the container's store directory
    /// (`local`: every copy of the capture), rendered again from the container by their
    /// paths there (`paths`, for `--files`; the copies in the store are reused).
    Heap {
        container: String,
        paths: Vec<String>,
        local: Vec<PathBuf>,
    },
}

impl Again {
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
            Again::Heap {
                container, paths, ..
            } => {
                // The store the copies are in: `<output dir>/<container>/`.
                let output_dir = stem.dir().parent().unwrap_or(stem.dir());
                format!(
                    "devprof --output-dir {} heap {} --files {}",
                    shell_word(&output_dir.display().to_string()),
                    shell_word(container),
                    shell_word(&paths.join(","))
                )
            }
        }
    }

    /// The files that hold the recording, those of them on the host.
    pub fn recording(&self, stem: &Stem) -> Vec<PathBuf> {
        let files = match self {
            Again::Heap { local, .. } => local.clone(),
            _ => vec![stem.path("data")],
        };
        files
            .into_iter()
            .filter(|f| std::fs::symlink_metadata(f).is_ok_and(|m| m.is_file()))
            .collect()
    }

    /// Lists the recording's files on the host in `manifest`.
    fn record_files(&self, stem: &Stem, manifest: &mut Manifest) {
        for file in self.recording(stem) {
            if let (Some(dir), Some(name)) = (file.parent(), file.file_name()) {
                manifest.record_file(dir, &name.to_string_lossy());
            }
        }
    }

    /// What holds the whole recording, for a note.
    fn holder(&self) -> &'static str {
        match self {
            Again::Heap { .. } => "the dumps listed",
            _ => "the .data file",
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
            Again::Heap { container, .. } => {
                format!(" (while {container} keeps the dumps; the copies listed are reused)")
            }
        }
    }
}

/// Ctrl-C while the recording, already home, is being read (`step`): what is home stays,
/// with a manifest saying what happened; the partial intermediates go. A heap capture with
/// no dump home yet leaves nothing. Returns the error to end the capture with.
pub fn keep_on_interrupt(stem: &Stem, mut manifest: Manifest, step: &str, again: &Again) -> Error {
    let kept = again.recording(stem);
    if kept.is_empty() && matches!(again, Again::Heap { .. }) {
        stem.discard(ARTIFACT_EXTENSIONS);
        return Error::Interrupted;
    }
    manifest.notes.push(format!(
        "interrupted while {step}; {} holds the whole recording",
        again.holder()
    ));
    again.record_files(stem, &mut manifest);
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
    if again.recording(stem).is_empty() {
        stem.discard(ARTIFACT_EXTENSIONS);
        return failure;
    }
    keep(stem, manifest, failure, again)
}

/// Keeps the recording after `failure` (see `keep_or_discard`).
pub fn keep(stem: &Stem, mut manifest: Manifest, failure: Error, again: &Again) -> Error {
    for ext in ARTIFACT_EXTENSIONS.iter().filter(|ext| **ext != "data") {
        let _ = std::fs::remove_file(stem.path(ext));
    }
    let command = again.command(stem);
    let hint = again.hint();
    manifest.notes.push(format!(
        "the analysis failed ({}); the recording is kept: re-analyse it with `{command}`{hint}",
        printable(first_line(&failure.to_string()))
    ));
    manifest.files.clear();
    again.record_files(stem, &mut manifest);
    let data = again
        .recording(stem)
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let listed = match manifest.write(stem) {
        Ok(path) => path.display().to_string(),
        Err(e) => format!("no manifest: {e}"),
    };
    Error::RecordingKept {
        source: Box::new(failure),
        data,
        manifest: listed,
        command,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Local;

    /// The manifest written at `stem`, and the names of the files it lists.
    fn written_manifest(stem: &Stem) -> (serde_json::Value, Vec<String>) {
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(stem.path("json")).unwrap()).unwrap();
        let files = manifest["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        (manifest, files)
    }

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
            container: "demo-seq".into(),
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
        assert_eq!(err.exit_code(), crate::error::exit::PROFILER);
        let (manifest, files) = written_manifest(&stem);
        assert!(files.contains(&stem.file_name("data")), "{files:?}");
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

    /// Regression: a heap capture's dumps, already copied home, were deleted when
    /// rendering them failed.
    #[test]
    fn a_heap_capture_keeps_its_dumps_home_and_names_the_render_again() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "heap", Local::now()).unwrap();
        let dump = dir.path().join("jeprof.7.3.m1.heap");
        std::fs::write(&dump, b"heap_v2/524288\n").unwrap();
        std::fs::write(stem.path("folded"), b"half").unwrap();
        let again = Again::Heap {
            container: "demo-seq".into(),
            paths: vec!["/profiling/jeprof.7.3.m1.heap".into()],
            local: vec![dump.clone(), dir.path().join("never-copied.heap")],
        };
        let failure = Error::HeapDumpInvalid {
            path: dump.display().to_string(),
            detail: "no t*: line".into(),
        };
        let text = keep_or_discard(&stem, Manifest::default(), failure, &again).to_string();
        assert!(dump.is_file() && !stem.path("folded").exists());
        assert!(text.contains("the recording is kept"), "{text}");
        assert!(
            text.contains(&format!(
                "devprof --output-dir {} heap demo-seq --files /profiling/jeprof.7.3.m1.heap",
                dir.path().parent().unwrap().display()
            )),
            "{text}"
        );
        let (_, mut files) = written_manifest(&stem);
        files.sort();
        let mut expected = vec![stem.file_name("json"), "jeprof.7.3.m1.heap".to_string()];
        expected.sort();
        assert_eq!(files, expected);
    }

    /// Ctrl-C before any dump is home: a heap capture leaves nothing, not an empty manifest.
    #[test]
    fn an_interrupted_heap_capture_with_nothing_home_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "heap", Local::now()).unwrap();
        let again = Again::Heap {
            container: "demo-seq".into(),
            paths: vec!["/profiling/jeprof.7.3.m1.heap".into()],
            local: Vec::new(),
        };
        let err = keep_on_interrupt(&stem, Manifest::default(), "copying the dumps out", &again);
        assert!(matches!(err, Error::Interrupted));
        assert!(!stem.path("json").exists());
    }
}
