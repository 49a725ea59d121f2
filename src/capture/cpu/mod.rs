//! The CPU recipe, the same for every engine: the engine chosen for the process (`select`)
//! records it for the window (or a command run under it, start to end), turns its output
//! into folded stacks, and the recipe writes the folded stacks, the flamegraphs and what
//! the manifest says. `--repeat K` cuts the window into a capture set afterwards.

mod results;

use super::collect::{collect, Folding, Step};
use super::command::{self, Launch, RunAs};
use super::context::CaptureCtx;
use super::jit;
use super::kept::Again;
use super::lifecycle::{self, CaptureSpec, Captured, Recipe, Run, WindowPlan, Written};
use super::manifest::{manifest_for, ManifestBase};
use super::place;
use super::record_script::{RecorderStart, EVENTS_OPEN_MARKER, READY_MARKER};
use super::target::{Located, Target};
use super::window::Recording;
use crate::engines::{
    select, Ahead, AnyEngine, AnyReady, Engine, InWorkdir, Primer, Reach, RecordCommand, RecordJob,
    Subject,
};
use crate::error::{Error, Result};
use crate::profile::stacks;
use crate::runtime::jvm::{self, JvmOptions};
use crate::settings::CpuSettings;
use crate::store::{CommandRecord, Manifest};
use crate::symbols::binary::SYMBOL_CACHE;
use results::{advise, no_samples, write_graphs};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Below this share of one CPU over the window (its samples at the sampling rate) the
/// target was mostly idle, judged against its own CPU use: a short capture of a busy
/// process has few samples and is not idle.
pub const IDLE_CPU_SHARE: f64 = 0.05;

/// The share of one CPU a capture's samples stand for: `samples` at `frequency_hz` over
/// `seconds` (None when either is zero).
pub fn cpu_share(samples: u64, frequency_hz: u32, seconds: f64) -> Option<f64> {
    (frequency_hz > 0 && seconds > 0.0).then(|| samples as f64 / (frequency_hz as f64 * seconds))
}
/// Above this share of unnamed frames the flamegraph is mostly hex.
pub const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// The Node-preset view's files, next to the unfiltered `.folded` and `.svg`.
pub const NODE_FOLDED: &str = "node-preset.folded";
pub const NODE_SVG: &str = "node-preset.svg";

/// Records `settings` and, with `--repeat K`, cuts the window into its parts.
pub async fn run_cpu(settings: &CpuSettings, ctx: &mut CaptureCtx) -> Result<Captured> {
    let mut outcome = lifecycle::run(CpuRecipe::new(settings), ctx).await?;
    if settings.repeat > 1 {
        let files = super::repeat::cut(
            &mut outcome.manifest,
            &outcome.manifest_path,
            settings.repeat,
        )?;
        // The manifest comes last in the list of files; the parts go before it.
        let at = outcome.files.len().saturating_sub(1);
        outcome.files.splice(at..at, files);
    }
    Ok(outcome)
}

/// A CPU capture: its settings, and what it learns on its way.
pub struct CpuRecipe<'s> {
    settings: &'s CpuSettings,
    spec: CaptureSpec,
    /// The engine chosen for the process, once placed.
    engine: Option<AnyEngine>,
    /// Who a command run runs as, checked before anything is made.
    run_as: Option<RunAs>,
    /// What the engine was asked to record, once the workdir is there.
    job: RecordJob,
    jvm: JvmOptions,
    /// What the runtime's options mean for the capture, printed before the window.
    runtime_warnings: Vec<String>,
    /// The recorder's command line (perf's own words, without a command run's launch).
    record_argv: Vec<String>,
}

impl<'s> CpuRecipe<'s> {
    pub fn new(settings: &'s CpuSettings) -> Self {
        CpuRecipe {
            settings,
            spec: CaptureSpec::new(
                "perf",
                &settings.target,
                &settings.process,
                &settings.output_dir,
            ),
            engine: None,
            run_as: None,
            job: RecordJob::default(),
            jvm: JvmOptions::default(),
            runtime_warnings: Vec::new(),
            record_argv: Vec::new(),
        }
    }

    fn engine(&self) -> &AnyEngine {
        self.engine
            .as_ref()
            .expect("the engine is chosen when the target is placed")
    }

