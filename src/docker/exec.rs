//! Commands run inside a container: output streamed chunk by chunk (never held whole),
//! standard error kept (bounded), the exit code. `ContainerShell` is the seam capture
//! recipes are written against, so their decisions can be exercised with scripted answers.

use super::exec_output::{keep_stderr, read_until_ready, UntilReady};
use super::standby::Standbys;
use super::{api_error, pipe, Docker};
use crate::error::{Error, Result};
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::StreamExt;
use std::future::Future;
use std::io::{BufRead, BufReader, BufWriter};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;

pub use super::ROOT;

/// The most standard output a collected command keeps (a `cat` of a file the container
/// made, a listing of its processes): past it, the rest is drained and dropped, and
/// stderr says so. Whatever may be larger streams (`stream_to`).
const STDOUT_LIMIT: usize = 256 << 20;

/// What a command run in a container printed, and how it ended.
#[derive(Debug, Clone, Default)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    /// None when the engine did not report one (the command was killed with the exec).
    pub exit_code: Option<i64>,
}

impl ExecOutput {
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// How a command an exec runs came to be started.
enum Origin {
    /// Started now.
    New,
    /// Primed before (`Standbys::prime`); read to its ready line already where that is
    /// given.
    Primed(Option<UntilReady>),
}

impl Docker {
    /// Creates and starts `argv` in the container, attached to its output, and to its
    /// stdin when `stdin` (the caller writes to the `input` of the result).
    pub(super) async fn start_exec(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        stdin: bool,
    ) -> Result<(String, StartExecResults)> {
        let exec = self
            .client
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdin: Some(stdin),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(argv.iter().map(|s| s.to_string()).collect()),
                    user: user.map(str::to_string),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| api_error(&format!("exec in {container}"), e))?;
        let started = self
            .client
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: false,
                    output_capacity: Some(64 * 1024),
                }),
            )
            .await
            .map_err(|e| api_error(&format!("start exec in {container}"), e))?;
        Ok((exec.id, started))
    }

    /// The exit code of a finished exec. The engine may report `running` for a moment
    /// after the output stream closed, so ask a few times, soon at first (every exec on a
    /// capture's path to its summary waits here).
    async fn exec_exit_code(&self, exec_id: &str) -> Result<Option<i64>> {
        for attempt in 0..50 {
            let info = self
                .client
                .inspect_exec(exec_id)
                .await
                .map_err(|e| api_error("inspect exec", e))?;
            if info.running != Some(true) {
                return Ok(info.exit_code);
            }
            let pause = [2, 5, 10].get(attempt).copied().unwrap_or(20);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        Ok(None)
    }

    /// Runs `argv` in the container; standard output goes chunk by chunk into `sink`
    /// (never held whole), standard error is collected (bounded).
    pub async fn exec_streaming(
        &self,
        container: &str,
        argv: &[&str],
        sink: mpsc::Sender<Bytes>,
    ) -> Result<ExecOutput> {
        self.exec_streaming_as(container, None, argv, sink).await
    }

    /// `exec_streaming` as `user` (`uid:gid` or a name; None: the container's user).
    pub async fn exec_streaming_as(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        sink: mpsc::Sender<Bytes>,
    ) -> Result<ExecOutput> {
        self.exec_streaming_on(container, user, argv, sink, None)
            .await
    }

    /// `exec_streaming_as`, on a standby of `standbys` where one waits (as root only).
    async fn exec_streaming_on(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        sink: mpsc::Sender<Bytes>,
        standbys: Option<&Standbys>,
    ) -> Result<ExecOutput> {
        let ((exec_id, started), _) = self
            .start_exec_or_take(container, user, argv, false, standbys)
            .await?;
        self.stream_exec(container, exec_id, started, sink).await
    }

    /// `start_exec`, on a standby of `standbys` where one waits (as root only), or taking
    /// the command primed on one where it is `argv` (with its stdin): how it started with
    /// it. Without `stdin`, a standby's stdin ends with the command, as a new exec's has
    /// none. Only in a container running unpaused: a paused one would hold the command (its
    /// frozen shell never reads it) where the engine refuses a new exec at once, and a
    /// stopped one took its standbys with it.
    async fn start_exec_or_take(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        stdin: bool,
        standbys: Option<&Standbys>,
    ) -> Result<((String, StartExecResults), Origin)> {
        let root = standbys.filter(|_| user == Some(ROOT));
        let wanted = root.filter(|s| s.waiting() || (stdin && s.primed()));
        let usable = match wanted {
            Some(standbys) => match self.container_state(container).await {
                Ok(state) if state.running && !state.paused => Some(standbys),
                _ => {
                    standbys.unprime();
                    None
                }
            },
            None => None,
        };
        if let Some((exec_id, started, read)) =
            usable.filter(|_| stdin).and_then(|s| s.take_primed(argv))
        {
            return Ok(((exec_id, started), Origin::Primed(read)));
        }
        let on_standby = match usable.filter(|s| s.waiting()) {
            Some(standbys) => standbys.run(argv).await,
            None => None,
        };
        match on_standby {
            Some((exec_id, StartExecResults::Attached { output, mut input })) if !stdin => {
                use tokio::io::AsyncWriteExt;
                let _ = input.shutdown().await;
                Ok((
                    (exec_id, StartExecResults::Attached { output, input }),
                    Origin::New,
                ))
            }
            Some(started) => Ok((started, Origin::New)),
            None => Ok((
                self.start_exec(container, user, argv, stdin).await?,
                Origin::New,
            )),
        }
    }

    /// Starts `argv` at once with its stdin attached, and writes one line to it when `go`
    /// resolves (the line `go` gives, e.g. `go` or `at:NS`): a process that waits for that line (`read`) is already running when it
    /// comes, so several containers' processes can be released within milliseconds of
    /// each other (starting an exec costs the engine tens to hundreds of milliseconds
    /// each). The process prints `ready_line` on its stdout once it waits; `running` is
    /// told when that line arrives, not when the engine answers the start (the engine
    /// answers before the process exists). Dropped before `go`, the stdin closes and the
    /// process reads end-of-file. As root, it starts on a standby of `standbys` where one
    /// waits.
    #[allow(clippy::too_many_arguments)]
    pub async fn exec_streaming_released(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        ready_line: &str,
        sink: mpsc::Sender<Bytes>,
        running: tokio::sync::oneshot::Sender<()>,
        go: impl std::future::Future<Output = String>,
        standbys: Option<&Standbys>,
    ) -> Result<ExecOutput> {
        let ((mut exec_id, mut started), origin) = self
            .start_exec_or_take(container, user, argv, true, standbys)
            .await?;
        let (mut primed, mut read_ahead) = match origin {
            Origin::New => (false, None),
            Origin::Primed(read) => (true, read),
        };
        let (mut output, mut input, mut until);
        loop {
            let StartExecResults::Attached {
                output: out,
                input: inp,
            } = started
            else {
                return self.stream_exec(container, exec_id, started, sink).await;
            };
            (output, input) = (out, inp);
            until = match read_ahead.take() {
                Some(read) => read,
                None => read_until_ready(&mut output, ready_line).await,
            };
            // A command started ahead that ended before it was ready (or whose stream
            // failed) is not this start's answer (what it found may have changed since, a
            // lowered sysctl say): the command is started again, as it would have been
            // without it.
            if until.ready || !primed {
                break;
            }
            ((exec_id, started), primed) =
                (self.start_exec(container, user, argv, true).await?, false);
        }
        if let Some(e) = until.failed.take() {
            return Err(api_error(&format!("read exec output in {container}"), e));
        }
        let ready = until.ready;
        if ready && !until.after.is_empty() {
            let _ = sink
                .send(Bytes::from(std::mem::take(&mut until.after)))
                .await;
        }
        let (mut stderr, seen) = (until.stderr, until.before);
        if ready {
            let _ = running.send(());
            let line = go.await;
            use tokio::io::AsyncWriteExt;
            input
                .write_all(format!("{line}\n").as_bytes())
                .await
                .map_err(|e| Error::io(format!("release the exec in {container}"), e))?;
            // End of input after the line: a command that reads its stdin gets
            // end-of-file, as it did with no stdin attached.
            let _ = input.shutdown().await;
        } else if !seen.is_empty() {
            // It ended without waiting: what it printed is still its output.
            let _ = sink.send(Bytes::from(seen)).await;
        }
        let rest = StartExecResults::Attached { output, input };
        let mut out = self.stream_exec(container, exec_id, rest, sink).await?;
        if !stderr.is_empty() {
            stderr.extend_from_slice(out.stderr.as_bytes());
            out.stderr = String::from_utf8_lossy(&stderr).into_owned();
        }
        Ok(out)
    }

    /// Streams a started exec's stdout into `sink` and returns its stderr and exit code.
    async fn stream_exec(
        &self,
        container: &str,
        exec_id: String,
        started: StartExecResults,
        sink: mpsc::Sender<Bytes>,
    ) -> Result<ExecOutput> {
        let mut stderr = Vec::new();
        if let StartExecResults::Attached { mut output, .. } = started {
            let mut sink = Some(sink);
            while let Some(frame) = output.next().await {
                match frame
                    .map_err(|e| api_error(&format!("read exec output in {container}"), e))?
                {
                    bollard::container::LogOutput::StdOut { message } => {
                        // A closed sink means the reader stopped; drain the rest so the
                        // process is not blocked on a full pipe.
                        if let Some(tx) = &sink {
                            if tx.send(message).await.is_err() {
                                sink = None;
                            }
                        }
                    }
                    bollard::container::LogOutput::StdErr { message } => {
                        keep_stderr(&mut stderr, &message);
                    }
                    _ => {}
                }
            }
        }
        Ok(ExecOutput {
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
            exit_code: self.exec_exit_code(&exec_id).await?,
        })
    }

    /// Runs `argv` in the container and collects everything it prints.
    pub async fn exec(&self, container: &str, argv: &[&str]) -> Result<ExecOutput> {
        self.exec_as(container, None, argv).await
    }

    /// `exec` as `user` (`uid:gid` or a name; None: the container's user).
    pub async fn exec_as(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
    ) -> Result<ExecOutput> {
        self.exec_collected(container, user, argv, None).await
    }

    /// `exec_as`, on a standby of `standbys` where one waits (as root only), given up
    /// after `EXEC_LIMIT`.
    async fn exec_collected(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        standbys: Option<&Standbys>,
    ) -> Result<ExecOutput> {
        let collected = self.exec_collected_unbounded(container, user, argv, standbys);
        match tokio::time::timeout(EXEC_LIMIT, collected).await {
            Ok(output) => output,
            Err(_) => Err(Error::Docker {
                action: format!(
                    "run {} in container {container}",
                    crate::text::printable(argv.first().copied().unwrap_or("a command"))
                ),
                reason: format!(
                    "it did not finish within {} s (devprof's limit for one command); check that the container \
                     still runs (`docker ps`) and the engine answers",
                    EXEC_LIMIT.as_secs()
                ),
            }),
        }
    }

    async fn exec_collected_unbounded(
        &self,
        container: &str,
        user: Option<&str>,
        argv: &[&str],
        standbys: Option<&Standbys>,
    ) -> Result<ExecOutput> {
        let (tx, rx) = mpsc::channel::<Bytes>(pipe::CHANNEL_CHUNKS);
        let collect = collect_at_most(rx, STDOUT_LIMIT);
        let (result, (stdout, cut)) = tokio::join!(
            self.exec_streaming_on(container, user, argv, tx, standbys),
            collect
        );
        let mut output = result?;
        output.stdout = String::from_utf8_lossy(&stdout).into_owned();
        if cut {
            output.stderr.push_str(&format!(
                "\ndevprof: standard output cut at {} MiB",
                STDOUT_LIMIT >> 20
            ));
        }
        Ok(output)
    }
}

