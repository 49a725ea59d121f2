//! The off-CPU recipe: check the config's events against the container's kernel, record
//! them with call chains (and switch records for off-CPU time), bring perf.data home,
//! stream `perf script` through the one-pass aggregator (`summarize`), and write the
//! summary, the event-count flamegraph and, with sched_switch, the off-CPU time
//! flamegraph (`write`).

mod events;
mod summarize;
mod write;

use super::context::CaptureCtx;
use super::kept::Again;
use super::lifecycle::{self, CaptureSpec, Captured, Recipe, Run, WindowPlan, Written};
use super::place;
use super::target::{Located, Target};
use super::window::Recording;
use crate::engines::select::{self, EventsRecording, PerfReady};
use crate::engines::Ahead;
use crate::error::{Error, Result};
use crate::profile::offcpu::events::{is_tracepoint, CheckedEvents};
use crate::profile::offcpu::summary::Mode;
use crate::settings::{EngineSpec, OffcpuSettings};
use events::{checked_events, ring_buffer, trial_events, unmount_tracefs, MountedTracefs};
use std::time::Instant;

/// A target perf may record.
type PerfTarget = Target<PerfReady>;

pub use summarize::SUMMARY_STARTED;

/// Records the config's events over the window and summarizes them.
pub async fn run_offcpu(settings: &OffcpuSettings, ctx: &mut CaptureCtx) -> Result<Captured> {
    lifecycle::run(OffcpuRecipe::new(settings), ctx).await
}

/// An off-CPU capture: its settings, and what it learns on its way.
pub struct OffcpuRecipe<'s> {
    settings: &'s OffcpuSettings,
    spec: CaptureSpec,
    /// The config's events this kernel and perf offer, once checked.
    checked: CheckedEvents,
    /// Notes for the summary and the manifest, gathered from the placement on.
    notes: Vec<String>,
    /// tracefs as devprof mounted it, to unmount at the end.
    mounted: Option<MountedTracefs>,
    /// perf's ring buffer size, where a larger one may be mapped.
    buffer: Option<String>,
    /// perf's command line as it ran.
    record_argv: Vec<String>,
}

impl<'s> OffcpuRecipe<'s> {
    pub fn new(settings: &'s OffcpuSettings) -> Self {
        OffcpuRecipe {
            settings,
            spec: CaptureSpec::new(
                "offcpu",
                &settings.target,
                &settings.process,
                &settings.output_dir,
            ),
            checked: CheckedEvents::default(),
            notes: Vec::new(),
            mounted: None,
            buffer: None,
            record_argv: Vec::new(),
        }
    }

    fn wants_tracepoints(&self) -> bool {
        self.settings.config.events.iter().any(|e| is_tracepoint(e))
    }

    /// The window's `perf record`: every event counted (-c 1) with its call chain.
    fn plan(&mut self, run: &Run<'_, PerfReady>) -> WindowPlan {
        let target = run.target;
        let events = &self.checked.events;
        self.record_argv = target.ready.events_record(&EventsRecording {
            workdir: run.workdir(),
            events,
            call_graph: self.settings.call_graph,
            buffer: self.buffer.as_deref(),
            switches: events.iter().any(|e| e == "sched:sched_switch"),
            pid: target.process.pid,
            duration: self.settings.duration,
        });
        WindowPlan {
            argv: self.record_argv.clone(),
            duration: self.settings.duration,
            label: format!(
                "recording {} ({} events from {})",
                target.container.name,
                events.len(),
                self.settings.config.name
            ),
            notes: self.notes.clone(),
            facts: target.ready.record_facts(),
            ..Default::default()
        }
    }
}

