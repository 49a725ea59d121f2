//! The container's configuration: capabilities (added and effective), seccomp, privileged.

use super::{caps_named, check, monitor_fix, skipped, Check, Context, Status};
use crate::docker::probe::{CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE};

/// Capabilities, seccomp and privileged, from `docker inspect` and the process status.
pub(super) fn configuration(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    let probe = &cx.probe;
    let trial_ok = cx.trial_ok;
    let paranoid_blocks = cx.paranoid_blocks;
    let seccomp_blocks = cx.seccomp_blocks;
    // The container's configuration.
    let config = facts.config.clone().unwrap_or_default();
    let added = if config.cap_add.is_empty() {
        "none".to_string()
    } else {
        config.cap_add.join(", ")
    };
    let effective = probe.cap_eff.map(caps_named).unwrap_or_default();
    let effective_text = if effective.is_empty() {
        "none of PERFMON, SYS_ADMIN, SYS_PTRACE, SYSLOG".to_string()
    } else {
        effective.join(", ")
    };
    let stand_in = if probe.has_cap(CAP_SYS_ADMIN)
        && !probe.has_cap(CAP_PERFMON)
        && matches!(facts.perfmon_known, Some(Err(_)))
    {
        "; SYS_ADMIN stands in for PERFMON, which this engine does not know"
    } else {
        ""
    };
    if probe.cap_eff.is_none() {
        checks.push(skipped(
            "capabilities",
            "capabilities",
            "the container's process status could not be read",
        ));
    } else if !trial_ok && paranoid_blocks {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Fail,
            format!("added: {added}; effective: {effective_text}: no CAP_PERFMON (or CAP_SYS_ADMIN) to open perf events"),
            Some(monitor_fix(facts.perfmon_known.as_ref())),
        ));
    } else if !probe.has_cap(CAP_SYS_PTRACE) && !trial_ok {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Fail,
            format!("added: {added}; effective: {effective_text}: no CAP_SYS_PTRACE (perf cannot inspect the process)"),
            Some("add it: compose `cap_add: [SYS_PTRACE]`, or `docker run --cap-add SYS_PTRACE`".into()),
        ));
    } else {
        checks.push(check(
            "capabilities",
            "capabilities",
            Status::Pass,
            format!("added: {added}; effective: {effective_text}{stand_in}"),
            None,
        ));
    }
    let profile = config
        .security_opt
        .iter()
        .find(|o| o.starts_with("seccomp"))
        .cloned()
        .unwrap_or_else(|| "Docker's default profile".to_string());
    match probe.seccomp {
        None => checks.push(skipped("seccomp", "seccomp", "the container's process status could not be read")),
        Some(0) => checks.push(check("seccomp", "seccomp", Status::Pass, format!("unconfined ({profile})"), None)),
        Some(_) if trial_ok => checks.push(check("seccomp", "seccomp", Status::Pass, format!("filtered ({profile}), and it allows perf_event_open"), None)),
        Some(_) if !seccomp_blocks => checks.push(check(
            "seccomp",
            "seccomp",
            Status::Pass,
            format!("filtered ({profile}); Docker's default profile allows perf_event_open with CAP_SYS_ADMIN or CAP_PERFMON"),
            None,
        )),
        Some(_) => checks.push(check(
            "seccomp",
            "seccomp",
            Status::Fail,
            format!("filtered ({profile}), which blocks perf_event_open without CAP_SYS_ADMIN or CAP_PERFMON"),
            Some("compose `security_opt: [seccomp=unconfined]`, or `docker run --security-opt seccomp=unconfined`".into()),
        )),
    }
    checks.push(check(
        "privileged",
        "privileged",
        Status::Pass,
        if config.privileged {
            "privileged: every capability and device (more than profiling needs; PERFMON and SYS_PTRACE suffice)".to_string()
        } else {
            "not privileged (profiling does not need it)".to_string()
        },
        None,
    ));
}
