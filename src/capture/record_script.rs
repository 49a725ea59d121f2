//! The shell script a recorder runs in its container: it writes the pidfile, says it is
//! ready, waits to be released on its stdin, says it starts, and records. A perf recorder
//! (alone or in a session) is started before the release with its events disabled and enabled by it
//! (`perf record -D -1 --control fifo:...`), so that its start-up is not in the window.

use crate::text::quote;
use std::time::Duration;

/// The recorder's pidfile in a capture's workdir, written by the shell that becomes the
/// recorder; the window's stop and the clean-up signal only the pid it names.
pub const RECORDER_PIDFILE: &str = "recorder.pid";

/// The line the record script prints right before it becomes the recorder (or enables it):
/// its arrival is the start of the window as seen from here, outside a session.
pub const START_MARKER: &str = "devprof-recorder-started";

/// The line the record script prints once it runs and waits to be released.
pub const READY_MARKER: &str = "devprof-recorder-ready";

/// The line a controlled start prints right before `READY_MARKER`: perf is up with its
/// events opened on the target (disabled), so the rights to record it are proven. The
/// ordinary start says it is ready before perf runs, and prints no such line.
pub const EVENTS_OPEN_MARKER: &str = "devprof-recorder-events-open";

/// A shell function: `wait_until NS` sleeps until NS (ns since the Unix epoch) by the
/// container's clock, which is its kernel's (this host's, for a local engine). It fails,
/// without waiting, when `date` gives no nanoseconds (busybox) or NS is more than 5 s
/// away (another host's clock): the caller then goes on at once. A session sends each
/// recorder and armed stop its instant ahead (`at:NS`), so that how long the line takes
/// to reach each container does not spread their starts and stops.
pub const WAIT_UNTIL_FN: &str = "wait_until() { n=$(date +%s%N 2>/dev/null); \
     case \"$n\" in ''|*[!0-9]*) return 1;; esac; d=$(($1 - n)); [ $d -gt 0 ] || return 0; \
     [ $d -lt 5000000000 ] || return 1; \
     sleep \"$(printf '%d.%09d' $((d / 1000000000)) $((d % 1000000000)))\" 2>/dev/null; }; ";

/// After the release line is read into `$_go`: waits for its instant when it names one,
/// running `otherwise` where the container cannot (`true`: go on at once).
pub fn wait_for_release(otherwise: &str) -> String {
    format!("case \"$_go\" in at:*[!0-9]*) ;; at:?*) wait_until \"${{_go#at:}}\" || {otherwise};; esac; ")
}

/// Files of a controlled start in the workdir: perf's control and ack fifos, its stderr.
pub const CONTROL_FIFO: &str = "perf.ctl";
const ACK_FIFO: &str = "perf.ack";
const RECORDER_STDERR: &str = "perf.err";
/// Made by a timed script's timer once its sleep is over.
const TIMER_DONE: &str = "perf.timer-done";

/// How long a controlled perf's `sleep` runs past the window in a session: it starts
/// before the gate, and the session's armed stop (or the deadlines) end it at the
/// window's end.
pub const CONTROLLED_SLACK: Duration = Duration::from_secs(600);

/// The same alone, where the window opens as soon as perf is ready: its start-up, with
/// room. A recorder left behind in a container paused past devprof's wait ends by itself
/// this long after its window would have.
pub const ALONE_SLACK: Duration = Duration::from_secs(10);

/// `perf record ... -- sleep SECONDS` started with its events disabled (`-D -1`) and a
/// control fifo (`--control fifo:CTL,ACK`), its sleep long enough to outlast the wait at
/// the gate; None when `argv` does not have that shape.
pub fn controlled_argv(argv: &[String], workdir: &str, duration: Duration) -> Option<Vec<String>> {
    controlled_argv_with_slack(argv, workdir, duration, CONTROLLED_SLACK)
}

