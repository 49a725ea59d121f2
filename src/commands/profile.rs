//! `devprof profile`: several containers and kinds in one aligned window, then the closing
//! table (one row per container) and the session's manifest.

use crate::capture::session::{self, SessionOutcome};
use crate::capture::CaptureCtx;
use crate::cli::ProfileArgs;
use crate::error::{Error, Result};
use crate::settings::profile::ProfileSettings;
use crate::store::session::{start_spread_ms, SessionRow};
use crate::ui::table;
use crate::units::{human_bytes, thousands};
use std::path::PathBuf;

pub async fn run(args: ProfileArgs, output_dir: PathBuf, ctx: &mut CaptureCtx) -> Result<()> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current directory", e))?;
    let settings = ProfileSettings::from_args(args, output_dir, &cwd)?;
    let outcome = session::run_session(&settings, ctx).await?;
    if settings.json {
        crate::ui::output::print_json(&serde_json::json!({
            "session": outcome.record_path,
            "rows": outcome.record.rows,
            "captures": outcome.record.captures,
            "thresholds": outcome.record.thresholds,
            "endpoints": outcome.record.endpoints,
            "start_spread_ms": start_spread_ms(&outcome.record.captures),
        }));
    } else {
        crate::out!("{}", human_summary(&outcome));
    }
    for capture in &outcome.captures {
        if let Ok(done) = &capture.result {
            for warning in &done.warnings {
                crate::warn!("{} {}: {warning}", capture.container, capture.kind);
            }
        }
    }
    // A second Ctrl-C aborts every capture: the run ends as interrupted (130), as a single
    // capture does, not as a session some of whose captures failed.
    if ctx.interrupts.received() >= 2 {
        return Err(Error::Interrupted);
    }
    match outcome.failed() {
        0 => Ok(()),
        failed => Err(Error::SessionIncomplete {
            failed,
            total: outcome.captures.len(),
        }),
    }
}

fn cell<T>(value: Option<T>, text: impl Fn(T) -> String) -> String {
    value.map(text).unwrap_or_else(|| "-".into())
}

/// The table's cells of one row, in the header's order.
pub fn row_cells(r: &SessionRow) -> Vec<String> {
    vec![
        r.container.clone(),
        cell(r.cpu_cores, |c| format!("{:.0}%", c * 100.0)),
        cell(r.samples, thousands),
        cell(r.heap_growth_bytes, |b| {
            let sign = if b < 0 { "-" } else { "+" };
            format!("{sign}{}", human_bytes(b.unsigned_abs()))
        }),
        cell(r.offcpu_s, |s| format!("{s:.1} thread-s")),
        match (&r.verdict, r.errors.is_empty()) {
            (_, false) => "failed".into(),
            (Some(v), true) => v.bound.label().into(),
            (None, true) => "-".into(),
        },
    ]
}

pub fn human_summary(outcome: &SessionOutcome) -> String {
    let rows: Vec<Vec<String>> = outcome.record.rows.iter().map(row_cells).collect();
    let mut out = format!(
        "session of {} container(s), {} over {:.0} s, started {}\n",
        outcome.record.rows.len(),
        outcome.record.kinds.join(", "),
        outcome.record.duration_requested_s,
        outcome.record.started_at
    );
    out.push_str(&table::render(
        &[
            "CONTAINER",
            "CPU (of a core)",
            "SAMPLES",
            "HEAP GROWTH",
            "OFF-CPU",
            "VERDICT",
        ],
        "LRRRRL",
        &rows,
        2,
    ));
    for r in &outcome.record.rows {
        if let Some(v) = &r.verdict {
            out.push_str(&format!(
                "  {}: {} — {}\n",
                r.container,
                v.bound.label(),
                v.because
            ));
        }
        for e in &r.errors {
            out.push_str(&format!("  {}: FAILED {e}\n", r.container));
        }
    }
    out.push_str(&format!("  thresholds: {}\n", outcome.record.thresholds));
    for e in &outcome.record.endpoints {
        let clock = |c: &Option<crate::profile::clock::ClockOffset>| {
            c.map(|c| format!("{:+.1} ms ± {:.1} ms", c.offset_ms, c.uncertainty_ms))
                .unwrap_or_else(|| "unknown".into())
        };
        out.push_str(&format!(
            "  endpoint {} ({}): clock {} before, {} after the window, against this host's\n",
            e.context,
            e.address,
            clock(&e.clock_before),
            clock(&e.clock_after)
        ));
    }
    if !outcome.record.endpoints.is_empty() {
        let uncertainty = outcome
            .record
            .endpoints
            .iter()
            .filter_map(|e| e.clock_before.map(|c| c.uncertainty_ms))
            .fold(0.0, f64::max);
        // Judged by what was recorded where the recorders stamp their samples; the release
        // instants are this host's own and agree by construction.
        let by_samples = outcome
            .record
            .alignment
            .as_ref()
            .and_then(|a| Some((a.first_sample_spread_ms?, a.last_sample_spread_ms?)));
        if let Some((first, last)) = by_samples {
            out.push_str(&format!(
                "  samples: first within {first} ms, last within {last} ms of each other on this host's clock (endpoint clocks known to ± {uncertainty:.1} ms)\n"
            ));
        } else if let Some(spread) = start_spread_ms(&outcome.record.captures) {
            out.push_str(&format!(
                "  starts: within {spread:.0} ms of each other on this host's clock (endpoint clocks known to ± {uncertainty:.1} ms)\n"
            ));
        }
    }
    out.push_str("files written:\n");
    for c in &outcome.record.captures {
        if let Some(m) = &c.manifest {
            out.push_str(&format!("  {} {}: {}\n", c.container, c.kind, m));
        }
    }
    out.push_str(&format!(
        "session manifest: {}\n",
        outcome.record_path.display()
    ));
    out
}
