//! What a container offers, read through one exec: the kernel, perf binaries, the perf
//! sysctls, the effective capabilities and seccomp mode, and every process with its parent
//! and command line. Capture recipes, engines and the doctor decide from these facts.

use super::exec::ContainerShell;
use super::target::{parse_processes, ProcInfo};
use crate::error::{Error, Result};

/// One exec that reports everything the capture needs to decide before recording.
/// Prints tab-separated `key<TAB>value` lines; its own processes are excluded.
pub const PROBE_SCRIPT: &str = r#"
echo "kernel	$(uname -r)"
seen=" "
IFS=:
for d in $PATH /usr/bin /usr/sbin /usr/local/bin; do
  for f in "$d"/perf "$d"/perf_[0-9]*; do
    case "$seen" in *" $f "*) continue;; esac
    seen="$seen$f "
    [ -f "$f" ] && [ -x "$f" ] && echo "perf	$f"
  done
done
unset IFS
echo "paranoid	$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
echo "kptr_restrict	$(cat /proc/sys/kernel/kptr_restrict 2>/dev/null)"
[ -w /proc/sys/kernel/perf_event_paranoid ] && echo "sysctl_writable	1"
while read -r k v _; do
  case "$k" in CapEff:) echo "cap_eff	$v";; Seccomp:) echo "seccomp	$v";; esac
done < /proc/self/status
self=$$
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  [ "$pid" = "$self" ] && continue
  ppid=
  while read -r k v _; do
    [ "$k" = "PPid:" ] && { ppid=$v; break; }
  done < "$d/status" 2>/dev/null
  [ "$ppid" = "$self" ] && continue
  printf 'proc\t%s\t%s\t%s\n' "$pid" "$ppid" "$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)"
done
"#;

/// Linux capability numbers that matter to perf.
pub const CAP_SYS_PTRACE: u32 = 19;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYSLOG: u32 = 34;
pub const CAP_PERFMON: u32 = 38;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerFacts {
    pub kernel: String,
    pub perf_candidates: Vec<String>,
    pub paranoid: Option<i32>,
    pub kptr_restrict: Option<i32>,
    pub sysctl_writable: bool,
    pub cap_eff: Option<u64>,
    /// 0 none, 1 strict, 2 filter (Docker's default profile).
    pub seccomp: Option<u8>,
    pub processes: Vec<ProcInfo>,
}

impl ContainerFacts {
    pub fn parse(text: &str) -> Self {
        let mut facts = ContainerFacts {
            processes: parse_processes(text),
            ..Default::default()
        };
        for line in text.lines() {
            let Some((key, value)) = line.split_once('\t') else {
                continue;
            };
            let value = value.trim();
            match key {
                "kernel" => facts.kernel = value.to_string(),
                "perf" => facts.perf_candidates.push(value.to_string()),
                "paranoid" => facts.paranoid = value.parse().ok(),
                "kptr_restrict" => facts.kptr_restrict = value.parse().ok(),
                "sysctl_writable" => facts.sysctl_writable = value == "1",
                "cap_eff" => facts.cap_eff = u64::from_str_radix(value, 16).ok(),
                "seccomp" => facts.seccomp = value.parse().ok(),
                _ => {}
            }
        }
        facts
    }

    pub fn has_cap(&self, cap: u32) -> bool {
        self.cap_eff.is_some_and(|bits| bits & (1u64 << cap) != 0)
    }

    /// CAP_PERFMON, or CAP_SYS_ADMIN which implies it on older kernels.
    pub fn may_monitor(&self) -> bool {
        self.has_cap(CAP_PERFMON) || self.has_cap(CAP_SYS_ADMIN)
    }

    pub async fn probe<S: ContainerShell>(shell: &S) -> Result<Self> {
        let out = shell.sh(PROBE_SCRIPT).await?;
        if !out.success() && out.stdout.is_empty() {
            return Err(Error::ProcessNotFound {
                container: shell.container().to_string(),
                what: "cannot inspect processes".to_string(),
                hint: format!(
                    "devprof needs `sh` in the container to find the process ({})",
                    out.stderr.trim()
                ),
            });
        }
        Ok(ContainerFacts::parse(&out.stdout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_facts_and_capabilities() {
        let text = "kernel\t6.18.44-fc\nperf\t/usr/bin/perf\nparanoid\t2\nkptr_restrict\t0\n\
                    cap_eff\t00000040a80c25fb\nseccomp\t0\nproc\t1\t0\tdemo-node \n";
        let f = ContainerFacts::parse(text);
        assert_eq!(f.kernel, "6.18.44-fc");
        assert_eq!(f.perf_candidates, vec!["/usr/bin/perf"]);
        assert_eq!(f.paranoid, Some(2));
        assert!(f.has_cap(CAP_PERFMON) && f.has_cap(CAP_SYS_PTRACE) && !f.has_cap(CAP_SYS_ADMIN));
        assert_eq!(f.processes.len(), 1);
    }
}