    /// The command run's launch in `workdir`: perf runs the command with the process's
    /// environment, working directory and user.
    fn launch<'a>(&'a self, target: &'a Target<AnyReady>, workdir: &'a str) -> Option<Launch<'a>> {
        let command = self.settings.command.as_deref()?;
        Some(Launch {
            pid: target.process.pid,
            cwd: target.process_facts.cwd.as_deref().unwrap_or("/"),
            run_as: self.run_as.as_ref()?,
            workdir,
            tool: &self.record_argv,
            command,
            name: "command",
        })
    }

    /// What the engine is given in the workdir.
    fn in_workdir<'a>(&'a self, target: &'a Target<AnyReady>) -> InWorkdir<'a, AnyReady> {
        InWorkdir {
            ready: &target.ready,
            shell: &target.shell,
            job: &self.job,
        }
    }

    /// How a kept recording of this capture is folded again.
    fn again(&self, target: &Target<AnyReady>) -> Again {
        Again::Fold {
            call_graph: self.settings.call_graph,
            container: target.container.name.clone(),
        }
    }
}

/// The perf recorder this capture would start, for the container probe's standby to start
/// before the trial answers. None for a command run, in a session, and where sysctls are
/// lowered after the probe.
fn primer(settings: &CpuSettings, ctx: &CaptureCtx) -> Option<Primer> {
    if settings.command.is_some()
        || settings.placement.allow_sysctl
        || super::gate::in_session(ctx.seat.as_ref())
    {
        return None;
    }
    Some(Primer {
        duration: settings.duration,
        frequency: settings.frequency,
        call_graph: settings.call_graph,
        auto: matches!(settings.engine, crate::settings::EngineSpec::Auto { .. }),
        wrap: Arc::new(|line| {
            let plan = RecorderStart {
                argv: line.argv,
                workdir: line.workdir,
                duration: line.duration,
                enable_on_release: line.facts.enables_on_release,
                until_command_ends: false,
                stops_itself: line.facts.stops_itself,
                in_session: false,
            }
            .plan();
            plan.exec_argv().map(str::to_string).to_vec()
        }),
        events_open: EVENTS_OPEN_MARKER,
        ready: READY_MARKER,
    })
}

