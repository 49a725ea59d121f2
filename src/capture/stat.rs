//! The stat recipe: `perf stat -x,` on the target process over a window, or on a command
//! run N times in the target container (with the process's environment and working
//! directory). Counters, derived readings and run times go into the manifest
//! (`stat-<time>.json`), perf's own CSV beside it.

use super::manifest::{manifest_for, ManifestBase};
use super::session::{cleanup_workdir, make_workdir, record, Window};
use super::{find_target, locate, Target};
use crate::docker::{ContainerShell, Shell};
use crate::engines::perf::{first_error_line, PerfEngine, PerfReady};
use crate::engines::Engine;
use crate::error::{Error, Result};
use crate::profile::stat::{self, Counter, Reading, Run, StatRecord};
use crate::settings::{CaptureMode, StatSettings, StatSource};
use crate::signals::Interrupts;
use crate::store::{self, Manifest, Stem};
use crate::text::quote;
use chrono::Local;
use std::path::PathBuf;
use std::time::Duration;

/// What a finished stat capture produced.
#[derive(Debug)]
pub struct StatOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

/// Longest one run of a command may take.
const RUN_LIMIT: Duration = Duration::from_secs(3600);

pub async fn run_stat(settings: &StatSettings, interrupts: &mut Interrupts) -> Result<StatOutcome> {
    if matches!(settings.source, StatSource::Command { .. })
        && settings.placement.mode == CaptureMode::Sidecar
    {
        return Err(Error::Usage(
            "a command runs inside the target container (its files, environment and working directory): \
             use --mode exec or auto"
                .into(),
        ));
    }
    let located = locate(&settings.target, &settings.process).await?;
    let target = find_target(
        &PerfEngine,
        located,
        &settings.process,
        &settings.placement,
        false,
    )
    .await?;
    let result = stat_with(&target, settings, interrupts).await;
    target.release().await;
    result
}

async fn stat_with(
    target: &Target<PerfReady>,
    settings: &StatSettings,
    interrupts: &mut Interrupts,
) -> Result<StatOutcome> {
    // perf names an event it does not know before anything is counted or written.
    check_events(target, settings).await?;
    if let StatSource::Command { argv, .. } = &settings.source {
        check_command(target, &argv[0]).await?;
    }
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }
    let workdir = make_workdir(&target.shell).await?;
    let result = count(target, settings, &workdir, interrupts).await;
    cleanup_workdir(&target.shell, &workdir).await;
    result
}

fn events_arg(settings: &StatSettings) -> String {
    settings.events.join(",")
}

