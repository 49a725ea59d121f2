//! Command runs: a command started inside the target container under perf (`cpu -- CMD`,
//! `stat --repeat N -- CMD`), as the target process would run it: in its working
//! directory, with its environment, as its user and groups.
//!
//! perf runs as root (opening events needs it), in devprof's own environment; the command
//! switches to the process's user with `setpriv`, and only then takes the process's
//! environment (`env -i NAME=VALUE... CMD`), so nothing the process put in its environment
//! reaches a program that runs as root. The environment is read in the container from
//! /proc/<pid>/environ by the launch script itself, so devprof never sees it and no
//! manifest holds it; only `NAME=VALUE` entries with a shell variable's name pass, so no
//! entry can become `env`'s command or option.

use crate::docker::probe::TRUSTED_FN;
use crate::docker::{ContainerShell, Shell};
use crate::error::{Error, Result};
use crate::text::quote;

/// Who the command runs as: the target process's user, group and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    /// `setpriv`'s path in the container (None for root: nothing to switch).
    pub setpriv: Option<String>,
}

impl RunAs {
    pub fn is_root(&self) -> bool {
        self.uid == 0 && self.gid == 0
    }

    /// `uid:gid`, for manifests and summaries.
    pub fn text(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }

    /// What goes before the command so that it runs as this user.
    fn prefix(&self) -> Vec<String> {
        let Some(setpriv) = &self.setpriv else {
            return Vec::new();
        };
        let groups = if self.groups.is_empty() {
            "--clear-groups".to_string()
        } else {
            format!(
                "--groups={}",
                self.groups
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        vec![
            setpriv.clone(),
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            groups,
            "--".into(),
        ]
    }
}

/// One command run: perf's command line up to its `--`, the command after it.
pub struct Launch<'a> {
    /// The target process, whose environment and working directory the run takes.
    pub pid: u32,
    pub cwd: &'a str,
    pub run_as: &'a RunAs,
    /// The capture's directory in the container: perf's pidfile, the run's status and log.
    pub workdir: &'a str,
    /// perf's command line, ending before the workload (`perf record ... -o F`).
    pub tool: &'a [String],
    pub command: &'a [String],
    /// Names this run's status and log files (`run-3`), so runs never share them.
    pub name: &'a str,
}

impl Launch<'_> {
    /// `<workdir>/<name>.status`: `devprof-run <exit status> <start ns> <end ns>`.
    pub fn status_path(&self) -> String {
        format!("{}/{}.status", self.workdir, self.name)
    }

    /// `<workdir>/<name>.log`: what perf and the command printed.
    pub fn log_path(&self) -> String {
        format!("{}/{}.log", self.workdir, self.name)
    }

    /// The argv that runs the command under perf: `sh -c SCRIPT`. perf's pid goes into
    /// `<workdir>/recorder.pid` (the session stops it through that); the command's exit status
    /// and the wall time around perf go into the status file; the last 64 KiB of the log
    /// (perf's own report at its end) go to standard error.
    pub fn argv(&self) -> Vec<String> {
        let mut head: Vec<String> = self.tool.to_vec();
        head.push("--".into());
        head.extend(self.run_as.prefix());
        let wd = self.workdir;
        let name = self.name;
        let script = format!(
            "cd {cwd} || exit 127; s=$(date +%s%N); \
             {run} >{log} 2>&1; x=$?; e=$(date +%s%N); \
             rc=$(cat {wd_q}/{name_q}.rc 2>/dev/null) || rc=$x; \
             echo \"devprof-run $rc $s $e\" > {status}; \
             tail -c 65536 {log} >&2; exit \"$rc\"",
            cwd = quote(self.cwd),
            run = in_process_env(
                self.pid,
                &head,
                self.command,
                Some((
                    &format!("{wd}/{}", super::record_script::RECORDER_PIDFILE),
                    &format!("{wd}/{name}.rc"),
                )),
            ),
            log = quote(&self.log_path()),
            wd_q = quote(wd),
            name_q = quote(name),
            status = quote(&self.status_path()),
        );
        vec!["sh".into(), "-c".into(), script]
    }
}