/// Longest one command whose output is collected may run: a backstop for an exec whose
/// stream never ends (its container removed under it); the set-up and the steps after the
/// window have shorter limits of their own and also watch the target.
const EXEC_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The chunks of `rx` up to `limit` bytes, and whether more came: then the receiver is
/// closed, so the sender drains the rest without keeping it.
async fn collect_at_most(mut rx: mpsc::Receiver<Bytes>, limit: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    while let Some(chunk) = rx.recv().await {
        if out.len() + chunk.len() > limit {
            out.extend_from_slice(&chunk[..limit - out.len()]);
            return (out, true);
        }
        out.extend_from_slice(&chunk);
    }
    (out, false)
}

/// The script that prints the file `$1` whole, only where it is a regular file (never
/// through a symlink, never a fifo or a device: the container may change what lies at a
/// path), then says on stderr that it did.
const CAT_REGULAR: &str = "[ -f \"$1\" ] && [ ! -L \"$1\" ] || exit 66; \
     cat -- \"$1\" && echo devprof-copied-whole >&2";

/// `CAT_REGULAR`'s exit status where the path is no regular file.
const NOT_REGULAR: i64 = 66;

/// `consume` over at most `limit` bytes of `reader`: more is an error (the reader is cut
/// there, whatever `consume` made of the part).
pub fn read_at_most<T>(
    reader: &mut dyn BufRead,
    limit: u64,
    consume: impl FnOnce(&mut dyn BufRead) -> std::io::Result<T>,
) -> std::io::Result<T> {
    use std::io::Read;
    let mut limited = reader.take(limit.saturating_add(1));
    let made = consume(&mut limited)?;
    if limited.limit() == 0 {
        return Err(std::io::Error::other(format!(
            "more than {} MiB: cut there",
            limit >> 20
        )));
    }
    Ok(made)
}