async fn check_events(target: &Target<PerfReady>, settings: &StatSettings) -> Result<()> {
    let perf = &target.ready.perf.path;
    let pid = target.process.pid.to_string();
    let events = events_arg(settings);
    let argv = [
        perf.as_str(),
        "stat",
        "-x,",
        "-e",
        &events,
        "-p",
        &pid,
        "--",
        "sleep",
        "0.01",
    ];
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

/// The command must exist in the container, found on the process's PATH.
async fn check_command(target: &Target<PerfReady>, program: &str) -> Result<()> {
    let script = format!(
        "{} sh -c 'command -v \"$1\"' sh {} >/dev/null",
        env_prefix(target),
        quote(program)
    );
    let out = target.shell.sh(&script).await?;
    if !out.success() {
        return Err(Error::Usage(format!(
            "command '{program}' not found in container '{}' (looked up on the PATH of pid {})",
            target.container.name, target.process.pid
        )));
    }
    Ok(())
}

/// `cd <cwd>; env -i K=V ...`: the target process's working directory and environment.
fn env_prefix(target: &Target<PerfReady>) -> String {
    let facts = &target.process_facts;
    let cwd = facts.cwd.as_deref().unwrap_or("/");
    let vars: Vec<String> = facts
        .env
        .iter()
        .map(|(k, v)| quote(&format!("{k}={v}")))
        .collect();
    format!("cd {} || exit 127; env -i {}", quote(cwd), vars.join(" "))
}

async fn count(
    target: &Target<PerfReady>,
    settings: &StatSettings,
    workdir: &str,
    interrupts: &mut Interrupts,
) -> Result<StatOutcome> {
    let container = &target.container.name;
    let stem = Stem::reserve(
        &store::container_dir(&settings.output_dir, container),
        "stat",
        Local::now(),
    )?;
    let result = match &settings.source {
        StatSource::Window(duration) => {
            count_window(target, settings, *duration, workdir, interrupts, &stem).await
        }
        StatSource::Command { argv, repeat } => {
            count_runs(target, settings, argv, *repeat, workdir, interrupts, &stem).await
        }
    };
    match result {
        Ok(outcome) => Ok(outcome),
        Err(e) => {
            stem.discard(&["csv"]);
            Err(e)
        }
    }
}

async fn count_window(
    target: &Target<PerfReady>,
    settings: &StatSettings,
    duration: Duration,
    workdir: &str,
    interrupts: &mut Interrupts,
    stem: &Stem,
) -> Result<StatOutcome> {
    let csv_path = format!("{workdir}/stat.csv");
    let argv: Vec<String> = vec![
        target.ready.perf.path.clone(),
        "stat".into(),
        "-x,".into(),
        "-o".into(),
        csv_path.clone(),
        "-e".into(),
        events_arg(settings),
        "-p".into(),
        target.process.pid.to_string(),
        // --timeout rather than `-- sleep N`: perf stat ignores SIGINT while a workload
        // runs, and Ctrl-C must end the window early with the counts so far.
        "--timeout".into(),
        duration.as_millis().to_string(),
    ];
    let label = format!(
        "counting {} ({} events)",
        target.container.name,
        settings.events.len()
    );
    let watch = target.watch();
    let window = Window {
        argv: &argv,
        duration,
        label: &label,
        notes: &[],
        user: None,
        watch: &watch,
    };
    let recording = record(&target.shell, workdir, &window, interrupts, stem).await?;
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
    manifest.perf.record_command = argv;
    write_csv(stem, &csv)?;
    let record = StatRecord {
        derived: stat::derive(&counters),
        unsupported_reason: unsupported_reason(&target.shell, &counters).await,
        counters,
        ..Default::default()
    };
    finish(manifest, record, stem)
}

#[allow(clippy::too_many_arguments)]
async fn count_runs(
    target: &Target<PerfReady>,
    settings: &StatSettings,
    command: &[String],
    repeat: u32,
    workdir: &str,
    interrupts: &mut Interrupts,
    stem: &Stem,
) -> Result<StatOutcome> {
    let mut runs = Vec::new();
    let mut csv_all = String::new();
    let started = std::time::Instant::now();
    for i in 1..=repeat {
        if interrupts.pending() {
            return Err(Error::Interrupted);
        }
        let csv_path = format!("{workdir}/run-{i}.csv");
        let log_path = format!("{workdir}/run-{i}.log");
        let script =
            format!(
            // perf's pid goes in the workdir's pidfile so that clean-up after Ctrl-C stops
            // it (and perf stops the command it runs).
            "s=$(date +%s%N); ({env} sh -c 'echo $$ > \"$0\"; exec \"$@\"' {pidfile} {perf} stat -x, -o {csv} -e {events} -- {cmd}) >{log} 2>&1; \
             rc=$?; e=$(date +%s%N); echo \"devprof-run $rc $s $e\"",
            env = env_prefix(target),
            pidfile = quote(&format!("{workdir}/perf.pid")),
            perf = quote(&target.ready.perf.path),
            csv = quote(&csv_path),
            events = quote(&events_arg(settings)),
            cmd = command.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
            log = quote(&log_path),
        );
        let out = tokio::select! {
            out = tokio::time::timeout(RUN_LIMIT, target.shell.sh(&script)) => match out {
                Ok(out) => out?,
                Err(_) => {
                    stop_command(&target.shell, workdir).await;
                    return Err(Error::PerfFailed {
                        container: target.container.name.clone(),
                        step: format!("run {i}"),
                        detail: format!("still running after {} s", RUN_LIMIT.as_secs()),
                    });
                }
            },
            _ = interrupts.next() => {
                stop_command(&target.shell, workdir).await;
                return Err(Error::Interrupted);
            }
        };
        let (exit_status, wall_s) =
            parse_run_line(&out.stdout).ok_or_else(|| Error::PerfFailed {
                container: target.container.name.clone(),
                step: format!("run {i}"),
                detail: first_error_line(&format!("{}{}", out.stdout, out.stderr)),
            })?;
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
    finish(manifest, record, stem)
}

/// Ends the command perf runs (perf's children, by parent pid from /proc), so the
/// workdir's clean-up, which stops perf itself, leaves nothing running.
async fn stop_command(shell: &Shell, workdir: &str) {
    let script = format!(
        "p=$(cat {pidfile} 2>/dev/null); [ -n \"$p\" ] || exit 0; \
         for f in /proc/[0-9]*/stat; do \
           s=$(cat \"$f\" 2>/dev/null) || continue; rest=${{s##*) }}; \
           set -- $rest; c=${{f#/proc/}}; \
           [ \"$2\" = \"$p\" ] && kill -TERM \"${{c%/stat}}\" 2>/dev/null; \
         done; true",
        pidfile = quote(&format!("{workdir}/perf.pid"))
    );
    let _ = shell.sh(&script).await;
}

/// `devprof-run <status> <start ns> <end ns>`: a run's exit status and wall time.
fn parse_run_line(stdout: &str) -> Option<(i32, f64)> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("devprof-run "))?;
    let mut f = line.split_whitespace().skip(1);
    let rc: i32 = f.next()?.parse().ok()?;
    let start: u128 = f.next()?.parse().ok()?;
    let end: u128 = f.next()?.parse().ok()?;
    Some((rc, end.checked_sub(start)? as f64 / 1e9))
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
            engine: PerfEngine.name(),
            tool: PerfEngine.tool(&target.ready),
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

fn finish(mut manifest: Manifest, record: StatRecord, stem: &Stem) -> Result<StatOutcome> {
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
    let mut files = manifest.record_stem_files(stem, &["csv"]);
    let manifest_path = manifest.write(stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(StatOutcome {
        manifest,
        manifest_path,
        files,
        warnings,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_run_line() {
        assert_eq!(
            parse_run_line("noise\ndevprof-run 1 1000000000 3500000000\n"),
            Some((1, 2.5))
        );
        assert_eq!(parse_run_line("devprof-run x 1 2"), None);
        assert_eq!(parse_run_line("devprof-run 0 5 2"), None);
    }
}
