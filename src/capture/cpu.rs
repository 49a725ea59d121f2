//! The CPU recipe, the same for every engine: find the target and a place where the engine
//! may record it, record for the window, let the engine turn its output into folded stacks,
//! then write the folded stacks, the flamegraph and the manifest.

use super::command::{self, Launch, RunAs};
use super::manifest::{manifest_for, subtitle, ManifestBase, Sampling};
use super::session::{cleanup_workdir, make_workdir, record, Window};
use super::{find_target, jit, locate, Located, Target};
use crate::engines::asprof::{release, AsprofEngine, AsprofMode, AsprofSource};
use crate::engines::perf::PerfEngine;
use crate::engines::pyspy::PySpyEngine;
use crate::engines::{CollectJob, Collected, Engine, RecordCommand, RecordJob};
use crate::error::{Error, Result};
use crate::profile::filter::{Preset, StackFilter};
use crate::profile::stacks;
use crate::render::{write_folded_file, write_heatmap_file, write_svg_file, SvgSpec};
use crate::runtime::{
    jvm, node_perf_map, python_perf_trampolines, PerfMap, Runtime, NODE_PERF_MAP_FIX,
};
use crate::settings::{CallGraph, CaptureMode, CpuSettings, EngineChoice};
use crate::signals::Interrupts;
use crate::store::{self, CommandRecord, GraphRecord, Manifest, Stem};
use crate::text::first_line;
use crate::units::{human_duration, thousands};
use chrono::Local;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Fewer samples than this and the flamegraph is mostly noise.
pub const LOW_SAMPLE_WARNING: u64 = 1000;
/// Above this share of unnamed frames the flamegraph is mostly hex.
pub const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// The Node-preset view's files, next to the unfiltered `.folded` and `.svg`.
pub const NODE_FOLDED: &str = "node-preset.folded";
pub const NODE_SVG: &str = "node-preset.svg";

/// What a finished capture produced.
#[derive(Debug)]
pub struct CpuOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

pub async fn run_cpu(settings: &CpuSettings, interrupts: &mut Interrupts) -> Result<CpuOutcome> {
    let located = locate(&settings.target, &settings.process).await?;
    if settings.engine == EngineChoice::Pprof {
        return run_go_pprof(located, settings, interrupts).await;
    }
    let asprof = match (settings.engine, located.runtime) {
        (EngineChoice::Perf | EngineChoice::PySpy | EngineChoice::Pprof, _) => None,
        (_, Runtime::Jvm) => match &settings.asprof_dir {
            Some(dir) => Some(AsprofSource::Host(dir.clone())),
            None => release::find_in_container(
                &located.shell,
                located.process_facts.env("ASYNC_PROFILER_HOME"),
            )
            .await
            .map(AsprofSource::Container),
        },
        (EngineChoice::Asprof, runtime) => {
            return Err(Error::Usage(format!(
                "--engine asprof records JVMs only: pid {} ({}) in '{}' is a {} process; use --engine perf (or auto)",
                located.process.pid,
                located.process.cmdline,
                located.container.name,
                runtime.name()
            )))
        }
        (EngineChoice::Auto, _) => None,
    };
    match choose_engine(settings.engine, located.runtime, asprof.is_some()) {
        EngineKind::Perf if settings.wall || settings.asprof_html => Err(Error::Usage(format!(
            "{} needs async-profiler, which records JVMs only and was not found for '{}' (a {} process)",
            if settings.wall { "--wall" } else { "--asprof-html" },
            located.container.name,
            located.runtime.name()
        ))),
        EngineKind::Perf => run_with(&PerfEngine, located, settings, interrupts).await,
        EngineKind::Asprof => {
            let Some(source) = asprof else {
                return Err(Error::AsprofMissing {
                    container: located.container.name.clone(),
                });
            };
            if settings.placement.mode == CaptureMode::Sidecar {
                return Err(Error::Usage(
                    "async-profiler runs inside the JVM's container (the JVM loads its agent from there): \
                     use --mode exec or auto with --engine asprof, or --engine perf in a sidecar"
                        .into(),
                ));
            }
            let engine = AsprofEngine {
                source,
                mode: if settings.wall {
                    AsprofMode::Wall
                } else {
                    AsprofMode::Cpu
                },
                jvm: jvm::options(&located.process_facts, &located.process.cmdline),
                process: located.process_facts.clone(),
                html: settings.asprof_html,
            };
            run_with(&engine, located, settings, interrupts).await
        }
        EngineKind::PySpy => {
            let engine = PySpyEngine {
                native: settings.python.native,
                idle: settings.python.idle,
                gil: settings.python.gil,
            };
            let trampolines =
                python_perf_trampolines(&located.process.cmdline, &located.process_facts);
            match run_with(&engine, located, settings, interrupts).await {
                // Python 3.12+ with perf trampolines names its frames for perf too.
                Err(e) if settings.engine == EngineChoice::Auto && trampolines && no_py_spy(&e) => {
                    eprintln!(
                        "note: {}; the process runs with Python's perf trampolines (-X perf / PYTHONPERFSUPPORT), recording with perf instead",
                        first_line(&e.to_string())
                    );
                    let located = locate(&settings.target, &settings.process).await?;
                    run_with(&PerfEngine, located, settings, interrupts).await
                }
                other => other,
            }
        }
    }
}