/// What `CAT_REGULAR` says once its `cat` succeeded.
const COPIED_WHOLE: &str = "devprof-copied-whole";

impl Docker {
    /// Copies the regular file `path` out of the container into `dest` (made new) with
    /// `cat` as root, on a standby of `standbys` where one waits: one exec that is often
    /// started already, where the archive API costs the engine a process of its own for
    /// each copy. More than `limit` fails, and the stream is cut there. Ok(false) where the
    /// container did not give the file whole (none there, not a regular file, no `cat`, no
    /// exec in a container stopped or paused, a stream cut): `dest` is then removed, and
    /// the caller may ask the archive API, which reads a stopped container's files too.
    async fn copy_file_out(
        &self,
        container: &str,
        path: &str,
        dest: &std::path::Path,
        limit: super::archive::CopyLimit,
        standbys: Option<&Standbys>,
    ) -> Result<bool> {
        let argv = ["sh", "-c", CAT_REGULAR, "sh", path];
        let Ok(((_, StartExecResults::Attached { mut output, .. }), _)) = self
            .start_exec_or_take(container, Some(ROOT), &argv, false, standbys)
            .await
        else {
            return Ok(false);
        };
        // Private (0600): a recording carries the target's (and the kernel's) addresses.
        let file = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new().write(true).create_new(true),
            0o600,
        )
        .open(dest)
        .map_err(|e| Error::io(format!("create {}", dest.display()), e))?;
        let (tx, mut reader) = pipe::channel();
        let writing = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut writer = BufWriter::with_capacity(1 << 20, file);
            std::io::copy(&mut reader, &mut writer)?;
            std::io::Write::flush(&mut writer)
        });
        let (mut received, mut stderr, mut failed, mut cut) = (0u64, Vec::new(), None, false);
        while let Some(frame) = output.next().await {
            match frame {
                Ok(bollard::container::LogOutput::StdOut { message }) => {
                    received = received.saturating_add(message.len() as u64);
                    if received > limit.bytes {
                        failed = Some(limit.exceeded(container, path, received));
                        break;
                    }
                    if tx.send(message).await.is_err() {
                        break; // the writer stopped (it says why)
                    }
                }
                Ok(bollard::container::LogOutput::StdErr { message }) => {
                    keep_stderr(&mut stderr, &message);
                }
                Ok(_) => {}
                Err(_) => {
                    cut = true;
                    break;
                }
            }
        }
        // Dropping the stream ends a copy cut short.
        drop((tx, output));
        let written = writing
            .await
            .map_err(|e| Error::io("copy task", std::io::Error::other(e)))
            .and_then(|w| w.map_err(|e| Error::io(format!("write {}", dest.display()), e)));
        let whole = !cut
            && String::from_utf8_lossy(&stderr)
                .lines()
                .any(|l| l == COPIED_WHOLE);
        let outcome = match (failed, written) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(whole),
        };
        if !matches!(outcome, Ok(true)) {
            let _ = std::fs::remove_file(dest);
        }
        outcome
    }
}