impl Recipe for CpuRecipe<'_> {
    type Ready = AnyReady;

    fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    fn ahead(&self, ctx: &CaptureCtx) -> Ahead {
        let settings = self.settings;
        Ahead::for_spec(
            &settings.engine,
            settings.placement.mode,
            primer(settings, ctx),
        )
    }

    async fn place(&mut self, mut located: Located, ctx: &CaptureCtx) -> Result<Target<AnyReady>> {
        let subject = Subject {
            shell: &located.shell,
            container: &located.container.name,
            process: &located.process,
            facts: &located.process_facts,
            runtime: located.runtime,
            mode: self.settings.placement.mode,
            window: self.settings.duration,
        };
        let asked = std::mem::take(&mut located.asked);
        let chain = match select(&self.settings.engine, &subject, asked).await {
            Ok(chain) => chain,
            Err(e) => {
                located.release_ahead().await;
                return Err(e);
            }
        };
        let placement = &self.settings.placement;
        let (engine, target) =
            place::chain(chain, located, placement, &self.spec.target, ctx).await?;
        self.engine = Some(engine);
        Ok(target)
    }

    async fn check(&mut self, target: &Target<AnyReady>, ctx: &mut CaptureCtx) -> Result<()> {
        ctx.not_interrupted()?;
        // A command is checked (found on the process's PATH, a way to run it as the
        // process's user) before anything is made in the store or run in the container.
        if let Some(command) = &self.settings.command {
            self.run_as = Some(command::prepare_for(target, &command[0]).await?);
        }
        Ok(())
    }

    async fn stage(
        &mut self,
        target: &Target<AnyReady>,
        workdir: &str,
        ctx: &CaptureCtx,
    ) -> Result<()> {
        let settings = self.settings;
        self.job = RecordJob {
            pid: target.process.pid,
            workdir: workdir.to_string(),
            duration: settings.duration,
            frequency: settings.frequency,
            call_graph: settings.call_graph,
            process: target.process_facts.clone(),
            symbol_cache: Some(
                crate::store::container_dir(&settings.output_dir, &target.container.name)
                    .join(SYMBOL_CACHE),
            ),
            report: ctx.report.clone(),
        };
        self.jvm = jvm::options(&target.process_facts, &target.process.cmdline);
        if self.engine().reads_perf_maps() {
            self.runtime_warnings = jit::perf_map_warnings(target.runtime, &self.jvm);
        }
        // Printed once, before the window: the user may want to fix them and start again.
        for warning in &self.runtime_warnings {
            crate::warn!("{warning}");
        }
        self.engine().stage(self.in_workdir(target)).await
    }

    async fn window(&mut self, run: &Run<'_, AnyReady>) -> Result<Option<WindowPlan>> {
        let target = run.target;
        let container = &target.container.name;
        let engine = self.engine();
        let ready = &target.ready;
        let (event, frequency) = (
            engine.event(ready),
            engine.frequency(ready, self.settings.frequency),
        );
        let (record_argv, user, label) = match &self.settings.command {
            Some(command) => {
                let tool = engine.command_record(ready, &self.job).ok_or_else(|| {
                    Error::Usage(format!("{} cannot record a command run", engine.name()))
                })?;
                let label = format!(
                    "recording `{}` in {container} ({frequency} Hz {event})",
                    command::display(command),
                );
                (tool, None, label)
            }
            None => {
                let RecordCommand { argv, user } = engine.record_command(ready, &self.job);
                (
                    argv,
                    user,
                    format!("recording {container} ({frequency} Hz {event})"),
                )
            }
        };
        let notes = engine.notes(ready);
        let facts = engine.recorder_facts();
        self.record_argv = record_argv;
        // A command run: perf runs it through the launch; the manifest keeps perf's own
        // words and the command, never the environment, which only the container sees.
        let launch = self.launch(target, run.workdir());
        let until_command_ends = launch.is_some();
        let argv = launch.map_or_else(|| self.record_argv.clone(), |l| l.argv());
        Ok(Some(WindowPlan {
            argv,
            duration: self.settings.duration,
            label,
            notes,
            user,
            facts,
            until_command_ends,
        }))
    }

    async fn analyse(
        &mut self,
        run: &Run<'_, AnyReady>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        let mut recording = recording.expect("a CPU capture records a window");
        let (engine, target) = (self.engine(), run.target);
        // A recorder that ends by itself and was stopped by Ctrl-C wrote nothing to keep
        // (an HTTP fetch cut short).
        if recording.interrupted && engine.recorder_stops_itself() && !recording.output.success() {
            return Err(Error::Interrupted);
        }
        let command = match self.launch(target, run.workdir()) {
            Some(launch) => Some(command_record(&launch, &recording, target).await),
            None => None,
        };
        let mut timings = BTreeMap::new();
        timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
        let (mut manifest, mut warnings) =
            self.window_manifest(target, &recording, command.as_ref());
        if engine.reads_perf_maps() && recording.process_exited.is_none() {
            match jit::write_jvm_perf_map(target, &self.jvm, &mut ctx.interrupts).await {
                Some(Ok(note)) => manifest.notes.push(note),
                Some(Err(warning)) => warnings.push(warning),
                None => {}
            }
        }
        ctx.report.mark("window written down");
        let folding = Folding {
            keep_script: self.settings.keep_script,
            inline: self.settings.inline,
            call_graph: self.settings.call_graph,
            fold: self.settings.fold,
            names_go: true,
        };
        let step = Step {
            name: "fold",
            within: "copy-out and perf script",
            doing: "folding",
            limit: super::liveness::collect_limit(self.settings.duration),
        };
        let asked = (folding, step, &self.again(target));
        let mut collected = collect(engine, run, &recording, asked, &manifest, ctx).await?;
        warnings.append(&mut collected.warnings);
        ctx.report.mark("folded");
        // The log stream was drained meanwhile. The workdir's work is done (perf.data is
        // home, any perf script has run): it is released while the log's tail is read back.
        let finish = engine.finish(self.in_workdir(target));
        tokio::join!(recording.settle_markers(), run.release_workdir_now(finish));
        ctx.report.mark("log markers read, workdir cleaned");
        recording.stamp_markers(&mut manifest);
        for (step, ms) in &collected.timings_ms {
            timings.insert(step.to_string(), *ms);
        }
        if let Some(hz) = collected.sampled_hz {
            manifest.frequency_hz = hz;
        }
        // Leading runs of [unknown] frames become one root, so the graph stays readable.
        let (folded, health) = stacks::repair(&collected.folded);
        let samples = folded.total();
        if samples == 0 {
            let none = no_samples(engine, target, &collected, command.as_ref(), self.settings);
            // A recording of samples that folded into nothing is kept for another try.
            if collected.reported_samples == Some(0) {
                run.stem.discard(&collected.raw_files);
                return Err(none);
            }
            return Err(run.keep(manifest, none, &self.again(target)));
        }
        let t = Instant::now();
        let event = engine.event(&target.ready);
        let extensions = write_graphs(
            run,
            &folded,
            &collected,
            &recording,
            &mut manifest,
            &event,
            self.settings,
        )?;
        timings.insert("render".to_string(), t.elapsed().as_millis() as u64);
        ctx.report.mark("rendered");

        let unsymbolized = folded.unsymbolized_share();
        manifest.sample_count = samples;
        manifest.perf_reported_samples = collected.reported_samples;
        manifest.lost_chunks = collected.lost_chunks;
        manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
        manifest.top_functions = folded.top_self(10);
        manifest.timings_ms = timings;
        manifest.fold_path = collected.fold_path.map(str::to_string);
        manifest.notes.extend(collected.notes.iter().cloned());
        advise(
            engine,
            target,
            &mut manifest,
            &mut warnings,
            health,
            unsymbolized,
            self.settings,
        );
        manifest.notes.extend(warnings.iter().cloned());
        Ok(Written {
            manifest,
            extensions,
            warnings,
            text: None,
            again: self.again(target),
        })
    }

    async fn finish(&self, target: &Target<AnyReady>, _workdir: &str) {
        // No profiler still sampling stays in the container.
        if let Some(engine) = &self.engine {
            engine.finish(self.in_workdir(target)).await;
        }
    }
}

