//! The CPU capture recipe: which commands run where, in what order, and how the container
//! is left clean whatever happens. Analysis is in `fold`/`render`, files in `store`.

use crate::docker::{ContainerShell, Docker, Shell};
use crate::error::{Error, Result};
use crate::fold::{self, Folded};
use crate::perf::{self, ContainerFacts, PerfTool};
use crate::pipe;
use crate::progress;
use crate::render::{self, SvgSpec};
use crate::settings::CpuSettings;
use crate::signals::Interrupts;
use crate::store::{self, ContainerRecord, FileRecord, Manifest, PerfRecord, ProcessRecord, Stem};
use crate::target::{resolve_container, select_process, ContainerInfo, ProcInfo};
use chrono::Local;
use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Fewer samples than this and the flamegraph is mostly noise.
pub const LOW_SAMPLE_WARNING: u64 = 1000;
/// Above this share of unnamed frames the flamegraph is mostly hex.
pub const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// What a finished capture produced.
#[derive(Debug)]
pub struct CpuOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
}

/// Everything decided before the capture window opens.
struct Plan {
    container: ContainerInfo,
    process: ProcInfo,
    perf: PerfTool,
    event: String,
    notes: Vec<String>,
}

pub async fn run_cpu(settings: &CpuSettings, interrupts: &mut Interrupts) -> Result<CpuOutcome> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(&settings.target, &containers)?;
    let shell = docker.shell(&container);
    let plan = prepare(&shell, container, settings).await?;
    if interrupts.pending() {
        return Err(Error::Interrupted);
    }

    let workdir = make_workdir(&shell).await?;
    let result = record_and_analyse(&shell, &plan, &workdir, settings, interrupts).await;
    // Always, success or not: no perf process and no temp file stay in the container.
    cleanup_workdir(&shell, &workdir).await;
    result
}

async fn prepare(shell: &Shell, container: ContainerInfo, settings: &CpuSettings) -> Result<Plan> {
    let facts = ContainerFacts::probe(shell).await?;
    let perf = perf::find_perf(shell, &facts).await?;
    let process = select_process(&facts.processes, &settings.process).map_err(|what| {
        let listing: Vec<String> = facts
            .processes
            .iter()
            .take(15)
            .map(|p| format!("{:>6}  {}", p.pid, p.cmdline))
            .collect();
        Error::ProcessNotFound {
            container: container.name.clone(),
            what,
            hint: format!("processes in the container:\n{}", listing.join("\n")),
        }
    })?;
    let access = perf::check_access(shell, &perf, &facts, process.pid).await?;
    Ok(Plan {
        container,
        process,
        perf,
        event: access.event,
        notes: access.notes,
    })
}

/// A private directory in the container's /tmp for perf.data and perf's pid.
async fn make_workdir(shell: &Shell) -> Result<String> {
    let out = shell
        .run(&["mktemp", "-d", "/tmp/devprof.XXXXXXXX"])
        .await?;
    let dir = out.stdout.trim().to_string();
    if !out.success() || !dir.starts_with("/tmp/devprof.") {
        return Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "create a temporary directory in /tmp".into(),
            detail: perf::first_error_line(&out.stderr),
        });
    }
    Ok(dir)
}

/// Stops a perf that may still run from `workdir` and removes the directory.
async fn cleanup_workdir(shell: &Shell, workdir: &str) {
    let script = format!(
        "p=$(cat {wd}/perf.pid 2>/dev/null); \
         if [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null; then \
           kill -INT \"$p\" 2>/dev/null; i=0; \
           while kill -0 \"$p\" 2>/dev/null && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; \
           kill -KILL \"$p\" 2>/dev/null; \
         fi; rm -rf {wd}",
        wd = quote(workdir)
    );
    if let Err(e) = shell.sh(&script).await {
        eprintln!(
            "warning: could not clean {workdir} in {}: {e}",
            shell.container()
        );
    }
}

/// Single-quotes a word for sh.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

