//! Which container and which process to profile. Pure logic over what the engine and the
//! container's /proc report, so every rule here is unit-tested.

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
    pub cmdline: String,
}

impl ProcInfo {
    /// The program's base name (`/usr/bin/tini` -> `tini`).
    pub fn program(&self) -> &str {
        let first = self.cmdline.split_whitespace().next().unwrap_or("");
        first.rsplit('/').next().unwrap_or(first)
    }
}

/// Parses the `proc<TAB>pid<TAB>ppid<TAB>cmdline` lines printed by the probe script.
pub fn parse_processes(text: &str) -> Vec<ProcInfo> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(4, '\t');
            if parts.next()? != "proc" {
                return None;
            }
            let pid = parts.next()?.trim().parse().ok()?;
            let ppid = parts.next()?.trim().parse().unwrap_or(0);
            let cmdline = parts.next().unwrap_or("").trim().to_string();
            // Kernel threads and zombies have no command line; nothing to profile there.
            (!cmdline.is_empty()).then_some(ProcInfo { pid, ppid, cmdline })
        })
        .collect()
}

#[derive(Debug, Clone)]
pub enum ProcessSelector {
    /// The container's main process, looked through shell and init wrappers.
    Main,
    /// The oldest process whose full command line matches (like `pgrep -o -f`).
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
    "s6-svscan",
    "runsvdir",
    "su-exec",
    "gosu",
    "env",
];

/// Chooses the process to profile, or explains why there is none.
pub fn select_process(
    processes: &[ProcInfo],
    selector: &ProcessSelector,
) -> std::result::Result<ProcInfo, String> {
    match selector {
        ProcessSelector::Pid(pid) => processes
            .iter()
            .find(|p| p.pid == *pid)
            .cloned()
            .ok_or_else(|| format!("no process with pid {pid}")),
        ProcessSelector::Matching(re) => processes
            .iter()
            .filter(|p| re.is_match(&p.cmdline))
            .min_by_key(|p| p.pid)
            .cloned()
            .ok_or_else(|| format!("no process whose command line matches /{re}/")),
        ProcessSelector::Main => {
            let mut current = processes
                .iter()
                .find(|p| p.pid == 1)
                .or_else(|| processes.iter().min_by_key(|p| p.pid))
                .ok_or_else(|| "the container has no process with a command line".to_string())?;
            // Walk down through wrappers: a wrapper with children is not the workload.
            for _ in 0..8 {
                if !WRAPPERS.contains(&current.program()) {
                    break;
                }
                let child = processes
                    .iter()
                    .filter(|p| p.ppid == current.pid && p.pid != current.pid)
                    .min_by_key(|p| p.pid);
                match child {
                    Some(child) => current = child,
                    None => break,
                }
            }
            Ok(current.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    const PROCS_TINI: &str = "proc\t1\t0\t/sbin/docker-init -- demo-node \n\
                              proc\t7\t1\tdemo-node \n\
                              proc\t30\t0\tsh -c sleep 100\n\
                              proc\t31\t30\t\n";

    #[test]
    fn main_process_looks_through_init_wrappers() {
        let procs = parse_processes(PROCS_TINI);
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
        let procs = parse_processes(
            "proc\t1\t0\tsh -c run.sh\nproc\t5\t1\t/bin/bash ./run.sh\nproc\t9\t5\t/usr/bin/reth node --dev\n",
        );
        assert_eq!(
            select_process(&procs, &ProcessSelector::Main).unwrap().pid,
            9
        );
    }

    #[test]
    fn a_real_program_as_pid_1_is_the_main_process() {
        let procs =
            parse_processes("proc\t1\t0\t/usr/local/bin/demo-node\nproc\t12\t1\tdemo-helper\n");
        assert_eq!(
            select_process(&procs, &ProcessSelector::Main).unwrap().pid,
            1
        );
    }

    #[test]
    fn process_regex_matches_full_command_line_oldest_first() {
        let procs = parse_processes(
            "proc\t1\t0\tinit\nproc\t8\t1\tnode --role rpc\nproc\t4\t1\tnode --role seq\n",
        );
        let re = ProcessSelector::Matching(Regex::new("--role (seq|rpc)").unwrap());
        assert_eq!(select_process(&procs, &re).unwrap().pid, 4);
        let none = ProcessSelector::Matching(Regex::new("geth").unwrap());
        assert!(select_process(&procs, &none).unwrap_err().contains("geth"));
        assert!(select_process(&procs, &ProcessSelector::Pid(99)).is_err());
    }
}
