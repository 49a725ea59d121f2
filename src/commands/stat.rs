//! `devprof stat`: count, then print the counters, what they mean, and the runs.

use crate::capture::stat::run_stat;
use crate::capture::{CaptureCtx, Captured};
use crate::cli::StatArgs;
use crate::error::Result;
use crate::settings::StatSettings;
use crate::ui::output;
use std::path::PathBuf;

pub async fn run(args: StatArgs, output_dir: PathBuf, ctx: &mut CaptureCtx) -> Result<()> {
    let settings = StatSettings::from_args(args, output_dir)?;
    let outcome = run_stat(&settings, ctx).await?;
    let flags = (settings.json, false);
    super::closing(&outcome, flags, ctx, json_fields, human_summary)
}

fn human_summary(outcome: &Captured) -> String {
    let m = &outcome.manifest;
    let mut out = String::new();
    let Some(stat) = &m.stat else {
        return out;
    };
    if stat.command.is_empty() {
        out.push_str(&format!(
            "{} (pid {}): counted for {:.1} s{}\n",
            m.container.name,
            m.process.pid,
            m.duration_recorded_s,
            if m.interrupted {
                " (stopped early)"
            } else {
                ""
            }
        ));
        out.push_str(&output::process_line(m));
    } else {
        out.push_str(&format!(
            "{}: `{}` run {} times\n",
            m.container.name,
            stat.command
                .iter()
                .map(|a| crate::text::quote(a))
                .collect::<Vec<_>>()
                .join(" "),
            stat.runs.len()
        ));
        for (i, run) in stat.runs.iter().enumerate() {
            let status = if run.exit_status == 0 {
                String::new()
            } else {
                format!("  exit status {} (left out)", run.exit_status)
            };
            out.push_str(&format!(
                "  run {:>3}: {:.4} s{status}\n",
                i + 1,
                run.wall_s
            ));
        }
        if let Some(w) = &stat.wall {
            out.push_str(&format!(
                "wall time over {} successful runs: min {:.4} s, max {:.4} s, median {:.4} s, mean {:.4} s, stddev {:.4} s, p95 {:.4} s, p99 {:.4} s\n",
                w.n, w.min, w.max, w.median, w.mean, w.stddev, w.p95, w.p99
            ));
        } else {
            out.push_str("no run exited 0: no wall time statistics\n");
        }
        out.push_str("counters summed over the successful runs:\n");
    }
    let width = stat
        .counters
        .iter()
        .map(|c| c.event.len())
        .max()
        .unwrap_or(0);
    for c in &stat.counters {
        out.push_str(&format!("  {:<width$}  {}\n", c.event, c.display()));
    }
    if let Some(reason) = &stat.unsupported_reason {
        out.push_str(&format!("not supported: {reason}\n"));
    }
    for d in &stat.derived {
        out.push_str(&format!("{}: {}\n", d.name, d.text));
    }
    out.push_str(&output::files_written(
        &outcome.files,
        outcome.manifest.markers_kept,
    ));
    out
}

/// What its `--json` says beside the fields every capture has.
fn json_fields(outcome: &Captured) -> serde_json::Value {
    serde_json::json!({
        "stat": outcome.manifest.stat,
    })
}
