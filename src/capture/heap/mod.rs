//! The heap recipe: find the process, check that jemalloc profiling is on, obtain dumps
//! (fresh ones over a window, or ones already written), bring them and the binaries they
//! reference home through the archive API, symbolize, and write the folded stacks, the
//! memory flamegraph, the text report and the manifest.
//!
//! How fresh dumps are obtained: a process cannot be made to call `prof.dump` from outside
//! without a debugger (none in node images, and ptrace would stop it), so devprof uses what
//! the program offers. When it catches DEVPROF_HEAP_DUMP_SIGNAL (SIGUSR2; the convention:
//! the program calls jemalloc's `prof.dump` on it, as the demo node does), devprof sends it
//! at the start and at the end of the window, so the newest dump is the heap as the window
//! closes. Interval dumps (`lg_prof_interval`) written during the window are collected too;
//! they come every 2^N allocated bytes, so a quiet process may write none in a window and a
//! busy one many, which is why the signal is preferred when the program has it. A signal the
//! process does not catch would kill it (SIGUSR2's default action), so devprof checks the
//! process's caught-signal mask first and never sends one that is not caught.

mod dumps;
mod go;
mod probe;
mod report;
mod window;

use super::context::CaptureCtx;
use super::kept::Again;
use super::lifecycle::{self, CaptureSpec, Captured, Recipe, Run, WindowPlan, Written};
use super::target::{locate, Located, Target};
use super::window::Recording;
use crate::engines::Ahead;
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{DumpFile, JemallocConf, Selection};
use crate::profile::heap::parse::Measure;
use crate::runtime::Runtime;
use crate::settings::{HeapSettings, HeapSource};
use dumps::existing_dumps;
use probe::probe_jemalloc;
use report::analyse;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How long a requested dump may take to appear and settle.
pub(super) const DUMP_WAIT: Duration = Duration::from_secs(15);
pub(super) const POLL: Duration = Duration::from_millis(200);
/// Rows of each table in the text report.
pub(super) const REPORT_ROWS: usize = 25;
/// The extensions a heap capture writes next to its manifest.
pub const HEAP_EXTENSIONS: &[&str] = &["folded", "svg", "txt"];
/// Where binaries fetched for symbols are cached, inside the container's store directory.
pub use crate::symbols::binary::SYMBOL_CACHE;

/// What the process's jemalloc is set up to do: the heap capture's part of its target.
/// `conf_variable` and `conf_text` are for messages and the manifest: the process's own
/// text, written on one line (`text::printable`).
pub(super) struct Jemalloc {
    pub(super) conf_variable: String,
    pub(super) conf_text: String,
    pub(super) conf: JemallocConf,
    /// Where the dumps are, as the process names it (`shown_dir` for messages).
    pub(super) dump_dir: String,
    pub(super) dump_base: String,
    pub(super) catches_signal: bool,
    /// When the process started, seconds since the epoch (from /proc/<pid>/stat).
    pub(super) process_started: Option<i64>,
}

/// The process of a jemalloc heap capture, reached from its container's own shell.
pub(super) type HeapTarget = Target<Jemalloc>;

/// Dumps obtained for the capture: every one brought home, and those merged.
pub(super) struct Obtained {
    pub(super) collected: Vec<DumpFile>,
    pub(super) merged: Vec<DumpFile>,
    pub(super) how: String,
    pub(super) window: Option<Duration>,
    pub(super) interrupted: bool,
    /// A fresh window: its edges, markers and session, for the manifest.
    pub(super) recording: Option<Recording>,
}

/// A heap capture: jemalloc's dumps, or, for a Go program, the runtime's heap profile.
pub async fn run_heap(settings: &HeapSettings, ctx: &mut CaptureCtx) -> Result<Captured> {
    let spec = CaptureSpec::new(
        "heap",
        &settings.target,
        &settings.process,
        &settings.output_dir,
    );
    let located = locate(ctx, &spec.target, &Ahead::Nothing).await?;
    if located.runtime == Runtime::Go {
        return lifecycle::run_located(go::GoHeapRecipe::new(settings, spec), located, ctx).await;
    }
    lifecycle::run_located(JemallocRecipe::new(settings, spec), located, ctx).await
}