/// `controlled_argv` with its `sleep` running `slack` past the window.
pub fn controlled_argv_with_slack(
    argv: &[String],
    workdir: &str,
    duration: Duration,
    slack: Duration,
) -> Option<Vec<String>> {
    let record = argv.iter().position(|a| a == "record")?;
    let n = argv.len();
    if n < record + 4 || argv[n - 3] != "--" || argv[n - 2] != "sleep" {
        return None;
    }
    let mut out = argv[..=record].to_vec();
    out.extend([
        "-D".to_string(),
        "-1".to_string(),
        "--control".to_string(),
        format!("fifo:{workdir}/{CONTROL_FIFO},{workdir}/{ACK_FIFO}"),
    ]);
    out.extend_from_slice(&argv[record + 1..n - 1]);
    out.push(format!("{}", (duration + slack).as_secs_f64()));
    Some(out)
}

/// A recorder's start, as a window asks for it: the command and its workdir, the window,
/// and how the recorder is released and stopped.
pub struct RecorderStart<'a> {
    pub argv: &'a [String],
    pub workdir: &'a str,
    pub duration: Duration,
    /// perf started before the release with its events disabled (`Window::enable_on_release`).
    pub enable_on_release: bool,
    pub until_command_ends: bool,
    pub stops_itself: bool,
    /// Released by a session's gate with the other captures, not alone.
    pub in_session: bool,
}

/// How a recorder is started: the script its exec runs (`sh -c SCRIPT`), whether perf in
/// it is controlled (enabled by the release), and whether its own timer ends the window.
pub struct RecorderPlan {
    pub script: String,
    pub controlled: bool,
    pub timed: bool,
}

impl RecorderStart<'_> {
    /// Started with its events disabled and enabled by the release, so perf's start-up
    /// (reading the process's maps, opening its events: up to seconds on a loaded host)
    /// is paid before the window opens: in a session, and alone too. The same start always
    /// makes the same script (a recorder primed ahead is taken by its script).
    pub fn plan(&self) -> RecorderPlan {
        let controlled = (self.enable_on_release && !self.until_command_ends)
            .then(|| {
                let slack = if self.in_session {
                    CONTROLLED_SLACK
                } else {
                    ALONE_SLACK
                };
                controlled_argv_with_slack(self.argv, self.workdir, self.duration, slack)
            })
            .flatten();
        let timed = controlled.is_some() && !self.in_session && !self.stops_itself;
        RecorderPlan {
            script: record_script(
                self.argv,
                controlled.as_deref(),
                self.workdir,
                timed.then_some(self.duration),
            ),
            controlled: controlled.is_some(),
            timed,
        }
    }
}

impl RecorderPlan {
    /// The exec's command line.
    pub fn exec_argv(&self) -> [&str; 3] {
        ["sh", "-c", &self.script]
    }
}

