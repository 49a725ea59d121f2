//! The CPU recipe, the same for every engine: find the target and a place where the engine
//! may record it, record for the window, let the engine turn its output into folded stacks,
//! then write the folded stacks, the flamegraph and the manifest.

mod results;

use super::command::{self, Launch, RunAs};
use super::kept::Again;
use super::manifest::{manifest_for, ManifestBase};
use super::record_script::RecorderStart;
use super::run::{placed, Run};
use super::session::Recording;
use super::{jit, locate, locate_ahead, reclaiming, Ahead, Located, Primer, Target};
use crate::engines::asprof::{release, AsprofEngine, AsprofMode, AsprofSource};
use crate::engines::perf::{self, PerfEngine};
use crate::engines::pprof::{PprofEngine, PprofKind};
use crate::engines::pyspy::PySpyEngine;
use crate::engines::{CollectJob, Collected, Engine, Reach, RecordCommand, RecordJob};
use crate::error::{Error, Result};
use crate::profile::stacks;
use crate::runtime::{self, jvm, python_perf_trampolines, Runtime};
use crate::settings::{AsprofOptions, CaptureMode, CpuSettings, EngineSpec, PythonOptions};
use crate::signals::Interrupts;
use crate::store::{self, CommandRecord, Manifest};
use crate::text::first_line;
use results::{advise, no_samples, write_graphs};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Fewer samples than this and the flamegraph is mostly noise.
pub const LOW_SAMPLE_WARNING: u64 = 1000;
/// Above this share of unnamed frames the flamegraph is mostly hex.
pub const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// The Node-preset view's files, next to the unfiltered `.folded` and `.svg`.
pub const NODE_FOLDED: &str = "node-preset.folded";
pub const NODE_SVG: &str = "node-preset.svg";

/// What a finished capture produced.
pub type CpuOutcome = super::Captured;