/// `--engine pprof`: the Go runtime's own CPU profile from the service's endpoint.
async fn run_go_pprof(
    located: super::Located,
    settings: &CpuSettings,
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
    let seconds = settings.duration.as_secs().max(1);
    let outcome = super::pprof::run_pprof(
        located,
        super::pprof::PprofKind::Cpu { seconds },
        settings.pprof_url.as_deref(),
        &settings.placement.profiler_image,
        &settings.target,
        &settings.output_dir,
        interrupts,
    )
    .await?;
    Ok(CpuOutcome {
        manifest: outcome.manifest,
        manifest_path: outcome.manifest_path,
        files: outcome.files,
        warnings: outcome.warnings,
    })
}

/// Whether an error says py-spy is nowhere to be run (neither in the target nor beside it).
fn no_py_spy(e: &Error) -> bool {
    match e {
        Error::ToolMissing { .. } | Error::ProfilerImageMissing { .. } => true,
        Error::PerfFailed { step, detail, .. } => {
            step == "profiler sidecar" && detail.contains("py-spy")
        }
        _ => false,
    }
}

/// The engines a CPU capture can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EngineKind {
    Perf,
    PySpy,
    Asprof,
}

/// The engine `choice` means for a process of `runtime`: py-spy for Python (perf sees
/// only the interpreter's C frames), async-profiler for a JVM when there is one (in the
/// container or from --asprof), perf for everything else.
fn choose_engine(choice: EngineChoice, runtime: Runtime, asprof_available: bool) -> EngineKind {
    match choice {
        EngineChoice::Perf => EngineKind::Perf,
        EngineChoice::PySpy => EngineKind::PySpy,
        EngineChoice::Asprof => EngineKind::Asprof,
        // Handled before an engine is chosen (it records nothing in the container).
        EngineChoice::Pprof => EngineKind::Perf,
        EngineChoice::Auto if runtime == Runtime::Python => EngineKind::PySpy,
        EngineChoice::Auto if runtime == Runtime::Jvm && asprof_available => EngineKind::Asprof,
        EngineChoice::Auto => EngineKind::Perf,
    }
}

/// The capture with one engine, from finding where it may record to the manifest.
pub async fn run_with<E: Engine>(
    engine: &E,
    located: Located,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let target = find_target(
        engine,
        located,
        &settings.process,
        &settings.placement,
        false,
    )
    .await?;
    let result = capture_with(engine, &target, settings, interrupts).await;
    // Always, success or not: no sidecar stays behind.
    target.release().await;
    result
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
    // user) before anything is made in the container or the store.
    let run_as = match &settings.command {
        Some(command) => Some(command::prepare_for(target, &command[0]).await?),
        None => None,
    };
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    let workdir = make_workdir(&target.shell).await?;
    let job = RecordJob {
        pid: target.process.pid,
        workdir: workdir.clone(),
        duration: settings.duration,
        frequency: settings.frequency,
        call_graph: settings.call_graph,
        process: target.process_facts.clone(),
    };
    let result = match engine.stage(&target.ready, &target.shell, &job).await {
        Ok(()) => {
            record_and_analyse(engine, target, &job, run_as.as_ref(), settings, interrupts).await
        }
        Err(e) => Err(e),
    };
    // Always, success or not: no profiler still sampling, no recorder process and no temp
    // file stay in the container (a stopped one took them with it and can run nothing).
    if !matches!(result, Err(Error::TargetStopped { .. })) {
        engine.finish(&target.ready, &target.shell, &job).await;
        cleanup_workdir(&target.shell, &workdir).await;
    }
    result
}

