//! The doctor's checklist as data: every fact gathered about the target goes in, a list of
//! checks (✓, ✗ with the fix, ! for what only degrades the profile, - when not
//! applicable or not checked) comes out. Pure, so every rule is unit-tested.

//! One file per area: `access` (perf, the trial, kernel settings, tracefs), `config`
//! (capabilities, seccomp, privileged), `binary` (symbols, debug info, frame pointers,
//! jemalloc), `runtime` (JIT and interpreted frames).

mod access;
mod binary;
mod config;
mod jvm;
mod path;
mod runtime_check;
#[cfg(test)]
mod tests;

use super::facts::{DoctorFacts, ProcessExtras, Trial};
use crate::docker::probe::{
    ContainerFacts, CAP_PERFMON, CAP_SYSLOG, CAP_SYS_ADMIN, CAP_SYS_PTRACE,
};
use crate::docker::target::{ContainerInfo, ProcInfo};
use crate::runtime::{self, Runtime};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// ✓
    Pass,
    /// ✗: the profile would be denied, empty or hex-only.
    Fail,
    /// !: the profile works but loses something (kernel frames, inlined frames, ...).
    Warn,
    /// -: not applicable, or not checked because an earlier check failed.
    Skip,
}

impl Status {
    pub fn mark(self) -> &'static str {
        match self {
            Status::Pass => "✓",
            Status::Fail => "✗",
            Status::Warn => "!",
            Status::Skip => "-",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub title: &'static str,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(
    id: &'static str,
    title: &'static str,
    status: Status,
    detail: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        id,
        title,
        status,
        detail: detail.into(),
        fix,
    }
}

fn skipped(id: &'static str, title: &'static str, why: &str) -> Check {
    check(id, title, Status::Skip, format!("not checked: {why}"), None)
}

fn caps_named(bits: u64) -> Vec<&'static str> {
    [
        (CAP_PERFMON, "PERFMON"),
        (CAP_SYS_ADMIN, "SYS_ADMIN"),
        (CAP_SYS_PTRACE, "SYS_PTRACE"),
        (CAP_SYSLOG, "SYSLOG"),
    ]
    .iter()
    .filter(|(bit, _)| bits & (1u64 << bit) != 0)
    .map(|(_, name)| *name)
    .collect()
}

/// The compose lines that grant monitoring on this engine.
fn monitor_fix(perfmon_known: Option<&Result<(), String>>) -> String {
    match perfmon_known {
        Some(Err(_)) => "add capabilities: compose `cap_add: [SYS_ADMIN, SYS_PTRACE]` (this engine does not know PERFMON, \
                         so SYS_ADMIN stands in for it), or `docker run --cap-add SYS_ADMIN --cap-add SYS_PTRACE`; \
                         `devprof compose --services SERVICE` writes the override"
            .to_string(),
        _ => "add capabilities: compose `cap_add: [PERFMON, SYS_PTRACE]`, or `docker run --cap-add PERFMON --cap-add SYS_PTRACE`; \
              `devprof compose --services SERVICE` writes the override"
            .to_string(),
    }
}

/// The checklist.
/// What every area reads, worked out once.
pub(super) struct Context<'a> {
    pub facts: &'a DoctorFacts,
    pub container: &'a ContainerInfo,
    pub process: Option<&'a ProcInfo>,
    pub probe: ContainerFacts,
    /// The kernel's release, from the engine or else the container.
    pub kernel: String,
    pub extras: ProcessExtras,
    /// CAP_PERFMON or CAP_SYS_ADMIN.
    pub may_monitor: bool,
    /// perf_event_paranoid > 1 and no capability past it.
    pub paranoid_blocks: bool,
    /// Docker's default seccomp profile allows perf_event_open only with CAP_SYS_ADMIN (and,
    /// on engines that know it, CAP_PERFMON).
    pub seccomp_blocks: bool,
    /// The 100 ms trial counted.
    pub trial_ok: bool,
    /// What runs in the process.
    pub runtime: Runtime,
}

