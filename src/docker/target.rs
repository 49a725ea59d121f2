//! Which container and which process to profile. Pure logic over what the engine and the
//! container's /proc report, so every rule here is unit-tested.

use super::wire::{records, split_argv, Record};
use crate::error::{Error, Result};
use regex::Regex;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub id: String,
    pub name: String,
    pub image: String,
    /// Docker's state word: running, exited, created, paused, ...
    pub state: String,
    /// Compose labels, when compose made the container.
    pub service: Option<String>,
    pub project: Option<String>,
    /// All of the container's labels.
    pub labels: std::collections::HashMap<String, String>,
}

impl ContainerInfo {
    pub fn is_running(&self) -> bool {
        self.state == "running"
    }
    pub fn short_id(&self) -> &str {
        &self.id[..self.id.len().min(12)]
    }
}

/// Finds `target` among `containers`: an exact container name first, then an id prefix,
/// then a compose service name. A match that is not running, or a service that several
/// running containers provide, is an error that lists what the user can pick instead.
pub fn resolve_container(target: &str, containers: &[ContainerInfo]) -> Result<ContainerInfo> {
    let target = target.trim().trim_start_matches('/');
    let running_names = || {
        let mut names: Vec<String> = containers
            .iter()
            .filter(|c| c.is_running())
            .map(|c| c.name.clone())
            .collect();
        names.sort();
        names
    };
    let must_run = |c: &ContainerInfo| -> Result<ContainerInfo> {
        if c.is_running() {
            Ok(c.clone())
        } else if c.state == "paused" {
            Err(Error::TargetPaused {
                target: target.to_string(),
                container: c.name.clone(),
            })
        } else {
            Err(Error::TargetNotRunning {
                target: target.to_string(),
                container: c.name.clone(),
                state: c.state.clone(),
                running: running_names(),
            })
        }
    };

    if let Some(c) = containers.iter().find(|c| c.name == target) {
        return must_run(c);
    }

    let is_hex = !target.is_empty() && target.chars().all(|ch| ch.is_ascii_hexdigit());
    if is_hex {
        let by_id: Vec<_> = containers
            .iter()
            .filter(|c| c.id.starts_with(target))
            .collect();
        match by_id.as_slice() {
            [one] => return must_run(one),
            [] => {}
            many => {
                return Err(Error::AmbiguousTarget {
                    target: target.to_string(),
                    containers: many
                        .iter()
                        .map(|c| format!("{} ({})", c.name, c.short_id()))
                        .collect(),
                })
            }
        }
    }

    let by_service: Vec<_> = containers
        .iter()
        .filter(|c| c.service.as_deref() == Some(target))
        .collect();
    let running: Vec<_> = by_service.iter().filter(|c| c.is_running()).collect();
    match (running.as_slice(), by_service.as_slice()) {
        ([one], _) => Ok((**one).clone()),
        ([], []) => Err(Error::TargetNotFound {
            target: target.to_string(),
            running: running_names(),
        }),
        ([], [first, ..]) => must_run(first),
        (many, _) => Err(Error::AmbiguousTarget {
            target: target.to_string(),
            containers: many
                .iter()
                .map(|c| match &c.project {
                    Some(p) => format!("{} (project {p})", c.name),
                    None => c.name.clone(),
                })
                .collect(),
        }),
    }
}

/// One process as seen inside the container's PID namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    /// The command line for people: the arguments joined by spaces, control characters
    /// shown as escapes (the process chose them; they never start a line of their own).
    pub cmdline: String,
    /// The arguments exactly as the process holds them (invalid UTF-8 replaced).
    pub argv: Vec<String>,
}

/// The key of a process record in the probe's output.
pub const PROC_RECORD: &str = "proc";

impl ProcInfo {
    pub fn new(pid: u32, ppid: u32, argv: Vec<String>) -> Self {
        let cmdline = crate::text::printable(argv.join(" ").trim_end());
        ProcInfo {
            pid,
            ppid,
            cmdline,
            argv,
        }
    }

    /// A `proc<TAB>pid<TAB>ppid<TAB>cmdline` record, its command line encoded. Kernel
    /// threads and zombies have no command line; nothing to profile there (None).
    pub fn from_record(record: &Record<'_>) -> Option<Self> {
        if record.key != PROC_RECORD {
            return None;
        }
        let pid = record.number(0).filter(|p| *p > 0)?;
        let ppid = record.number(1).unwrap_or(0);
        let argv = split_argv(&record.bytes(2)?);
        if argv.iter().all(|a| a.trim().is_empty()) {
            return None;
        }
        Some(ProcInfo::new(pid, ppid, argv))
    }

    /// The program's base name (`/usr/bin/tini` -> `tini`).
    pub fn program(&self) -> &str {
        let first = self.cmdline.split_whitespace().next().unwrap_or("");
        first.rsplit('/').next().unwrap_or(first)
    }
}

