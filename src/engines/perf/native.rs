//! The native fold of a perf capture: perf.data read by devprof (`profile::perfdata::stacks`),
//! the files its stacks point into fetched from the container into the store's symbol cache
//! and named by devprof's symbolizer, kernel frames named from the container's kallsyms.
//! `perf script` stays the fallback (DWARF call graphs, JIT code, files it cannot fetch).

use super::CollectJob;
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::perfdata::stacks::{self, NativeFold, Symbols};
use crate::profile::timeline::TimelineWriter;
use crate::settings::{CallGraph, FoldPath};
use crate::symbols::binary::{self, Fetched};
use crate::symbols::kallsyms::Kallsyms;
use crate::symbols::module::load_all;
use crate::ui::progress;
use std::path::PathBuf;

/// The manifest's names for the two paths.
pub const NATIVE: &str = "native";
pub const PERF_SCRIPT: &str = "perf-script";

/// Above this share of samples it cannot name as perf would, auto mode hands the capture
/// to `perf script`.
const DOUBT_LIMIT: f64 = 0.02;

/// Whether this capture is folded natively first: asked for, or auto on a frame-pointer
/// capture whose `perf script` text is not wanted anyway.
pub fn wanted(job: &CollectJob<'_>) -> bool {
    match job.fold {
        FoldPath::Native => true,
        FoldPath::PerfScript => false,
        FoldPath::Auto => job.call_graph == CallGraph::FramePointer && !job.keep_script,
    }
}

/// Whether auto mode may keep a native fold.
pub fn trusted(fold: &NativeFold) -> bool {
    fold.doubtful_share() <= DOUBT_LIMIT
}

/// What the manifest says about a kept native fold.
pub fn notes(fold: &NativeFold) -> Vec<String> {
    let mut notes = Vec::new();
    if !fold.missing_modules.is_empty() {
        notes.push(format!(
            "native fold: no symbols for {} (their frames are named by file)",
            fold.missing_modules.join(", ")
        ));
    }
    if fold.jit_samples > 0 {
        notes.push(format!(
            "native fold: {} samples in JIT code, unnamed (--fold perf-script names them from the runtime's perf map)",
            fold.jit_samples
        ));
    }
    notes
}

/// Folds the downloaded `<stem>.data` natively and writes its timeline.
pub async fn fold(job: &CollectJob<'_>) -> Result<NativeFold> {
    let spinner = progress::spinner("symbolizing and folding stacks (native)");
    let result = fold_inner(job).await;
    spinner.finish_and_clear();
    result
}

async fn fold_inner(job: &CollectJob<'_>) -> Result<NativeFold> {
    let data = job.stem.path("data");
    let read_path = data.clone();
    let raw = tokio::task::spawn_blocking(move || stacks::read(&read_path, true))
        .await
        .map_err(|e| Error::io("read perf.data", std::io::Error::other(e)))?
        .map_err(|e| Error::io(format!("read {}", data.display()), e))?;

    let paths = raw.files_used();
    let kernel = raw.has_kernel_frames();
    // In a sidecar, the target's files are seen under its /proc/<pid>/root.
    let root = job.symfs.as_deref().unwrap_or("");
    let seen: Vec<String> = paths.iter().map(|p| format!("{root}{p}")).collect();
    // The binaries and the kernel's symbols come out of the container at the same time.
    let kallsyms = async {
        if !kernel {
            return None;
        }
        match job.shell.run(&["cat", "/proc/kallsyms"]).await {
            Ok(out) if out.success() => Kallsyms::parse(out.stdout),
            _ => None,
        }
    };
    let (fetched, kallsyms) = tokio::join!(
        binary::fetch_cached(job.shell, job.shell.container(), &seen, job.stem.dir()),
        kallsyms
    );
    let locals: Vec<(String, PathBuf)> = paths
        .into_iter()
        .zip(fetched)
        .filter_map(|(path, f)| match f {
            Fetched::Local { local, .. } => Some((path, local)),
            Fetched::Missing | Fetched::Failed(_) => None,
        })
        .collect();
    let timeline = job.stem.path("timeline");
    let inline = job.inline;
    tokio::task::spawn_blocking(move || -> std::io::Result<NativeFold> {
        let mut symbols = Symbols {
            kernel: kallsyms,
            ..Symbols::default()
        };
        symbols.modules.extend(load_all(locals, inline).modules);
        let file = std::io::BufWriter::new(std::fs::File::create(&timeline)?);
        let mut writer = TimelineWriter::new(file)?;
        let fold = stacks::fold(&raw, &symbols, inline, Some(&mut writer));
        writer.finish()?;
        Ok(fold)
    })
    .await
    .map_err(|e| Error::io("fold perf.data", std::io::Error::other(e)))?
    .map_err(|e| Error::io("write the timeline", e))
}
