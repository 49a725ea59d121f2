//! A session's releases by instant: each recorder and each armed stop is sent the instant
//! it acts at (`at:NS`) ahead of time, and its container waits for it by its own clock, so
//! that the time a line takes to reach each container does not spread the windows.

use super::record_script::{recorder_pid_fn, wait_for_release, CONTROL_FIFO, WAIT_UNTIL_FN};
use crate::docker::exec::ROOT;
use crate::docker::{ContainerShell, Shell};
use crate::text::quote;
use bytes::Bytes;
use chrono::{DateTime, Local};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long before its instant a session's release line is sent (`at:NS`): more than the
/// line takes to reach a container on a loaded host (up to ~0.3 s seen here).
pub const RELEASE_LEAD: Duration = Duration::from_millis(500);

/// In a session, waits for the gate and then for the instant the recorders are released
/// at (its opening plus the lead), so that a capture without a recorder of its own (a heap
/// dump, a pprof fetch) opens its window with theirs; returns that instant. Outside a
/// session returns None at once.
pub async fn released() -> Option<Instant> {
    let opened = super::gate::wait_for_start().await?;
    let at = opened + RELEASE_LEAD;
    tokio::time::sleep_until(at.into()).await;
    Some(at)
}

/// A monotonic instant on this host's wall clock.
pub fn instant_on_wall_clock(at: Instant) -> DateTime<Local> {
    let now = Instant::now();
    let wall = Local::now();
    match at.checked_duration_since(now) {
        Some(ahead) => wall + chrono::TimeDelta::from_std(ahead).unwrap_or_default(),
        None => wall - chrono::TimeDelta::from_std(now - at).unwrap_or_default(),
    }
}

/// The release line naming an instant: `at:` and ns since the Unix epoch.
pub fn release_line(at: DateTime<Local>) -> String {
    format!("at:{}", at.timestamp_nanos_opt().unwrap_or(0))
}

/// A stop of the recorder prepared ahead: an exec already running in the container, told
/// to signal the recorder at `end`, so that stopping costs no exec start then. Dropped
/// before `end` (the window ended otherwise), it is withdrawn.
pub struct ArmedStop(tokio::task::JoinHandle<()>);

/// The line the armed stop's shell prints once it waits to be released.
const STOP_ARMED_MARKER: &str = "devprof-stop-armed";

impl ArmedStop {
    /// Arms a stop for the instant `end` will hold (set when the gate opens; never set,
    /// the stop waits until it is withdrawn). `endpoint_clock`: how far the container's
    /// clock runs ahead of this host's, added to the instant it is told. `controlled`: the
    /// recorder is a perf with a control fifo, disabled first; only then is the fifo
    /// touched (another recorder's workdir may be its user's, where root opens nothing).
    pub fn arm(
        shell: &Shell,
        workdir: &str,
        mut end: tokio::sync::watch::Receiver<Option<tokio::time::Instant>>,
        endpoint_clock: chrono::TimeDelta,
        controlled: bool,
    ) -> ArmedStop {
        let shell = shell.clone();
        let workdir = workdir.to_string();
        ArmedStop(tokio::spawn(async move {
            let mut at_end = end.clone();
            // Sent a lead ahead of the end, naming it: the container waits for the end by
            // its own clock (or the lead, where it cannot read one).
            let release = async move {
                match at_end.wait_for(Option::is_some).await.map(|v| *v) {
                    Ok(Some(at)) => {
                        let at = at.into_std();
                        tokio::time::sleep_until(at.checked_sub(RELEASE_LEAD).unwrap_or(at).into())
                            .await;
                        release_line(instant_on_wall_clock(at) + endpoint_clock)
                    }
                    _ => std::future::pending::<String>().await,
                }
            };
            let disable = if controlled {
                let ctl = quote(&format!("{workdir}/{CONTROL_FIFO}"));
                format!("[ -p {ctl} ] && echo disable 1<> {ctl}; ")
            } else {
                String::new()
            };
            let script = format!(
                "{WAIT_UNTIL_FN}{recorder}echo {STOP_ARMED_MARKER}; read _go || exit 0; \
                 {wait}{disable}recorder && kill -INT \"$p\" 2>/dev/null; exit 0",
                recorder = recorder_pid_fn(&workdir),
                wait = wait_for_release(&format!("sleep {}", RELEASE_LEAD.as_secs_f64())),
            );
            let (sink, _unread) = mpsc::channel::<Bytes>(1);
            let (running, _) = tokio::sync::oneshot::channel::<()>();
            let armed = shell
                .docker()
                .exec_streaming_released(
                    shell.container(),
                    Some(ROOT),
                    &["sh", "-c", &script],
                    STOP_ARMED_MARKER,
                    sink,
                    running,
                    release,
                    // Armed while the recorder starts: the standbys are for what follows.
                    None,
                )
                .await;
            if !armed.is_ok_and(|out| out.success()) {
                // Could not be armed: stopped the ordinary way, at the same instant.
                if let Ok(Some(at)) = end.wait_for(Option::is_some).await.map(|v| *v) {
                    tokio::time::sleep_until(at).await;
                    stop_recorder(&shell, &workdir).await;
                }
            }
        }))
    }
}

