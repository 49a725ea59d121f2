//! What a container offers, read through one exec: the kernel, perf binaries, the perf
//! sysctls, the effective capabilities and seccomp mode, and every process with its parent
//! and command line. Capture recipes, engines and the doctor decide from these facts.
//!
//! The scalar facts come first, in a fixed order, and are read from their positions; the
//! command lines come after them hex-encoded (`wire`), so no process can add a fact or a
//! perf binary by what it puts in its argv. perf is looked for only in root's own
//! directories, never on PATH and never in a process's root.

use super::exec::ContainerShell;
use super::target::{ProcInfo, PROC_RECORD};
use super::wire::{self, WireError};
use crate::error::{Error, Result};
use std::time::Duration;

/// Shell functions for programs devprof runs as root: `root_only PATH` holds when PATH
/// and every directory above it belong to root and no one else may write them (a symbolic
/// link shows as writable by all, so a link on the way fails it); `trusted PATH` prints
/// the regular file PATH names when `root_only` holds for it and for the directory of
/// every link followed to reach it.
pub const TRUSTED_FN: &str = r#"
root_only() {
  q=$1
  while :; do
    set -f; set -- $(ls -ldn "$q" 2>/dev/null); set +f
    [ "${3-}" = 0 ] || return 1
    case "${1-}" in ?????w*|????????w*) return 1;; esac
    [ "$q" = / ] && return 0
    q=${q%/*}; [ -n "$q" ] || q=/
  done
}
trusted() {
  t=$1; n=0
  case "$t" in /*) ;; *) return 1;; esac
  while [ -L "$t" ]; do
    d=${t%/*}; root_only "${d:-/}" || return 1
    l=$(readlink "$t") || return 1
    case "$l" in /*) t=$l;; *) t=${d}/$l;; esac
    n=$((n+1)); [ $n -le 8 ] || return 1
  done
  [ -f "$t" ] && root_only "$t" && printf '%s\n' "$t"
}
"#;

/// The directories perf is looked for in, besides Ubuntu's /usr/lib/linux-tools*/.
pub const PERF_DIRS: &[&str] = &["/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin"];

/// The facts every probe starts with, one line each, in this order.
const HEADER: [&str; 6] = [
    "kernel",
    "paranoid",
    "kptr_restrict",
    "cap_eff",
    "seccomp",
    "sysctl_writable",
];

/// The record that says a PMU in sysfs names a cycles event (`.../events/cpu-cycles`, or
/// `cpu_cycles` on Arm): without one, most likely no PMU here counts cycles.
const CYCLES_RECORD: &str = "pmu_cycles";

/// What a probe asked for perf ahead (`$1` is `perf`) adds for each perf candidate: its
/// answer to `version --build-options`, so that the recorder's command line is known as
/// soon as the probe answers.
const PERF_VERSION_RECORD: &str = "perf_version";
/// The same probe's workdir, made by `mktemp -d` where it found a perf (the workdir every
/// capture needs; none is made in a container perf cannot record from).
const WORKDIR_RECORD: &str = "workdir";
/// The most of perf's version answer read (Debian's is under 2 KiB).
const VERSION_LIMIT: usize = 16 * 1024;

/// The part of the probe after the shell functions: the header, perf candidates (asked
/// ahead: their versions and a workdir), then `proc<TAB>pid<TAB>ppid<TAB>cmdline`
/// records; its own processes are excluded.
const PROBE_BODY: &str = r#"
ahead=${1-}
printf 'kernel\t%s\n' "$(uname -r 2>/dev/null)"
printf 'paranoid\t%s\n' "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
printf 'kptr_restrict\t%s\n' "$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null)"
c=; s=
while read -r k v _; do
  case "$k" in CapEff:) c=$v;; Seccomp:) s=$v;; esac
done < /proc/self/status
printf 'cap_eff\t%s\nseccomp\t%s\n' "$c" "$s"
w=0; [ -w /proc/sys/kernel/perf_event_paranoid ] && w=1
printf 'sysctl_writable\t%s\n' "$w"
for f in /sys/bus/event_source/devices/*/events/cpu-cycles /sys/bus/event_source/devices/*/events/cpu_cycles; do
  [ -e "$f" ] && { echo CYCLES_RECORD; break; }