/// The shell text `in_process_env` runs under xargs: `$1` and `$2` count the head and the
/// tail, which come after them in the order tail, head; xargs appends the process's
/// environment. The tail is moved behind the environment, then one pass keeps the head and
/// the tail and, of the environment, only `NAME=VALUE` entries whose NAME is a shell
/// variable's name: `head... env -i NAME=VALUE... tail...`.
const ENV_ROTATION: &str = "h=$1; t=$2; shift 2; \
     i=0; while [ $i -lt $t ]; do set -- \"$@\" \"$1\"; shift; i=$((i+1)); done; \
     m=$(($# - h - t)); n=$#; i=0; \
     while [ $i -lt $n ]; do a=$1; shift; \
       if [ $i -lt $h ] || [ $i -ge $((h + m)) ]; then set -- \"$@\" \"$a\"; \
       else case $a in [A-Za-z_]*=*) k=${a%%=*}; \
         case $k in *[!A-Za-z0-9_]*) ;; *) set -- \"$@\" \"$a\";; esac;; esac; fi; \
       i=$((i+1)); done; ";

/// Shell text that runs `head... env -i <the environment of pid> tail...` (the
/// environment read NUL-separated from /proc by xargs, so values with spaces or newlines
/// survive; entries that are not `NAME=VALUE` dropped). The environment passes through a
/// command line only inside `env -i`, which replaces itself at once: it never stays
/// visible in the container's process list. `head` ends where the process's user is taken
/// on (`setpriv ... --`), so the environment applies only to what runs as that user. With
/// `files` (pidfile, rc file): the process that runs `head` writes its pid to the pidfile
/// first, and its exit status goes to the rc file (xargs itself folds statuses into 123).
fn in_process_env(
    pid: u32,
    head: &[String],
    tail: &[String],
    files: Option<(&str, &str)>,
) -> String {
    let mut fixed: Vec<String> = Vec::new();
    if let Some((pidfile, rcfile)) = files {
        fixed.extend([
            "sh".into(),
            "-c".into(),
            "p=$1; r=$2; shift 2; sh -c 'echo $$ > \"$0\"; exec \"$@\"' \"$p\" \"$@\"; echo $? > \"$r\"".into(),
            "sh".into(),
            pidfile.into(),
            rcfile.into(),
        ]);
    }
    fixed.extend(head.iter().cloned());
    fixed.extend(["env".to_string(), "-i".to_string()]);
    let guard = match files {
        // xargs runs its command again when the arguments overflow one command line:
        // the guard makes sure the command itself runs once.
        Some((_, rcfile)) => format!(
            "( set -C; : > {} ) 2>/dev/null || exit 125; ",
            quote(&format!("{rcfile}.once"))
        ),
        None => String::new(),
    };
    let inner = format!("{ENV_ROTATION}{guard}exec \"$@\"");
    format!(
        "xargs -0 sh -c {inner} sh {h} {t} {args} < /proc/{pid}/environ",
        inner = quote(&inner),
        h = fixed.len(),
        t = tail.len(),
        args = tail
            .iter()
            .chain(&fixed)
            .map(|a| quote(a))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Before anything runs: the command exists on the process's PATH (in its environment
/// and working directory), and the tools the launch needs are there. Returns who the
/// command will run as.
pub async fn prepare(
    shell: &Shell,
    container: &str,
    pid: u32,
    cwd: &str,
    uid: Option<u32>,
    gid: Option<u32>,
    program: &str,
) -> Result<RunAs> {
    // setpriv runs as root: only one root alone may change is taken.
    let probe = format!(
        "{TRUSTED_FN}for t in xargs env date tail; do command -v $t >/dev/null || echo \"missing $t\"; done; \
         s=$(command -v setpriv) && trusted \"$s\" >/dev/null && echo \"setpriv $s\"; \
         while read -r k v; do [ \"$k\" = Groups: ] && echo \"groups $v\"; done < /proc/{pid}/status; \
         [ -r /proc/{pid}/environ ] || echo noenv"
    );
    let out = shell.sh(&probe).await?;
    let (uid, gid) = (uid.unwrap_or(0), gid.unwrap_or(0));
    let mut run_as = RunAs {
        uid,
        gid,
        groups: Vec::new(),
        setpriv: None,
    };
    let mut setpriv = None;
    for line in out.stdout.lines() {
        match line.split_once(' ') {
            Some(("missing", tool)) => {
                return Err(Error::Usage(format!(
                    "container '{container}' has no `{tool}`, which devprof needs to start a command there \
                     with the process's environment"
                )))
            }
            Some(("setpriv", path)) => setpriv = Some(path.trim().to_string()),
            Some(("groups", list)) => {
                run_as.groups = list
                    .split_whitespace()
                    .filter_map(|g| g.parse().ok())
                    .collect()
            }
            _ if line == "noenv" => {
                return Err(Error::Usage(format!(
                    "the environment of pid {pid} in '{container}' cannot be read (/proc/{pid}/environ); \
                     has the process exited?"
                )))
            }
            _ => {}
        }
    }
    if !run_as.is_root() {
        match setpriv {
            Some(path) => run_as.setpriv = Some(path),
            None => {
                return Err(Error::Usage(format!(
                    "pid {pid} in '{container}' runs as uid {uid}, gid {gid}: the command would run as that user, \
                     but the container has no `setpriv` (util-linux) that only root may change, to switch to it; install util-linux in the image"
                )))
            }
        }
    }
    // Looked up as the process's user, with its environment, as the run will be.
    let check: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        "command -v \"$1\"".into(),
        "sh".into(),
        program.into(),
    ];
    let script = format!(
        "cd {} || exit 127; {}",
        quote(cwd),
        in_process_env(pid, &run_as.prefix(), &check, None)
    );
    let found = shell.sh(&script).await?;
    if !found.success() {
        return Err(Error::Usage(format!(
            "command '{program}' not found in container '{container}' (looked up on the PATH of pid {pid}, in {cwd})"
        )));
    }
    Ok(run_as)
}

/// `prepare` for a found target: its process's working directory and user.
pub async fn prepare_for<R>(target: &super::target::Target<R>, program: &str) -> Result<RunAs> {
    let facts = &target.process_facts;
    prepare(
        &target.shell,
        &target.container.name,
        target.process.pid,
        facts.cwd.as_deref().unwrap_or("/"),
        facts.uid,
        facts.gid,
        program,
    )
    .await
}

/// How one run ended: its exit status and the wall time around perf, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunEnd {
    pub exit_status: i32,
    pub wall_s: f64,
}