pub async fn run_cpu(settings: &CpuSettings, interrupts: &mut Interrupts) -> Result<CpuOutcome> {
    let mut outcome = run_cpu_window(settings, interrupts).await?;
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

async fn run_cpu_window(settings: &CpuSettings, interrupts: &mut Interrupts) -> Result<CpuOutcome> {
    // Where perf will most likely record in the container, its version and access trial
    // and the workdir are asked for beside the process's probe, not after it.
    let ahead = match settings.engine {
        EngineSpec::Auto { .. } | EngineSpec::Perf => {
            Ahead::perf_primed(settings.placement.mode, perf_primer(settings))
        }
        _ => Ahead::Nothing,
    };
    let located = locate_ahead(&settings.target, &settings.process, ahead).await?;
    crate::ui::phases::mark("target found");
    reclaiming(located, async |located| {
        run_located(located, settings, interrupts).await
    })
    .await
}

/// The perf recorder this capture starts, for the probe's standby to start before the
/// trial answers (perf's start-up, 0.2-0.4 s on a loaded host, then runs beside the
/// process's probe and the trial instead of after them). None for a command run, in a
/// session, where sysctls are lowered after the probe, and under auto for a process whose
/// name says JVM or Python (another engine most likely records it).
fn perf_primer(settings: &CpuSettings) -> Option<Primer> {
    if settings.command.is_some() || settings.placement.allow_sysctl || super::gate::in_session() {
        return None;
    }
    let auto = matches!(settings.engine, EngineSpec::Auto { .. });
    let (duration, frequency, call_graph) =
        (settings.duration, settings.frequency, settings.call_graph);
    Some(Arc::new(move |perf, facts, pid, workdir| {
        let process = facts.processes.iter().find(|p| p.pid == pid)?;
        let guess = runtime::of_program(process.program(), &Default::default());
        if auto && matches!(guess, Runtime::Jvm | Runtime::Python) {
            return None;
        }
        let job = RecordJob {
            pid,
            workdir: workdir.to_string(),
            duration,
            frequency,
            call_graph,
            process: Default::default(),
        };
        let argv = perf::likely_record_argv(perf, facts, &job);
        let engine = PerfEngine::default();
        let plan = RecorderStart {
            argv: &argv,
            workdir,
            duration,
            enable_on_release: engine.recorder_enables_on_release(),
            until_command_ends: false,
            stops_itself: engine.recorder_stops_itself(),
            in_session: false,
        }
        .plan();
        Some(plan.exec_argv().map(str::to_string).to_vec())
    }))
}

async fn run_located(
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    match &settings.engine {
        EngineSpec::Pprof { url } => {
            run_go_pprof(located, settings, url.as_deref(), interrupts).await
        }
        EngineSpec::Asprof(_) if located.runtime != Runtime::Jvm => Err(Error::Usage(format!(
            "--engine asprof records JVMs only: pid {} ({}) in '{}' is a {} process; use --engine perf (or auto)",
            located.process.pid,
            located.process.cmdline,
            located.container.name,
            located.runtime.name()
        ))),
        EngineSpec::Asprof(options) => match asprof_source(options, &located).await {
            Some(source) => run_asprof(source, options, located, settings, interrupts).await,
            None => Err(Error::AsprofMissing {
                container: located.container.name.clone(),
            }),
        },
        EngineSpec::Auto { jvm, .. } if located.runtime == Runtime::Jvm => {
            match asprof_source(jvm, &located).await {
                Some(source) => run_asprof(source, jvm, located, settings, interrupts).await,
                None => run_perf(jvm, located, settings, interrupts).await,
            }
        }
        EngineSpec::Auto { python, jvm } if located.runtime == Runtime::Python => {
            let perf_names_python =
                python_perf_trampolines(&located.process.cmdline, &located.process_facts);
            let chain = python_chain(true, perf_names_python);
            run_chain(chain, *python, jvm, located, settings, interrupts).await
        }
        EngineSpec::Auto { jvm, .. } => run_perf(jvm, located, settings, interrupts).await,
        EngineSpec::PySpy(python) => {
            let chain = python_chain(false, false);
            let jvm = AsprofOptions::default();
            run_chain(chain, *python, &jvm, located, settings, interrupts).await
        }
        EngineSpec::Perf => {
            run_perf(&AsprofOptions::default(), located, settings, interrupts).await
        }
    }
}

/// Where async-profiler comes from for this JVM: the release given with --asprof, else
/// one found in the container (None: neither).
async fn asprof_source(options: &AsprofOptions, located: &Located) -> Option<AsprofSource> {
    if let Some(dir) = &options.dir {
        return Some(AsprofSource::Host(dir.clone()));
    }
    let found = release::find_in_container(&located.shell).await;
    let named = located.process_facts.env("ASYNC_PROFILER_HOME");
    if let Some(note) = release::ignored_home_note(named, found.as_deref()) {
        eprintln!("note: {note}");
    }
    found.map(AsprofSource::Container)
}

async fn run_asprof(
    source: AsprofSource,
    options: &AsprofOptions,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if settings.placement.mode == CaptureMode::Sidecar {
        return Err(Error::Usage(
            "async-profiler runs inside the JVM's container (the JVM loads its agent from there): \
             use --mode exec or auto with --engine asprof, or --engine perf in a sidecar"
                .into(),
        ));
    }
    let engine = AsprofEngine {
        source,
        mode: if options.wall {
            AsprofMode::Wall
        } else {
            AsprofMode::Cpu
        },
        jvm: jvm::options(&located.process_facts, &located.process.cmdline),
        process: located.process_facts.clone(),
        html: options.html,
    };
    run_with(&engine, located, settings, interrupts).await
}

/// perf, which records every runtime but cannot honour async-profiler's own flags.
async fn run_perf(
    jvm: &AsprofOptions,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if let Some(flag) = jvm.needs_asprof() {
        return Err(Error::Usage(format!(
            "{flag} needs async-profiler, which records JVMs only and was not found for '{}' (a {} process)",
            located.container.name,
            located.runtime.name()
        )));
    }
    // perf's answers asked beside the process's probe are the first `prepare`'s.
    let mut located = located;
    let engine = PerfEngine::answered(located.perf_answer.take());
    run_with(&engine, located, settings, interrupts).await
}

/// The engines of a fallback chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EngineKind {
    Perf,
    PySpy,
}

impl EngineKind {
    fn name(self) -> &'static str {
        match self {
            EngineKind::Perf => PerfEngine::default().name(),
            EngineKind::PySpy => PySpyEngine::default().name(),
        }
    }
}

/// An engine, and the one that stands in for it when it is not available, with why it
/// may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chain {
    first: EngineKind,
    then: Option<(EngineKind, &'static str)>,
}

/// A Python capture's engines. perf stands in for py-spy only under auto, and only where
/// perf names Python frames too (Python 3.12+ with its perf trampolines).
fn python_chain(auto: bool, perf_names_python: bool) -> Chain {
    Chain {
        first: EngineKind::PySpy,
        then: (auto && perf_names_python).then_some((
            EngineKind::Perf,
            "the process runs with Python's perf trampolines (-X perf / PYTHONPERFSUPPORT), \
             which name its frames for perf too",
        )),
    }
}