/// The shell script that runs the recorder: it writes the pidfile, says it is ready, waits
/// for the release on its stdin, says it starts, and records. With a controlled perf, perf
/// is started first and is ready (its events opened, disabled) before the script says so;
/// the release enables them, and where `stop_after` is given the script itself disables
/// and stops perf that long after (alone: no exec is armed for the stop, which would start
/// while perf starts up and take its CPU). Where the fifos cannot be made, the ordinary way.
pub fn record_script(
    argv: &[String],
    controlled: Option<&[String]>,
    workdir: &str,
    stop_after: Option<Duration>,
) -> String {
    let join = |argv: &[String]| argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
    let pidfile = quote(&format!("{workdir}/{RECORDER_PIDFILE}"));
    let ordinary = format!(
        "{WAIT_UNTIL_FN}echo $$ > {pidfile}; echo {READY_MARKER}; read _go || exit 0; \
         {wait}echo {START_MARKER}; exec {cmd}",
        wait = wait_for_release("true"),
        cmd = join(argv)
    );
    let Some(controlled) = controlled else {
        return ordinary;
    };
    let (ctl, ack, err) = (
        quote(&format!("{workdir}/{CONTROL_FIFO}")),
        quote(&format!("{workdir}/{ACK_FIFO}")),
        quote(&format!("{workdir}/{RECORDER_STDERR}")),
    );
    // Readiness is perf's own "Events disabled" line, read with shell builtins only; a
    // perf that exits before it is ready ends the script with its status and its words.
    // The fifo is opened read-write to enable: that never blocks, even if perf is gone.
    // The stop is a SIGINT; perf then ends its `sleep` with SIGTERM and exits with its
    // status (143), or re-raises the SIGINT (130), once its output is written: that is
    // how this recorder ends, not a failure (its output is checked after).
    // The timer is a subshell with no output of its own (an open stdout would hold the
    // exec open). Only it signals its sleep, with SIGKILL (a caught signal sent to a child
    // just forked can be lost), when told to stop by a TERM: the script sends that only
    // while the timer has not marked itself done, so while it is still its unreaped child
    // (`wait $p` reaps any child that ended): never a stale pid, never a sleep left behind.
    // perf is signalled as the armed stop does, only while its pid still names the workdir.
    let (timer, timer_end) = match stop_after {
        Some(after) => {
            let done = quote(&format!("{workdir}/{TIMER_DONE}"));
            (
                format!(
                    "( s=; x=; trap 'x=1; [ -z \"$s\" ] || kill -KILL \"$s\" 2>/dev/null' TERM; \
                       sleep {secs} & s=$!; [ -z \"$x\" ] || kill -KILL \"$s\" 2>/dev/null; \
                       wait \"$s\"; r=$?; [ -z \"$x\" ] || exit 0; : > {done}; \
                       {recorder}[ $r -eq 0 ] && {{ echo disable 1<> {ctl}; \
                       recorder && kill -INT \"$p\" 2>/dev/null; }} ) \
                       </dev/null >/dev/null 2>&1 & t=$!; ",
                    secs = after.as_secs_f64(),
                    recorder = recorder_pid_fn(workdir),
                ),
                format!("[ -e {done} ] || {{ kill $t 2>/dev/null; wait $t; }}; "),
            )
        }
        None => (String::new(), String::new()),
    };
    format!(
        "{WAIT_UNTIL_FN}rm -f {ctl} {ack} {err}; \
         if ! mkfifo -m 600 {ctl} {ack} 2>/dev/null; then {ordinary}; fi; \
         {cmd} 2>{err} & p=$!; echo $p > {pidfile}; \
         ready() {{ while IFS= read -r l; do case \"$l\" in 'Events disabled'*) return 0;; esac; done < {err}; return 1; }}; \
         i=0; until ready; do \
           if ! kill -0 $p 2>/dev/null; then wait $p; rc=$?; cat {err} >&2; exit $rc; fi; \
           i=$((i+1)); [ $i -lt 3000 ] || break; sleep 0.02; \
         done; \
         echo {EVENTS_OPEN_MARKER}; echo {READY_MARKER}; \
         read _go || {{ kill -INT $p; wait $p; exit 0; }}; \
         {wait}echo enable 1<> {ctl}; {timer}echo {START_MARKER}; \
         wait $p; rc=$?; {timer_end}cat {err} >&2; case $rc in 130|143) rc=0;; esac; exit $rc",
        wait = wait_for_release("true"),
        cmd = join(controlled)
    )
}