/// The checklist.
pub fn evaluate(facts: &DoctorFacts) -> Vec<Check> {
    let mut checks = Vec::new();

    // The daemon.
    match &facts.daemon {
        Some(Ok(address)) => {
            let endpoint = facts
                .endpoint
                .as_ref()
                .map(|e| {
                    format!(
                        " ({} {}{}, API {}, kernel {})",
                        e.flavour.name(),
                        e.version,
                        if facts.rootless { ", rootless" } else { "" },
                        e.api_version,
                        e.kernel
                    )
                })
                .unwrap_or_default();
            checks.push(check(
                "daemon",
                "container endpoint",
                Status::Pass,
                format!("reachable at {address}{endpoint}"),
                None,
            ));
        }
        Some(Err(why)) => {
            checks.push(check(
                "daemon",
                "container endpoint",
                Status::Fail,
                why.clone(),
                Some("start it (`systemctl start docker`), point DOCKER_HOST at it, and use its socket as root or a member of the `docker` group".into()),
            ));
            return checks;
        }
        None => return checks,
    }

    // The container.
    let container = match &facts.container {
        Some(Ok(c)) => {
            checks.push(check(
                "container",
                "container running",
                Status::Pass,
                format!(
                    "{} ({}, image {}) is running",
                    c.name,
                    c.short_id(),
                    c.image
                ),
                None,
            ));
            c
        }
        Some(Err(why)) => {
            let (first, rest) = why.split_once('\n').unwrap_or((why.as_str(), ""));
            checks.push(check(
                "container",
                "container running",
                Status::Fail,
                first.to_string(),
                Some(if rest.trim().is_empty() {
                    "start it, or name a running container".to_string()
                } else {
                    rest.trim().to_string()
                }),
            ));
            return checks;
        }
        None => return checks,
    };

    // The process.
    let process = match &facts.process {
        Some(Ok(p)) => {
            checks.push(check(
                "process",
                "target process",
                Status::Pass,
                format!("pid {} in the container: {}", p.pid, p.cmdline),
                None,
            ));
            Some(p)
        }
        Some(Err(why)) => {
            checks.push(check(
                "process",
                "target process",
                Status::Fail,
                why.clone(),
                Some("pick it with --process REGEX (its command line) or --pid N (as seen in the container)".into()),
            ));
            None
        }
        None => {
            checks.push(skipped(
                "process",
                "target process",
                "the container could not be inspected",
            ));
            None
        }
    };
    let probe = facts.probe.clone().unwrap_or_default();
    let kernel = facts
        .endpoint
        .as_ref()
        .map(|e| e.kernel.clone())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| probe.kernel.clone());

    let may_monitor = probe.may_monitor();
    let extras = facts.extras.clone().unwrap_or_default();
    // The binary's own tables name a Go program even where /proc did not (its build info
    // unread): its stripped names are then no block.
    let binary_is_go = matches!(&facts.binary, Some((_, Ok(elf))) if elf.go_tables);
    let runtime = match runtime_of(process, &extras) {
        crate::runtime::Runtime::Native if binary_is_go => crate::runtime::Runtime::Go,
        runtime => runtime,
    };
    let cx = Context {
        runtime,
        facts,
        container,
        process,
        kernel,
        extras,
        may_monitor,
        paranoid_blocks: probe.paranoid.is_some_and(|l| l > 1) && !may_monitor,
        seccomp_blocks: probe.seccomp == Some(2) && !may_monitor,
        trial_ok: matches!(facts.trial, Some(Trial::Allowed(_))),
        probe,
    };
    access::perf_check(&cx, &mut checks);
    access::perf_event_open(&cx, &mut checks);
    access::kernel(&cx, &mut checks);
    config::configuration(&cx, &mut checks);
    binary::binary(&cx, &mut checks);
    binary::jemalloc(&cx, &mut checks);
    let runtime = cx.runtime;
    checks.push(runtime_check::runtime_check(
        runtime,
        cx.process,
        &cx.extras,
        facts.extras.is_some(),
    ));
    path::judge_path(&mut checks, facts.mode, facts.sidecar_image.as_ref());
    if let (Runtime::Jvm, Some(process), true) = (runtime, cx.process, facts.extras.is_some()) {
        checks.extend(jvm::jvm_checks(&jvm::JvmFacts {
            pid: process.pid,
            cmdline: &process.cmdline,
            extras: &cx.extras,
            asprof: facts.asprof.as_ref().and_then(|a| a.as_deref()),
            paranoid: cx.probe.paranoid,
            kptr_restrict: cx.probe.kptr_restrict,
        }));
    }
    checks
}

/// The runtime of the process the doctor looked at.
pub fn runtime_of(process: Option<&ProcInfo>, extras: &ProcessExtras) -> Runtime {
    let program = process.map(|p| p.program().to_string()).unwrap_or_default();
    runtime::of_program(&program, &extras.process)
}

/// Checks that block profiling.
pub fn failures(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|c| c.status == Status::Fail).collect()
}

/// The checklist for a terminal. Each check's line starts with its mark and title, which
/// only devprof writes: a detail is one line (`text::printable`, since it quotes the
/// container: an executable's name, a command line), and a fix's further lines are
/// indented under its first, so nothing a container says can forge a line of its own.
pub fn render(target: &str, checks: &[Check]) -> String {
    let mut out = format!("devprof doctor {target}\n");
    let width = checks
        .iter()
        .map(|c| c.title.chars().count())
        .max()
        .unwrap_or(10);
    for c in checks {
        out.push_str(&format!(
            "  {} {:<width$}  {}\n",
            c.status.mark(),
            c.title,
            crate::text::printable(&c.detail)
        ));
        if let Some(fix) = &c.fix {
            if c.status != Status::Pass {
                for (i, line) in fix.lines().enumerate() {
                    let head = if i == 0 { "fix: " } else { "     " };
                    let line = crate::text::printable(line);
                    out.push_str(&format!("    {:<width$}  {head}{line}\n", ""));
                }
            }
        }
    }
    let failed = failures(checks);
    let warned = checks.iter().filter(|c| c.status == Status::Warn).count();
    if failed.is_empty() {
        out.push_str(&format!(
            "nothing blocks profiling {target}{}\n",
            if warned > 0 {
                format!(" ({warned} warning(s): the profile loses something, see !)")
            } else {
                String::new()
            }
        ));
    } else {
        out.push_str(&format!(
            "{} check(s) block profiling: {}\n",
            failed.len(),
            failed
                .iter()
                .map(|c| c.title)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}