/// `devprof-run <status> <start ns> <end ns>`.
pub fn parse_status(text: &str) -> Option<RunEnd> {
    let line = text.lines().rev().find(|l| l.starts_with("devprof-run "))?;
    let mut f = line.split_whitespace().skip(1);
    let exit_status: i32 = f.next()?.parse().ok()?;
    let start: u128 = f.next()?.parse().ok()?;
    let end: u128 = f.next()?.parse().ok()?;
    Some(RunEnd {
        exit_status,
        wall_s: end.checked_sub(start)? as f64 / 1e9,
    })
}

/// Reads a run's status file from the container.
pub async fn read_status(shell: &Shell, launch: &Launch<'_>) -> Option<RunEnd> {
    let out = shell.run(&["cat", &launch.status_path()]).await.ok()?;
    parse_status(&out.stdout)
}

/// What an exit status says, in words, for a status that is not 0.
pub fn status_words(status: i32) -> String {
    match status {
        127 => "127: command not found in the container".into(),
        126 => "126: the command could not be executed (permission denied?)".into(),
        s if s > 128 && s < 160 => format!("{s}: killed by signal {}", s - 128),
        s => s.to_string(),
    }
}

/// The last `lines` lines of a run's output (perf's own report left out), as text to
/// append to a message; empty when there are none.
pub fn output_tail(log: &str, lines: usize) -> String {
    let kept: Vec<&str> = log
        .lines()
        .filter(|l| !l.starts_with("[ perf record:") && !l.trim().is_empty())
        .collect();
    if kept.is_empty() {
        return String::new();
    }
    let tail = &kept[kept.len().saturating_sub(lines)..];
    format!("; its last output:\n    {}", tail.join("\n    "))
}