async fn record_and_analyse(
    shell: &Shell,
    plan: &Plan,
    workdir: &str,
    settings: &CpuSettings,
    interrupts: &mut Interrupts,
) -> Result<CpuOutcome> {
    let container = &plan.container.name;
    let dir = store::container_dir(&settings.output_dir, container);
    let stem = Stem::reserve(&dir, "perf", Local::now())?;
    let data_in_container = format!("{workdir}/perf.data");
    let mut timings = BTreeMap::new();

    // ---- record ----
    let mut record_argv: Vec<String> = vec![
        plan.perf.path.clone(),
        "record".into(),
        "-g".into(),
        "--call-graph".into(),
        settings.call_graph.perf_arg().into(),
        "-F".into(),
        settings.frequency.to_string(),
        "-e".into(),
        plan.event.clone(),
    ];
    if plan.perf.supports_zstd {
        record_argv.push("-z".into());
    }
    record_argv.extend([
        "-p".into(),
        plan.process.pid.to_string(),
        "-o".into(),
        data_in_container.clone(),
        "--".into(),
        "sleep".into(),
        format!("{}", settings.duration.as_secs_f64()),
    ]);
    let record_script = format!(
        "echo $$ > {pidfile}; exec {cmd}",
        pidfile = quote(&format!("{workdir}/perf.pid")),
        cmd = record_argv
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );

    let bar = progress::capture_bar(
        settings.duration,
        &format!(
            "recording {container} ({} Hz {})",
            settings.frequency, plan.event
        ),
    );
    for note in &plan.notes {
        progress::note(Some(&bar), &format!("note: {note}"));
    }
    let started = Instant::now();
    let docker = shell.docker().clone();
    let record_container = container.clone();
    let mut record = tokio::spawn(async move {
        docker
            .exec(&record_container, &["sh", "-c", &record_script])
            .await
    });
    let mut interrupted = false;
    let mut stop_requested: Option<Instant> = None;
    let record_out = loop {
        tokio::select! {
            joined = &mut record => {
                break joined.map_err(|e| Error::io("perf record task", std::io::Error::other(e)))??;
            }
            _ = interrupts.next() => {
                if interrupted {
                    bar.abandon_with_message("aborted");
                    record.abort();
                    stem.discard(&["data", "folded", "svg", "script"]);
                    return Err(Error::Interrupted);
                }
                interrupted = true;
                stop_requested = Some(Instant::now());
                bar.set_message("stopping perf (Ctrl-C again aborts)");
                stop_perf(shell, workdir).await;
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                let tenths = (started.elapsed().as_millis() / 100) as u64;
                bar.set_position(tenths.min(bar.length().unwrap_or(tenths)));
            }
        }
    };
    // The window perf recorded: up to Ctrl-C when there was one, else the requested
    // length (the exec also spans perf's start-up and its writing of perf.data).
    let recorded_for = stop_requested
        .map(|at| at - started)
        .unwrap_or_else(|| started.elapsed())
        .min(settings.duration);
    bar.finish_and_clear();
    timings.insert("record".to_string(), started.elapsed().as_millis() as u64);

    let report = perf::parse_record_report(&record_out.stderr);
    let data_written = shell
        .run(&["test", "-s", &data_in_container])
        .await
        .map(|o| o.success())
        .unwrap_or(false);
    if !data_written {
        stem.discard(&[]);
        let detail = perf::first_error_line(&record_out.stderr);
        return Err(if perf::is_permission_error(&record_out.stderr) {
            let facts = ContainerFacts::probe(shell).await.unwrap_or_default();
            let denial = perf::diagnose_denial(&facts);
            Error::PerfDenied {
                container: container.clone(),
                detail,
                missing: denial.missing,
                fixes: denial.fixes,
            }
        } else {
            Error::PerfFailed {
                container: container.clone(),
                step: "perf record".into(),
                detail,
            }
        });
    }

    // ---- bring perf.data home ----
    let spinner = progress::spinner("copying perf.data out of the container");
    let t = Instant::now();
    let data_name = stem.file_name("data");
    let downloaded = shell
        .docker()
        .download(container, &data_in_container, stem.dir(), move |entry| {
            (entry == std::path::Path::new("perf.data")).then(|| PathBuf::from(&data_name))
        })
        .await;
    spinner.finish_and_clear();
    if let Err(e) = downloaded {
        stem.discard(&["data"]);
        return Err(e);
    }
    timings.insert("download".to_string(), t.elapsed().as_millis() as u64);

    // ---- perf script, streamed into the folder ----
    let t = Instant::now();
    let spinner = progress::spinner("symbolizing and folding stacks (perf script)");
    let script_argv: Vec<String> = vec![
        plan.perf.path.clone(),
        "script".into(),
        "-i".into(),
        data_in_container.clone(),
        "-F".into(),
        "comm,pid,tid,time,event,ip,sym,dso".into(),
        if settings.inline {
            "--inline"
        } else {
            "--no-inline"
        }
        .into(),
    ];
    let folded = tokio::select! {
        folded = stream_script(shell, &script_argv, settings.keep_script.then(|| stem.path("script"))) => folded,
        _ = interrupts.next() => {
            spinner.finish_and_clear();
            // perf.data is already home: keep it, with a manifest saying what happened.
            let mut manifest = base_manifest(plan, settings, recorded_for, interrupted);
            manifest.notes.push("interrupted while folding; re-run `perf script` on the .data file".into());
            manifest.files.push(FileRecord { name: stem.file_name("data"), bytes: store::file_size(&stem.path("data")) });
            let _ = std::fs::remove_file(stem.path("script"));
            manifest.write(&stem)?;
            return Err(Error::Interrupted);
        }
    };
    spinner.finish_and_clear();
    let (folded, script_stderr) = match folded {
        Ok(f) => f,
        Err(e) => {
            stem.discard(&["data", "script"]);
            return Err(e);
        }
    };
    timings.insert("fold".to_string(), t.elapsed().as_millis() as u64);

    let samples = folded.total();
    if samples == 0 {
        stem.discard(&["data", "script"]);
        return Err(Error::NoSamples {
            container: container.clone(),
            reason: match report.samples {
                Some(0) => Some("perf recorded 0 samples".into()),
                Some(n) => Some(format!("perf recorded {n} samples but none had a stack; {}", perf::first_error_line(&script_stderr))),
                None => None,
            },
            hint: format!(
                "pid {} ({}) may be idle or may have exited; check it is busy, or pick another process with --process/--pid",
                plan.process.pid, plan.process.cmdline
            ),
        });
    }

    // ---- write artifacts ----
    let t = Instant::now();
    write_folded(&folded, &stem)?;
    let spec = SvgSpec::cpu(
        format!(
            "{container} — CPU ({}) — {} — {} samples",
            plan.event,
            crate::duration::human(recorded_for),
            thousands(samples)
        ),
        Some(format!(
            "pid {} {} · {} Hz · {} call graphs · {}",
            plan.process.pid,
            truncate(&plan.process.cmdline, 80),
            settings.frequency,
            settings.call_graph.perf_arg(),
            Local::now().format("%Y-%m-%d %H:%M:%S")
        )),
    );
    let svg_path = stem.path("svg");
    let svg_file = std::fs::File::create(&svg_path)
        .map_err(|e| Error::io(format!("create {}", svg_path.display()), e))?;
    render::write_svg(&folded, &spec, BufWriter::new(svg_file))
        .map_err(|e| Error::io(format!("write {}", svg_path.display()), e))?;
    timings.insert("render".to_string(), t.elapsed().as_millis() as u64);

    let unsymbolized = folded.unsymbolized_share();
    let mut manifest = base_manifest(plan, settings, recorded_for, interrupted);
    manifest.sample_count = samples;
    manifest.perf_reported_samples = report.samples;
    manifest.lost_chunks = report.lost_chunks;
    manifest.unsymbolized_share = (unsymbolized * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms = timings;
    manifest.perf.record_command = record_argv;

    let mut extensions = vec!["data", "folded", "svg"];
    if settings.keep_script {
        extensions.push("script");
    }
    let mut files = Vec::new();
    for ext in extensions {
        let path = stem.path(ext);
        let bytes = store::file_size(&path);
        manifest.files.push(FileRecord {
            name: stem.file_name(ext),
            bytes,
        });
        files.push((path, bytes));
    }

    let mut warnings = Vec::new();
    if samples < LOW_SAMPLE_WARNING {
        warnings.push(format!(
            "only {samples} samples: the target was mostly idle. Put load on it while recording, record longer, or raise --frequency."
        ));
    }
    if unsymbolized > UNSYMBOLIZED_WARNING {
        warnings.push(format!(
            "{:.0}% of frames are unsymbolized: the binary lacks symbols/debuginfo or frame pointers. \
             Build with debug info and `-C force-frame-pointers=yes` (or `devprof build`), don't strip it, \
             or record with --call-graph dwarf.",
            unsymbolized * 100.0
        ));
    }
    if let Some(lost) = report.lost_chunks.filter(|l| *l > 0) {
        warnings.push(format!(
            "perf lost {lost} chunks of samples; lower --frequency"
        ));
    }
    manifest.notes.extend(warnings.iter().cloned());

    let manifest_path = manifest.write(&stem)?;
    let manifest_bytes = store::file_size(&manifest_path);
    files.push((manifest_path.clone(), manifest_bytes));
    Ok(CpuOutcome {
        manifest,
        manifest_path,
        files,
        warnings,
    })
}

/// Asks the perf started from `workdir` to stop; it then writes perf.data and exits.
async fn stop_perf(shell: &Shell, workdir: &str) {
    let script = format!(
        "f={pidfile}; i=0; while [ ! -s \"$f\" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
         kill -INT \"$(cat \"$f\")\" 2>/dev/null",
        pidfile = quote(&format!("{workdir}/perf.pid"))
    );
    let _ = shell.sh(&script).await;
}

/// Runs `perf script` and folds its output as it arrives, optionally teeing the text.
async fn stream_script(
    shell: &Shell,
    argv: &[String],
    keep: Option<PathBuf>,
) -> Result<(Folded, String)> {
    let (tx, reader) = pipe::channel();
    let folding = tokio::task::spawn_blocking(move || -> std::io::Result<Folded> {
        match keep {
            Some(path) => {
                let copy = BufWriter::new(std::fs::File::create(&path)?);
                fold::fold_perf_script(BufReader::with_capacity(
                    1 << 20,
                    pipe::TeeReader::new(reader, copy),
                ))
            }
            None => fold::fold_perf_script(BufReader::with_capacity(1 << 20, reader)),
        }
    });
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    let exec = shell
        .docker()
        .exec_streaming(shell.container(), &refs, tx)
        .await;
    let folded = folding
        .await
        .map_err(|e| Error::io("fold task", std::io::Error::other(e)))?
        .map_err(|e| Error::io("fold perf script output", e))?;
    let out = exec?;
    if !out.success() && folded.is_empty() {
        return Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "perf script".into(),
            detail: perf::first_error_line(&out.stderr),
        });
    }
    Ok((folded, out.stderr))
}