/// The process records of the probe's output.
pub fn parse_processes(text: &str) -> Vec<ProcInfo> {
    records(text)
        .filter_map(|r| ProcInfo::from_record(&r))
        .collect()
}

#[derive(Debug, Clone)]
pub enum ProcessSelector {
    /// The container's main process, looked through shell and init wrappers.
    Main,
    /// Processes whose program name matches, else whose full command line matches.
    Matching(Regex),
    Pid(u32),
}

/// Programs that only start and reap the real workload.
const WRAPPERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "ash",
    "zsh",
    "tini",
    "tini-static",
    "docker-init",
    "dumb-init",
    "catatonit",
    // Podman's --init: catatonit, mounted as /run/podman-init.
    "podman-init",
    "s6-svscan",
    "runsvdir",
    "su-exec",
    "gosu",
    "env",
];

fn is_wrapper(p: &ProcInfo) -> bool {
    WRAPPERS.contains(&p.program())
}

/// Without the wrappers, unless nothing else is left.
fn without_wrappers(set: Vec<&ProcInfo>) -> Vec<&ProcInfo> {
    let real: Vec<&ProcInfo> = set.iter().copied().filter(|p| !is_wrapper(p)).collect();
    if real.is_empty() {
        set
    } else {
        real
    }
}

/// The processes `selector` may mean, oldest first: for `Main`, the container's first
/// process looked through shell and init wrappers (both sides of a pipeline when the
/// wrapper runs one); for `Matching`, the processes whose program name matches, else
/// those whose full command line does, wrappers last resort; for `Pid`, that one. Several
/// candidates are for the caller to choose among (the busiest, by `busiest`).
pub fn candidates(
    processes: &[ProcInfo],
    selector: &ProcessSelector,
) -> std::result::Result<Vec<ProcInfo>, String> {
    let mut set: Vec<&ProcInfo> = match selector {
        ProcessSelector::Pid(pid) => processes.iter().filter(|p| p.pid == *pid).collect(),
        ProcessSelector::Matching(re) => {
            let by_program: Vec<&ProcInfo> = processes
                .iter()
                .filter(|p| re.is_match(p.program()))
                .collect();
            if by_program.is_empty() {
                without_wrappers(
                    processes
                        .iter()
                        .filter(|p| re.is_match(&p.cmdline))
                        .collect(),
                )
            } else {
                without_wrappers(by_program)
            }
        }
        ProcessSelector::Main => {
            let root = processes
                .iter()
                .find(|p| p.pid == 1)
                .or_else(|| processes.iter().min_by_key(|p| p.pid));
            let mut frontier: Vec<&ProcInfo> = root.into_iter().collect();
            // Walk down through wrappers: a wrapper with children is not the workload.
            for _ in 0..8 {
                let mut next = Vec::new();
                let mut deeper = false;
                for p in frontier {
                    let children: Vec<&ProcInfo> = processes
                        .iter()
                        .filter(|c| c.ppid == p.pid && c.pid != p.pid)
                        .collect();
                    if is_wrapper(p) && !children.is_empty() {
                        next.extend(children);
                        deeper = true;
                    } else {
                        next.push(p);
                    }
                }
                frontier = next;
                if !deeper {
                    break;
                }
            }
            without_wrappers(frontier)
        }
    };
    set.sort_by_key(|p| p.pid);
    set.dedup_by_key(|p| p.pid);
    if set.is_empty() {
        return Err(match selector {
            ProcessSelector::Pid(pid) => format!("no process with pid {pid}"),
            ProcessSelector::Matching(re) => {
                format!("no process whose program or command line matches /{re}/")
            }
            ProcessSelector::Main => "the container has no process with a command line".into(),
        });
    }
    Ok(set.into_iter().cloned().collect())
}

/// Chooses the process to profile without sampling: the oldest candidate.
pub fn select_process(
    processes: &[ProcInfo],
    selector: &ProcessSelector,
) -> std::result::Result<ProcInfo, String> {
    Ok(candidates(processes, selector)?.remove(0))
}

/// One candidate's CPU use over a short sample, and who runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    pub pid: u32,
    /// Percent of one CPU.
    pub cpu_percent: f64,
    pub uid: Option<u32>,
}