/// The command for people: its words quoted where needed.
pub fn display(command: &[String]) -> String {
    command
        .iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                quote(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Ends the command perf runs from `workdir` and everything it started, as Ctrl-C in a
/// terminal would: SIGINT to perf's descendants, then SIGTERM and SIGKILL to those that
/// stay. perf itself is left to notice its command ended and write what it recorded.
pub async fn stop_command(shell: &Shell, workdir: &str) {
    let script = format!(
        "f={pidfile}; i=0; while [ ! -s \"$f\" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; \
         p=$(cat \"$f\" 2>/dev/null); [ -n \"$p\" ] || exit 0; \
         tree=; new=$p; \
         while [ -n \"$new\" ]; do next=; \
           for s in /proc/[0-9]*/stat; do l=$(cat \"$s\" 2>/dev/null) || continue; \
             r=${{l##*) }}; set -- $r; \
             for q in $new; do [ \"$2\" = \"$q\" ] && {{ c=${{s#/proc/}}; next=\"$next ${{c%/stat}}\"; }}; done; \
           done; tree=\"$tree $next\"; new=$next; \
         done; \
         [ -n \"$tree\" ] || exit 0; \
         alive() {{ for q in $tree; do kill -0 $q 2>/dev/null && return 0; done; return 1; }}; \
         for sig in INT TERM KILL; do kill -$sig $tree 2>/dev/null; i=0; \
           while alive && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; alive || break; done; true",
        pidfile = quote(&format!("{workdir}/{}", super::record_script::RECORDER_PIDFILE))
    );
    let _ = shell.sh(&script).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_status_line() {
        assert_eq!(
            parse_status("noise\ndevprof-run 1 1000000000 3500000000\n"),
            Some(RunEnd {
                exit_status: 1,
                wall_s: 2.5
            })
        );
        assert_eq!(parse_status("devprof-run x 1 2"), None);
        assert_eq!(parse_status("devprof-run 0 5 2"), None);
    }

    #[test]
    fn root_runs_without_a_switch_and_others_through_setpriv() {
        let root = RunAs {
            uid: 0,
            gid: 0,
            groups: vec![],
            setpriv: None,
        };
        assert!(root.prefix().is_empty());
        let app = RunAs {
            uid: 1000,
            gid: 1000,
            groups: vec![1000, 27],
            setpriv: Some("/usr/bin/setpriv".into()),
        };
        assert_eq!(
            app.prefix(),
            [
                "/usr/bin/setpriv",
                "--reuid=1000",
                "--regid=1000",
                "--groups=1000,27",
                "--"
            ]
        );
    }

    #[test]
    fn the_environment_is_read_in_the_container_never_written_into_the_script() {
        let argv = in_process_env(42, &["perf".into()], &["it's".into()], None);
        assert!(argv.contains("< /proc/42/environ"));
        assert!(
            argv.contains(" sh 3 1 'it'\\''s' 'perf' 'env' '-i' <"),
            "{argv}"
        );
    }

    /// Runs `in_process_env` on this host against an environment file with hostile
    /// entries, the command printing the argv `env` got (`env` itself stubbed).
    fn run_with_environ(environ: &[u8]) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let environ_path = dir.path().join("environ");
        std::fs::write(&environ_path, environ).unwrap();
        let stub = dir.path().join("env");
        std::fs::write(&stub, "#!/bin/sh\nprintf '%s\\0' \"$@\"\n").unwrap();
        std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let script = in_process_env(1, &[], &["cmd".into(), "arg".into()], None)
            .replace(
                "< /proc/1/environ",
                &format!("< {}", quote(&environ_path.to_string_lossy())),
            )
            .replace(
                "'env' '-i'",
                &format!("{} '-i'", quote(&stub.to_string_lossy())),
            );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh and xargs on this host");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(String::from)
            .collect()
    }

    #[test]
    fn command_env_entry_without_equals_never_becomes_envs_command_or_option() {
        let got = run_with_environ(
            b"PATH=/usr/bin\0/tmp/evil\0-u\0--split-string=/tmp/evil\0=x\0A-B=1\0LD_PRELOAD=/tmp/x.so\0V=a\nb=c\0",
        );
        assert_eq!(
            got,
            [
                "-i",
                "PATH=/usr/bin",
                "LD_PRELOAD=/tmp/x.so",
                "V=a\nb=c",
                "cmd",
                "arg"
            ],
            "only NAME=VALUE entries reach env, before the command"
        );
        assert_eq!(run_with_environ(b""), ["-i", "cmd", "arg"]);
    }

    #[test]
    fn command_env_is_taken_only_after_the_switch_to_the_processs_user() {
        let app = RunAs {
            uid: 1000,
            gid: 1000,
            groups: vec![],
            setpriv: Some("/usr/bin/setpriv".into()),
        };
        let tool = ["/usr/bin/perf".to_string(), "record".into()];
        let command = ["make".to_string()];
        let launch = Launch {
            pid: 7,
            cwd: "/app",
            run_as: &app,
            workdir: "/tmp/devprof.x",
            tool: &tool,
            command: &command,
            name: "command",
        };
        let script = &launch.argv()[2];
        let order = [
            "'/usr/bin/perf'",
            "'record'",
            "'--'",
            "'/usr/bin/setpriv'",
            "'--reuid=1000'",
            "'env' '-i'",
        ];
        let mut at = 0;
        for word in order {
            let found = script[at..]
                .find(word)
                .unwrap_or_else(|| panic!("{word} in order: {script}"));
            at += found;
        }
        assert!(!script.contains("PERF_RUN_PATH"));
    }

    #[test]
    fn words_for_exit_statuses() {
        assert!(status_words(127).contains("not found"));
        assert_eq!(status_words(137), "137: killed by signal 9");
        assert_eq!(status_words(1), "1");
        assert_eq!(
            display(&["sh".into(), "-c".into(), "a b".into()]),
            "sh -c 'a b'"
        );
    }
}
