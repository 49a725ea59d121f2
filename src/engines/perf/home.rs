//! A perf recording brought home: perf.data copied out of the container as `<stem>.data`
//! (by `cat` on a shell started ahead, else through the archive API), whole or not at all,
//! and where none came, why perf wrote none.

use super::{failure, first_error_line, is_mlock_error, DATA_NAME};
use crate::docker::archive::CopyLimit;
use crate::docker::probe::ContainerFacts;
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::store::Stem;
use crate::ui::Reporter;
use std::path::{Path, PathBuf};

/// After the window: fails (discarding the stem) when perf wrote no data, explaining why
/// from what perf printed (`stderr`).
async fn ensure_data_written(
    shell: &Shell,
    data_in_container: &str,
    stderr: &str,
    stem: &Stem,
) -> Result<()> {
    let written = shell
        .run(&["test", "-s", data_in_container])
        .await
        .map(|o| o.success())
        .unwrap_or(false);
    if written {
        return Ok(());
    }
    stem.discard(&[]);
    let container = shell.container().to_string();
    if is_mlock_error(stderr) {
        return Err(Error::PerfDenied {
            container,
            detail: first_error_line(stderr),
            missing: vec!["locked memory for perf's ring buffer (other perf sessions of this user hold the budget)".into()],
            fixes: vec![
                "add the capability IPC_LOCK (compose `cap_add: [IPC_LOCK]`), or raise `kernel.perf_event_mlock_kb` on the host, or run fewer perf sessions at once".into(),
            ],
        });
    }
    let facts = ContainerFacts::probe(shell).await.unwrap_or_default();
    Err(failure(&container, "perf record", stderr, &facts))
}

/// Copies perf.data out of the container as `<stem>.data` (`download_data`); where none
/// came, or an empty one, fails as `ensure_data_written` does when perf wrote nothing. The
/// copy is tried first: on the common path the check would cost an exec after every window.
pub async fn bring_home(
    shell: &Shell,
    data_in_container: &str,
    stderr: &str,
    stem: &Stem,
    report: &Reporter,
) -> Result<()> {
    let spinner = report.spinner("copying perf.data out of the container");
    let copied = download_data(shell, data_in_container, stem).await;
    spinner.finish_and_clear();
    let local = stem.path("data");
    if copied.is_ok() && std::fs::metadata(&local).is_ok_and(|m| m.len() > 0) {
        return Ok(());
    }
    if copied.is_ok() {
        // An empty recording is not one to keep.
        let _ = std::fs::remove_file(&local);
    }
    ensure_data_written(shell, data_in_container, stderr, stem).await?;
    // Written, yet its copy came out empty: nothing to fold.
    copied.and(Err(Error::PerfFailed {
        container: shell.container().to_string(),
        step: "copy perf.data out".into(),
        detail: format!("{data_in_container} came out empty, though perf wrote it; record again"),
    }))
}

/// Copies perf.data out of the container as `<stem>.data`: written as `<stem>.data.part`
/// and renamed once whole, so that a `.data` in the store is always a whole recording
/// (kept whatever fails after it) and a cut-off copy is never mistaken for one.
async fn download_data(shell: &Shell, data_in_container: &str, stem: &Stem) -> Result<()> {
    let partial = stem.path(PARTIAL_DATA);
    // `cat` on a shell started ahead first; the archive API where that did not give it.
    let downloaded = match shell
        .copy_file_out(data_in_container, &partial, CopyLimit::RECORDING)
        .await
    {
        Ok(true) => Ok(Vec::new()),
        Ok(false) => {
            let data_name = stem.file_name(PARTIAL_DATA);
            let source_name = Path::new(data_in_container)
                .file_name()
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DATA_NAME));
            shell
                .docker()
                .download(
                    shell.container(),
                    data_in_container,
                    stem.dir(),
                    CopyLimit::RECORDING,
                    move |entry| (entry == source_name).then(|| PathBuf::from(&data_name)),
                )
                .await
        }
        Err(e) => Err(e),
    };
    let whole = downloaded.and_then(|_| {
        std::fs::rename(&partial, stem.path("data")).map_err(|e| {
            Error::io(
                format!("rename {} to {}", partial.display(), stem.file_name("data")),
                e,
            )
        })
    });
    if whole.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    whole
}

/// A download of perf.data under way.
const PARTIAL_DATA: &str = "data.part";