/// Running commands in one container. Capture recipes are written against this trait so
/// their decisions can be exercised with scripted answers.
pub trait ContainerShell: Sync {
    fn container(&self) -> &str;
    fn run(&self, argv: &[&str]) -> impl Future<Output = Result<ExecOutput>> + Send;
    fn sh(&self, script: &str) -> impl Future<Output = Result<ExecOutput>> + Send {
        async move { self.run(&["sh", "-c", script]).await }
    }
}

/// A container reached through the Docker API.
#[derive(Clone)]
pub struct Shell {
    pub(super) docker: Docker,
    pub(super) container: String,
    /// Shells started ahead, which its next commands as root start on.
    pub(super) standbys: Standbys,
}

impl Shell {
    /// Runs `argv` as `user` (`uid:gid`): tools that attach to a runtime (async-profiler,
    /// jcmd) must run as the process's own user.
    pub async fn run_as(&self, user: &str, argv: &[&str]) -> Result<ExecOutput> {
        self.docker.exec_as(&self.container, Some(user), argv).await
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Starts `count` standbys in the container, in the background: the next commands run
    /// as root (`run`, `sh`, a recorder as root) start on them instead of as new execs.
    pub fn start_standbys(&self, count: usize) {
        self.standbys.start(&self.docker, &self.container, count);
    }

    /// Lets the standbys no command took go (each ends in the container).
    pub fn release_standbys(&self) {
        self.standbys.release();
    }

    pub fn standbys(&self) -> &Standbys {
        &self.standbys
    }

    /// Copies the regular file `path` out of the container into `dest` (made new) with
    /// `cat`, on a standby where one waits (`Docker::copy_file_out`); Ok(false) where the
    /// container did not give it whole.
    pub async fn copy_file_out(
        &self,
        path: &str,
        dest: &std::path::Path,
        limit: super::archive::CopyLimit,
    ) -> Result<bool> {
        self.docker
            .copy_file_out(&self.container, path, dest, limit, Some(&self.standbys))
            .await
    }

    /// Runs `script` (`args` its `$1`...) as root and keeps its shell as a standby for the
    /// next command; returns what it printed (`Standbys::run_then_stand_by`).
    pub async fn run_then_stand_by(&self, script: &str, args: &[&str]) -> Result<String> {
        self.standbys
            .run_then_stand_by(&self.docker, &self.container, script, args)
            .await
    }
}

impl ContainerShell for Shell {
    fn container(&self) -> &str {
        &self.container
    }

