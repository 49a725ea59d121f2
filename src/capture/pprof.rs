//! The capture around Go's pprof engine (`engines::pprof`): a fetcher beside the target,
//! the session's start gate before the fetch, Ctrl-C, the stem, and a manifest that
//! names the target and the session. The fetcher never stays behind.

use super::manifest::identity;
use super::sidecar::SPARE_LIFETIME;
use super::{gate, Located};
use crate::engines::pprof::{self, Fetcher, PprofKind, PprofOutcome, PprofTarget};
use crate::error::{Error, Result};
use crate::signals::Interrupts;
use crate::store::{self, Stem};
use chrono::Local;

/// Fetches the profile of `kind` from the Go process `located` found, and writes the
/// capture: `.pb.gz` as served, `.folded`, `.svg` and the manifest. Nothing is written
/// before the profile is home and decoded.
pub async fn run_pprof(
    located: Located,
    kind: PprofKind,
    given_url: Option<&str>,
    profiler_image: &str,
    typed_target: &str,
    output_dir: &std::path::Path,
    interrupts: &mut Interrupts,
) -> Result<PprofOutcome> {
    let lifetime = kind.window() + SPARE_LIFETIME;
    let fetcher = Fetcher::start(
        &located.docker,
        &located.container,
        profiler_image,
        lifetime,
    )
    .await?;
    let result = tokio::select! {
        r = fetch_and_write(&fetcher, &located, kind, given_url, typed_target, output_dir) => r,
        _ = interrupts.next() => Err(Error::Interrupted),
    };
    // Always: no fetcher stays behind.
    fetcher.remove().await;
    result
}

async fn fetch_and_write(
    fetcher: &Fetcher,
    located: &Located,
    kind: PprofKind,
    given_url: Option<&str>,
    typed_target: &str,
    output_dir: &std::path::Path,
) -> Result<PprofOutcome> {
    let target = PprofTarget {
        container: &located.container,
        pid: located.process.pid,
        program: located.process.program(),
    };
    let base = fetcher.endpoint(&target, given_url).await?;
    // In a session, the fetch (the runtime's window) opens with the other recorders.
    super::armed_stop::released().await;
    let fetched =
        pprof::fetch_profile(fetcher, &target, kind, pprof::profile_url(&base, kind)).await?;

    // The profile is home and readable: from here on files are written.
    let (prefix, kind_name) = match kind {
        PprofKind::Cpu { .. } => ("perf", "cpu"),
        PprofKind::Heap { .. } => ("heap", "heap"),
    };
    let stem = Stem::reserve(
        &store::container_dir(output_dir, &located.container.name),
        prefix,
        Local::now(),
    )?;
    let mut manifest = identity(
        kind_name,
        typed_target,
        &located.container,
        &located.process,
        &located.process_facts,
        located.runtime,
    );
    if let Some(go) = &located.go {
        manifest.runtime_version = go.version.clone();
    }
    manifest.session = gate::session_name();
    match pprof::write_capture(&target, kind, &fetched, manifest, &stem) {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            stem.discard(pprof::PPROF_EXTENSIONS);
            Err(e)
        }
    }
}
