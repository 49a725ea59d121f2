//! The container's side of an off-CPU capture, before the window: the config's events
//! checked against the container's kernel (tracefs made available where the container may),
//! every event opened once on the process, and the largest ring buffer perf may map.

use super::PerfTarget;
use crate::docker::ContainerShell;
use crate::engines::perf;
use crate::error::{Error, Result};
use crate::profile::offcpu::events::{
    check_events, is_tracepoint, kernel_version, CheckedEvents, EventProblem,
};
use crate::settings::OffcpuSettings;

/// Ring buffer sizes tried, largest first, so that bursts of events are not dropped.
const RING_BUFFERS: &[&str] = &["16M", "4M"];

/// The config's events that this container's kernel and perf offer; tracefs made
/// available first when tracepoints are wanted.
pub async fn checked_events(
    target: &PerfTarget,
    settings: &OffcpuSettings,
    notes: &mut Vec<String>,
) -> Result<CheckedEvents> {
    let wants_tracepoints = settings.config.events.iter().any(|e| is_tracepoint(e));
    let tracepoints = if wants_tracepoints {
        available_tracepoints(target, notes).await?
    } else {
        Vec::new()
    };
    let kernel = kernel_version(&target.facts.kernel);
    let checked = check_events(&settings.config.events, &tracepoints, kernel).map_err(
        |problem| match problem {
            EventProblem::Unknown { event, suggestion } => Error::UnknownEvent {
                event,
                suggestion,
                config: settings.config.source.clone(),
            },
            EventProblem::NoneLeft { skipped } => Error::NoEvents {
                container: target.container.name.clone(),
                config: settings.config.source.clone(),
                skipped,
            },
        },
    )?;
    for (event, why) in &checked.skipped {
        notes.push(format!("skipped {event}: {why}"));
    }
    Ok(checked)
}

/// The `system:name` tracepoints of the container's tracefs, mounting it where the
/// container may.
async fn available_tracepoints(
    target: &PerfTarget,
    notes: &mut Vec<String>,
) -> Result<Vec<String>> {
    const SCRIPT: &str = r#"
for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
  if [ -r "$t/available_events" ]; then echo "tracefs $t"; cat "$t/available_events"; exit 0; fi
done
if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && [ -r /sys/kernel/tracing/available_events ]; then
  echo "mounted /sys/kernel/tracing"; cat /sys/kernel/tracing/available_events; exit 0
fi
echo "no-tracefs"
"#;
    let out = target.shell.sh(SCRIPT).await?;
    let mut lines = out.stdout.lines();
    match lines.next() {
        Some(first) if first.starts_with("tracefs ") || first.starts_with("mounted ") => {
            if first.starts_with("mounted ") {
                notes.push("mounted tracefs at /sys/kernel/tracing in the container (it may: CAP_SYS_ADMIN)".into());
            }
            Ok(lines
                .map(|l| l.trim().to_string())
                .filter(|l| l.contains(':'))
                .collect())
        }
        _ => Err(Error::TracefsUnavailable {
            container: target.container.name.clone(),
        }),
    }
}

/// Opens every event on the process for 100 ms, so a denied tracepoint fails before the
/// capture window, with perf's own words.
pub async fn trial_events(target: &PerfTarget, events: &[String]) -> Result<()> {
    let pid = target.process.pid.to_string();
    let mut argv: Vec<&str> = vec![&target.ready.perf.path, "stat", "-x,"];
    for event in events {
        argv.extend(["-e", event.as_str()]);
    }
    argv.extend(["-p", &pid, "--", "sleep", "0.1"]);
    let out = target.shell.run(&argv).await?;
    if out.success() {
        return Ok(());
    }
    Err(perf::failure(
        &target.container.name,
        "trial of the config's events",
        &out.stderr,
        &target.facts,
    ))
}

/// The largest ring buffer perf may map here, or None for perf's default.
pub async fn ring_buffer(target: &PerfTarget, workdir: &str) -> Option<String> {
    let pid = target.process.pid.to_string();
    let trial = format!("{workdir}/ring-trial.data");
    for size in RING_BUFFERS {
        let head = target.ready.perf.record_in(workdir);
        let mut argv: Vec<&str> = head.iter().map(String::as_str).collect();
        argv.extend([
            "-q",
            "-m",
            size,
            "-e",
            "cpu-clock",
            "-p",
            &pid,
            "-o",
            &trial,
            "--",
            "sleep",
            "0.05",
        ]);
        let out = target.shell.run(&argv).await.ok()?;
        let _ = target.shell.run(&["rm", "-f", &trial]).await;
        if out.success() {
            return Some(size.to_string());
        }
    }
    None
}
