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
    use crate::capture::record_script::RECORDER_PIDFILE;

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

    /// Runs the stop script on this host against a pidfile holding `pid_text`, with a
    /// process whose command line names the workdir (the recorder) and one that does not
    /// (a bystander); `kill` is a function that only writes down what it was asked to
    /// signal (a check gone wrong must not signal this host's processes). Returns those
    /// arguments.
    fn stop_with_pidfile(pid_text: impl Fn(u32, u32) -> String) -> (Vec<String>, u32) {
        let dir = tempfile::tempdir().unwrap();
        let workdir = dir
            .path()
            .join("devprof.test")
            .to_string_lossy()
            .into_owned();
        std::fs::create_dir(&workdir).unwrap();
        // A shell whose command line names the workdir stands in for the recorder.
        let mut recorder = std::process::Command::new("sh")
            .args(["-c", "sleep 30", "sh", &format!("{workdir}/perf.data")])
            .spawn()
            .unwrap();
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        std::fs::write(
            format!("{workdir}/{RECORDER_PIDFILE}"),
            pid_text(recorder.id(), bystander.id()),
        )
        .unwrap();
        let log = dir.path().join("kills");
        let script = format!(
            "kill() {{ printf '%s\\n' \"$*\" >> {}; }}; {}",
            quote(&log.to_string_lossy()),
            stop_script(&workdir).replace("[ $i -lt 50 ]", "[ $i -lt 3 ]")
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let recorder_pid = recorder.id();
        for child in [&mut recorder, &mut bystander] {
            let _ = child.kill();
            let _ = child.wait();
        }
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kills = std::fs::read_to_string(&log).unwrap_or_default();
        (kills.lines().map(String::from).collect(), recorder_pid)
    }

    #[test]
    fn stop_recorder_signals_only_the_recorder_the_pidfile_names() {
        let (kills, recorder) = stop_with_pidfile(|r, _| format!("{r}\n"));
        assert_eq!(kills, [format!("-INT {recorder}")]);
        // What the target's user may write there instead: nothing is signalled.
        let never = |text: &dyn Fn(u32, u32) -> String| stop_with_pidfile(text).0;
        assert_eq!(
            never(&|_, b| b.to_string()),
            Vec::<String>::new(),
            "a foreign pid"
        );
        assert_eq!(
            never(&|_, _| "-1".into()),
            Vec::<String>::new(),
            "every process"
        );
        assert_eq!(
            never(&|_, _| "0".into()),
            Vec::<String>::new(),
            "the process group"
        );
        assert_eq!(never(&|r, _| format!("0{r}")), Vec::<String>::new());
        assert_eq!(never(&|r, _| format!("{r} -1")), Vec::<String>::new());
        assert_eq!(never(&|_, _| String::new()), Vec::<String>::new());
    }

    #[test]
    fn stop_and_cleanup_share_one_check_of_the_pidfile() {
        let check = recorder_pid_fn("/tmp/devprof.x");
        assert!(stop_script("/tmp/devprof.x").starts_with(&check));
        // cleanup_workdir's script is built around the same function.
        assert!(!check.contains("kill"));
    }
}
