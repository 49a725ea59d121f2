//! Capture recipes: which commands run where, in what order, and how the container is left
//! clean whatever happens. The steps every perf capture shares live here (finding the
//! target, the temporary directory, the recording window with its progress bar and
//! Ctrl-C handling, bringing perf.data home, streaming `perf script`); `cpu` and `offcpu`
//! compose them. Analysis is in `fold`/`offcpu`, files in `store`.

pub mod cpu;
pub mod offcpu;
pub mod sidecar;

use crate::docker::{ContainerShell, Docker, ExecOutput, Shell};
use crate::error::{Error, Result};
use crate::perf::{self, ContainerFacts, PerfTool};
use crate::pipe;
use crate::progress;
use crate::settings::CaptureMode;
use crate::signals::Interrupts;
use crate::store::Stem;
use crate::target::{resolve_container, select_process, ContainerInfo, ProcInfo, ProcessSelector};
use std::io::{BufRead, BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A resolved target: the container, what it offers, and the process to record. In
/// sidecar mode `shell` runs commands in the profiler container beside the target, which
/// shares its PID namespace (so pids are the same) and reaches its files through
/// /proc/<pid>/root.
pub struct Target {
    pub shell: Shell,
    pub container: ContainerInfo,
    pub facts: ContainerFacts,
    pub perf: PerfTool,
    pub process: ProcInfo,
    pub access: perf::Access,
    pub sidecar: Option<sidecar::Sidecar>,
}

impl Target {
    /// Where perf finds the target's binaries: its own root in sidecar mode.
    pub fn symfs(&self) -> Option<String> {
        self.sidecar
            .as_ref()
            .map(|_| format!("/proc/{}/root", self.process.pid))
    }

    /// How devprof reached perf, for summaries and manifests.
    pub fn mode_description(&self) -> String {
        match &self.sidecar {
            None => "exec (perf inside the container)".to_string(),
            Some(s) => format!(
                "sidecar {} from {} with {}",
                s.info.name, s.info.image, s.privileges
            ),
        }
    }

    /// Removes the sidecar, if any. Always called, whatever happened.
    pub async fn release(&self) {
        if let Some(sidecar) = &self.sidecar {
            self.shell.docker().remove_container(&sidecar.info.id).await;
        }
    }
}

/// Connects, resolves the container, and finds a perf that may record the process:
/// inside the container (exec), or in a sidecar beside it, as `mode` allows.
pub async fn find_target(
    target: &str,
    selector: &ProcessSelector,
    mode: CaptureMode,
    needs_tracefs: bool,
) -> Result<Target> {
    let docker = Docker::connect().await?;
    let containers = docker.containers().await?;
    let container = resolve_container(target, &containers)?;
    if mode != CaptureMode::Sidecar {
        match exec_target(&docker, &container, selector).await {
            Ok(found) => return Ok(found),
            Err(e @ (Error::PerfMissing { .. } | Error::PerfDenied { .. }))
                if mode == CaptureMode::Auto =>
            {
                eprintln!(
                    "note: {}; profiling from a sidecar container instead",
                    first_line(&e.to_string())
                );
            }
            Err(e) => return Err(e),
        }
    }
    sidecar::start(&docker, &container, selector, needs_tracefs).await
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

async fn exec_target(
    docker: &Docker,
    container: &ContainerInfo,
    selector: &ProcessSelector,
) -> Result<Target> {
    let shell = docker.shell(container);
    let facts = ContainerFacts::probe(&shell).await?;
    let perf = perf::find_perf(&shell, &facts).await?;
    let process = choose_process(&facts, selector, &container.name)?;
    let access = perf::check_access(&shell, &perf, &facts, process.pid).await?;
    Ok(Target {
        shell,
        container: container.clone(),
        facts,
        perf,
        process,
        access,
        sidecar: None,
    })
}

pub(crate) fn choose_process(
    facts: &ContainerFacts,
    selector: &ProcessSelector,
    container: &str,
) -> Result<ProcInfo> {
    select_process(&facts.processes, selector).map_err(|what| {
        let listing: Vec<String> = facts
            .processes
            .iter()
            .take(15)
            .map(|p| format!("{:>6}  {}", p.pid, p.cmdline))
            .collect();
        Error::ProcessNotFound {
            container: container.to_string(),
            what,
            hint: format!("processes in the container:\n{}", listing.join("\n")),
        }
    })
}

/// A private directory in the container's /tmp for perf.data and perf's pid.
pub async fn make_workdir(shell: &Shell) -> Result<String> {
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
pub async fn cleanup_workdir(shell: &Shell, workdir: &str) {
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

/// How the recording window went.
pub struct Recording {
    pub output: ExecOutput,
    /// The window perf recorded: up to Ctrl-C when there was one, else the requested
    /// length (the exec also spans perf's start-up and its writing of perf.data).
    pub window: Duration,
    /// How long the whole perf run took.
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// What to record and how to show it.
#[derive(Clone, Copy)]
pub struct Window<'a> {
    /// `perf record ... -- sleep N`
    pub argv: &'a [String],
    pub duration: Duration,
    /// The progress bar's label.
    pub label: &'a str,
    /// Printed above the bar before the window opens.
    pub notes: &'a [String],
}

/// Runs `window.argv` (a `perf record ... -- sleep N`) in the container with a progress bar
/// over `duration`. The first Ctrl-C asks perf to stop (it still writes perf.data); a
/// second one aborts, discarding `stem`'s files.
pub async fn record(
    shell: &Shell,
    workdir: &str,
    window: &Window<'_>,
    interrupts: &mut Interrupts,
    stem: &Stem,
) -> Result<Recording> {
    let Window {
        argv: record_argv,
        duration,
        label,
        notes,
    } = *window;
    let record_script = format!(
        "echo $$ > {pidfile}; exec {cmd}",
        pidfile = quote(&format!("{workdir}/perf.pid")),
        cmd = record_argv
            .iter()
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let bar = progress::capture_bar(duration, label);
    for note in notes {
        progress::note(Some(&bar), &format!("note: {note}"));
    }
    let started = Instant::now();
    let docker = shell.docker().clone();
    let container = shell.container().to_string();
    let mut task =
        tokio::spawn(async move { docker.exec(&container, &["sh", "-c", &record_script]).await });
    let mut stop_requested: Option<Instant> = None;
    let output = loop {
        tokio::select! {
            joined = &mut task => {
                break joined.map_err(|e| Error::io("perf record task", std::io::Error::other(e)))??;
            }
            _ = interrupts.next() => {
                if stop_requested.is_some() {
                    bar.abandon_with_message("aborted");
                    task.abort();
                    stem.discard(ARTIFACT_EXTENSIONS);
                    return Err(Error::Interrupted);
                }
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
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let window = stop_requested
        .map(|at| at - started)
        .unwrap_or(elapsed)
        .min(duration);
    Ok(Recording {
        output,
        window,
        elapsed,
        interrupted: stop_requested.is_some(),
    })
}

/// Every extension a capture may have written, for discarding.
pub const ARTIFACT_EXTENSIONS: &[&str] = &[
    "data",
    "folded",
    "svg",
    "script",
    "txt",
    "offcpu.folded",
    "offcpu.svg",
];

/// Asks the perf started from `workdir` to stop; it then writes perf.data and exits.
async fn stop_perf(shell: &Shell, workdir: &str) {
    let script = format!(
        "f={pidfile}; i=0; while [ ! -s \"$f\" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
         kill -INT \"$(cat \"$f\")\" 2>/dev/null",
        pidfile = quote(&format!("{workdir}/perf.pid"))
    );
    let _ = shell.sh(&script).await;
}

/// After the window: fails (discarding the stem) when perf wrote no data, explaining why.
pub async fn ensure_data_written(
    shell: &Shell,
    data_in_container: &str,
    recording: &Recording,
    stem: &Stem,
) -> Result<()> {
    let written = shell
        .run(&["test", "-s", data_in_container])
        .await
        .map(|o| o.success())
        .unwrap_or(false);
    if written {
        return Ok(());
    }
    stem.discard(&[]);
    let stderr = &recording.output.stderr;
    let container = shell.container().to_string();
    if perf::is_mlock_error(stderr) {
        return Err(Error::PerfDenied {
            container,
            detail: perf::first_error_line(stderr),
            missing: vec!["locked memory for perf's ring buffer (other perf sessions of this user hold the budget)".into()],
            fixes: vec![
                "add the capability IPC_LOCK (compose `cap_add: [IPC_LOCK]`), or raise `kernel.perf_event_mlock_kb` on the host, or run fewer perf sessions at once".into(),
            ],
        });
    }
    let facts = ContainerFacts::probe(shell).await.unwrap_or_default();
    Err(perf::failure(&container, "perf record", stderr, &facts))
}

/// Copies perf.data out of the container as `<stem>.data`.
pub async fn download_data(shell: &Shell, data_in_container: &str, stem: &Stem) -> Result<()> {
    let spinner = progress::spinner("copying perf.data out of the container");
    let data_name = stem.file_name("data");
    let source_name = Path::new(data_in_container)
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("perf.data"));
    let downloaded = shell
        .docker()
        .download(
            shell.container(),
            data_in_container,
            stem.dir(),
            move |entry| (entry == source_name).then(|| PathBuf::from(&data_name)),
        )
        .await;
    spinner.finish_and_clear();
    if downloaded.is_err() {
        stem.discard(&["data"]);
    }
    downloaded.map(|_| ())
}

/// Runs `perf script` (or any command) in the container and hands its standard output,
/// as it arrives, to `consume` on a blocking thread; `keep` also saves the text there.
/// Returns what `consume` made and perf's standard error.
pub async fn stream_script<T, F>(
    shell: &Shell,
    argv: &[String],
    keep: Option<PathBuf>,
    consume: F,
) -> Result<(T, ExecOutput)>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn BufRead) -> std::io::Result<T> + Send + 'static,
{
    let (tx, reader) = pipe::channel();
    let consuming = tokio::task::spawn_blocking(move || -> std::io::Result<T> {
        match keep {
            Some(path) => {
                let copy = BufWriter::new(std::fs::File::create(&path)?);
                consume(&mut BufReader::with_capacity(
                    1 << 20,
                    pipe::TeeReader::new(reader, copy),
                ))
            }
            None => consume(&mut BufReader::with_capacity(1 << 20, reader)),
        }
    });
    let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
    let exec = shell
        .docker()
        .exec_streaming(shell.container(), &refs, tx)
        .await;
    let made = consuming
        .await
        .map_err(|e| Error::io("analysis task", std::io::Error::other(e)))?
        .map_err(|e| Error::io("read perf script output", e))?;
    Ok((made, exec?))
}

pub fn truncate(text: &str, max: usize) -> String {
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
}