/// Runs the chain's first engine; the next one runs only when the first is not available
/// (its tool, or the sidecar image with it, missing), never after a recording failed or
/// was interrupted.
async fn run_chain(
    chain: Chain,
    python: PythonOptions,
    jvm: &AsprofOptions,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let first = run_kind(chain.first, python, jvm, located, settings, interrupts).await;
    match (first, chain.then) {
        (Err(e), Some((next, because))) if e.engine_unavailable() => {
            eprintln!(
                "note: {}; recording with {} instead: {because}",
                first_line(&e.to_string()),
                next.name()
            );
            let located = locate(&settings.target, &settings.process).await?;
            run_kind(next, python, jvm, located, settings, interrupts).await
        }
        (result, _) => result,
    }
}

async fn run_kind(
    kind: EngineKind,
    python: PythonOptions,
    jvm: &AsprofOptions,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    match kind {
        EngineKind::PySpy => {
            run_with(&PySpyEngine::from(python), located, settings, interrupts).await
        }
        EngineKind::Perf => run_perf(jvm, located, settings, interrupts).await,
    }
}

/// `--engine pprof`: the Go runtime's own CPU profile from the service's endpoint.
async fn run_go_pprof(
    located: Located,
    settings: &CpuSettings,
    url: Option<&str>,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if located.runtime != Runtime::Go {
        return Err(Error::Usage(format!(
            "--engine pprof reads a Go program's net/http/pprof endpoint: pid {} ({}) in '{}' is a {} process; use --engine auto",
            located.process.pid,
            located.process.cmdline,
            located.container.name,
            located.runtime.name()
        )));
    }
    let engine = PprofEngine {
        kind: PprofKind::Cpu {
            seconds: settings.duration.as_secs().max(1),
        },
        url: url.map(str::to_string),
        container: located.container.name.clone(),
    };
    run_with(&engine, located, settings, interrupts).await
}

/// The capture with one engine, from finding where it may record to the manifest.
pub async fn run_with<E: Engine>(
    engine: &E,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    placed(
        engine,
        located,
        &settings.placement,
        false,
        async |target| capture_with(engine, target, settings, interrupts).await,
    )
    .await
}

async fn capture_with<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    // A command is checked (found on the process's PATH, a way to run it as the process's
    // user) before anything is made in the store or run in the container (only the empty
    // workdir is made by then).
    let run_as = match &settings.command {
        Some(command) => Some(command::prepare_for(target, &command[0]).await?),
        None => None,
    };
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    target
        .in_workdir(
            async |workdir| {
                let job = record_job(target, settings, workdir);
                engine.stage(&target.ready, &target.shell, &job).await?;
                let run = Run::new(target, workdir, &settings.output_dir, "perf")?;
                record_and_analyse(engine, &run, &job, run_as.as_ref(), settings, interrupts).await
            },
            // No profiler still sampling stays in the container.
            async |workdir| {
                let job = record_job(target, settings, workdir);
                engine.finish(&target.ready, &target.shell, &job).await
            },
        )
        .await
}

fn record_job<R>(target: &Target<R>, settings: &CpuSettings, workdir: &str) -> RecordJob {
    RecordJob {
        pid: target.process.pid,
        workdir: workdir.to_string(),
        duration: settings.duration,
        frequency: settings.frequency,
        call_graph: settings.call_graph,
        process: target.process_facts.clone(),
    }
}

/// The window as it went: the recording, the recorder's command line (perf's own words,
/// without a command run's launch), and the command run, if there was one.
struct Recorded {
    recording: Recording,
    record_argv: Vec<String>,
    command: Option<CommandRecord>,
}

