//! The steps every capture window shares, whatever the engine: a private temporary
//! directory in the container, the recording command run under a progress bar with its pid
//! in a pidfile, Ctrl-C (the first stops the recorder early, which still writes its output;
//! a second aborts), and clean-up that leaves no recorder and no file behind.

use crate::docker::exec::ROOT;
use crate::docker::{ContainerShell, ExecOutput, Shell};
use crate::engines::perf::first_error_line;
use crate::error::{Error, Result};
use crate::signals::Interrupts;
use crate::store::Stem;
use crate::text::quote;
use crate::ui::progress;
use std::time::{Duration, Instant};

/// A private directory in the container's /tmp for the recorder's output and its pid.
pub async fn make_workdir(shell: &Shell) -> Result<String> {
    let out = shell
        .run(&["mktemp", "-d", "/tmp/devprof.XXXXXXXX"])
        .await?;
    let dir = out.stdout.trim().to_string();
    if !out.success() || !dir.starts_with("/tmp/devprof.") {
        return Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "create a temporary directory in /tmp".into(),
            detail: first_error_line(&out.stderr),
        });
    }
    Ok(dir)
}

/// Stops a recorder that may still run from `workdir` and removes the directory.
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

/// How the recording window went.
pub struct Recording {
    pub output: ExecOutput,
    /// The window recorded: up to Ctrl-C when there was one, else the requested length
    /// (the exec also spans the recorder's start-up and its writing of its output).
    pub window: Duration,
    /// How long the whole recorder run took.
    pub elapsed: Duration,
    pub interrupted: bool,
}

/// What to record and how to show it.
#[derive(Clone, Copy)]
pub struct Window<'a> {
    /// The recorder's command line, e.g. `perf record ... -- sleep N`.
    pub argv: &'a [String],
    pub duration: Duration,
    /// The progress bar's label.
    pub label: &'a str,
    /// Printed above the bar before the window opens.
    pub notes: &'a [String],
    /// Who runs the recorder (`uid:gid`); None: root.
    pub user: Option<&'a str>,
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
    "html",
];

/// Runs `window.argv` in the container with a progress bar over `duration`. The first
/// Ctrl-C asks the recorder to stop (it still writes its output); a second one aborts,
/// discarding `stem`'s files.
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
        user,
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
    let user = user.unwrap_or(ROOT).to_string();
    let mut task = tokio::spawn(async move {
        docker
            .exec_as(&container, Some(&user), &["sh", "-c", &record_script])
            .await
    });
    let mut stop_requested: Option<Instant> = None;
    let output = loop {
        tokio::select! {
            joined = &mut task => {
                break joined.map_err(|e| Error::io("recorder task", std::io::Error::other(e)))??;
            }
            _ = interrupts.next() => {
                if stop_requested.is_some() {
                    bar.abandon_with_message("aborted");
                    task.abort();
                    stem.discard(ARTIFACT_EXTENSIONS);
                    return Err(Error::Interrupted);
                }
                stop_requested = Some(Instant::now());
                bar.set_message("stopping the recorder (Ctrl-C again aborts)");
                stop_recorder(shell, workdir).await;
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

/// Asks the recorder started from `workdir` to stop; it then writes its output and exits.
async fn stop_recorder(shell: &Shell, workdir: &str) {
    let script = format!(
        "f={pidfile}; i=0; while [ ! -s \"$f\" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; \
         kill -INT \"$(cat \"$f\")\" 2>/dev/null",
        pidfile = quote(&format!("{workdir}/perf.pid"))
    );
    let _ = shell.sh(&script).await;
}