async fn record_and_analyse<E: Engine>(
    engine: &E,
    target: &Target<E::Ready>,
    job: &RecordJob,
    run_as: Option<&RunAs>,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let workdir = job.workdir.as_str();
    let container = &target.container.name;
    let ready = &target.ready;
    let event = engine.event(ready);
    let notes = engine.notes(ready);
    let stem = Stem::reserve(
        &store::container_dir(&settings.output_dir, container),
        "perf",
        Local::now(),
    )?;
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

    let cwd = target.process_facts.cwd.as_deref().unwrap_or("/");
    let run = settings.command.as_deref().zip(run_as);
    let (record_argv, user, label) = match run {
        Some((command, _)) => {
            let tool = engine.command_record(ready, job).ok_or_else(|| {
                Error::Usage(format!("{} cannot record a command run", engine.name()))
            })?;
            let label = format!(
                "recording `{}` in {container} ({} Hz {event})",
                command::display(command),
                settings.frequency
            );
            (tool, None, label)
        }
        None => {
            let RecordCommand { argv, user } = engine.record_command(ready, job);
            let label = format!("recording {container} ({} Hz {event})", settings.frequency);
            (argv, user, label)
        }
    };
    // A command run: perf runs it through the launch (the process's environment, working
    // directory and user); the manifest keeps perf's own words and the command, never the
    // environment, which only the container sees.
    let launch = run.map(|(command, run_as)| Launch {
        pid: target.process.pid,
        cwd,
        run_as,
        workdir,
        tool: &record_argv,
        command,
        name: "command",
    });
    let exec_argv = match &launch {
        Some(l) => l.argv(),
        None => record_argv.clone(),
    };
    let watch = target.watch();
    let window = Window {
        argv: &exec_argv,
        duration: settings.duration,
        label: &label,
        notes: &notes,
        user: user.as_deref(),
        watch: &watch,
        until_command_ends: launch.is_some(),
        ends_with_target: engine.recorder_ends_with_target(),
    };
    let window_start = Instant::now();
    let recording = record(&target.shell, workdir, &window, interrupts, &stem).await?;
    timings.insert("record".to_string(), recording.elapsed.as_millis() as u64);
    let command_record = match &launch {
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
    manifest.events = vec![event.clone()];
    manifest.frequency_hz = settings.frequency;
    manifest.call_graph = settings.call_graph.perf_arg().into();
    manifest.notes.extend(notes.iter().cloned());
    manifest.perf.record_command = record_argv.clone();
    manifest.notes.extend(runtime_warnings);
    if let Some(go) = &target.go {
        // Said once: a stripped Go binary needs no rebuild, unlike a stripped Rust one.
        let note = crate::runtime::go_names_note(go.stripped);
        eprintln!("note: {note}");
        manifest.notes.push(note.to_string());
    }
    let mut warnings = Vec::new();
    if let Some(run) = &command_record {
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
    if engine.reads_perf_maps() && recording.process_exited.is_none() {
        match jit::write_jvm_perf_map(target, &jvm_options).await {
            Some(Ok(note)) => manifest.notes.push(note),
            Some(Err(warning)) => warnings.push(warning),
            None => {}
        }
    }

    let job = CollectJob {
        shell: &target.shell,
        go: target.go.clone(),
        pid: target.process.pid,
        workdir,
        recorded: &recording.output,
        stem: &stem,
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
        engine.collect(ready, &job),
    );
    let collected: Collected = tokio::select! {
        collected = collecting => match collected {
            Ok(c) => c,
            Err(e) => {
                // A step given up at its deadline leaves what it had written half-done.
                if matches!(e, Error::PerfFailed { .. }) {
                    stem.discard(super::session::ARTIFACT_EXTENSIONS);
                }
                return Err(e);
            }
        },
        stop = watch.until_stopped(window_start, None) => {
            stem.discard(super::session::ARTIFACT_EXTENSIONS);
            return Err(match stop {
                super::liveness::Stop::Container { exit_code, at } => watch.stopped_error(exit_code, at),
                super::liveness::Stop::Process { .. } => Error::Interrupted,
            });
        }
        _ = interrupts.next() => {
            // What is already home stays, with a manifest saying what happened.
            manifest.notes.push("interrupted while folding; the .data file holds the whole recording".into());
            let kept: Vec<&str> = ["data"].into_iter().filter(|ext| stem.path(ext).is_file()).collect();
            manifest.record_stem_files(&stem, &kept);
            let _ = std::fs::remove_file(stem.path("script"));
            let _ = std::fs::remove_file(stem.path("timeline"));
            manifest.write(&stem)?;
            return Err(Error::Interrupted);
        }
    };
    for (step, ms) in &collected.timings_ms {
        timings.insert(step.to_string(), *ms);
    }
    // Leading runs of [unknown] frames become one root, so the graph stays readable.
    let (folded, mut health) = stacks::repair(&collected.folded);

    let samples = folded.total();
    if samples == 0 {
        stem.discard(&collected.raw_files);
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: match collected.reported_samples {
                Some(0) => Some(format!("{} recorded 0 samples", engine.name())),
                Some(n) => Some(format!(
                    "{} recorded {n} samples but none had a stack; {}",
                    engine.name(),
                    crate::engines::perf::first_error_line(&collected.stderr)
                )),
                None => None,
            },
            hint: match &command_record {
                Some(run) => format!(
                    "the command ran for {:.2} s and used too little CPU to be sampled at {} Hz; give it more work, or raise --frequency",
                    run.wall_s, settings.frequency
                ),
                None => format!(
                    "pid {} ({}) may be idle or may have exited; check it is busy, or pick another process with --process/--pid",
                    target.process.pid, target.process.cmdline
                ),
            },
        });
    }

    let t = Instant::now();
    write_folded_file(&folded, &stem.path("folded"))?;
    let spec = SvgSpec::cpu(
        format!(
            "{container} — CPU ({event}) — {} — {} samples",
            human_duration(recording.window),
            thousands(samples)
        ),
        Some(subtitle(
            target,
            Sampling::Frequency(settings.frequency),
            settings.call_graph,
        )),
    );
    write_svg_file(&folded, &spec, &stem.path("svg"))?;
    let mut extensions: Vec<&str> = collected.raw_files.clone();
    extensions.extend(["folded", "svg"]);
    if collected.raw_files.contains(&"timeline") {
        write_heatmap_file(
            &stem.path("timeline"),
            &spec.title,
            "samples",
            &stem.path("html"),
        )?;
        extensions.push("html");
    }
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
    });
    if target.runtime == Runtime::Node {
        // Node users read both: the whole stacks, and the JavaScript left once the
        // runtime's own frames are dropped.
        let filter = StackFilter {
            preset: Some(Preset::Node),
            ..Default::default()
        };
        let filtered = filter.apply(&folded);
        write_folded_file(&filtered, &stem.path(NODE_FOLDED))?;
        let mut spec = spec.clone();
        spec.title = format!("{} — filtered: preset node (JavaScript only)", spec.title);
        write_svg_file(&filtered, &spec, &stem.path(NODE_SVG))?;
        extensions.extend([NODE_FOLDED, NODE_SVG]);
        manifest.graphs.push(GraphRecord {
            svg: stem.file_name(NODE_SVG),
            folded: stem.file_name(NODE_FOLDED),
            view: "preset node (runtime frames dropped, JavaScript kept)".into(),
        });
    }
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let unsymbolized = folded.unsymbolized_share();
    manifest.sample_count = samples;
    manifest.perf_reported_samples = collected.reported_samples;
    manifest.lost_chunks = collected.lost_chunks;
    manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms = timings;
    manifest.fold_path = collected.fold_path.map(str::to_string);
    manifest.notes.extend(collected.notes.iter().cloned());

    let mut files = manifest.record_stem_files(&stem, &extensions);

    if samples < LOW_SAMPLE_WARNING {
        warnings.push(format!(
            "only {samples} samples: the target was mostly idle. Put load on it while recording, record longer, or raise --frequency."
        ));
    }
    let node_map = (target.runtime == Runtime::Node)
        .then(|| node_perf_map(&target.process.cmdline, &target.process_facts));
    // Without its perf map a Node profile is unnamed for that reason, said below.
    if unsymbolized > UNSYMBOLIZED_WARNING && node_map.is_none_or(|m| m == PerfMap::Written) {
        let fix = match target.runtime {
            Runtime::Jvm => "JIT-compiled Java code is named only through the JVM's perf map or async-profiler: \
                 record with --engine asprof (async-profiler in the container, or --asprof DIR), or let the JVM \
                 accept jcmd (no -XX:+DisableAttachMechanism, jcmd from the JDK in the image)",
            Runtime::Go => "Go functions are named from the symbol table or .gopclntab; the unnamed frames are \
                 outside the Go binary (cgo libraries, the vDSO) or its table could not be read: check the \
                 notes above, or use Go's own profile with --engine pprof",
            _ => "the binary lacks symbols/debuginfo or frame pointers. Build with debug info and \
                 `-C force-frame-pointers=yes` (or `devprof build`), don't strip it, or record with --call-graph dwarf",
        };
        warnings.push(format!(
            "{:.0}% of frames are unsymbolized: {fix}.",
            unsymbolized * 100.0
        ));
    }
    if health.broken_share > stacks::BROKEN_WARNING {
        let (why, fix) = stacks::broken_advice(
            engine.name(),
            target.runtime.name(),
            settings.call_graph == CallGraph::Dwarf,
        );
        warnings.push(format!(
            "{:.0}% of samples have a broken stack (it does not reach the thread's entry point): {why}. Fix: {fix}.",
            health.broken_share * 100.0
        ));
        health.why = Some(why);
        health.fix = Some(fix);
    }
    manifest.stacks = Some(health);
    if let Some(map) = node_map {
        manifest.perf_map = Some(map.describe().to_string());
        if map != PerfMap::Written {
            warnings.push(format!(
                "V8 perf map {}: JavaScript functions show as [unknown] or as addresses. To get their names, {NODE_PERF_MAP_FIX}.",
                map.describe()
            ));
        }
    }
    if let Some(lost) = manifest.lost_chunks.filter(|l| *l > 0) {
        warnings.push(format!(
            "perf lost {lost} chunks of samples; lower --frequency"
        ));
    }
    manifest.notes.extend(warnings.iter().cloned());

    let manifest_path = manifest.write(&stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(CpuOutcome {
        manifest,
        manifest_path,
        files,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_goes_to_py_spy_unless_perf_is_asked_for() {
        assert_eq!(
            choose_engine(EngineChoice::Auto, Runtime::Python, false),
            EngineKind::PySpy
        );
        assert_eq!(
            choose_engine(EngineChoice::Perf, Runtime::Python, false),
            EngineKind::Perf
        );
        assert_eq!(
            choose_engine(EngineChoice::Auto, Runtime::Node, false),
            EngineKind::Perf
        );
        assert_eq!(
            choose_engine(EngineChoice::PySpy, Runtime::Native, false),
            EngineKind::PySpy
        );
    }

    #[test]
    fn auto_takes_async_profiler_for_a_jvm_only_when_there_is_one() {
        use EngineChoice::*;
        assert_eq!(choose_engine(Auto, Runtime::Jvm, true), EngineKind::Asprof);
        assert_eq!(choose_engine(Auto, Runtime::Jvm, false), EngineKind::Perf);
        assert_eq!(choose_engine(Auto, Runtime::Native, true), EngineKind::Perf);
        assert_eq!(choose_engine(Perf, Runtime::Jvm, true), EngineKind::Perf);
        assert_eq!(
            choose_engine(Asprof, Runtime::Jvm, false),
            EngineKind::Asprof
        );
    }
}