async fn record_and_analyse<E: Engine>(
    engine: &E,
    run: &Run<'_, E::Ready>,
    job: &RecordJob,
    run_as: Option<&RunAs>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let target = run.target;
    let mut timings = BTreeMap::new();
    let jvm_options = jvm::options(&target.process_facts, &target.process.cmdline);
    let runtime_warnings = if engine.reads_perf_maps() {
        jit::perf_map_warnings(target.runtime, &jvm_options)
    } else {
        Vec::new()
    };
    // Printed once, before the window: the user may want to fix them and start again.
    for warning in &runtime_warnings {
        eprintln!("warning: {warning}");
    }
    if engine.reads_perf_maps() {
        // The native fold's kernel names, read while the window runs.
        crate::engines::perf::preload_kernel(
            run.stem.dir().join(crate::symbols::binary::SYMBOL_CACHE),
        );
    }
    let recorded = record_window(engine, run, job, run_as, settings, interrupts).await?;
    let recording = &recorded.recording;
    // A recorder that ends by itself and was stopped by Ctrl-C wrote nothing to keep (an
    // HTTP fetch cut short).
    if recording.interrupted && engine.recorder_stops_itself() && !recording.output.success() {
        run.stem.discard(super::session::ARTIFACT_EXTENSIONS);
        return Err(Error::Interrupted);
    }
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let (mut manifest, mut warnings) =
        window_manifest(engine, target, &recorded, runtime_warnings, settings);
    if engine.reads_perf_maps() && recording.process_exited.is_none() {
        match jit::write_jvm_perf_map(target, &jvm_options, interrupts).await {
            Some(Ok(note)) => manifest.notes.push(note),
            Some(Err(warning)) => warnings.push(warning),
            None => {}
        }
    }
    crate::ui::phases::mark("window written down");
    let collected = collect(
        engine,
        run,
        recording,
        &manifest,
        &mut warnings,
        settings,
        interrupts,
    )
    .await?;
    crate::ui::phases::mark("folded");
    // The log stream was drained meanwhile. The workdir's work is done (perf.data is home,
    // any perf script has run): it is cleaned while the log's tail is read back.
    let mut recorded = recorded;
    let finish = engine.finish(&target.ready, &target.shell, job);
    tokio::join!(
        recorded.recording.settle_markers(),
        target.clean_workdir_now(run.workdir, finish)
    );
    crate::ui::phases::mark("log markers read, workdir cleaned");
    recorded.recording.stamp_markers(&mut manifest);
    let recording = &recorded.recording;
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
        let none = no_samples(
            engine,
            target,
            &collected,
            recorded.command.as_ref(),
            settings,
        );
        // A recording of samples that folded into nothing is kept for another try.
        if collected.reported_samples == Some(0) {
            run.stem.discard(&collected.raw_files);
            return Err(none);
        }
        return Err(run.keep(manifest, none, &again(settings, target)));
    }

    let t = Instant::now();
    let extensions = write_graphs(
        run,
        &folded,
        &collected,
        recording,
        &mut manifest,
        &engine.event(&target.ready),
        settings,
    )?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);
    crate::ui::phases::mark("rendered");

    let unsymbolized = folded.unsymbolized_share();
    manifest.sample_count = samples;
    manifest.perf_reported_samples = collected.reported_samples;
    manifest.lost_chunks = collected.lost_chunks;
    manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms = timings;
    manifest.fold_path = collected.fold_path.map(str::to_string);
    manifest.notes.extend(collected.notes.iter().cloned());

    let mut files = manifest.record_stem_files(&run.stem, &extensions);
    advise(
        engine,
        target,
        &mut manifest,
        &mut warnings,
        health,
        unsymbolized,
        settings,
    );
    manifest.notes.extend(warnings.iter().cloned());

    let manifest_path = manifest.write(&run.stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(CpuOutcome {
        manifest,
        manifest_path,
        files,
        warnings,
    })
}

/// How a kept recording of this capture is folded again.
fn again<'a, R>(settings: &CpuSettings, target: &'a Target<R>) -> Again<'a> {
    Again::Fold {
        call_graph: settings.call_graph,
        container: &target.container.name,
    }
}

