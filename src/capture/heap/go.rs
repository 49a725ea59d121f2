//! A Go program's heap: the runtime's own heap profile from its net/http/pprof endpoint
//! (jemalloc's dumps do not apply: Go has its own allocator), fetched by the pprof engine
//! through the same lifecycle as every capture: placed beside the target, the session's
//! gate, the target's watch, Ctrl-C, the stem and the manifest's session.

use super::HeapOutcome;
use crate::capture::manifest::{manifest_for, ManifestBase};
use crate::capture::run::{placed, Run};
use crate::capture::{Located, Target};
use crate::engines::pprof::{self, PprofEngine, PprofKind};
use crate::engines::{CollectJob, Engine, RecordCommand, RecordJob};
use crate::error::{Error, Result};
use crate::profile::heap::parse::Measure;
use crate::settings::{CallGraph, CaptureMode, FoldPath, HeapSettings, HeapSource, Placement};
use crate::signals::Interrupts;
use crate::store;
use std::time::Duration;

/// How long the runtime may take to answer a heap profile's request.
const FETCH_LIMIT: Duration = Duration::from_secs(60);

pub(super) async fn go_heap(
    located: Located,
    settings: &HeapSettings,
    interrupts: &mut Interrupts,
) -> Result<HeapOutcome> {
    if let HeapSource::Existing(_) = settings.source {
        return Err(Error::Usage(format!(
            "'{}' runs a Go program, whose heap profile comes from its net/http/pprof endpoint as it is now: \
             --latest, --all-dumps, --last and --files choose among jemalloc dumps and do not apply",
            located.container.name
        )));
    }
    let engine = PprofEngine {
        kind: PprofKind::Heap {
            allocated: settings.measure == Measure::Allocated,
        },
        url: settings.pprof_url.clone(),
        container: located.container.name.clone(),
    };
    // The engine reaches the process over its network: no mode or right to choose.
    let placement = Placement {
        mode: CaptureMode::Sidecar,
        profiler_image: settings.profiler_image.clone(),
        window: FETCH_LIMIT,
        allow_privileged: false,
        allow_sysctl: false,
    };
    placed(&engine, located, &placement, false, async |target| {
        target
            .in_workdir(
                async |workdir| snapshot(&engine, target, workdir, settings, interrupts).await,
                async |_| {},
            )
            .await
    })
    .await
}

/// The heap as the window opens: one fetch, then the files.
async fn snapshot(
    engine: &PprofEngine,
    target: &Target<pprof::Ready>,
    workdir: &str,
    settings: &HeapSettings,
    interrupts: &mut Interrupts,
) -> Result<HeapOutcome> {
    let PprofKind::Heap { allocated } = engine.kind else {
        unreachable!("a heap capture fetches a heap profile")
    };
    let run = Run::new(target, workdir, &settings.output_dir, "heap")?;
    let job = RecordJob {
        pid: target.process.pid,
        workdir: workdir.to_string(),
        duration: FETCH_LIMIT,
        frequency: 0,
        call_graph: CallGraph::FramePointer,
        process: target.process_facts.clone(),
    };
    let RecordCommand { argv, .. } = engine.record_command(&target.ready, &job);
    let label = format!("fetching the heap profile of {}", target.container.name);
    let mut window = run.window(&argv, FETCH_LIMIT, &label, &[], true);
    // A snapshot: the fetch runs to its end; the limit only bounds it.
    window.until_command_ends = true;
    window.stops_itself = true;
    let recording = run.record(&window, interrupts).await?;
    // Ctrl-C cut the fetch short: nothing came home.
    if recording.interrupted && !recording.output.success() {
        run.stem
            .discard(crate::capture::session::ARTIFACT_EXTENSIONS);
        return Err(Error::Interrupted);
    }
    let mut manifest = manifest_for(
        target,
        ManifestBase {
            kind: "heap",
            typed_target: &settings.target,
            engine: engine.name(),
            tool: engine.tool(&target.ready),
            window: Duration::ZERO,
            requested: Duration::ZERO,
            interrupted: recording.interrupted,
        },
    );
    recording.stamp(&mut manifest);
    manifest.events = vec![engine.event(&target.ready)];
    if let Some(go) = &target.go {
        manifest.runtime_version = go.version.clone();
    }
    let collect = CollectJob {
        shell: &target.shell,
        target_container: &target.container.id,
        go: None,
        pid: target.process.pid,
        workdir,
        recorded: &recording.output,
        stem: &run.stem,
        symfs: None,
        keep_script: false,
        inline: false,
        call_graph: CallGraph::FramePointer,
        fold: FoldPath::Native,
    };
    let fetched = run
        .after_window(
            engine.fetched(&target.ready, &collect),
            "fetch",
            "reading the heap profile",
            &crate::capture::kept::Again::Summarize,
            || manifest.clone(),
            || {},
            interrupts,
        )
        .await?;
    let written = pprof::write_heap_capture(
        &target.container.name,
        allocated,
        &fetched,
        &mut manifest,
        &run.stem,
    );
    let extensions = match written {
        Ok(extensions) => extensions,
        Err(e) => {
            run.stem.discard(pprof::HEAP_EXTENSIONS);
            return Err(e);
        }
    };
    let mut files = manifest.record_stem_files(&run.stem, &extensions);
    let manifest_path = manifest.write(&run.stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(HeapOutcome {
        manifest,
        manifest_path,
        files,
        warnings: Vec::new(),
        report: String::new(),
    })
}