/// The script that samples the CPU time of the pids given as arguments over `interval`:
/// `a<TAB>pid<TAB>ticks` before, `b<TAB>pid<TAB>ticks<TAB>uid` after.
pub const CPU_SAMPLE_SCRIPT: &str = r#"
ticks() { s=; read -r s < /proc/$1/stat 2>/dev/null || return 0; r=${s##*) }; set -- $r; [ $# -ge 13 ] && echo $(( ${12} + ${13} )); }
for p in "$@"; do printf 'a	%s	%s
' "$p" "$(ticks $p)"; done
sleep INTERVAL
for p in "$@"; do
  u=; while read -r k v _; do [ "$k" = Uid: ] && { u=$v; break; }; done < /proc/$p/status 2>/dev/null
  printf 'b	%s	%s	%s
' "$p" "$(ticks $p)" "$u"
done
"#;

/// Parses what `CPU_SAMPLE_SCRIPT` printed (`ticks_per_sec`: the kernel's USER_HZ).
pub fn parse_cpu_sample(text: &str, interval_secs: f64, ticks_per_sec: f64) -> Vec<CpuSample> {
    let mut before = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let pid = f.get(1).and_then(|p| p.parse::<u32>().ok());
        let ticks = f.get(2).and_then(|t| t.trim().parse::<u64>().ok());
        match (f.first().copied(), pid, ticks) {
            (Some("a"), Some(pid), Some(t)) => {
                before.insert(pid, t);
            }
            (Some("b"), Some(pid), Some(t)) => {
                let Some(t0) = before.get(&pid) else { continue };
                let used = t.saturating_sub(*t0) as f64 / ticks_per_sec;
                out.push(CpuSample {
                    pid,
                    cpu_percent: if interval_secs > 0.0 {
                        used / interval_secs * 100.0
                    } else {
                        0.0
                    },
                    uid: f.get(3).and_then(|u| u.trim().parse().ok()),
                });
            }
            _ => {}
        }
    }
    out
}

/// The busiest of `candidates` by `samples`; the oldest when none used the CPU.
pub fn busiest(candidates: &[ProcInfo], samples: &[CpuSample]) -> Option<ProcInfo> {
    let cpu = |p: &ProcInfo| {
        samples
            .iter()
            .find(|s| s.pid == p.pid)
            .map(|s| s.cpu_percent)
            .unwrap_or(0.0)
    };
    let mut best: Option<&ProcInfo> = None;
    for p in candidates {
        if best.is_none_or(|b| cpu(p) > cpu(b)) {
            best = Some(p);
        }
    }
    best.cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::wire::encode;

    /// `proc<TAB>pid<TAB>ppid<TAB>words` lines as the probe prints them (the words as NUL
    /// separated arguments, encoded), parsed.
    fn listed(lines: &str) -> Vec<ProcInfo> {
        let text: String = lines
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.splitn(4, '\t').collect();
                let argv: Vec<u8> = f[3]
                    .split_whitespace()
                    .flat_map(|w| w.bytes().chain([0]))
                    .collect();
                format!("{}\t{}\t{}\t{}\n", f[0], f[1], f[2], encode(&argv))
            })
            .collect();
        parse_processes(&text)
    }

    fn container(
        name: &str,
        id: &str,
        state: &str,
        service: Option<(&str, &str)>,
    ) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            name: name.into(),
            image: "img".into(),
            state: state.into(),
            service: service.map(|s| s.1.to_string()),
            project: service.map(|s| s.0.to_string()),
            labels: Default::default(),
        }
    }

    fn fleet() -> Vec<ContainerInfo> {
        vec![
            container(
                "demo-seq",
                "aaaa1111",
                "running",
                Some(("demo", "demo-seq")),
            ),
            container(
                "demo-rpc",
                "bbbb2222",
                "running",
                Some(("demo", "demo-rpc")),
            ),
            container("old", "cccc3333", "exited", None),
            container("p1-node-1", "dddd4444", "running", Some(("p1", "node"))),
            container("p2-node-1", "eeee5555", "running", Some(("p2", "node"))),
            container("p3-web-1", "ffff6666", "running", Some(("p3", "web"))),
        ]
    }

    #[test]
    fn resolves_by_name_id_prefix_and_service() {
        assert_eq!(
            resolve_container("demo-seq", &fleet()).unwrap().name,
            "demo-seq"
        );
        assert_eq!(
            resolve_container("bbbb", &fleet()).unwrap().name,
            "demo-rpc"
        );
        assert_eq!(resolve_container("web", &fleet()).unwrap().name, "p3-web-1");
    }

    #[test]
    fn service_in_several_projects_lists_the_containers() {
        match resolve_container("node", &fleet()) {
            Err(Error::AmbiguousTarget { containers, .. }) => {
                assert_eq!(
                    containers,
                    vec!["p1-node-1 (project p1)", "p2-node-1 (project p2)"]
                );
            }
            other => panic!("expected ambiguity, got {other:?}"),
        }
    }

    #[test]
    fn stopped_and_missing_targets_list_running_candidates() {
        match resolve_container("old", &fleet()) {
            Err(Error::TargetNotRunning { state, running, .. }) => {
                assert_eq!(state, "exited");
                assert!(running.contains(&"demo-seq".to_string()));
                assert!(!running.contains(&"old".to_string()));
            }
            other => panic!("expected not running, got {other:?}"),
        }
        assert!(matches!(
            resolve_container("nope", &fleet()),
            Err(Error::TargetNotFound { .. })
        ));
    }

    /// Regression: a paused target was refused as "not running" with `docker start` as
    /// the fix, which fails on a paused container.
    #[test]
    fn a_paused_target_is_named_paused_with_unpause_as_the_fix() {
        let mut containers = fleet();
        containers.push(container("frozen", "abab7777", "paused", None));
        let err = resolve_container("frozen", &containers).unwrap_err();
        assert!(matches!(err, Error::TargetPaused { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("is paused") && text.contains("`docker unpause frozen`"),
            "{text}"
        );
        assert!(!text.contains("docker start"), "{text}");
    }

    const PROCS_TINI: &str = "proc\t1\t0\t/sbin/docker-init -- demo-node \n\
                              proc\t7\t1\tdemo-node \n\
                              proc\t30\t0\tsh -c sleep 100\n\
                              proc\t31\t30\t\n";

    #[test]
    fn main_process_looks_through_init_wrappers() {
        let procs = listed(PROCS_TINI);
        assert_eq!(
            procs.len(),
            3,
            "the empty command line (kernel thread/zombie) is dropped"
        );
        let main = select_process(&procs, &ProcessSelector::Main).unwrap();
        assert_eq!((main.pid, main.cmdline.as_str()), (7, "demo-node"));
    }

    #[test]
    fn main_process_looks_through_nested_shells() {
        let procs = listed(
            "proc\t1\t0\tsh -c run.sh\nproc\t5\t1\t/bin/bash ./run.sh\nproc\t9\t5\t/usr/bin/reth node --dev\n",
        );
        assert_eq!(
            select_process(&procs, &ProcessSelector::Main).unwrap().pid,
            9
        );
    }

    #[test]
    fn a_real_program_as_pid_1_is_the_main_process() {
        let procs = listed("proc\t1\t0\t/usr/local/bin/demo-node\nproc\t12\t1\tdemo-helper\n");
        assert_eq!(
            select_process(&procs, &ProcessSelector::Main).unwrap().pid,
            1
        );
    }

    #[test]
    fn both_sides_of_a_pipeline_are_candidates_and_the_busy_one_wins() {
        let procs =
            listed("proc\t1\t0\tsh -c demo-node | cat\nproc\t7\t1\tdemo-node\nproc\t8\t1\tcat\n");
        let all = candidates(&procs, &ProcessSelector::Main).unwrap();
        assert_eq!(all.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![7, 8]);
        // Real output of CPU_SAMPLE_SCRIPT over 0.5 s: the node busy, cat idle.
        let samples = parse_cpu_sample(
            "a\t7\t1200\na\t8\t3\nb\t7\t1248\t0\nb\t8\t3\t0\n",
            0.5,
            100.0,
        );
        assert_eq!(samples[0].cpu_percent.round(), 96.0);
        assert_eq!(busiest(&all, &samples).unwrap().pid, 7);
        // The busy side second in the pipeline is chosen just the same.
        let flipped = [
            CpuSample {
                pid: 7,
                cpu_percent: 0.0,
                uid: None,
            },
            CpuSample {
                pid: 8,
                cpu_percent: 90.0,
                uid: None,
            },
        ];
        assert_eq!(busiest(&all, &flipped).unwrap().pid, 8);
    }

    #[test]
    fn process_name_is_matched_before_the_wrappers_command_line() {
        let procs = listed(
            "proc\t1\t0\tsh -c demo-node | cat\nproc\t7\t1\t/usr/local/bin/demo-node --x\nproc\t8\t1\tcat\n",
        );
        let re = ProcessSelector::Matching(Regex::new("demo").unwrap());
        assert_eq!(select_process(&procs, &re).unwrap().pid, 7);
        // Only the wrapper's command line matches: the wrapper, as a last resort.
        let re = ProcessSelector::Matching(Regex::new("demo-node \\|").unwrap());
        assert_eq!(select_process(&procs, &re).unwrap().pid, 1);
    }

    #[test]
    fn process_regex_matches_full_command_line_oldest_first() {
        let procs =
            listed("proc\t1\t0\tinit\nproc\t8\t1\tnode --role rpc\nproc\t4\t1\tnode --role seq\n");
        let re = ProcessSelector::Matching(Regex::new("--role (seq|rpc)").unwrap());
        assert_eq!(select_process(&procs, &re).unwrap().pid, 4);
        let none = ProcessSelector::Matching(Regex::new("geth").unwrap());
        assert!(select_process(&procs, &none).unwrap_err().contains("geth"));
        assert!(select_process(&procs, &ProcessSelector::Pid(99)).is_err());
    }
}