/// The window: the engine's recorder over the process, or a command run under it.
async fn record_window<E: Engine>(
    engine: &E,
    run: &Run<'_, E::Ready>,
    job: &RecordJob,
    run_as: Option<&RunAs>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<Recorded> {
    let target = run.target;
    let container = &target.container.name;
    let ready = &target.ready;
    let event = engine.event(ready);
    let frequency = engine.frequency(ready, settings.frequency);
    let notes = engine.notes(ready);
    let cwd = target.process_facts.cwd.as_deref().unwrap_or("/");
    let command_run = settings.command.as_deref().zip(run_as);
    let (record_argv, user, label) = match command_run {
        Some((command, _)) => {
            let tool = engine.command_record(ready, job).ok_or_else(|| {
                Error::Usage(format!("{} cannot record a command run", engine.name()))
            })?;
            let label = format!(
                "recording `{}` in {container} ({frequency} Hz {event})",
                command::display(command),
            );
            (tool, None, label)
        }
        None => {
            let RecordCommand { argv, user } = engine.record_command(ready, job);
            let label = format!("recording {container} ({frequency} Hz {event})");
            (argv, user, label)
        }
    };
    // A command run: perf runs it through the launch (the process's environment, working
    // directory and user); the manifest keeps perf's own words and the command, never the
    // environment, which only the container sees.
    let launch = command_run.map(|(command, run_as)| Launch {
        pid: target.process.pid,
        cwd,
        run_as,
        workdir: run.workdir,
        tool: &record_argv,
        command,
        name: "command",
    });
    let exec_argv = match &launch {
        Some(l) => l.argv(),
        None => record_argv.clone(),
    };
    let mut window = run.window(
        &exec_argv,
        settings.duration,
        &label,
        &notes,
        engine.recorder_ends_with_target(),
    );
    window.user = user.as_deref();
    window.until_command_ends = launch.is_some();
    window.enable_on_release = engine.recorder_enables_on_release();
    window.stops_itself = engine.recorder_stops_itself();
    let recording = run.record_leaving_markers(&window, interrupts).await?;
    let command = match &launch {
        Some(l) => {
            let end = command::read_status(&target.shell, l).await;
            Some(CommandRecord {
                argv: l.command.to_vec(),
                exit_status: end.map(|e| e.exit_status),
                wall_s: end.map_or(recording.elapsed.as_secs_f64(), |e| e.wall_s),
                user: l.run_as.text(),
                cwd: cwd.to_string(),
            })
        }
        None => None,
    };
    Ok(Recorded {
        recording,
        record_argv,
        command,
    })
}

/// The manifest as the window leaves it, and the warnings the window gave.
fn window_manifest<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    recorded: &Recorded,
    runtime_warnings: Vec<String>,
    settings: &CpuSettings,
) -> (Manifest, Vec<String>) {
    let Recorded {
        recording,
        record_argv,
        command: command_record,
    } = recorded;
    let ready = &target.ready;
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
    manifest.perf.record_command = record_argv.clone();
    manifest.notes.extend(runtime_warnings);
    // An engine that reads the process's own binary names a stripped Go one from its
    // tables; one that reads the runtime's profile never sees the binary.
    let reads_binary = engine.reach() == Reach::Process;
    if let Some(go) = target.go.as_ref().filter(|_| reads_binary) {
        // Said once: a stripped Go binary needs no rebuild, unlike a stripped Rust one.
        let note = crate::runtime::go_names_note(go.stripped);
        eprintln!("note: {note}");
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
        match run.exit_status {
            Some(0) => {}
            // After Ctrl-C the command ends by the signal devprof sent it.
            Some(_) if recording.interrupted => {}
            Some(status) => warnings.push(format!(
                "the command exited with status {}; the profile covers its run{}",
                command::status_words(status),
                command::output_tail(&recording.output.stderr, 5)
            )),
            None if recording.interrupted => {}
            None => {
                warnings.push("the command's exit status is unknown (its run was cut short)".into())
            }
        }
        manifest.command = command_record.clone();
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

/// The engine's output turned into folded stacks, under the target's watch and Ctrl-C;
/// once the recording is home, whatever stops this keeps it.
async fn collect<E: Engine>(
    engine: &E,
    run: &Run<'_, E::Ready>,
    recording: &Recording,
    manifest: &Manifest,
    warnings: &mut Vec<String>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<Collected> {
    let target = run.target;
    let container = &target.container.name;
    // The engine judges a runtime's perf map before perf may read it (perf's collect).
    let job = CollectJob {
        shell: &target.shell,
        target_container: &target.container.id,
        go: target.go.clone(),
        pid: target.process.pid,
        workdir: run.workdir,
        recorded: &recording.output,
        stem: &run.stem,
        symfs: target.symfs(),
        keep_script: settings.keep_script,
        inline: settings.inline,
        call_graph: settings.call_graph,
        fold: settings.fold,
    };
    let limit = super::liveness::collect_limit(settings.duration);
    let collecting = super::liveness::within(
        limit,
        container,
        "copy-out and perf script",
        engine.collect(&target.ready, &job),
    );
    let mut collected = run
        .after_window(
            collecting,
            "fold",
            "folding",
            &again(settings, target),
            || manifest.clone(),
            || {},
            interrupts,
        )
        .await?;
    warnings.append(&mut collected.warnings);
    Ok(collected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_follows_py_spy_only_under_auto_where_perf_names_python() {
        let engines = |c: Chain| (c.first, c.then.map(|(next, _)| next));
        use EngineKind::*;
        assert_eq!(engines(python_chain(true, true)), (PySpy, Some(Perf)));
        assert_eq!(engines(python_chain(true, false)), (PySpy, None));
        // Named, py-spy is the engine: no other records in its place.
        assert_eq!(engines(python_chain(false, true)), (PySpy, None));
    }
}
