//! Whether perf may record there: perf itself, the perf_event_open trial (or its
//! prediction), the kernel's settings and tracefs.

use super::{check, monitor_fix, skipped, Check, Context, Status};
use crate::docker::probe::{CAP_PERFMON, CAP_SYSLOG};
use crate::engines::diagnosis;
use crate::setup::doctor::facts::Trial;

/// perf: found and runs in the container, its version against the kernel's.
pub(super) fn perf_check(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    let container = cx.container;
    let kernel = &cx.kernel;
    // perf.
    match &facts.perf {
        Some(Ok(tool)) => {
            let versions = match (diagnosis::major_minor(&tool.version), diagnosis::major_minor(kernel)) {
                (Some(p), Some(k)) if p == k => format!(", made for this kernel ({kernel})"),
                (Some(p), Some(k)) if p < k => format!(
                    ", older than the kernel {kernel}: it records the usual events; features of kernels after {}.{} are not offered",
                    p.0, p.1
                ),
                (Some(_), Some(_)) => format!(", newer than the kernel {kernel}: it asks only for what the kernel offers"),
                _ => format!(" (kernel {kernel})"),
            };
            checks.push(check("perf", "perf", Status::Pass, format!("{}, version {}{versions}", tool.path, tool.version), None));
        }
        Some(Err(why)) => checks.push(check(
            "perf",
            "perf",
            Status::Fail,
            why.clone(),
            Some(format!(
                "use an image with perf: `devprof build tools {}` adds perf, procps and binutils to it (or `apt-get install linux-perf` \
                 in a Debian image); or record it from a profiler container beside it, unchanged: `devprof cpu --mode sidecar {}`",
                container.image, container.name
            )),
        )),
        None => checks.push(skipped("perf", "perf", "the container could not be inspected")),
    }
}

/// perf_event_open: the trial, or the prediction from the configuration without one.
pub(super) fn perf_event_open(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    let process = cx.process;
    let probe = &cx.probe;
    let paranoid_blocks = cx.paranoid_blocks;
    let seccomp_blocks = cx.seccomp_blocks;
    // perf_event_open: the trial, or the prediction from the configuration without one.
    let denial = diagnosis::diagnose_denial(probe);
    let predicted_denied = paranoid_blocks || seccomp_blocks;
    match &facts.trial {
        Some(Trial::Allowed(ms)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Pass,
            format!(
                "allowed: a 100 ms trial (`perf stat -e cpu-clock -p {}`) counted {ms:.1} ms",
                process.map(|p| p.pid).unwrap_or_default()
            ),
            None,
        )),
        Some(Trial::Denied(detail)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!("denied in a 100 ms trial: {detail}; missing: {}", denial.missing.join(", ")),
            Some(denial.fixes.join("; ")),
        )),
        Some(Trial::Failed(detail)) => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!("the 100 ms trial failed: {detail}"),
            Some("run `perf stat -e cpu-clock -p PID -- sleep 0.1` in the container to see perf's whole message".into()),
        )),
        None if predicted_denied => checks.push(check(
            "perf_event_open",
            "perf_event_open",
            Status::Fail,
            format!(
                "not tried ({}); this configuration denies it: {}",
                if matches!(facts.perf, Some(Err(_))) { "no perf" } else { "no process" },
                denial.missing.join(", ")
            ),
            Some(denial.fixes.join("; ")),
        )),
        None => checks.push(skipped("perf_event_open", "perf_event_open", "no perf or no process to try it with")),
    }
}

/// The kernel's settings (perf_event_paranoid, kptr_restrict) and tracefs.
pub(super) fn kernel(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    let probe = &cx.probe;
    let extras = &cx.extras;
    let trial_ok = cx.trial_ok;
    let may_monitor = cx.may_monitor;
    // Kernel settings.
    match probe.paranoid {
        Some(level) if level <= 1 => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Pass,
            format!("{level}: perf may profile processes and the kernel without a capability"),
            None,
        )),
        Some(level) if may_monitor => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Pass,
            format!(
                "{level}, and the container's CAP_{} lets perf past it",
                if probe.has_cap(CAP_PERFMON) {
                    "PERFMON"
                } else {
                    "SYS_ADMIN"
                }
            ),
            None,
        )),
        Some(level) => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            if trial_ok { Status::Pass } else { Status::Fail },
            format!(
                "{level}: without CAP_PERFMON perf may not sample the kernel or other processes"
            ),
            (!trial_ok).then(|| {
                format!(
                    "{}; or on the Docker host: `sudo sysctl kernel.perf_event_paranoid=1`",
                    monitor_fix(facts.perfmon_known.as_ref())
                )
            }),
        )),
        None => checks.push(check(
            "perf_event_paranoid",
            "kernel.perf_event_paranoid",
            Status::Warn,
            "cannot be read in the container",
            None,
        )),
    }
    let kptr = probe
        .kptr_restrict
        .map(|k| k.to_string())
        .unwrap_or_else(|| "?".into());
    let kernel_visible =
        !extras.kallsyms_address.is_empty() && extras.kallsyms_address.chars().any(|c| c != '0');
    if facts.extras.is_none() {
        checks.push(skipped("kptr_restrict", "kernel symbols", "no process"));
    } else if kernel_visible {
        checks.push(check(
            "kptr_restrict",
            "kernel symbols",
            Status::Pass,
            format!(
                "kernel.kptr_restrict is {kptr}; /proc/kallsyms shows addresses here{}: kernel frames get names",
                if probe.has_cap(CAP_SYSLOG) { " (CAP_SYSLOG)" } else { "" }
            ),
            None,
        ));
    } else {
        checks.push(check(
            "kptr_restrict",
            "kernel symbols",
            Status::Warn,
            format!("kernel.kptr_restrict is {kptr} and /proc/kallsyms shows zeros here: kernel frames will be [unknown]"),
            Some(match probe.kptr_restrict {
                Some(2) => "kptr_restrict 2 hides kernel addresses from everyone: on the Docker host \
                            `sudo sysctl kernel.kptr_restrict=1`, then grant SYSLOG (`devprof compose --kernel-symbols`)"
                    .to_string(),
                Some(0) => "grant SYSLOG: compose `cap_add: [SYSLOG]` (`devprof compose --kernel-symbols`); or on the \
                            Docker host `sudo sysctl kernel.perf_event_paranoid=1` (with kptr_restrict 0, addresses are \
                            then shown to every process)"
                    .to_string(),
                _ => "grant SYSLOG: compose `cap_add: [SYSLOG]` (`devprof compose --kernel-symbols`); or on the Docker \
                      host `sudo sysctl kernel.kptr_restrict=0 kernel.perf_event_paranoid=1`"
                    .to_string(),
            }),
        ));
    }
    match (&facts.extras, &extras.tracefs) {
        (None, _) => checks.push(skipped("tracefs", "tracefs", "no process")),
        (Some(_), Some(dir)) => checks.push(check("tracefs", "tracefs", Status::Pass, format!("tracepoints visible at {dir} (devprof offcpu)"), None)),
        (Some(_), None) => checks.push(check(
            "tracefs",
            "tracefs",
            Status::Warn,
            "not visible in the container: devprof offcpu cannot record tracepoints (cpu works)",
            Some("mount it into the container: compose `volumes: [/sys/kernel/tracing:/sys/kernel/tracing:ro]` (in `devprof compose`'s override), after `sudo mount -t tracefs nodev /sys/kernel/tracing` on the host".into()),
        )),
    }
}
