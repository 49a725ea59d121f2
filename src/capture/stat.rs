//! The stat recipe: `perf stat -x,` on the target process over a window, or on a command
//! run N times in the target container (with the process's environment and working
//! directory). Counters, derived readings and run times go into the manifest
//! (`stat-<time>.json`), perf's own CSV beside it.

use super::command::{self, Launch, RunAs, RunEnd};
use super::context::CaptureCtx;
use super::kept::Again;
use super::lifecycle::{
    self, CaptureSpec, Captured, Recipe, Run as CaptureRun, WindowPlan, Written,
};
use super::manifest::{manifest_for, ManifestBase};
use super::place;
use super::target::{Located, Target};
use super::window::Recording;
use crate::docker::{ContainerShell, Shell};
use crate::engines::select::{self, PerfReady};
use crate::engines::{Ahead, RecorderFacts};
use crate::error::{Error, Result};
use crate::profile::stat::{self, Counter, Reading, Run, StatRecord};
use crate::settings::{CaptureMode, EngineSpec, StatSettings, StatSource};
use crate::store::{Manifest, Stem};
use crate::text::{first_error_line, quote};
use std::time::Duration;

/// Longest one run of a command may take.
const RUN_LIMIT: Duration = Duration::from_secs(3600);

pub async fn run_stat(settings: &StatSettings, ctx: &mut CaptureCtx) -> Result<Captured> {
    if matches!(settings.source, StatSource::Command { .. })
        && settings.placement.mode == CaptureMode::Sidecar
    {
        return Err(Error::Usage(
            "a command runs inside the target container (its files, environment and working directory): \
             use --mode exec or auto"
                .into(),
        ));
    }
    lifecycle::run(StatRecipe::new(settings), ctx).await
}

/// A stat capture: its settings, and who a command runs as.
pub struct StatRecipe<'s> {
    settings: &'s StatSettings,
    spec: CaptureSpec,
    run_as: Option<RunAs>,
    /// perf stat's command line over the window.
    argv: Vec<String>,
}

impl<'s> StatRecipe<'s> {
    pub fn new(settings: &'s StatSettings) -> Self {
        StatRecipe {
            settings,
            spec: CaptureSpec::new(
                "stat",
                &settings.target,
                &settings.process,
                &settings.output_dir,
            ),
            run_as: None,
            argv: Vec::new(),
        }
    }
}

impl Recipe for StatRecipe<'_> {
    type Ready = PerfReady;

    fn spec(&self) -> &CaptureSpec {
        &self.spec
    }

    fn ahead(&self, _ctx: &CaptureCtx) -> Ahead {
        Ahead::for_spec(&EngineSpec::Perf, self.settings.placement.mode, None)
    }

    async fn place(&mut self, mut located: Located, ctx: &CaptureCtx) -> Result<Target<PerfReady>> {
        let engine = select::perf(std::mem::take(&mut located.asked));
        place::engine(&engine, located, &self.settings.placement, false, ctx).await
    }

    async fn check(&mut self, target: &Target<PerfReady>, _ctx: &mut CaptureCtx) -> Result<()> {
        // perf names an event it does not know before anything is counted or written.
        check_events(target, self.settings).await?;
        if let StatSource::Command { argv, .. } = &self.settings.source {
            self.run_as = Some(command::prepare_for(target, &argv[0]).await?);
        }
        Ok(())
    }

    async fn window(&mut self, run: &CaptureRun<'_, PerfReady>) -> Result<Option<WindowPlan>> {
        let StatSource::Window(duration) = self.settings.source else {
            return Ok(None);
        };
        let target = run.target;
        let csv_path = format!("{}/stat.csv", run.workdir());
        let mut argv = target
            .ready
            .stat(Some(&csv_path), &events_arg(self.settings));
        argv.extend([
            "-p".into(),
            target.process.pid.to_string(),
            // --timeout rather than `-- sleep N`: perf stat ignores SIGINT while a workload
            // runs, and Ctrl-C must end the window early with the counts so far.
            "--timeout".into(),
            duration.as_millis().to_string(),
        ]);
        self.argv = argv.clone();
        Ok(Some(WindowPlan {
            argv,
            duration,
            label: format!(
                "counting {} ({} events)",
                target.container.name,
                self.settings.events.len()
            ),
            // perf stat -p counts on after its target exits, until its workload ends.
            facts: RecorderFacts::default(),
            ..Default::default()
        }))
    }

    async fn analyse(
        &mut self,
        run: &CaptureRun<'_, PerfReady>,
        recording: Option<Recording>,
        ctx: &mut CaptureCtx,
    ) -> Result<Written> {
        match (&self.settings.source, recording) {
            (StatSource::Window(duration), Some(recording)) => {
                count_window(run, self.settings, *duration, recording, &self.argv).await
            }
            (StatSource::Command { argv, repeat }, _) => {
                let runs = Runs {
                    command: argv,
                    repeat: *repeat,
                    run_as: self.run_as.as_ref().expect("a command run was prepared"),
                };
                count_runs(run, self.settings, &runs, ctx).await
            }
            (StatSource::Window(_), None) => unreachable!("a window was recorded"),
        }
    }
}