fn write_folded(folded: &Folded, stem: &Stem) -> Result<()> {
    let path = stem.path("folded");
    let file = std::fs::File::create(&path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    folded
        .write_to(BufWriter::new(file))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

fn base_manifest(
    plan: &Plan,
    settings: &CpuSettings,
    recorded_for: Duration,
    interrupted: bool,
) -> Manifest {
    Manifest {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: "cpu".into(),
        created: Local::now().to_rfc3339(),
        target: settings.target.clone(),
        container: ContainerRecord {
            name: plan.container.name.clone(),
            id: plan.container.id.clone(),
            image: plan.container.image.clone(),
        },
        process: ProcessRecord {
            pid: plan.process.pid,
            command_line: plan.process.cmdline.clone(),
        },
        perf: PerfRecord {
            path: plan.perf.path.clone(),
            version: plan.perf.version.clone(),
            record_command: Vec::new(),
        },
        events: vec![plan.event.clone()],
        frequency_hz: settings.frequency,
        call_graph: settings.call_graph.perf_arg().into(),
        duration_requested_s: settings.duration.as_secs_f64(),
        duration_recorded_s: (recorded_for.as_secs_f64() * 1000.0).round() / 1000.0,
        interrupted,
        notes: plan.notes.clone(),
        ..Default::default()
    }
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_sh() {
        assert_eq!(quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(4958), "4,958");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}