done
seen=" "
for d in PERF_DIRS /usr/lib/linux-tools-* /usr/lib/linux-tools/*; do
  [ -d "$d" ] || continue
  for f in "$d"/perf "$d"/perf_[0-9]*; do
    [ -f "$f" ] || continue
    r=$(trusted "$f") && [ -x "$r" ] || continue
    case "$seen" in *" $r "*) continue;; esac
    seen="$seen$r "
    printf 'perf\t'; printf '%s' "$f" | enc NAME_LIMIT; echo
    [ "$ahead" = perf ] || continue
    printf 'PERF_VERSION_RECORD\t'; printf '%s' "$f" | enc NAME_LIMIT; printf '\t'
    "$f" version --build-options 2>/dev/null </dev/null | enc VERSION_LIMIT; echo
  done
done
if [ "$ahead" = perf ] && [ "$seen" != " " ]; then
  printf 'WORKDIR_RECORD\t'; printf '%s' "$(mktemp -d /tmp/devprof.XXXXXXXX 2>/dev/null)" | enc NAME_LIMIT; echo
fi
self=$$
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  [ "$pid" = "$self" ] && continue
  ppid=
  { while read -r k v _; do
      [ "$k" = "PPid:" ] && { ppid=$v; break; }
    done < "$d/status"; } 2>/dev/null
  [ "$ppid" = "$self" ] && continue
  printf 'PROC_RECORD\t%s\t%s\t' "$pid" "$ppid"
  { enc PROC_TEXT_LIMIT < "$d/cmdline"; } 2>/dev/null
  echo
done
"#;

/// The probe script: one exec that reports everything the capture needs to decide before
/// recording.
pub fn probe_script() -> String {
    let body = PROBE_BODY
        .replace("PERF_DIRS", &PERF_DIRS.join(" "))
        .replace("PROC_RECORD", PROC_RECORD)
        .replace("CYCLES_RECORD", CYCLES_RECORD)
        .replace("PERF_VERSION_RECORD", PERF_VERSION_RECORD)
        .replace("WORKDIR_RECORD", WORKDIR_RECORD)
        .replace("VERSION_LIMIT", &VERSION_LIMIT.to_string())
        .replace("PROC_TEXT_LIMIT", &wire::PROC_TEXT_LIMIT.to_string())
        .replace("NAME_LIMIT", &wire::NAME_LIMIT.to_string());
    format!("{}{TRUSTED_FN}{body}", wire::PRELUDE)
}

/// Longest the probe may take (it reads every process's command line).
const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// Linux capability numbers that matter to perf.
pub const CAP_SYS_PTRACE: u32 = 19;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYSLOG: u32 = 34;
pub const CAP_PERFMON: u32 = 38;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerFacts {
    pub kernel: String,
    /// perf binaries in root's own directories (`PERF_DIRS`, /usr/lib/linux-tools*/), each
    /// with every directory above it and every link to it root's alone.
    pub perf_candidates: Vec<String>,
    pub paranoid: Option<i32>,
    pub kptr_restrict: Option<i32>,
    pub sysctl_writable: bool,
    pub cap_eff: Option<u64>,
    /// 0 none, 1 strict, 2 filter (Docker's default profile).
    pub seccomp: Option<u8>,
    /// A PMU in sysfs names a cycles event (false on VMs without a PMU, such as this
    /// project's CI): without it perf most likely cannot count cycles, so the access
    /// trial gives them no time to count.
    pub pmu_cycles: bool,
    pub processes: Vec<ProcInfo>,
    /// What a probe asked for perf ahead found (empty otherwise).
    pub perf_ahead: PerfAhead,
}

/// A probe's answers for a perf capture: each candidate's `version --build-options`
/// answer, and the workdir `mktemp -d` printed (its form not yet checked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfAhead {
    pub versions: Vec<(String, String)>,
    pub workdir: Option<String>,
}

