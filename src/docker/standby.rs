//! Shells started ahead in a container: each is an exec of `sh` as root that says it is
//! ready and waits on its stdin for the one command it is to become. Starting an exec
//! costs the engine its create and start and the container a new process (50-200 ms on a
//! loaded host): a capture starts standbys while it waits anyway (its probes, its window),
//! and the commands right after (the recorder, the reads and the clean-up after the window)
//! then start at once. A standby never used reads end-of-file when devprof lets go of it
//! (or exits) and ends without running anything. A command may be primed on one before
//! the capture knows it will run it (the recorder, before the access trial answers): a
//! later start of the very same command line takes it.

use super::exec_output::{read_until_ready, UntilReady};
use super::{Docker, ROOT};
use crate::text::quote;
use bollard::exec::StartExecResults;
use futures_util::StreamExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// What a standby prints once it waits for its command.
const READY: &str = "devprof-standby-ready";
/// The line that ends the command sent to a standby (a command's arguments may hold
/// newlines: it is sent as lines, and run only once this line came).
const COMMAND_END: &str = "devprof-standby-command-end";

/// The standby's own script: ready, then the lines up to `COMMAND_END`, run with `eval`
/// (one `exec` of the command's argv, quoted here); end of input before that line runs
/// nothing.
fn standby_script() -> String {
    standby_after("", READY)
}

/// `before`, then the standby's script with `ready` for its ready line.
fn standby_after(before: &str, ready: &str) -> String {
    format!(
        "{before}echo {ready}; _c=; _ok=; \
         while IFS= read -r _l; do \
           if [ \"$_l\" = {COMMAND_END} ]; then _ok=1; break; fi; _c=\"$_c$_l\n\"; \
         done; [ -n \"$_ok\" ] || exit 0; eval \"$_c\""
    )
}

/// `script` in a subshell (its `exit` ends only that; no stdin), then an empty line (the
/// ready line is then a line of its own whatever the script's output ended with), then
/// the standby's script with `ready`.
fn ahead_script(script: &str, ready: &str) -> String {
    standby_after(&format!("( {script}\n) </dev/null; echo; "), ready)
}

/// How much of `seen` the script of `ahead_script` printed, once `seen` ends with the
/// empty line and the ready line.
fn printed_before(seen: &[u8], ready: &str) -> Option<usize> {
    let tail = format!("\n{ready}\n");
    seen.ends_with(tail.as_bytes())
        .then(|| seen.len() - tail.len())
}

/// The most a script run ahead of its standby may print: the container's probe lists
/// every process, bounded as a plain exec's collected output is (256 MiB).
const BEFORE_LIMIT: usize = 256 << 20;

/// The text a standby runs for `argv`: `exec` of it, every word quoted; None when one of
/// its lines would read as the end of the command.
fn command_text(argv: &[&str]) -> Option<String> {
    let words: Vec<String> = argv.iter().map(|a| quote(a)).collect();
    let text = format!("exec {}", words.join(" "));
    (!text.lines().any(|l| l == COMMAND_END)).then_some(text)
}

/// A started shell waiting for its command.
pub struct Standby {
    exec_id: String,
    started: StartExecResults,
}

/// A command started ahead on a standby, before the capture knows it will run it: taken
/// only by a start of the very same command line, while fresh.
struct Primed {
    argv: Vec<String>,
    at: Instant,
    exec_id: String,
    started: StartExecResults,
    /// Its output up to its ready line, where that was waited for (`primed_ready`).
    read: Option<UntilReady>,
}

/// How long a primed command may wait to be taken: a primed recorder's `sleep` outlasts
/// its window by `ALONE_SLACK` (10 s) from its start, so it must be released well before.
const PRIMED_FRESH: Duration = Duration::from_secs(5);

/// The standbys of one container, shared by the clones of its `Shell`, how many are on
/// their way, and the command primed on one of them.
#[derive(Clone, Default)]
pub struct Standbys(
    Arc<Mutex<Vec<Standby>>>,
    Arc<AtomicUsize>,
    Arc<Mutex<Option<Primed>>>,
);

