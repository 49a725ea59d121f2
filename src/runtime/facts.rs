//! What /proc says about one process, read through one exec: its executable and name, its
//! user, the environment variables that switch profiling features on, the runtime
//! libraries it maps, and whether it writes a perf map. Everything is read under
//! /proc/<pid>/, so the same script works inside the container and from a sidecar that
//! shares its pid namespace.

use crate::docker::ContainerShell;
use crate::error::Result;

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

/// Prints `key<TAB>value` lines about the process whose pid is `$1`.
pub const PROCESS_SCRIPT: &str = r#"
p=$1
printf 'exe\t%s\n' "$(readlink /proc/$p/exe 2>/dev/null)"
printf 'cwd\t%s\n' "$(readlink /proc/$p/cwd 2>/dev/null)"
read -r comm < /proc/$p/comm 2>/dev/null && printf 'comm\t%s\n' "$comm"
while read -r k a b _; do
  case "$k" in
    Uid:) printf 'uid\t%s\n' "$b";;
    Gid:) printf 'gid\t%s\n' "$b";;
    SigCgt:) printf 'sigcgt\t%s\n' "$a";;
    NSpid:) printf 'nspid\t%s\n' "$a";;
    CapEff:) printf 'capeff\t%s\n' "$a";;
  esac
done < /proc/$p/status 2>/dev/null
uid=$(awk '/^Uid:/ {print $3}' /proc/$p/status 2>/dev/null)
if [ -n "$uid" ] && [ -r /proc/$p/root/etc/passwd ]; then
  while IFS=: read -r name _ u _; do
    [ "$u" = "$uid" ] && { printf 'user\t%s\n' "$name"; break; }
  done < /proc/$p/root/etc/passwd
fi
tr '\0' '\n' < /proc/$p/environ 2>/dev/null | while IFS= read -r l; do
  case "$l" in WATCHED) printf 'env\t%s\n' "$l";; esac
done
while read -r a b c d e f; do
  case "$f" in *libjemalloc*|*libjvm*|*libnode*|*libpython*|*libasyncProfiler*) printf 'lib\t%s\n' "$f";; esac
done < /proc/$p/maps 2>/dev/null
[ -e /proc/$p/root/tmp/perf-$p.map ] && printf 'perfmap\t1\n'
e=$(readlink /proc/$p/exe 2>/dev/null)
if [ -z "$e" ]; then
  # /proc/<pid>/exe needs ptrace rights; argv[0] on PATH names the program without them.
  a=$(tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | head -n 1)
  case "$a" in /*) e=$a;; ?*) e=$(command -v "$a" 2>/dev/null);; esac
  [ -n "$e" ] && printf 'program\t%s\n' "$e"
fi
if command -v grep >/dev/null 2>&1; then
  { grep -qaF 'Go buildinf:' /proc/$p/exe || grep -qaF 'Go buildinf:' "/proc/$p/root$e" || grep -qaF 'Go buildinf:' "$e"; } 2>/dev/null && printf 'gobuildinfo\t1\n'
else
  printf 'nogrep\t1\n'
fi
"#;

/// The script with the watched variables filled in.
pub fn process_script() -> String {
    let patterns: Vec<String> = WATCHED_ENV.iter().map(|v| format!("{v}=*")).collect();
    PROCESS_SCRIPT.replace("WATCHED", &patterns.join("|"))
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
    /// The program's path from argv[0] (on PATH), when /proc/<pid>/exe is unreadable.
    pub program_path: Option<String>,
    /// The executable carries Go's build info (`\xff Go buildinf:`): a Go program.
    pub go_buildinfo: bool,
    /// The container has no grep to look for the build info with: whether the program is
    /// Go is for its executable, read through the archive API, to tell.
    pub go_unchecked: bool,
}

impl ProcessFacts {
    pub fn parse(text: &str) -> Self {
        let mut facts = ProcessFacts::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once('\t') else {
                continue;
            };
            let value = value.trim_end();
            match key {
                "exe" => facts.exe = value.trim_end_matches(" (deleted)").to_string(),
                "cwd" if !value.is_empty() => facts.cwd = Some(value.to_string()),
                "comm" => facts.comm = value.to_string(),
                "uid" => facts.uid = value.trim().parse().ok(),
                "gid" => facts.gid = value.trim().parse().ok(),
                "user" if !value.is_empty() => facts.user = Some(value.to_string()),
                "sigcgt" => facts.sigcgt = Some(value.trim().to_string()),
                "capeff" => facts.cap_eff = u64::from_str_radix(value.trim(), 16).ok(),
                "env" => {
                    if let Some((k, v)) = value.split_once('=') {
                        facts.env.push((k.to_string(), v.to_string()));
                    }
                }
                "lib" => {
                    let lib = value.trim().to_string();
                    if !facts.libraries.contains(&lib) {
                        facts.libraries.push(lib);
                    }
                }
                "perfmap" => facts.perf_map = true,
                "gobuildinfo" => facts.go_buildinfo = true,
                "nogrep" => facts.go_unchecked = true,
                "program" if value.starts_with('/') => facts.program_path = Some(value.to_string()),
                _ => {}
            }
        }
        facts
    }

    /// Reads the facts of `pid` through `shell`.
    pub async fn probe<S: ContainerShell>(shell: &S, pid: u32) -> Result<Self> {
        let pid = pid.to_string();
        let out = shell
            .run(&["sh", "-c", &process_script(), "sh", &pid])
            .await?;
        Ok(ProcessFacts::parse(&out.stdout))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_script_prints() {
        let f = ProcessFacts::parse(
            "exe\t/usr/lib/jvm/java-17-openjdk-amd64/bin/java (deleted)\ncwd\t/app\ncomm\tjava\n\
             uid\t1000\ngid\t1000\nsigcgt\t0000000000000000\nuser\tapp\ncapeff\t0000000000000000\n\
             env\tJAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer\n\
             lib\t/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\n\
             lib\t/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so\nperfmap\t1\n",
        );
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
        assert!(!script.contains("WATCHED"));
    }
}