impl ContainerFacts {
    /// The workdir the probe made ahead, as `mktemp -d` printed it, if it made one.
    pub fn made_workdir(&self) -> Option<&str> {
        self.perf_ahead.workdir.as_deref()
    }
}

impl PerfAhead {
    /// `perf`'s answer to its version query, if the probe asked it.
    pub fn version_answer(&self, perf: &str) -> Option<&str> {
        self.versions
            .iter()
            .find(|(path, _)| path == perf)
            .map(|(_, answer)| answer.as_str())
    }
}

/// Whether `path` is where the probe may find perf: a `perf` or `perf_<digits>...` file
/// directly in one of `PERF_DIRS`, or in one of Ubuntu's linux-tools directories.
pub fn is_perf_path(path: &str) -> bool {
    let Some((dir, name)) = path.rsplit_once('/') else {
        return false;
    };
    let clean =
        !path.chars().any(char::is_control) && !path.split('/').any(|c| c == ".." || c == ".");
    let named = name == "perf"
        || name
            .strip_prefix("perf_")
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
    let one_below = |parent: &str| {
        dir.strip_prefix(parent)
            .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
    };
    clean
        && named
        && (PERF_DIRS.contains(&dir)
            || one_below("/usr/lib/linux-tools-")
            || one_below("/usr/lib/linux-tools/"))
}

/// An optional scalar: empty is unknown, anything else must read strictly.
fn optional<T>(
    key: &'static str,
    value: &str,
    read: impl Fn(&str) -> Option<T>,
) -> std::result::Result<Option<T>, WireError> {
    if value.is_empty() {
        return Ok(None);
    }
    read(value).map(Some).ok_or_else(|| WireError::Invalid {
        key,
        value: crate::text::printable(value),
    })
}