    fn run(&self, argv: &[&str]) -> impl Future<Output = Result<ExecOutput>> + Send {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        async move {
            let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
            self.docker
                .exec_collected(&self.container, Some(ROOT), &refs, Some(&self.standbys))
                .await
        }
    }
}

impl Shell {
    /// Runs `argv` in the container and hands its standard output, as it arrives, to
    /// `consume` on a blocking thread (a `perf script` of gigabytes never sits in memory);
    /// `keep` also saves the text there. Returns what `consume` made and how the command
    /// ended.
    /// `stream_to` of the regular file `path` (`cat` as root, never through a link, and
    /// never a FIFO or a device, which would block or never end), at most `limit` bytes:
    /// past it the read fails and says so. Ok(None) where `path` is not a regular file.
    pub async fn stream_file_to<T, F>(
        &self,
        path: &str,
        limit: u64,
        consume: F,
    ) -> Result<Option<(T, ExecOutput)>>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn BufRead) -> std::io::Result<T> + Send + 'static,
    {
        let argv: Vec<String> = ["sh", "-c", CAT_REGULAR, "sh", path]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (made, output) = self
            .stream_to(&argv, None, move |reader| {
                read_at_most(reader, limit, consume)
            })
            .await?;
        if output.exit_code == Some(NOT_REGULAR) {
            return Ok(None);
        }
        Ok(Some((made, output)))
    }