/// A jemalloc heap capture: fresh dumps over a window, or dumps already written.
struct JemallocRecipe<'s> {
    settings: &'s HeapSettings,
    spec: CaptureSpec,
    timings: BTreeMap<String, u64>,
    warnings: Vec<String>,
    /// The newest dump sequence of the process before the window.
    before_window: Option<u64>,
}

impl Jemalloc {
    /// The dump directory for a message: the process's prof_prefix, on one line.
    pub(super) fn shown_dir(&self) -> String {
        crate::text::printable(&self.dump_dir)
    }
}

impl<'s> JemallocRecipe<'s> {
    fn new(settings: &'s HeapSettings, spec: CaptureSpec) -> Self {
        JemallocRecipe {
            settings,
            spec,
            timings: BTreeMap::new(),
            warnings: Vec::new(),
            before_window: None,
        }
    }
}

impl Recipe for JemallocRecipe<'_> {
    type Ready = Jemalloc;

    fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    /// Signals and listings act in the container itself: no profiler, no sidecar.
    async fn place(&mut self, mut located: Located, _ctx: &CaptureCtx) -> Result<HeapTarget> {
        let t = Instant::now();
        let jemalloc = match self.jemalloc(&located).await {
            Ok(jemalloc) => jemalloc,
            Err(e) => {
                located.release_ahead().await;
                return Err(e);
            }
        };
        self.timings
            .insert("probe".to_string(), t.elapsed().as_millis() as u64);
        Ok(located.into_target(jemalloc, None, None))
    }

    async fn check(&mut self, target: &HeapTarget, _ctx: &mut CaptureCtx) -> Result<()> {
        if let HeapSource::Window(_) = self.settings.source {
            window::check_can_dump(target, &self.settings.signal)?;
        }
        Ok(())
    }

    fn has_window(&self) -> bool {
        matches!(self.settings.source, HeapSource::Window(_))
    }

    async fn window(&mut self, run: &Run<'_, Jemalloc>) -> Result<Option<WindowPlan>> {
        let HeapSource::Window(duration) = self.settings.source else {
            return Ok(None);
        };
        let (plan, before) = window::plan(run, duration, &self.settings.signal).await?;
        self.before_window = before;
        Ok(Some(plan))
    }

    async fn record(
        &mut self,
        run: &Run<'_, Jemalloc>,
        ctx: &mut CaptureCtx,
    ) -> Result<Option<Recording>> {
        let plan = self.window(run).await?.expect("a heap window");
        run.record(&plan, ctx).await.map(Some)
    }

    async fn analyse(
        &mut self,
        run: &Run<'_, Jemalloc>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        let t = Instant::now();
        let obtained = match (&self.settings.source, recording) {
            (HeapSource::Existing(selection), _) => existing_dumps(run.target, selection).await?,
            (HeapSource::Window(_), Some(recording)) => {
                let signal = &self.settings.signal;
                window::obtained(run, signal, recording, self.before_window, ctx).await?
            }
            (HeapSource::Window(_), None) => unreachable!("a window was recorded"),
        };
        self.timings
            .insert("obtain".to_string(), t.elapsed().as_millis() as u64);
        self.render(run, obtained, ctx).await
    }
}