impl ContainerFacts {
    pub fn parse(text: &str) -> std::result::Result<Self, WireError> {
        let (head, rest) = wire::header(text, &HEADER)?;
        let kernel = head[0];
        if !kernel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c))
        {
            return Err(WireError::Invalid {
                key: "kernel",
                value: crate::text::printable(kernel),
            });
        }
        let sysctl_writable = match head[5] {
            "1" => true,
            "0" => false,
            other => {
                return Err(WireError::Invalid {
                    key: "sysctl_writable",
                    value: crate::text::printable(other),
                })
            }
        };
        let mut facts = ContainerFacts {
            kernel: kernel.to_string(),
            paranoid: optional("paranoid", head[1], wire::number)?,
            kptr_restrict: optional("kptr_restrict", head[2], wire::number)?,
            cap_eff: optional("cap_eff", head[3], wire::mask)?,
            seccomp: optional("seccomp", head[4], |v| {
                wire::number::<u8>(v).filter(|m| *m <= 2)
            })?,
            sysctl_writable,
            ..Default::default()
        };
        let mut in_processes = false;
        for record in rest.map(wire::Record::parse) {
            in_processes |= record.key == PROC_RECORD;
            match record.key {
                // Candidates come before the first process and only from the search.
                "perf" if !in_processes => {
                    let path = record.bytes(0).and_then(|b| String::from_utf8(b).ok());
                    if let Some(path) = path.filter(|p| is_perf_path(p)) {
                        if !facts.perf_candidates.contains(&path) {
                            facts.perf_candidates.push(path);
                        }
                    }
                }
                CYCLES_RECORD if !in_processes => facts.pmu_cycles = true,
                PERF_VERSION_RECORD if !in_processes => {
                    let path = record.bytes(0).and_then(|b| String::from_utf8(b).ok());
                    let answer = record
                        .bytes(1)
                        .map(|b| String::from_utf8_lossy(&b).into_owned());
                    if let (Some(path), Some(answer)) = (path, answer) {
                        // Only a candidate's, once: the records before it said which.
                        if facts.perf_candidates.contains(&path)
                            && facts.perf_ahead.version_answer(&path).is_none()
                        {
                            facts.perf_ahead.versions.push((path, answer));
                        }
                    }
                }
                WORKDIR_RECORD if !in_processes && facts.perf_ahead.workdir.is_none() => {
                    facts.perf_ahead.workdir =
                        record.bytes(0).and_then(|b| String::from_utf8(b).ok());
                }
                PROC_RECORD => facts.processes.extend(ProcInfo::from_record(&record)),
                _ => {}
            }
        }
        Ok(facts)
    }

    pub fn has_cap(&self, cap: u32) -> bool {
        self.cap_eff.is_some_and(|bits| bits & (1u64 << cap) != 0)
    }

    /// CAP_PERFMON, or CAP_SYS_ADMIN which implies it on older kernels.
    pub fn may_monitor(&self) -> bool {
        self.has_cap(CAP_PERFMON) || self.has_cap(CAP_SYS_ADMIN)
    }

    pub async fn probe<S: ContainerShell>(shell: &S) -> Result<Self> {
        let failed = |hint: String| Error::ProcessNotFound {
            container: shell.container().to_string(),
            what: "cannot inspect processes".to_string(),
            hint,
        };
        let out = match tokio::time::timeout(PROBE_LIMIT, shell.sh(&probe_script())).await {
            Ok(out) => out?,
            Err(_) => return Err(failed(overloaded())),
        };
        if !out.success() && out.stdout.is_empty() {
            return Err(failed(format!(
                "devprof needs `sh` in the container to find the process ({})",
                out.stderr.trim()
            )));
        }
        Self::parse_probed(&out.stdout).map_err(failed)
    }

    /// `probe`, asking ahead for a perf capture (each perf's version, a workdir), its exec
    /// kept as a standby for the next command as root (`Shell::run_then_stand_by`).
    pub async fn probe_for_perf(shell: &super::Shell) -> Result<Self> {
        let failed = |hint: String| Error::ProcessNotFound {
            container: shell.container().to_string(),
            what: "cannot inspect processes".to_string(),
            hint,
        };
        let script = probe_script();
        let stdout =
            match tokio::time::timeout(PROBE_LIMIT, shell.run_then_stand_by(&script, &["perf"]))
                .await
            {
                Ok(stdout) => stdout?,
                Err(_) => return Err(failed(overloaded())),
            };
        if stdout.is_empty() {
            return Err(failed(
                "devprof needs `sh` in the container to find the process (the probe printed nothing)"
                    .to_string(),
            ));
        }
        Self::parse_probed(&stdout).map_err(failed)
    }

    /// The probe's output read, or the hint for what it was instead.
    fn parse_probed(stdout: &str) -> std::result::Result<Self, String> {
        ContainerFacts::parse(stdout).map_err(|e| {
            format!(
                "the probe's output is not what devprof's script prints ({e}); is `sh` in the container a POSIX shell?"
            )
        })
    }
}