impl Drop for ArmedStop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Longest the request to stop the recorder may take.
const STOP_LIMIT: Duration = Duration::from_secs(15);

/// Asks the recorder started from `workdir` to stop; it then writes its output and exits.
/// The pidfile may not be there yet (the recorder's shell writes it first thing), and a
/// recorder just started may not handle SIGINT yet: the signal then kills the shell before
/// its `exec`, or perf before it has counted or written anything, and the window's
/// recording is lost. So the signal waits, up to 5 s, until the process catches SIGINT.
pub(super) async fn stop_recorder(shell: &Shell, workdir: &str) {
    let _ = tokio::time::timeout(STOP_LIMIT, shell.sh(&stop_script(workdir))).await;
}

/// The script `stop_recorder` runs.
pub(super) fn stop_script(workdir: &str) -> String {
    format!(
        "{recorder}{catches}i=0; while ! {{ recorder && catches_int; }} && [ $i -lt 50 ]; do \
           sleep 0.1; i=$((i+1)); done; \
         recorder && kill -INT \"$p\" 2>/dev/null",
        recorder = recorder_pid_fn(workdir),
        catches = CATCHES_INT_FN,
    )
}

/// Shell text defining `catches_int`: whether process `$p` is no longer the shell that
/// starts the recorder (that shell handles SIGINT itself, by exiting) and has a handler for
/// SIGINT (signal 2: the value 2 in the `SigCgt` mask of /proc/PID/status, in the mask's
/// last hex digit, which is checked to be one before the shell does arithmetic on it).
const CATCHES_INT_FN: &str =
    "catches_int() { read -r c < /proc/$p/comm && read -r me < /proc/$$/comm \
     && [ \"$c\" != \"$me\" ] || return 1; \
   while read -r k v; do [ \"$k\" = SigCgt: ] || continue; d=${v#\"${v%?}\"}; \
     case $d in [0-9a-f]) ;; *) return 1;; esac; \
     [ $(( 0x$d & 2 )) -ne 0 ]; return; done < /proc/$p/status; return 1; } 2>/dev/null; ";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::RECORDER_PIDFILE;

    /// Regression: a Ctrl-C right after the window opened killed perf stat before it
    /// handled SIGINT, so nothing was counted or written ("stat.csv: No such file"). The
    /// stand-in recorder here handles SIGINT only after half a second; the real signal it
    /// is sent must find its handler.
    #[test]
    fn stop_recorder_waits_until_the_recorder_handles_sigint() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir.path().join("devprof.test");
        std::fs::create_dir(&workdir).unwrap();
        let caught = dir.path().join("caught");
        // perl (no SIGINT handler of its own, unlike a shell) stands in for perf.
        let mut recorder = std::process::Command::new("perl")
            .args([
                "-e",
                "select(undef, undef, undef, 0.5); \
                 $SIG{INT} = sub { open(my $f, '>', $ARGV[1]); print $f \"caught\\n\"; exit 0 }; \
                 sleep 30;",
                &format!("{}/perf.data", workdir.display()),
                &caught.display().to_string(),
            ])
            .spawn()
            .unwrap();
        std::fs::write(
            workdir.join(RECORDER_PIDFILE),
            format!("{}\n", recorder.id()),
        )
        .unwrap();
        // Its 5 s wait cut to 2 s: were it to run out, the signal would be sent anyway.
        let stopped = std::process::Command::new("sh")
            .args([
                "-c",
                &stop_script(&workdir.to_string_lossy()).replace("[ $i -lt 50 ]", "[ $i -lt 20 ]"),
            ])
            .status()
            .unwrap();
        let waited = std::thread::spawn(move || recorder.wait().unwrap());
        let status = waited.join().unwrap();
        assert!(stopped.success());
        assert!(
            status.success(),
            "the recorder died of the signal: {status}"
        );
        assert_eq!(std::fs::read_to_string(&caught).unwrap(), "caught\n");
    }
}