fn events_arg(settings: &StatSettings) -> String {
    settings.events.join(",")
}

async fn check_events(target: &Target<PerfReady>, settings: &StatSettings) -> Result<()> {
    let perf = target.ready.path();
    let mut argv = target.ready.stat(None, &events_arg(settings));
    argv.extend(["-p", &target.process.pid.to_string(), "--", "sleep", "0.01"].map(String::from));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = target.shell.run(&argv).await?;
    if let Some(shown) = stat::unknown_event(&out.stderr) {
        // perf shows the list cut short around the error: ask for each event alone.
        let script = format!(
            "for e in {}; do {} stat -e \"$e\" -- true >/dev/null 2>&1 || {{ echo \"$e\"; break; }}; done",
            settings.events.iter().map(|e| quote(e)).collect::<Vec<_>>().join(" "),
            quote(perf)
        );
        let named = target.shell.sh(&script).await.ok();
        let event = named
            .map(|o| o.stdout.trim().to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or(shown);
        return Err(Error::UnknownEvent {
            event,
            suggestion: None,
            config: "-e".into(),
        });
    }
    if !out.success() {
        return Err(Error::PerfFailed {
            container: target.container.name.clone(),
            step: "trial `perf stat`".into(),
            detail: first_error_line(&out.stderr),
        });
    }
    Ok(())
}

async fn count_window(
    run: &CaptureRun<'_, PerfReady>,
    settings: &StatSettings,
    duration: Duration,
    recording: Recording,
    argv: &[String],
) -> Result<Written> {
    let (target, stem) = (run.target, &run.stem);
    let csv_path = format!("{}/stat.csv", run.workdir());
    let csv = read_file(&target.shell, &csv_path).await?;
    let counters = stat::parse_csv(&csv);
    if counters.is_empty() {
        return Err(Error::PerfFailed {
            container: target.container.name.clone(),
            step: "perf stat".into(),
            detail: first_error_line(&recording.output.stderr),
        });
    }
    let mut manifest = base_manifest(target, settings, duration, recording.window);
    manifest.interrupted = recording.interrupted;
    manifest.perf.record_command = argv.to_vec();
    write_csv(stem, &csv)?;
    let record = StatRecord {
        derived: stat::derive(&counters),
        unsupported_reason: unsupported_reason(&target.shell, &counters).await,
        counters,
        ..Default::default()
    };
    Ok(written(manifest, record))
}

/// A command and how often to run it, as whom.
struct Runs<'a> {
    command: &'a [String],
    repeat: u32,
    run_as: &'a RunAs,
}

