//! The container's side of an off-CPU capture, before the window: the config's events
//! checked against the container's kernel (tracefs made available where the container may),
//! every event opened once on the process, and the largest ring buffer perf may map.

use super::PerfTarget;
use crate::docker::ContainerShell;
use crate::engines::select::failure;
use crate::error::{Error, Result};
use crate::profile::offcpu::events::{
    check_events, is_tracepoint, kernel_version, CheckedEvents, EventProblem,
};
use crate::settings::OffcpuSettings;

/// Ring buffer sizes tried, largest first, so that bursts of events are not dropped.
const RING_BUFFERS: &[&str] = &["16M", "4M"];

/// The config's events that this container's kernel and perf offer; tracefs made
/// available first when tracepoints are wanted (`mounted` says when devprof mounted it).
pub async fn checked_events(
    target: &PerfTarget,
    settings: &OffcpuSettings,
    notes: &mut Vec<String>,
    mounted: &mut Option<MountedTracefs>,
) -> Result<CheckedEvents> {
    let wants_tracepoints = settings.config.events.iter().any(|e| is_tracepoint(e));
    let tracepoints = if wants_tracepoints {
        available_tracepoints(target, notes, mounted).await?
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

/// tracefs as devprof mounted it in the container: the mount's id (/proc/self/mountinfo),
/// so that clean-up unmounts that mount and no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MountedTracefs {
    id: u64,
}

/// Prints the id of the topmost mount at /sys/kernel/tracing (the last one listed).
const TOP_MOUNT_ID: &str = r#"id=
while read -r mid _ _ _ mp _; do [ "$mp" = /sys/kernel/tracing ] && id=$mid; done < /proc/self/mountinfo
"#;

/// The `system:name` tracepoints of the container's tracefs, mounting it where the
/// container may.
async fn available_tracepoints(
    target: &PerfTarget,
    notes: &mut Vec<String>,
    mounted: &mut Option<MountedTracefs>,
) -> Result<Vec<String>> {
    let script = format!(
        r#"
for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
  if [ -r "$t/available_events" ]; then echo "tracefs $t"; cat "$t/available_events"; exit 0; fi
done
if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
  {TOP_MOUNT_ID}
  echo "mounted $id"
  [ -r /sys/kernel/tracing/available_events ] && cat /sys/kernel/tracing/available_events
  exit 0
fi
echo "no-tracefs"
"#
    );
    let out = target.shell.sh(&script).await?;
    let mut lines = out.stdout.lines();
    let first = lines.next().unwrap_or_default();
    if let Some(id) = first.strip_prefix("mounted ") {
        // Kept even when what follows fails: clean-up unmounts it.
        *mounted = id.trim().parse().ok().map(|id| MountedTracefs { id });
    }
    match first {
        first if first.starts_with("tracefs ") || mounted.is_some() => {
            if mounted.is_some() {
                notes.push("mounted tracefs at /sys/kernel/tracing in the container for the capture (it may: CAP_SYS_ADMIN); unmounted when it ends".into());
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

/// Unmounts the tracefs devprof mounted, if it is still the topmost mount there and no
/// other devprof recorder in the container may be reading it; else says what is left.
pub async fn unmount_tracefs(target: &PerfTarget, mounted: MountedTracefs) {
    let script = format!(
        r#"{TOP_MOUNT_ID}
[ "$id" = "{ours}" ] || {{ echo "not-ours"; exit 0; }}
for d in /proc/[0-9]*; do
  case "$(cat $d/comm 2>/dev/null)" in perf*) ;; *) continue;; esac
  case "$(tr '\0' ' ' < $d/cmdline 2>/dev/null)" in *"/tmp/devprof."*" record "*) echo "in-use"; exit 0;; esac
done
umount /sys/kernel/tracing && echo "unmounted"
"#,
        ours = mounted.id
    );
    let container = &target.container.name;
    let done =
        tokio::time::timeout(std::time::Duration::from_secs(10), target.shell.sh(&script)).await;
    let answer = match &done {
        Ok(Ok(out)) => out.stdout.trim().to_string(),
        _ => String::new(),
    };
    match answer.as_str() {
        "unmounted" => {}
        // Someone mounted over it, or removed it: not devprof's to touch.
        "not-ours" => {}
        "in-use" => crate::note!(
            "left tracefs mounted at /sys/kernel/tracing in {container}: another devprof capture records there; \
             once none does: `docker exec {container} umount /sys/kernel/tracing`"
        ),
        _ => crate::warn!(
            "could not unmount the tracefs devprof mounted at /sys/kernel/tracing in {container}; \
                 `docker exec {container} umount /sys/kernel/tracing` removes it"
        ),
    }
}

/// Opens every event on the process for 100 ms, so a denied tracepoint fails before the
/// capture window, with perf's own words.
pub async fn trial_events(target: &PerfTarget, events: &[String]) -> Result<()> {
    let argv = target.ready.events_trial(events, target.process.pid);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = target.shell.run(&argv).await?;
    if out.success() {
        return Ok(());
    }
    Err(failure(
        &target.container.name,
        "trial of the config's events",
        &out.stderr,
        &target.facts,
    ))
}

/// The largest ring buffer perf may map here, or None for perf's default.
pub async fn ring_buffer(target: &PerfTarget, workdir: &str) -> Option<String> {
    let trial = format!("{workdir}/ring-trial.data");
    for size in RING_BUFFERS {
        let argv = target
            .ready
            .ring_trial(workdir, size, target.process.pid, &trial);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = target.shell.run(&argv).await.ok()?;
        let _ = target.shell.run(&["rm", "-f", &trial]).await;
        if out.success() {
            return Some(size.to_string());
        }
    }
    None
}