/// perf's stderr without the lines a controlled start makes it print.
pub fn without_control_lines(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| {
            !matches!(
                l.trim(),
                "Events disabled" | "Events enabled" | "Terminated"
            )
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Shell text that sets `$p` to the recorder's pid from `WD/recorder.pid`, and succeeds, only
/// when the pidfile is a regular file holding a positive integer, the pid is not this
/// shell's, and that process's command line names the workdir (`WD/`): the recorder
/// writes there, a process that reused the pid does not. The pidfile may be written by
/// the target's user (async-profiler runs as the JVM's user), so nothing else it says is
/// taken: never `-1`, `0` or a foreign pid.
pub(super) fn recorder_pid_fn(workdir: &str) -> String {
    format!(
        "recorder() {{ p=; f={pidfile}; [ -f \"$f\" ] && [ ! -L \"$f\" ] || return 1; \
           {{ read -r p < \"$f\"; }} 2>/dev/null; \
           case \"$p\" in ''|0*|*[!0-9]*) return 1;; esac; \
           [ ${{#p}} -le 9 ] && [ \"$p\" != $$ ] || return 1; \
           case \"$(tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null)\" in *{wd_slash}*) return 0;; esac; \
           return 1; }}; ",
        pidfile = quote(&format!("{workdir}/{RECORDER_PIDFILE}")),
        wd_slash = quote(&format!("{workdir}/")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_controlled_perf_starts_disabled_with_a_control_fifo_and_outlasts_the_gate() {
        let argv = strings(&[
            "/usr/bin/perf",
            "record",
            "-F",
            "99",
            "-g",
            "-p",
            "6",
            "-o",
            "/tmp/d/perf.data",
            "--",
            "sleep",
            "5",
        ]);
        let controlled = controlled_argv(&argv, "/tmp/d", Duration::from_secs(5)).unwrap();
        assert_eq!(
            controlled,
            strings(&[
                "/usr/bin/perf",
                "record",
                "-D",
                "-1",
                "--control",
                "fifo:/tmp/d/perf.ctl,/tmp/d/perf.ack",
                "-F",
                "99",
                "-g",
                "-p",
                "6",
                "-o",
                "/tmp/d/perf.data",
                "--",
                "sleep",
                "605",
            ])
        );
        // Other shapes run the ordinary way.
        let pyspy = strings(&[
            "py-spy",
            "record",
            "-o",
            "x",
            "--duration",
            "5",
            "--pid",
            "7",
        ]);
        assert_eq!(
            controlled_argv(&pyspy, "/tmp/d", Duration::from_secs(5)),
            None
        );
        assert_eq!(
            controlled_argv(&strings(&["perf", "record"]), "/d", Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_controlled_start_hides_only_the_lines_it_makes_perf_print() {
        let stderr =
            "Events disabled\nEvents enabled\n[ perf record: Woken up 2 times to write data ]\n";
        assert_eq!(
            without_control_lines(stderr),
            "[ perf record: Woken up 2 times to write data ]\n"
        );
    }

    /// The controlled script on this host, with a stand-in for perf that prints what perf
    /// prints, waits for `enable` on its control fifo and exits when signalled: ready only
    /// once "Events disabled" is there, enabled on release, perf's words on stderr after.
    #[test]
    fn the_controlled_script_is_ready_once_perf_is_and_enables_it_on_release() {
        use std::io::{BufRead, BufReader, Write};
        let dir = tempfile::tempdir().unwrap();
        let wd = dir.path().to_str().unwrap().to_string();
        let argv = fake_perf(
            dir.path(),
            "ctl=${5#fifo:}; ctl=${ctl%%,*}\n\
             sleep 0.3; echo 'Events disabled' >&2\n\
             read cmd < \"$ctl\"; echo \"got $cmd\" > \"$(dirname \"$ctl\")/enabled\"\n\
             echo 'Events enabled' >&2; echo '[ perf record: Captured and wrote 0.1 MB ]' >&2\n\
             exit 0\n",
        );
        let controlled = controlled_argv(&argv, &wd, Duration::from_secs(5)).unwrap();
        let script = record_script(&argv, Some(&controlled), &wd, None);
        // Under a deadline: a script that never says it is ready fails the test, not CI.
        let mut child = std::process::Command::new("timeout")
            .args(["30", "sh", "-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), EVENTS_OPEN_MARKER);
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), READY_MARKER);
        assert!(
            !dir.path().join("enabled").exists(),
            "enabled before the release"
        );
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), START_MARKER);
        let done = child.wait_with_output().unwrap();
        assert!(done.status.success());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("enabled"))
                .unwrap()
                .trim(),
            "got enable"
        );
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(stderr.contains("Captured and wrote"), "{stderr}");
        let pid: u32 = std::fs::read_to_string(dir.path().join(RECORDER_PIDFILE))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(pid > 0);
    }

    /// A stand-in for perf in `dir`, running `body` in sh; the argv that records with it.
    fn fake_perf(dir: &std::path::Path, body: &str) -> Vec<String> {
        let fake = dir.join("fake-perf");
        std::fs::write(&fake, format!("#!/bin/sh\n{body}")).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&fake)
            .status()
            .unwrap();
        strings(&[
            fake.to_str().unwrap(),
            "record",
            "-p",
            "1",
            "--",
            "sleep",
            "5",
        ])
    }

    /// A stand-in perf for the timed script: ready at once, it notes each command its
    /// control fifo brings and exits after `disable`, or right after `enable` when
    /// `exit_at_enable` (a perf stopped before the window is over).
    fn timed_fake_perf(dir: &std::path::Path, exit_at_enable: bool) -> Vec<String> {
        let after_enable = if exit_at_enable {
            "exit 0"
        } else {
            "read cmd <&3; echo \"$cmd\" >> \"$d/commands\""
        };
        fake_perf(
            dir,
            &format!(
                "ctl=${{5#fifo:}}; ctl=${{ctl%%,*}}; d=$(dirname \"$ctl\")\n\
                 exec 3<> \"$ctl\"; echo 'Events disabled' >&2\n\
                 read cmd <&3; echo \"$cmd\" >> \"$d/commands\"\n\
                 {after_enable}\n"
            ),
        )
    }

    /// Runs the timed script under a deadline (a script held open by its timer fails the
    /// test), released at once; its exit status and the commands perf was sent.
    fn run_timed(dir: &std::path::Path, argv: &[String], stop_after: Duration) -> (bool, String) {
        use std::io::Write;
        let wd = dir.to_str().unwrap();
        let controlled = controlled_argv(argv, wd, Duration::from_secs(5)).unwrap();
        let script = record_script(argv, Some(&controlled), wd, Some(stop_after));
        let mut child = std::process::Command::new("timeout")
            .args(["10", "sh", "-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let done = child.wait_with_output().unwrap();
        let commands = std::fs::read_to_string(dir.join("commands")).unwrap_or_default();
        (done.status.success(), commands)
    }

    /// Whether a `sleep SECONDS` runs on this host (the timer's, left behind).
    fn sleep_running(seconds: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|c| c == format!("sleep\0{seconds}\0").as_bytes())
        })
    }

    /// Alone, no exec is armed to stop a controlled perf: its script disables and stops
    /// it once the window is over, and a perf that ends first takes the timer with it.
    #[test]
    fn a_timed_script_disables_perf_after_the_window_and_leaves_no_timer() {
        let dir = tempfile::tempdir().unwrap();
        let argv = timed_fake_perf(dir.path(), false);
        let (ok, commands) = run_timed(dir.path(), &argv, Duration::from_millis(300));
        assert!(ok);
        assert_eq!(commands, "enable\ndisable\n");

        let dir = tempfile::tempdir().unwrap();
        let argv = timed_fake_perf(dir.path(), true);
        let (ok, commands) = run_timed(dir.path(), &argv, Duration::from_secs_f64(23.4567));
        assert!(ok, "the timer held the script open");
        assert_eq!(commands, "enable\n");
        // A killed sleep may take a moment to be gone.
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !sleep_running("23.4567")
        });
        assert!(gone, "the timer's sleep was left running");
    }
}