async fn count_runs(
    run: &CaptureRun<'_, PerfReady>,
    settings: &StatSettings,
    runs_of: &Runs<'_>,
    ctx: &mut CaptureCtx,
) -> Result<Written> {
    let (target, workdir, stem) = (run.target, run.workdir(), &run.stem);
    let command = runs_of.command;
    let mut runs = Vec::new();
    let mut csv_all = String::new();
    let started = std::time::Instant::now();
    let cwd = target.process_facts.cwd.as_deref().unwrap_or("/");
    for i in 1..=runs_of.repeat {
        ctx.not_interrupted()?;
        let csv_path = format!("{workdir}/run-{i}.csv");
        let tool = target.ready.stat(Some(&csv_path), &events_arg(settings));
        let name = format!("run-{i}");
        let launch = Launch {
            pid: target.process.pid,
            cwd,
            run_as: runs_of.run_as,
            workdir,
            tool: &tool,
            command,
            name: &name,
        };
        let argv = launch.argv();
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = tokio::select! {
            out = tokio::time::timeout(RUN_LIMIT, target.shell.run(&argv)) => match out {
                Ok(out) => out?,
                Err(_) => {
                    command::stop_command(&target.shell, workdir).await;
                    return Err(Error::PerfFailed {
                        container: target.container.name.clone(),
                        step: format!("run {i}"),
                        detail: format!("still running after {} s", RUN_LIMIT.as_secs()),
                    });
                }
            },
            _ = ctx.interrupts.next() => {
                command::stop_command(&target.shell, workdir).await;
                return Err(Error::Interrupted);
            }
        };
        let RunEnd {
            exit_status,
            wall_s,
        } = command::read_status(&target.shell, &launch)
            .await
            .ok_or_else(|| Error::PerfFailed {
                container: target.container.name.clone(),
                step: format!("run {i}"),
                detail: first_error_line(&format!("{}{}", out.stdout, out.stderr)),
            })?;
        let log_path = launch.log_path();
        let csv = read_file(&target.shell, &csv_path)
            .await
            .unwrap_or_default();
        csv_all.push_str(&format!("# run {i} exit {exit_status}\n{csv}"));
        let counters = stat::parse_csv(&csv);
        if counters.is_empty() {
            let log = read_file(&target.shell, &log_path)
                .await
                .unwrap_or_default();
            return Err(Error::PerfFailed {
                container: target.container.name.clone(),
                step: format!("run {i} of `{}`", command.join(" ")),
                detail: format!(
                    "perf stat counted nothing (exit status {exit_status}): {}",
                    first_error_line(&log)
                ),
            });
        }
        runs.push(Run {
            exit_status,
            wall_s,
            counters,
        });
    }
    let ok: Vec<&Run> = runs.iter().filter(|r| r.exit_status == 0).collect();
    let counters = stat::sum_runs(&ok.iter().map(|r| r.counters.clone()).collect::<Vec<_>>());
    let wall: Vec<f64> = ok.iter().map(|r| r.wall_s).collect();
    let elapsed = started.elapsed();
    let mut manifest = base_manifest(target, settings, elapsed, elapsed);
    manifest.perf.record_command = command.to_vec();
    write_csv(stem, &csv_all)?;
    let all_counters: Vec<Counter> = runs.iter().flat_map(|r| r.counters.clone()).collect();
    let record = StatRecord {
        command: command.to_vec(),
        derived: stat::derive(&counters),
        unsupported_reason: unsupported_reason(&target.shell, &all_counters).await,
        counters,
        wall: stat::spread(&wall),
        failed_runs: runs.len() - ok.len(),
        runs,
    };
    Ok(written(manifest, record))
}

fn base_manifest(
    target: &Target<PerfReady>,
    settings: &StatSettings,
    requested: Duration,
    window: Duration,
) -> Manifest {
    let mut manifest = manifest_for(
        target,
        ManifestBase {
            kind: "stat",
            typed_target: &settings.target,
            engine: PerfReady::ENGINE,
            tool: target.ready.tool(),
            window,
            requested,
            interrupted: false,
        },
    );
    manifest.events = settings.events.clone();
    manifest
}

fn write_csv(stem: &Stem, csv: &str) -> Result<()> {
    let path = stem.path("csv");
    std::fs::write(&path, csv).map_err(|e| Error::io(format!("write {}", path.display()), e))
}

fn written(mut manifest: Manifest, record: StatRecord) -> Written {
    let mut warnings = Vec::new();
    if record.failed_runs > 0 {
        warnings.push(format!(
            "{} of {} runs exited non-zero; they are listed but left out of the times and sums",
            record.failed_runs,
            record.runs.len()
        ));
    }
    manifest.sample_count = record.runs.len() as u64;
    manifest.stat = Some(record);
    manifest.notes.extend(warnings.iter().cloned());
    Written {
        manifest,
        extensions: vec!["csv"],
        warnings,
        text: None,
        // Counters come out whole or not at all: there is nothing to analyse again.
        again: Again::Summarize,
    }
}

async fn read_file(shell: &Shell, path: &str) -> Result<String> {
    let out = shell.run(&["cat", path]).await?;
    if !out.success() {
        return Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: format!("read {path}"),
            detail: first_error_line(&out.stderr),
        });
    }
    Ok(out.stdout)
}

/// Why events were not supported, from what the container shows of the machine; None
/// when every event was counted.
async fn unsupported_reason(shell: &Shell, counters: &[Counter]) -> Option<String> {
    if !counters.iter().any(|c| c.reading == Reading::NotSupported) {
        return None;
    }
    let out = shell
        .sh("grep -qw hypervisor /proc/cpuinfo && echo hypervisor; \
             for d in cpu cpu_core cpu_atom armv8_pmuv3_0; do \
               [ -e /sys/bus/event_source/devices/$d ] && echo pmu; done; true")
        .await
        .ok()?;
    Some(stat::unsupported_reason(
        out.stdout.contains("hypervisor"),
        out.stdout.contains("pmu"),
    ))
}