fn overloaded() -> String {
    format!(
        "the probe of the container's processes did not finish within {} s; is the container overloaded?",
        PROBE_LIMIT.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::wire::encode;

    fn header() -> String {
        "kernel\t6.18.44-fc\nparanoid\t2\nkptr_restrict\t0\ncap_eff\t00000040a80c25fb\nseccomp\t0\nsysctl_writable\t0\n"
            .to_string()
    }

    /// A probe asked for perf ahead: a version answer only for a candidate listed before
    /// it, the first one of each, none from after the processes began; the workdir as
    /// printed (its form is checked where it is used).
    #[test]
    fn reads_the_perf_versions_and_workdir_asked_ahead_only_where_they_belong() {
        let version = "perf version 6.1.187\n zstd: [ on  ]  # HAVE_ZSTD_SUPPORT\n";
        let text = format!(
            "{}perf\t{}\nperf_version\t{}\t{}\nperf_version\t{}\t{}\nperf_version\t{}\t{}\nworkdir\t{}\nworkdir\t{}\nproc\t1\t0\t{}\nperf_version\t{}\t{}\nworkdir\t{}\n",
            header(),
            encode(b"/usr/bin/perf"),
            encode(b"/usr/bin/perf"),
            encode(version.as_bytes()),
            encode(b"/usr/bin/perf"),
            encode(b"perf version 9.9"),
            encode(b"/usr/local/bin/perf"),
            encode(b"perf version 9.9"),
            encode(b"/tmp/devprof.AbC123"),
            encode(b"/tmp/devprof.second"),
            encode(b"demo-node\0"),
            encode(b"/usr/bin/perf"),
            encode(b"perf version 1.0"),
            encode(b"/tmp/devprof.late"),
        );
        let f = ContainerFacts::parse(&text).unwrap();
        assert_eq!(f.perf_ahead.version_answer("/usr/bin/perf"), Some(version));
        assert_eq!(f.perf_ahead.version_answer("/usr/local/bin/perf"), None);
        assert_eq!(f.perf_ahead.versions.len(), 1);
        assert_eq!(f.perf_ahead.workdir.as_deref(), Some("/tmp/devprof.AbC123"));
        assert_eq!(f.processes.len(), 1);
        // Asked for nothing ahead, a probe has none of it.
        let plain = ContainerFacts::parse(&header()).unwrap();
        assert_eq!(plain.perf_ahead, PerfAhead::default());
    }

    #[test]
    fn parses_facts_and_capabilities() {
        let text = format!(
            "{}perf\t{}\nproc\t1\t0\t{}\n",
            header(),
            encode(b"/usr/bin/perf"),
            encode(b"demo-node\0")
        );
        let f = ContainerFacts::parse(&text).unwrap();
        assert_eq!(f.kernel, "6.18.44-fc");
        assert_eq!(f.perf_candidates, vec!["/usr/bin/perf"]);
        assert_eq!(f.paranoid, Some(2));
        assert!(f.has_cap(CAP_PERFMON) && f.has_cap(CAP_SYS_PTRACE) && !f.has_cap(CAP_SYS_ADMIN));
        assert_eq!(f.processes.len(), 1);
        assert_eq!(f.processes[0].argv, vec!["demo-node"]);
        assert!(!f.sysctl_writable);
    }

    #[test]
    fn a_cycles_event_is_known_from_its_record_before_the_processes_only() {
        let without = ContainerFacts::parse(&header()).unwrap();
        assert!(!without.pmu_cycles);
        let with = ContainerFacts::parse(&format!("{}pmu_cycles\n", header())).unwrap();
        assert!(with.pmu_cycles);
        // A process cannot print the record: its command line is encoded, and a record
        // after the first process is not read as a fact.
        let late = format!("{}proc\t1\t0\t{}\npmu_cycles\n", header(), encode(b"x\0"));
        assert!(!ContainerFacts::parse(&late).unwrap().pmu_cycles);
    }

    #[test]
    fn probe_newline_in_argv_cannot_add_a_perf_candidate() {
        // What the old probe printed for `exec -a $'x\nperf\t/tmp/p/perf_6.18\nz' sleep`:
        // the raw line is no record at all now.
        let raw = format!(
            "{}proc\t9\t1\tx\nperf\t/tmp/p/perf_6.18\nparanoid\t-1\nz sleep 1000\n",
            header()
        );
        let f = ContainerFacts::parse(&raw).unwrap();
        assert!(f.perf_candidates.is_empty());
        assert_eq!(f.paranoid, Some(2));
        assert!(
            f.processes.is_empty(),
            "an unencoded command line is not taken"
        );
        // The same argv as the new probe prints it: one process, its argv exact.
        let argv = b"x\nperf\t/tmp/p/perf_6.18\nparanoid\t-1\nz\0sleep\x001000\0";
        let f =
            ContainerFacts::parse(&format!("{}proc\t9\t1\t{}\n", header(), encode(argv))).unwrap();
        assert!(f.perf_candidates.is_empty());
        assert_eq!(f.paranoid, Some(2));
        assert_eq!(
            f.processes[0].argv[0],
            "x\nperf\t/tmp/p/perf_6.18\nparanoid\t-1\nz"
        );
        assert!(!f.processes[0].cmdline.contains('\n'));
    }

    #[test]
    fn probe_facts_are_read_once_from_their_places() {
        // A second header line never overrides the first.
        let text = format!("{}paranoid\t-1\nsysctl_writable\t1\n", header());
        let f = ContainerFacts::parse(&text).unwrap();
        assert_eq!(f.paranoid, Some(2));
        assert!(!f.sysctl_writable);
        // Out of order or malformed: refused, not guessed.
        let swapped = header().replacen(
            "paranoid\t2\nkptr_restrict\t0",
            "kptr_restrict\t0\nparanoid\t2",
            1,
        );
        assert!(ContainerFacts::parse(&swapped).is_err());
        assert!(ContainerFacts::parse(&header().replace("\t2\n", "\t2 \n")).is_err());
        assert!(ContainerFacts::parse(&header().replace("00000040a80c25fb", "40")).is_err());
        assert!(ContainerFacts::parse(&header().replace("6.18.44-fc", "6.18\u{1b}")).is_err());
        // Unknown values stay unknown.
        let blank = header().replace("paranoid\t2", "paranoid\t");
        assert_eq!(ContainerFacts::parse(&blank).unwrap().paranoid, None);
    }

    /// `trusted` run by this host's sh: a file root alone may change is taken (through
    /// links that root alone may change too), anything under a directory others may write
    /// is not, whoever owns the file.
    #[test]
    fn trusted_takes_only_files_root_alone_may_change() {
        let trusted = |path: &str| {
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("{TRUSTED_FN}\ntrusted \"$1\""), "sh", path])
                .output()
                .expect("sh on this host");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let sh = ["/usr/bin/sh", "/bin/sh"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap();
        let real = std::fs::canonicalize(sh).unwrap();
        assert_eq!(
            trusted(&real.to_string_lossy()).as_deref(),
            Some(&*real.to_string_lossy())
        );
        // /tmp is writable by all: nothing below it, not a copy, not a link to a good file.
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("perf");
        std::fs::copy(&real, &copy).unwrap();
        assert_eq!(trusted(&copy.to_string_lossy()), None);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(trusted(&link.to_string_lossy()), None);
        assert_eq!(trusted("relative/perf"), None);
        assert_eq!(trusted("/nonexistent/perf"), None);
    }

    #[test]
    fn messages_name_every_place_perf_is_looked_for() {
        for dir in PERF_DIRS {
            assert!(
                crate::error::PERF_SEARCH.contains(&format!("{dir},"))
                    || crate::error::PERF_SEARCH.contains(&format!("{dir} ")),
                "{dir}"
            );
        }
        assert!(crate::error::PERF_SEARCH.contains("/usr/lib/linux-tools"));
    }

    #[test]
    fn perf_candidates_come_only_from_roots_directories() {
        for ok in [
            "/usr/bin/perf",
            "/usr/bin/perf_6.1",
            "/usr/local/bin/perf_6.8",
            "/sbin/perf",
            "/usr/lib/linux-tools-6.8.0-31/perf",
            "/usr/lib/linux-tools/6.8.0-31-generic/perf",
        ] {
            assert!(is_perf_path(ok), "{ok}");
        }
        for bad in [
            "/tmp/p/perf_6.18",
            "/proc/1/root/usr/bin/perf",
            "/usr/bin/../../tmp/perf",
            "/usr/bin/perfx",
            "/usr/bin/perf_x",
            "/usr/lib/linux-tools/a/b/perf",
            "/usr/lib/linux-tools-/perf",
            "perf",
            "/usr/bin/perf\n",
        ] {
            assert!(!is_perf_path(bad), "{bad}");
        }
        // A candidate after the first process, or outside the search, is dropped.
        let text = format!(
            "{}perf\t{}\nproc\t1\t0\t{}\nperf\t{}\n",
            header(),
            encode(b"/tmp/p/perf_6.18"),
            encode(b"sleep\0"),
            encode(b"/usr/bin/perf")
        );
        assert!(ContainerFacts::parse(&text)
            .unwrap()
            .perf_candidates
            .is_empty());
    }
}