/// How a command run ended, for the manifest.
async fn command_record(
    launch: &Launch<'_>,
    recording: &Recording,
    target: &Target<AnyReady>,
) -> CommandRecord {
    let end = command::read_status(&target.shell, launch).await;
    CommandRecord {
        argv: launch.command.to_vec(),
        exit_status: end.map(|e| e.exit_status),
        wall_s: end.map_or(recording.elapsed.as_secs_f64(), |e| e.wall_s),
        user: launch.run_as.text(),
        cwd: launch.cwd.to_string(),
    }
}

impl CpuRecipe<'_> {
    /// The manifest as the window leaves it, and the warnings the window gave.
    fn window_manifest(
        &self,
        target: &Target<AnyReady>,
        recording: &Recording,
        command_record: Option<&CommandRecord>,
    ) -> (Manifest, Vec<String>) {
        let (engine, ready, settings) = (self.engine(), &target.ready, self.settings);
        let mut manifest = manifest_for(
            target,
            ManifestBase {
                kind: "cpu",
                typed_target: &settings.target,
                engine: engine.name(),
                tool: engine.tool(ready),
                window: recording.window,
                requested: settings.duration,
                interrupted: recording.interrupted,
            },
        );
        recording.stamp(&mut manifest);
        manifest.events = vec![engine.event(ready)];
        manifest.frequency_hz = engine.frequency(ready, settings.frequency);
        manifest.call_graph = settings.call_graph.perf_arg().into();
        manifest.notes.extend(engine.notes(ready));
        manifest.perf.record_command = self.record_argv.clone();
        manifest.notes.extend(self.runtime_warnings.iter().cloned());
        // An engine that reads the process's own binary names a stripped Go one from its
        // tables; one that reads the runtime's profile never sees the binary.
        let reads_binary = engine.reach() == Reach::Process;
        if let Some(go) = target.go.as_ref().filter(|_| reads_binary) {
            // Said once: a stripped Go binary needs no rebuild, unlike a stripped Rust one.
            let note = crate::runtime::go_names_note(go.stripped);
            crate::note!("{note}");
            manifest.notes.push(note.to_string());
        }
        let mut warnings = Vec::new();
        if let Some(run) = command_record {
            manifest.perf.record_command.push("--".into());
            manifest
                .perf
                .record_command
                .extend(run.argv.iter().cloned());
            manifest.duration_recorded_s = run.wall_s;
            manifest.duration_requested_s = 0.0;
            warnings.extend(command_warning(run, recording));
            manifest.command = Some(run.clone());
        }
        if let Some(at) = recording.process_exited {
            warnings.push(format!(
                "pid {} exited at T+{} s; the profile covers the window until then",
                target.process.pid,
                at.as_secs()
            ));
        }
        warnings.extend(recording.paused_warning(&target.container.name));
        (manifest, warnings)
    }
}

/// What a command run's end says to the user, if anything.
fn command_warning(run: &CommandRecord, recording: &Recording) -> Option<String> {
    match run.exit_status {
        Some(0) => None,
        // After Ctrl-C the command ends by the signal devprof sent it.
        Some(_) | None if recording.interrupted => None,
        Some(status) => Some(format!(
            "the command exited with status {}; the profile covers its run{}",
            command::status_words(status),
            command::output_tail(&recording.output.stderr, 5)
        )),
        None => Some("the command's exit status is unknown (its run was cut short)".into()),
    }
}
