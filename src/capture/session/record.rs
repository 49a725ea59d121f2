//! What a session writes down: each capture cut to the window, one row per container
//! (its CPU use over the window, what its captures measured, the verdict), and the
//! session's own manifest.

use super::CaptureEnd;
use crate::capture::context::CaptureCtx;
use crate::capture::gate::Ticket;
use crate::capture::target::{locate, TargetSpec};
use crate::docker::target::ProcessSelector;
use crate::docker::ContainerShell;
use crate::engines::Ahead;
use crate::error::{Error, Result};
use crate::profile::verdict::{judge_given, stat_ticks, thresholds_text, Given, Measured, Waits};
use crate::settings::profile::{Kind, ProfileSettings, Targets};
use crate::store::session::{SessionCapture, SessionEndpoint, SessionRecord, SessionRow};
use crate::ui::Reporter;
use chrono::{DateTime, Local};
use std::path::Path;
use std::time::{Duration, Instant};

/// USER_HZ: clock ticks per second in /proc/<pid>/stat on every Linux Docker runs on.
const TICKS_PER_S: f64 = 100.0;

/// How the session's targets were named, for its record.
fn targets_text(targets: &Targets) -> String {
    match targets {
        Targets::Named(_) => "named".into(),
        Targets::Project(p) => format!("project {p}"),
        Targets::All => "all".into(),
    }
}

/// A kind as the session's record names it.
fn kind_text(kind: &Kind) -> String {
    match kind {
        Kind::Offcpu(config) => format!("offcpu:{config}"),
        k => k.name().to_string(),
    }
}

/// Perf recorders that took samples past the window (stopping late on a loaded host) get
/// a copy cut to it; their whole recordings stay.
pub(super) fn cut_to_window(
    captures: &mut [CaptureEnd],
    endpoints: &[SessionEndpoint],
    started_at: DateTime<Local>,
    duration: std::time::Duration,
    report: &Reporter,
) {
    let Some(start_ns) = started_at.timestamp_nanos_opt() else {
        return;
    };
    let end_ns = start_ns.saturating_add(duration.as_nanos() as i64);
    let done = captures.iter_mut().filter_map(|c| match &mut c.result {
        Ok(done) => Some((c.container.as_str(), done)),
        Err(_) => None,
    });
    for failure in crate::capture::alignment::cut_to_window(done, endpoints, start_ns, end_ns) {
        report.note(None, &format!("warning: {failure}"));
    }
}

/// The session's own manifest.
pub(super) fn session_record(
    settings: &ProfileSettings,
    started_at: DateTime<Local>,
    interrupted: bool,
    rows: Vec<SessionRow>,
    captures: &[CaptureEnd],
    endpoints: Vec<SessionEndpoint>,
) -> SessionRecord {
    SessionRecord {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: "session".into(),
        created: Local::now().to_rfc3339(),
        targets: targets_text(&settings.targets),
        kinds: settings.kinds.iter().map(kind_text).collect(),
        duration_requested_s: settings.duration.as_secs_f64(),
        started_at: crate::capture::window::instant_text(&started_at),
        interrupted,
        rows,
        captures: captures
            .iter()
            .map(|c| capture_record(c, &settings.output_dir))
            .collect(),
        thresholds: thresholds_text(),
        alignment: Some(crate::capture::alignment::measure(
            captures.iter().filter_map(|c| {
                c.result
                    .as_ref()
                    .ok()
                    .map(|done| (c.container.as_str(), c.kind, done))
            }),
            &endpoints,
        )),
        endpoints,
    }
}

/// A container's CPU use over the window.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuReading {
    pid: u32,
    cores: f64,
}

/// Reads the main process's CPU time when the gate opens and when the window ends (or
/// Ctrl-C ends it), through an exec in the container: nothing is read from this host.
pub(super) async fn meter(
    container: &str,
    ticket: Ticket,
    window: Duration,
    ctx: &mut CaptureCtx,
) -> Result<CpuReading> {
    let spec = TargetSpec {
        name: container.to_string(),
        process: ProcessSelector::Main,
    };
    let located = locate(ctx, &spec, &Ahead::Nothing).await?;
    let pid = located.process.pid;
    ticket.arrive().await;
    let read = || async {
        let out = located
            .shell
            .run(&["cat", &format!("/proc/{pid}/stat")])
            .await?;
        let ticks = stat_ticks(&out.stdout).ok_or_else(|| Error::ProcessNotFound {
            container: container.to_string(),
            what: format!("pid {pid} is gone"),
            hint: format!(
                "/proc/{pid}/stat could not be read: the process exited or its container stopped"
            ),
        });
        Ok::<_, Error>((ticks?, Instant::now()))
    };
    let (before, t0) = read().await?;
    tokio::select! {
        _ = tokio::time::sleep(window) => {}
        _ = ctx.interrupts.next() => {}
    }
    let (after, t1) = read().await?;
    let secs = (t1 - t0).as_secs_f64().max(0.001);
    Ok(CpuReading {
        pid,
        cores: after.saturating_sub(before) as f64 / TICKS_PER_S / secs,
    })
}

