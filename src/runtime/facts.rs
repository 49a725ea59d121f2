//! What /proc says about one process, read through one exec: its executable and name, its
//! user, the environment variables that switch profiling features on, the runtime
//! libraries it maps, and whether it writes a perf map. Everything is read under
//! /proc/<pid>/, so the same script works inside the container and from a sidecar that
//! shares its pid namespace.

use crate::docker::target::ProcInfo;
use crate::docker::wire::{self, Once, Record};
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use std::time::Duration;

/// Environment variables worth knowing (never the whole environment: it may hold secrets).
pub const WATCHED_ENV: &[&str] = &[
    "_RJEM_MALLOC_CONF",
    "MALLOC_CONF",
    "PYTHONPERFSUPPORT",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "JAVA_HOME",
    "ASYNC_PROFILER_HOME",
    "NODE_OPTIONS",
];

/// Prints records about the process whose pid is `$1` (`$2`: its argv[0], for a program
/// whose /proc/<pid>/exe cannot be read). Every text the process or the container controls
/// (paths, names, environment entries) is encoded (`wire`); numbers come from the kernel.
/// Nothing the process names is read: where /proc/<pid>/exe is unreadable, argv[0] is only
/// resolved to a path, which the archive API reads from outside when it matters.
const PROCESS_BODY: &str = r#"
p=$1
exe=$(readlink /proc/$p/exe 2>/dev/null)
printf 'exe\t'; { readlink /proc/$p/exe 2>/dev/null; } | enc NAME_LIMIT; echo
printf 'cwd\t'; { readlink /proc/$p/cwd 2>/dev/null; } | enc NAME_LIMIT; echo
printf 'comm\t'; { enc NAME_LIMIT < /proc/$p/comm; } 2>/dev/null; echo
uid=
{ while read -r k a b _; do
    case "$k" in
      Uid:) uid=$b; printf 'uid\t%s\n' "$b";;
      Gid:) printf 'gid\t%s\n' "$b";;
      SigCgt:) printf 'sigcgt\t%s\n' "$a";;
      NSpid:) printf 'nspid\t%s\n' "$a";;
      CapEff:) printf 'capeff\t%s\n' "$a";;
    esac
  done < /proc/$p/status; } 2>/dev/null
pw=/proc/$p/root/etc/passwd
if [ -n "$uid" ] && [ -f "$pw" ] && [ ! -L "$pw" ]; then
  cap PASSWD_LIMIT < "$pw" | while IFS=: read -r name _ u _; do
    [ "$u" = "$uid" ] && { printf 'user\t'; printf '%s' "$name" | enc NAME_LIMIT; echo; break; }
  done
fi
WATCHED_ENV_RECORDS
{ while read -r a b c d e f; do
    case "$f" in *libjemalloc*|*libjvm*|*libnode*|*libpython*|*libasyncProfiler*)
      printf 'lib\t'; printf '%s' "$f" | enc NAME_LIMIT; echo;;
    esac
  done < /proc/$p/maps; } 2>/dev/null
[ -e /proc/$p/root/tmp/perf-$p.map ] && printf 'perfmap\t1\n'
if [ -n "$exe" ]; then
  if command -v grep >/dev/null 2>&1; then
    grep -qaF 'Go buildinf:' /proc/$p/exe 2>/dev/null && printf 'gobuildinfo\t1\n'
  else
    printf 'gounchecked\t1\n'
  fi