    pub async fn stream_to<T, F>(
        &self,
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
        let exec = self
            .docker
            .exec_streaming_as(&self.container, Some(ROOT), &refs, tx)
            .await;
        let made = consuming
            .await
            .map_err(|e| Error::io("analysis task", std::io::Error::other(e)))?
            .map_err(|e| {
                Error::io(
                    format!(
                        "read the output of {}",
                        argv.first().map(String::as_str).unwrap_or("a command")
                    ),
                    e,
                )
            })?;
        Ok((made, exec?))
    }
}

#[cfg(test)]
mod tests {
    use super::{collect_at_most, mpsc, read_at_most, Bytes};

    #[test]
    fn a_read_past_its_limit_fails_and_one_within_it_is_whole() {
        let text = b"a;b 1\na;c 2\n";
        let whole = read_at_most(&mut &text[..], 12, |r| {
            let mut s = String::new();
            std::io::Read::read_to_string(r, &mut s).map(|_| s)
        })
        .unwrap();
        assert_eq!(whole, "a;b 1\na;c 2\n");
        let err = read_at_most(&mut &text[..], 11, |r| {
            std::io::Read::read_to_end(r, &mut Vec::new())
        })
        .unwrap_err();
        assert!(err.to_string().contains("cut there"), "{err}");
    }

    /// The copy's script, run by this host's sh: a regular file comes whole with the
    /// word that says so; a symlink, a fifo (which would block a `cat`) or nothing at the
    /// path gives nothing, at once.
    #[test]
    fn the_copy_script_prints_only_a_regular_file_and_says_when_it_did() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("perf.data");
        std::fs::write(&file, b"PERFILE2\0bytes").unwrap();
        std::os::unix::fs::symlink(&file, dir.path().join("link")).unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let run = |path: &std::path::Path| {
            std::process::Command::new("timeout")
                .args(["10", "sh", "-c", super::CAT_REGULAR, "sh"])
                .arg(path)
                .output()
                .unwrap()
        };
        let whole = run(&file);
        assert_eq!(whole.stdout, b"PERFILE2\0bytes");
        assert_eq!(
            String::from_utf8_lossy(&whole.stderr).trim(),
            super::COPIED_WHOLE
        );
        for refused in [dir.path().join("link"), fifo, dir.path().join("missing")] {
            let out = run(&refused);
            assert_eq!(out.status.code(), Some(66), "{refused:?}");
            assert!(
                out.stdout.is_empty() && out.stderr.is_empty(),
                "{refused:?}"
            );
        }
    }

    #[tokio::test]
    async fn collected_output_past_its_budget_is_cut_not_kept_whole() {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let sender = tokio::spawn(async move {
            // Far more than the budget; the sender stops when the receiver is gone.
            for _ in 0..1000 {
                if tx.send(Bytes::from(vec![b'x'; 1024])).await.is_err() {
                    return true;
                }
            }
            false
        });
        let (out, cut) = collect_at_most(rx, 10_000).await;
        assert_eq!(out.len(), 10_000);
        assert!(cut);
        assert!(sender.await.unwrap(), "the sender saw the receiver close");
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        tx.send(Bytes::from_static(b"small")).await.unwrap();
        drop(tx);
        assert_eq!(
            collect_at_most(rx, 10_000).await,
            (b"small".to_vec(), false)
        );
    }
}