/// The kinds a session was given, for its verdicts' advice (which never asks for one).
pub(super) fn kinds_given(settings: &ProfileSettings) -> Given {
    let names: Vec<&str> = settings.kinds.iter().map(Kind::name).collect();
    Given::of_kinds(&names)
}

pub(super) fn row(
    container: &str,
    captures: &[CaptureEnd],
    reading: Option<&std::result::Result<CpuReading, String>>,
    window: Duration,
    given: Given,
) -> SessionRow {
    let mine: Vec<&CaptureEnd> = captures
        .iter()
        .filter(|c| c.container == container)
        .collect();
    let done = |kind: &str| {
        mine.iter()
            .find(|c| c.kind == kind)
            .and_then(|c| c.result.as_ref().ok())
    };
    let mut errors: Vec<String> = mine
        .iter()
        .filter_map(|c| c.result.as_ref().err().map(|e| format!("{}: {e}", c.kind)))
        .collect();
    let cpu = match reading {
        Some(Ok(r)) => Some(*r),
        Some(Err(e)) => {
            // Said once when a capture already says why the container is gone.
            if errors.is_empty() {
                errors.push(format!("CPU reading: {e}"));
            }
            None
        }
        None => None,
    };
    let window_s = done("cpu")
        .map(|d| d.manifest.duration_recorded_s)
        .filter(|s| *s > 0.0)
        .unwrap_or(window.as_secs_f64());
    let samples = done("cpu").map(|d| d.manifest.sample_count);
    let heap_growth_bytes = done("heap")
        .and_then(|d| d.manifest.heap.as_ref())
        .and_then(|h| h.window_growth_bytes);
    let offcpu_s = done("offcpu")
        .and_then(|d| d.manifest.offcpu.as_ref())
        .and_then(|o| o.off_cpu.as_ref())
        .map(|o| o.total_us as f64 / 1e6);
    // Where the off-CPU time went, from the capture's off-CPU time stacks.
    let waits = done("offcpu")
        .and_then(|d| {
            let dir = d.manifest_path.parent()?;
            let file = d
                .manifest
                .files
                .iter()
                .find(|f| f.name.ends_with(".offcpu.folded"))?;
            crate::store::catalog::listed_path(dir, &file.name)
        })
        .and_then(|path| crate::store::loader::read(&path).ok())
        .map(|folded| Waits::of(&folded));
    // The verdict is judged on the figures the row shows, so its reason
    // quotes the table's own numbers (30.549% must not read 31% beside 30%).
    let thousandths = |x: f64| (x * 1000.0).round() / 1000.0;
    let cpu_cores = cpu.map(|c| thousandths(c.cores));
    let offcpu_s = offcpu_s.map(thousandths);
    let measured = Measured {
        cpu_cores,
        window_s,
        heap_growth_bytes,
        offcpu_s,
        waits,
    };
    SessionRow {
        container: container.to_string(),
        cpu_cores,
        pid: cpu.map(|c| c.pid),
        samples,
        heap_growth_bytes,
        offcpu_s,
        verdict: if errors.is_empty() {
            judge_given(&measured, given)
        } else {
            None
        },
        errors,
    }
}

fn capture_record(c: &CaptureEnd, output_dir: &Path) -> SessionCapture {
    let (manifest, started, stopped, error) = match &c.result {
        Ok(done) => (
            Some(
                done.manifest_path
                    .strip_prefix(output_dir)
                    .unwrap_or(&done.manifest_path)
                    .display()
                    .to_string(),
            ),
            done.manifest.window_started_at.clone(),
            done.manifest.window_stopped_at.clone(),
            None,
        ),
        Err(e) => (None, None, None, Some(e.clone())),
    };
    SessionCapture {
        container: c.container.clone(),
        kind: c.kind.to_string(),
        manifest,
        window_started_at: started,
        window_stopped_at: stopped,
        error,
    }
}