else
  # /proc/<pid>/exe needs ptrace rights; argv[0] on PATH names the program without them.
  case "$2" in /*) a=$2;; ?*) a=$(command -v "$2" 2>/dev/null);; *) a=;; esac
  [ -n "$a" ] && { printf 'program\t'; printf '%s' "$a" | enc NAME_LIMIT; echo; }
  printf 'gounchecked\t1\n'
fi
"#;

/// Longest /etc/passwd read for the user's name.
const PASSWD_LIMIT: usize = 1 << 20;

/// Longest the process script may take.
const PROCESS_LIMIT: Duration = Duration::from_secs(60);

/// The script with the watched variables and the limits filled in, after the shell
/// functions it uses.
pub fn process_script() -> String {
    let patterns: Vec<String> = WATCHED_ENV.iter().map(|v| format!("{v}=*")).collect();
    let body = PROCESS_BODY
        .replace("WATCHED_ENV_RECORDS", &wire::env_records("$p", &patterns))
        .replace("PASSWD_LIMIT", &PASSWD_LIMIT.to_string())
        .replace("PROC_TEXT_LIMIT", &wire::PROC_TEXT_LIMIT.to_string())
        .replace("NAME_LIMIT", &wire::NAME_LIMIT.to_string());
    format!("{}{body}", wire::PRELUDE)
}

/// The argv[0] handed to the script: a name that could pass for an option is left out.
pub fn script_argv0(process: &ProcInfo) -> &str {
    process
        .argv
        .first()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-') && !a.contains('\0'))
        .unwrap_or("")
}

/// What the process script printed, parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFacts {
    /// /proc/<pid>/exe as the container sees it (` (deleted)` removed).
    pub exe: String,
    pub cwd: Option<String>,
    /// The kernel's name for it (/proc/<pid>/comm), which programs may change.
    pub comm: String,
    /// Effective user and group ids.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The user's name in the container's /etc/passwd.
    pub user: Option<String>,
    /// The caught-signal mask (hex).
    pub sigcgt: Option<String>,
    /// The process's effective capabilities (a bit per capability number).
    pub cap_eff: Option<u64>,
    /// The watched variables that are set.
    pub env: Vec<(String, String)>,
    /// Runtime libraries mapped (libjemalloc, libjvm, libnode, libpython, ...).
    pub libraries: Vec<String>,
    /// A perf map (/tmp/perf-<pid>.map in the process's root) exists.
    pub perf_map: bool,
    /// The program's path from argv[0] (on PATH), when /proc/<pid>/exe is unreadable. Only
    /// ever read through the archive API, never by a command in the container.
    pub program_path: Option<String>,
    /// The executable carries Go's build info (`\xff Go buildinf:`): a Go program.
    pub go_buildinfo: bool,
    /// The executable could not be searched for the build info in the container (no
    /// grep, or /proc/<pid>/exe unreadable): whether the program is Go is for its
    /// executable, read through the archive API, to tell.
    pub go_unchecked: bool,
}

/// A decoded one-line text field: one trailing newline (readlink's, comm's) removed.
fn line_text(record: &Record<'_>) -> Option<String> {
    let text = record.text(0)?;
    Some(text.strip_suffix('\n').unwrap_or(&text).to_string())
}

impl ProcessFacts {
    pub fn parse(text: &str) -> Self {
        let mut facts = ProcessFacts::default();
        let mut once = Once::default();
        for record in wire::records(text) {
            let key = record.key;
            match key {
                "env" => {
                    let entry = record.text(0);
                    if let Some((k, v)) = entry.as_deref().and_then(|e| e.split_once('=')) {
                        if WATCHED_ENV.contains(&k) && facts.env(k).is_none() {
                            facts.env.push((k.to_string(), v.to_string()));
                        }
                    }
                }
                "lib" => {
                    if let Some(lib) = line_text(&record) {
                        if !facts.libraries.contains(&lib) {
                            facts.libraries.push(lib);
                        }
                    }
                }
                _ if !once.first(key) => {}
                "exe" => {
                    if let Some(exe) = line_text(&record) {
                        facts.exe = exe.trim_end_matches(" (deleted)").to_string();
                    }
                }
                "cwd" => facts.cwd = line_text(&record).filter(|c| c.starts_with('/')),
                "comm" => facts.comm = line_text(&record).unwrap_or_default(),
                "uid" => facts.uid = record.number(0),
                "gid" => facts.gid = record.number(0),
                "user" => facts.user = line_text(&record).filter(|u| !u.is_empty()),
                "sigcgt" => {
                    facts.sigcgt = record
                        .raw(0)
                        .filter(|m| wire::mask(m).is_some())
                        .map(str::to_string)
                }
                "capeff" => facts.cap_eff = record.raw(0).and_then(wire::mask),
                "perfmap" => facts.perf_map = record.raw(0) == Some("1"),
                "gobuildinfo" => facts.go_buildinfo = record.raw(0) == Some("1"),
                "gounchecked" => facts.go_unchecked = record.raw(0) == Some("1"),
                "program" => facts.program_path = line_text(&record).filter(|p| p.starts_with('/')),
                _ => {}
            }
        }
        facts
    }

    /// Reads the facts of `process` through `shell`.
    pub async fn probe<S: ContainerShell>(shell: &S, process: &ProcInfo) -> Result<Self> {
        let pid = process.pid.to_string();
        let script = process_script();
        let argv = ["sh", "-c", &script, "sh", &pid, script_argv0(process)];
        let read = async { Ok(shell.run(&argv).await?.stdout) };
        Self::parsed_within(shell.container(), &pid, read).await
    }

    /// `probe`, its exec kept as a standby for the shell's next command (the recorder).
    pub async fn probe_standing_by(
        shell: &crate::docker::Shell,
        process: &ProcInfo,
    ) -> Result<Self> {
        let pid = process.pid.to_string();
        let script = process_script();
        let args = [pid.as_str(), script_argv0(process)];
        let read = shell.run_then_stand_by(&script, &args);
        Self::parsed_within(shell.container(), &pid, read).await
    }

    async fn parsed_within(
        container: &str,
        pid: &str,
        read: impl std::future::Future<Output = Result<String>>,
    ) -> Result<Self> {
        match tokio::time::timeout(PROCESS_LIMIT, read).await {
            Ok(stdout) => Ok(ProcessFacts::parse(&stdout?)),
            Err(_) => Err(Error::ProcessNotFound {
                container: container.to_string(),
                what: format!("what /proc says about pid {pid} could not be read"),
                hint: format!(
                    "the process script did not finish within {} s; is the container overloaded?",
                    PROCESS_LIMIT.as_secs()
                ),
            }),
        }
    }

    /// The executable's path: /proc/<pid>/exe's, else argv[0]'s on PATH.
    pub fn executable(&self) -> Option<&str> {
        Some(self.exe.as_str())
            .filter(|e| !e.is_empty())
            .or(self.program_path.as_deref())
    }

    /// A watched variable's value, when set.
    pub fn env(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a mapped library's path contains `needle`.
    pub fn maps(&self, needle: &str) -> bool {
        self.libraries.iter().any(|l| l.contains(needle))
    }

    /// `uid:gid` for `docker exec --user`, when known.
    pub fn exec_user(&self) -> Option<String> {
        Some(format!("{}:{}", self.uid?, self.gid?))
    }

    /// The user for people: `app (1000)`, `uid 1000`, or `root`.
    pub fn user_text(&self) -> String {
        match (&self.user, self.uid) {
            (Some(name), Some(uid)) if uid != 0 => format!("{name} ({uid})"),
            (Some(name), _) => name.clone(),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "unknown".to_string(),
        }
    }
}

/// `key<TAB>value` lines as the process script prints them: the text values encoded.
#[cfg(test)]
pub fn encoded(lines: &str) -> String {
    const TEXT: &[&str] = &["exe", "cwd", "comm", "user", "env", "lib", "program"];
    lines
        .lines()
        .map(|line| match line.split_once('\t') {
            Some((key, value)) if TEXT.contains(&key) => {
                format!("{key}\t{}\n", wire::encode(value.as_bytes()))
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_script_prints() {
        let f = ProcessFacts::parse(&encoded(
            "exe\t/usr/lib/jvm/java-17-openjdk-amd64/bin/java (deleted)\ncwd\t/app\ncomm\tjava\n\
             uid\t1000\ngid\t1000\nsigcgt\t0000000000000000\nuser\tapp\ncapeff\t0000000000000000\n\
             env\tJAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer\n\
             lib\t/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\n\
             lib\t/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\nperfmap\t1\n",
        ));
        assert_eq!(f.exe, "/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
        assert_eq!((f.uid, f.gid), (Some(1000), Some(1000)));
        assert_eq!(f.cap_eff, Some(0));
        assert_eq!(f.exec_user().as_deref(), Some("1000:1000"));
        assert_eq!(f.user_text(), "app (1000)");
        assert_eq!(
            f.env("JAVA_TOOL_OPTIONS"),
            Some("-XX:+PreserveFramePointer")
        );
        assert_eq!(f.libraries.len(), 1);
        assert!(f.maps("libjvm") && f.perf_map);
    }

    #[test]
    fn the_script_watches_only_the_listed_variables() {
        let script = process_script();
        assert!(script.contains("NODE_OPTIONS=*|") || script.contains("NODE_OPTIONS=*)"));
        assert!(!script.contains("WATCHED_ENV"));
    }

    #[test]
    fn process_facts_forged_by_a_file_name_or_environment_are_not_taken() {
        // An executable named with newlines, an environment value holding a second entry:
        // both arrive as one encoded field each.
        let exe = "/tmp/x\nuid\t0\nlib\t/usr/lib/libjvm.so\nperfmap\t1";
        let text = format!(
            "exe\t{}\nuid\t1000\nenv\t{}\n",
            wire::encode(format!("{exe}\n").as_bytes()),
            wire::encode(b"MALLOC_CONF=a\nJAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism"),
        );
        let f = ProcessFacts::parse(&text);
        assert_eq!(f.exe, exe);
        assert_eq!(f.uid, Some(1000));
        assert!(f.libraries.is_empty() && !f.perf_map);
        assert_eq!(
            f.env("MALLOC_CONF"),
            Some("a\nJAVA_TOOL_OPTIONS=-XX:+DisableAttachMechanism")
        );
        assert_eq!(f.env("JAVA_TOOL_OPTIONS"), None);
        // A key seen twice: the first stands.
        let f = ProcessFacts::parse(
            "uid\t1000\nuid\t0\ncapeff\t0000000000000000\ncapeff\t000001ffffffffff\n",
        );
        assert_eq!((f.uid, f.cap_eff), (Some(1000), Some(0)));
        // Raw (unencoded) text is not taken.
        assert_eq!(ProcessFacts::parse("exe\t/usr/bin/java\n").exe, "");
    }

    #[test]
    fn runtime_probe_never_reads_the_file_argv0_names() {
        let script = process_script();
        // The only file searched for Go's build info is /proc/<pid>/exe itself.
        assert!(script.contains("grep -qaF 'Go buildinf:' /proc/$p/exe"));
        assert_eq!(script.matches("grep -qaF").count(), 1, "{script}");
        // argv[0] reaches the script as an argument; one that could pass for an option
        // is not handed over.
        let p = |argv: &[&str]| ProcInfo::new(7, 1, argv.iter().map(|a| a.to_string()).collect());
        assert_eq!(script_argv0(&p(&["/dev/zero", "x"])), "/dev/zero");
        assert_eq!(script_argv0(&p(&["-v"])), "");
        assert_eq!(script_argv0(&p(&[])), "");
    }

    /// The maps loop (`read -r a b c d e f`) emptied the executable's variable, so every
    /// native process counted as not searched for Go's build info: each capture copied its
    /// whole executable out of the container to look (~0.4 s and 15 MB for demo-seq).
    #[test]
    fn a_readable_executable_is_searched_in_place_not_left_unchecked() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let pid = child.id().to_string();
        let out = std::process::Command::new("sh")
            .args(["-c", &process_script(), "sh", &pid, "sleep"])
            .output()
            .expect("sh runs");
        let _ = child.kill();
        let _ = child.wait();
        let facts = ProcessFacts::parse(&String::from_utf8_lossy(&out.stdout));
        assert!(facts.exe.ends_with("/sleep"), "{facts:?}");
        assert!(!facts.go_unchecked, "searched in place: {facts:?}");
        assert!(!facts.go_buildinfo);
    }
}