impl Recipe for OffcpuRecipe<'_> {
    type Ready = PerfReady;

    fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    fn ahead(&self, _ctx: &CaptureCtx) -> Ahead {
        Ahead::for_spec(&EngineSpec::Perf, self.settings.placement.mode, None)
    }

    async fn place(&mut self, mut located: Located, ctx: &CaptureCtx) -> Result<PerfTarget> {
        let engine = select::perf(std::mem::take(&mut located.asked));
        let placement = &self.settings.placement;
        let tracefs = self.wants_tracepoints();
        let target = place::engine(&engine, located, placement, tracefs, ctx).await?;
        self.notes = target
            .ready
            .notes()
            .iter()
            .filter(|n| !n.contains("cycles"))
            .cloned()
            .collect();
        if let Some(go) = &target.go {
            self.notes
                .push(crate::runtime::go_names_note(go.stripped).to_string());
        }
        Ok(target)
    }

    async fn check(&mut self, target: &PerfTarget, _ctx: &mut CaptureCtx) -> Result<()> {
        let checked =
            checked_events(target, self.settings, &mut self.notes, &mut self.mounted).await?;
        trial_events(target, &checked.events).await?;
        self.checked = checked;
        Ok(())
    }

    async fn window(&mut self, run: &Run<'_, PerfReady>) -> Result<Option<WindowPlan>> {
        self.buffer = ring_buffer(run.target, run.workdir()).await;
        if self.buffer.is_none() {
            self.notes.push(
                "perf may not map a larger ring buffer here; bursts of events may be lost".into(),
            );
        }
        Ok(Some(self.plan(run)))
    }

    async fn record(
        &mut self,
        run: &Run<'_, PerfReady>,
        ctx: &mut CaptureCtx,
    ) -> Result<Option<Recording>> {
        let plan = self.window(run).await?.expect("an off-CPU window");
        let recording = run.record(&plan, ctx).await?;
        if self.buffer.is_none() || !select::is_mlock_error(&recording.output.stderr) {
            return Ok(Some(recording));
        }
        // Other perf sessions of the same user took the locked-memory budget between the
        // trial and the start: record with perf's default ring buffer instead.
        self.buffer = None;
        self.notes.push("the locked-memory budget for perf ring buffers is in use by other sessions; recording with the default buffer".into());
        let mut plan = self.plan(run);
        plan.notes.clear();
        run.record(&plan, ctx).await.map(Some)
    }

    async fn analyse(
        &mut self,
        run: &Run<'_, PerfReady>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        let recording = recording.expect("an off-CPU capture records a window");
        let notes = std::mem::take(&mut self.notes);
        let record_argv = std::mem::take(&mut self.record_argv);
        summarize::summarized(
            run,
            &self.checked,
            self.settings,
            recording,
            notes,
            record_argv,
            ctx,
        )
        .await
    }

    async fn release(&mut self, target: &PerfTarget, failure: Option<&Error>) {
        // What devprof mounted goes, once nothing of the capture runs in the container (a
        // stopped container took the mount with it; a paused one runs nothing).
        let Some(mounted) = self.mounted.take() else {
            return;
        };
        let watch = target.watch();
        let stopped = failure.is_some_and(|e| matches!(e.cause(), Error::TargetStopped { .. }));
        if !stopped && watch.in_target() && watch.paused().await {
            let name = &target.container.name;
            crate::warn!(
                "left tracefs mounted at /sys/kernel/tracing in {name} (paused); after `docker unpause {name}`: \
                 `docker exec {name} umount /sys/kernel/tracing`"
            );
        } else if !stopped {
            unmount_tracefs(target, mounted).await;
        }
    }
}

/// The summary of a recording that is home: what it needs, and what follows from it.
struct Summarizing<'a, 'r> {
    run: &'a Run<'r, PerfReady>,
    checked: &'a CheckedEvents,
    mode: Mode,
    /// Shared with the copy-out.
    deadline: Instant,
    recording: &'a Recording,
    settings: &'a OffcpuSettings,
}

/// How a kept off-CPU recording is summarized again.
fn again() -> Again {
    Again::Summarize
}
