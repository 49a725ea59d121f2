//! A Go program's heap: the runtime's own heap profile from its net/http/pprof endpoint
//! (jemalloc's dumps do not apply: Go has its own allocator), fetched by the pprof engine
//! like any engine's recording (placed beside the target, the session's gate, the
//! target's watch, Ctrl-C, the stem and the manifest's session), and written as a memory
//! flamegraph with the manifest's heap record.

use crate::capture::collect::{collect, Folding, Step};
use crate::capture::context::CaptureCtx;
use crate::capture::kept::Again;
use crate::capture::lifecycle::{CaptureSpec, Recipe, Run, WindowPlan, Written};
use crate::capture::manifest::{manifest_for, ManifestBase};
use crate::capture::place;
use crate::capture::target::{Located, Target};
use crate::capture::window::Recording;
use crate::engines::{select, AnyEngine, AnyReady, Collected, Engine, RecordJob};
use crate::error::{Error, Result};
use crate::profile::heap::parse::Measure;
use crate::profile::heap::HeapRecord;
use crate::render::{write_folded_file, write_svg_file, SvgSpec};
use crate::settings::{CaptureMode, HeapSettings, HeapSource, Placement};
use crate::store::{self, GraphRecord, Manifest};
use crate::units::human_bytes;
use inferno::flamegraph::color::{BasicPalette, Palette};
use std::time::Duration;

/// How long the runtime may take to answer a heap profile's request.
const FETCH_LIMIT: Duration = Duration::from_secs(60);

/// The files a Go heap capture writes next to its manifest.
const GO_HEAP_EXTENSIONS: &[&str] = &["pb.gz", "folded", "svg"];

/// The Go heap, as the window opens: one fetch, then the files.
pub(super) struct GoHeapRecipe<'s> {
    settings: &'s HeapSettings,
    spec: CaptureSpec,
    engine: Option<AnyEngine>,
    job: RecordJob,
}

impl<'s> GoHeapRecipe<'s> {
    pub(super) fn new(settings: &'s HeapSettings, spec: CaptureSpec) -> Self {
        GoHeapRecipe {
            settings,
            spec,
            engine: None,
            job: RecordJob::default(),
        }
    }

    fn engine(&self) -> &AnyEngine {
        self.engine.as_ref().expect("the engine is placed first")
    }

    fn allocated(&self) -> bool {
        self.settings.measure == Measure::Allocated
    }
}

impl Recipe for GoHeapRecipe<'_> {
    type Ready = AnyReady;

    fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    async fn place(&mut self, mut located: Located, ctx: &CaptureCtx) -> Result<Target<AnyReady>> {
        if let HeapSource::Existing(_) = self.settings.source {
            located.release_ahead().await;
            return Err(Error::Usage(format!(
                "'{}' runs a Go program, whose heap profile comes from its net/http/pprof endpoint as it is now: \
                 --latest, --all-dumps, --last and --files choose among jemalloc dumps and do not apply",
                located.container.name
            )));
        }
        let engine = select::go_heap(
            &located.container.name,
            self.allocated(),
            self.settings.pprof_url.clone(),
        );
        // The engine reaches the process over its network: no mode or right to choose.
        let placement = Placement {
            mode: CaptureMode::Sidecar,
            profiler_image: self.settings.profiler_image.clone(),
            window: FETCH_LIMIT,
            allow_privileged: false,
            allow_sysctl: false,
        };
        let target = place::engine(&engine, located, &placement, false, ctx).await?;
        self.engine = Some(engine);
        Ok(target)
    }

    async fn window(&mut self, run: &Run<'_, AnyReady>) -> Result<Option<WindowPlan>> {
        let target = run.target;
        self.job = RecordJob {
            pid: target.process.pid,
            workdir: run.workdir().to_string(),
            duration: FETCH_LIMIT,
            process: target.process_facts.clone(),
            ..Default::default()
        };
        let engine = self.engine();
        Ok(Some(WindowPlan {
            argv: engine.record_command(&target.ready, &self.job).argv,
            duration: FETCH_LIMIT,
            label: format!("fetching the heap profile of {}", target.container.name),
            facts: engine.recorder_facts(),
            // A snapshot: the fetch runs to its end; the limit only bounds it.
            until_command_ends: true,
            ..Default::default()
        }))
    }

    async fn analyse(
        &mut self,
        run: &Run<'_, AnyReady>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        let recording = recording.expect("a Go heap capture fetches in a window");
        // Ctrl-C cut the fetch short: nothing came home.
        if recording.interrupted && !recording.output.success() {
            return Err(Error::Interrupted);
        }
        let (engine, target) = (self.engine(), run.target);
        let mut manifest = manifest_for(
            target,
            ManifestBase {
                kind: "heap",
                typed_target: &self.settings.target,
                engine: engine.name(),
                tool: engine.tool(&target.ready),
                window: Duration::ZERO,
                requested: Duration::ZERO,
                interrupted: recording.interrupted,
            },
        );
        recording.stamp(&mut manifest);
        manifest.events = vec![engine.event(&target.ready)];
        let again = Again::Summarize;
        let step = Step {
            name: "fetch",
            within: "fetch of the heap profile",
            doing: "reading the heap profile",
            limit: FETCH_LIMIT,
        };
        let asked = (Folding::default(), step, &again);
        let collected = collect(engine, run, &recording, asked, &manifest, ctx).await?;
        let container = &target.container.name;
        write_heap(
            container,
            self.allocated(),
            &collected,
            &mut manifest,
            &run.stem,
        )?;
        Ok(Written {
            manifest,
            extensions: GO_HEAP_EXTENSIONS.to_vec(),
            warnings: Vec::new(),
            text: None,
            again,
        })
    }
}

/// Writes `.folded` and `.svg` at `stem` and completes `manifest` with what the heap
/// profile says (the original `.pb.gz` is already kept).
fn write_heap(
    container: &str,
    allocated: bool,
    collected: &Collected,
    manifest: &mut Manifest,
    stem: &store::Stem,
) -> Result<()> {
    let folded = &collected.folded;
    write_folded_file(folded, &stem.path("folded"))?;
    let total = folded.total();
    let (measure, sample_type) = if allocated {
        ("allocated since start (alloc_space)", "alloc_space")
    } else {
        ("in use (inuse_space)", "inuse_space")
    };
    let title = format!("{container} — Go heap, {measure} — {}", human_bytes(total));
    let mut spec = SvgSpec::cpu(title, None);
    spec.count_name = store::units::BYTES.into();
    spec.palette = Palette::Basic(BasicPalette::Mem);
    write_svg_file(folded, &spec, &stem.path("svg"))?;

    manifest.sample_count = total;
    manifest.unsymbolized_share = (folded.unsymbolized_share() * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    for (step, ms) in &collected.timings_ms {
        manifest.timings_ms.insert(step.to_string(), *ms);
    }
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
        unit: store::units::BYTES.into(),
    });
    manifest.notes.extend(collected.notes.iter().cloned());
    let url = collected.source.as_deref().unwrap_or("its endpoint");
    manifest.heap = Some(HeapRecord {
        measure: if allocated { "allocated" } else { "in-use" }.into(),
        how: format!("Go runtime heap profile from {url} ({sample_type})"),
        total_bytes: total,
        total_objects: collected.objects.unwrap_or(0),
        stacks: folded.stacks.len(),
        top_self: folded.top_self(25),
        top_inclusive: crate::profile::top::by_inclusive(folded, 25)
            .into_iter()
            .map(|r| (r.name, r.samples))
            .collect(),
        ..Default::default()
    });
    Ok(())
}