impl Standbys {
    /// Makes `count` standbys wait in `container` (those waiting or starting count: a
    /// shell that windows many times never holds more), started in the background; each
    /// joins the pool once it waits for its command.
    pub fn start(&self, docker: &Docker, container: &str, count: usize) {
        let waiting = self.0.lock().unwrap_or_else(|e| e.into_inner()).len();
        let more = count.saturating_sub(waiting + self.1.load(Ordering::SeqCst));
        for _ in 0..more {
            self.1.fetch_add(1, Ordering::SeqCst);
            let (docker, container, pool) = (docker.clone(), container.to_string(), self.clone());
            tokio::spawn(async move {
                let standby = started(&docker, &container).await;
                if let Some(standby) = standby {
                    pool.0
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(standby);
                }
                pool.1.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// Whether a standby waits now.
    pub fn waiting(&self) -> bool {
        !self.0.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// A standby that waits now, if any (one still starting is not waited for).
    fn take(&self) -> Option<Standby> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Lets every waiting standby go: each reads end-of-file and ends; so does a primed
    /// command no one took (it reads end-of-file where it waits for its release).
    pub fn release(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.unprime();
    }

    /// Starts `argv` now on a waiting standby, for a start of the same command line to
    /// take later (`take_primed`) instead of starting it then; false where no standby
    /// waits. A command that waits for a line on its stdin before it acts (a recorder) is
    /// the kind to prime: one never taken is let go by `release`, and ends.
    pub async fn prime(&self, argv: &[&str]) -> bool {
        let Some((exec_id, started)) = self.run(argv).await else {
            return false;
        };
        *self.2.lock().unwrap_or_else(|e| e.into_inner()) = Some(Primed {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            at: Instant::now(),
            exec_id,
            started,
            read: None,
        });
        true
    }

    /// Waits, at most `limit`, for the primed command to print `ready_line`, and returns
    /// what it printed on its stdout before it; None where it ended (or failed, or was not
    /// ready in time) first: it is then let go. A start that takes it later does not wait
    /// for the line again.
    pub async fn primed_ready(&self, ready_line: &str, limit: Duration) -> Option<Vec<u8>> {
        // Out of the slot while it is read: nothing else takes it meanwhile.
        let mut primed = self.2.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let StartExecResults::Attached { output, .. } = &mut primed.started else {
            return None;
        };
        let read = tokio::time::timeout(limit, read_until_ready(output, ready_line))
            .await
            .ok()
            .filter(|read| read.ready)?;
        let before = read.before.clone();
        primed.read = Some(read);
        *self.2.lock().unwrap_or_else(|e| e.into_inner()) = Some(primed);
        Some(before)
    }

    /// The primed command, when it is `argv` and still fresh (with its output up to its
    /// ready line, where that was read already); one that is not is let go (nothing will
    /// take it).
    pub(super) fn take_primed(
        &self,
        argv: &[&str],
    ) -> Option<(String, StartExecResults, Option<UntilReady>)> {
        let primed = self.2.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let same =
            primed.argv.len() == argv.len() && primed.argv.iter().zip(argv).all(|(a, b)| a == b);
        (same && primed.at.elapsed() < PRIMED_FRESH).then_some((
            primed.exec_id,
            primed.started,
            primed.read,
        ))
    }

    /// Whether a command is primed.
    pub fn primed(&self) -> bool {
        self.2.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Lets the primed command go, if any.
    pub fn unprime(&self) {
        self.2.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Runs `script` (with `args` as its `$1`...) as root in a subshell, then keeps its
    /// exec as a standby: one exec for a probe and the command after it. Returns what the
    /// script printed on stdout. Its ready line carries a nonce: what the script prints
    /// (a process's names, its files') cannot end it early.
    pub async fn run_then_stand_by(
        &self,
        docker: &Docker,
        container: &str,
        script: &str,
        args: &[&str],
    ) -> crate::error::Result<String> {
        let ready = format!("{READY}-{:016x}", nonce());
        let whole = ahead_script(script, &ready);
        let mut argv = vec!["sh", "-c", &whole, "sh"];
        argv.extend_from_slice(args);
        let (exec_id, started) = docker
            .start_exec(container, Some(ROOT), &argv, true)
            .await?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Ok(String::new());
        };
        let mut seen = Vec::new();
        while let Some(frame) = output.next().await {
            let Ok(bollard::container::LogOutput::StdOut { message }) = frame else {
                continue;
            };
            seen.extend_from_slice(&message);
            if seen.len() > BEFORE_LIMIT {
                // Let go: its stdin closes and it ends.
                break;
            }
            if let Some(printed) = printed_before(&seen, &ready) {
                seen.truncate(printed);
                self.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Standby {
                        exec_id,
                        started: StartExecResults::Attached { output, input },
                    });
                break;
            }
        }
        seen.truncate(BEFORE_LIMIT);
        Ok(String::from_utf8_lossy(&seen).into_owned())
    }

    /// `argv` started as root on a standby, with its stdin attached: the exec's id and
    /// its streams, as the engine's start gives them for a new exec; None when no standby
    /// waits (or the command cannot be sent to one).
    pub async fn run(&self, argv: &[&str]) -> Option<(String, StartExecResults)> {
        let text = command_text(argv)?;
        // A standby whose exec went away meanwhile fails the write: the next is tried.
        while let Some(standby) = self.take() {
            let Standby {
                exec_id,
                started: StartExecResults::Attached { output, mut input },
            } = standby
            else {
                continue;
            };
            let sent = input
                .write_all(format!("{text}\n{COMMAND_END}\n").as_bytes())
                .await;
            if sent.is_ok() && input.flush().await.is_ok() {
                return Some((exec_id, StartExecResults::Attached { output, input }));
            }
        }
        None
    }
}

/// 64 random bits from the kernel (0 where it gives none: a plain marker then).
fn nonce() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer given.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got == bytes.len() as isize {
        u64::from_ne_bytes(bytes)
    } else {
        0
    }
}

/// Starts one standby and waits until it says it waits; None if it does not.
async fn started(docker: &Docker, container: &str) -> Option<Standby> {
    let script = standby_script();
    let (exec_id, started) = docker
        .start_exec(container, Some(ROOT), &["sh", "-c", &script], true)
        .await
        .ok()?;
    let StartExecResults::Attached { mut output, input } = started else {
        return None;
    };
    let mut seen = Vec::new();
    while let Some(frame) = output.next().await {
        if let Ok(bollard::container::LogOutput::StdOut { message }) = frame {
            seen.extend_from_slice(&message);
            // Nothing but the line is expected before its command.
            if seen.len() > READY.len() + 1 {
                return None;
            }
            if seen == format!("{READY}\n").as_bytes() {
                return Some(Standby {
                    exec_id,
                    started: StartExecResults::Attached { output, input },
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primed(pool: &Standbys, argv: &[&str], age: Duration) {
        *pool.2.lock().unwrap() = Some(Primed {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            at: Instant::now() - age,
            exec_id: "e1".into(),
            started: StartExecResults::Detached,
            read: None,
        });
    }

    /// A primed command is taken only by the very same command line, and only while fresh;
    /// one asked for with another line, or too late, is let go, never taken later.
    #[test]
    fn a_primed_command_is_taken_only_by_its_own_line_while_fresh() {
        let pool = Standbys::default();
        primed(&pool, &["sh", "-c", "perf record -F 99"], Duration::ZERO);
        assert!(pool.primed());
        let taken = pool.take_primed(&["sh", "-c", "perf record -F 99"]);
        assert_eq!(taken.map(|(id, _, _)| id).as_deref(), Some("e1"));
        assert!(!pool.primed());

        primed(&pool, &["sh", "-c", "perf record -F 99"], Duration::ZERO);
        assert!(pool
            .take_primed(&["sh", "-c", "perf record -F 999"])
            .is_none());
        assert!(!pool.primed(), "let go once another line was asked for");
        assert!(pool
            .take_primed(&["sh", "-c", "perf record -F 99"])
            .is_none());

        primed(
            &pool,
            &["sh", "-c", "perf record -F 99", "x"],
            Duration::ZERO,
        );
        assert!(pool
            .take_primed(&["sh", "-c", "perf record -F 99"])
            .is_none());

        primed(&pool, &["sh"], PRIMED_FRESH + Duration::from_millis(1));
        assert!(pool.take_primed(&["sh"]).is_none(), "too old to be taken");

        primed(&pool, &["sh"], Duration::ZERO);
        pool.release();
        assert!(!pool.primed());
    }

    /// A primed command whose output is `frames` (stdout, stderr).
    fn primed_printing(pool: &Standbys, argv: &[&str], frames: &[(&str, &str)]) {
        use bollard::container::LogOutput;
        let frames: Vec<_> = frames
            .iter()
            .flat_map(|(out, err)| {
                [
                    LogOutput::StdOut {
                        message: out.to_string().into(),
                    },
                    LogOutput::StdErr {
                        message: err.to_string().into(),
                    },
                ]
            })
            .map(Ok::<_, bollard::errors::Error>)
            .collect();
        *pool.2.lock().unwrap() = Some(Primed {
            argv: argv.iter().map(|a| a.to_string()).collect(),
            at: Instant::now(),
            exec_id: "e1".into(),
            started: StartExecResults::Attached {
                output: Box::pin(futures_util::stream::iter(frames)),
                input: Box::pin(tokio::io::sink()),
            },
            read: None,
        });
    }

    /// Waiting for a primed command's ready line gives what it printed before the line,
    /// and the start that takes it then gets the rest as read (no second wait); one that
    /// ends before the line is let go.
    #[tokio::test]
    async fn a_primed_command_read_to_its_ready_line_keeps_what_came_after() {
        let pool = Standbys::default();
        let argv = ["sh", "-c", "record"];
        primed_printing(
            &pool,
            &argv,
            &[("opened\nre", "warm"), ("ady\nSTART\n", "ing\n")],
        );
        let before = pool.primed_ready("ready", Duration::from_secs(5)).await;
        assert_eq!(before.as_deref(), Some(&b"opened\n"[..]));
        assert!(pool.primed(), "kept for its start");
        let (_, _, read) = pool.take_primed(&argv).expect("taken by its own line");
        let read = read.expect("read to its ready line");
        assert!(read.ready);
        assert_eq!(read.after, b"START\n");
        assert_eq!(read.stderr, b"warm", "stderr up to the ready line");

        primed_printing(&pool, &argv, &[("opened\n", "perf: denied\n")]);
        assert!(pool
            .primed_ready("ready", Duration::from_secs(5))
            .await
            .is_none());
        assert!(
            !pool.primed(),
            "one that ended before it was ready is let go"
        );
    }

    /// The standby's script as a container's `sh` runs it, here: the command sent as lines
    /// (an argument with a newline and a quote in it) runs once the end line comes, with
    /// the rest of stdin still its own; end of input before the end line runs nothing.
    #[test]
    fn a_standby_runs_the_command_it_is_sent_whole_and_nothing_without_its_end() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let run = |input: &str| {
            let mut child = Command::new("sh")
                .args(["-c", &standby_script()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("sh on this host");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap()
        };
        let script = "printf '%s|' \"$1\"; read -r rest; echo \"$rest\"";
        let text = command_text(&["sh", "-c", script, "sh", "two\nlines 'q'"]).unwrap();
        assert_eq!(
            run(&format!("{text}\n{COMMAND_END}\nafter\n")),
            format!("{READY}\ntwo\nlines 'q'|after\n")
        );
        assert_eq!(run(&format!("{text}\n")), format!("{READY}\n"));
        assert_eq!(run(""), format!("{READY}\n"));
        // Quoted, the end line's text is no line of its own.
        assert!(command_text(&["echo", COMMAND_END]).is_some());
        assert!(command_text(&["sh", "-c", &format!("x\n{COMMAND_END}\ny")]).is_none());
    }

    /// A probe run ahead of its standby: its output, whether or not it ends with a
    /// newline, then the ready line; its `exit` ends only its subshell, not the standby.
    #[test]
    fn a_script_run_ahead_keeps_its_arguments_and_its_exit_leaves_the_standby() {
        let run = |script: &str| {
            let out = std::process::Command::new("sh")
                .args(["-c", &ahead_script(script, "ready-n"), "sh", "first"])
                .stdin(std::process::Stdio::null())
                .output()
                .expect("sh on this host");
            let printed = printed_before(&out.stdout, "ready-n").expect("the ready line");
            String::from_utf8_lossy(&out.stdout[..printed]).into_owned()
        };
        assert_eq!(run("printf %s \"$1\"; exit 3"), "first");
        assert_eq!(run("echo \"$1\""), "first\n");
        assert_eq!(run("true"), "");
        assert_eq!(printed_before(b"x\nready-n\n", "ready-n"), Some(1));
        assert_eq!(
            printed_before(b"ready-n\n", "ready-n"),
            None,
            "no empty line"
        );
        assert_ne!(nonce(), nonce());
    }
}