impl JemallocRecipe<'_> {
    /// The process's jemalloc, and whether it can give what was asked.
    async fn jemalloc(&mut self, located: &Located) -> Result<Jemalloc> {
        let settings = self.settings;
        let named_files = matches!(settings.source, HeapSource::Existing(Selection::Files(_)));
        let jemalloc = probe_jemalloc(located, settings.signal.number, !named_files).await?;
        if settings.measure == Measure::Allocated && !jemalloc.conf.accumulates() {
            return Err(Error::Usage(format!(
                "--alloc needs accumulated counts, which jemalloc writes only with prof_accum:true; process {} of '{}' \
                 runs with {}={}\n  add prof_accum:true to {} and restart the process, or drop --alloc (in-use bytes)",
                located.process.pid, located.container.name, jemalloc.conf_variable, jemalloc.conf_text, jemalloc.conf_variable
            )));
        }
        if !jemalloc.conf.active() {
            self.warnings.push(format!(
                "prof_active:false in {}: jemalloc takes no samples until profiling is activated (mallctl prof.active)",
                jemalloc.conf_variable
            ));
        }
        Ok(jemalloc)
    }

    /// Brings the dumps home and renders them, raced against the target becoming unusable
    /// and Ctrl-C. Once the dumps are home no failure deletes them: the manifest lists them
    /// with what failed and how to render them again.
    async fn render(
        &mut self,
        run: &Run<'_, Jemalloc>,
        obtained: Obtained,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        // A Ctrl-C not spent on ending the window: stop before copying anything.
        ctx.not_interrupted()?;
        let (target, settings) = (run.target, self.settings);
        let base = || base_manifest(target, settings, &obtained);
        // The dumps by their paths in the container, for the command that renders them again.
        let dump_dir = target.ready.dump_dir.trim_end_matches('/');
        let paths: Vec<String> = obtained
            .merged
            .iter()
            .map(|d| {
                d.path
                    .clone()
                    .unwrap_or_else(|| format!("{dump_dir}/{}", d.name))
            })
            .collect();
        let container = target.container.name.clone();
        let nothing_home = Again::Heap {
            container: container.clone(),
            paths: paths.clone(),
            local: Vec::new(),
        };
        let t = Instant::now();
        let mut copied = Vec::new();
        let report = ctx.report.clone();
        let downloading =
            report::download_dumps(target, &obtained, run.stem.dir(), &mut copied, &report);
        let downloaded = run
            .after_window(
                downloading,
                "copy the dumps out",
                "copying the dumps out",
                &nothing_home,
                base,
                || {},
                ctx,
            )
            .await;
        // Not all home: the copies made so far are no recording.
        let local_names = downloaded.inspect_err(|_| {
            for path in &copied {
                let _ = std::fs::remove_file(path);
            }
        })?;
        self.timings
            .insert("download_dumps".to_string(), t.elapsed().as_millis() as u64);
        let home = Again::Heap {
            container,
            paths,
            local: obtained
                .collected
                .iter()
                .filter_map(|d| local_names.get(&d.name))
                .map(|local| run.stem.dir().join(local))
                .collect(),
        };
        let analysing = analyse(
            target,
            &obtained,
            &local_names,
            settings,
            &run.stem,
            &mut self.timings,
            &mut self.warnings,
            &report,
        );
        let analysis = run
            .after_window(
                analysing,
                "render the dumps",
                "rendering the dumps",
                &home,
                base,
                || {},
                ctx,
            )
            .await?;
        Ok(Written {
            manifest: analysis.manifest,
            extensions: analysis.extensions,
            warnings: std::mem::take(&mut self.warnings),
            text: Some(analysis.text),
            again: home,
        })
    }
}

/// The manifest of a heap capture before its analysis: what the window did.
fn base_manifest(
    target: &HeapTarget,
    settings: &HeapSettings,
    obtained: &Obtained,
) -> crate::store::Manifest {
    let mut manifest = super::manifest::manifest_for(
        target,
        super::manifest::ManifestBase {
            kind: "heap",
            typed_target: &settings.target,
            engine: "jemalloc",
            tool: Default::default(),
            window: obtained.window.unwrap_or_default(),
            requested: obtained.window.unwrap_or_default(),
            interrupted: obtained.interrupted,
        },
    );
    if let Some(recording) = &obtained.recording {
        recording.stamp(&mut manifest);
    }
    manifest.notes.push(obtained.how.clone());
    manifest
}
