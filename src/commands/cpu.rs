//! `devprof cpu`: run the capture, then print the closing summary.

use crate::capture::{self, CaptureCtx, Captured};
use crate::cli::CpuArgs;
use crate::error::Result;
use crate::settings::CpuSettings;
use crate::ui::output;
use crate::units::thousands;
use std::path::PathBuf;

pub async fn run(args: CpuArgs, output_dir: PathBuf, ctx: &mut CaptureCtx) -> Result<()> {
    let settings = CpuSettings::from_args(args, output_dir)?;
    let outcome = capture::cpu::run_cpu(&settings, ctx).await?;
    let flags = (settings.json, settings.open);
    super::closing(&outcome, flags, ctx, json_fields, human_summary)
}

pub fn human_summary(outcome: &Captured) -> String {
    let m = &outcome.manifest;
    let mut out = String::new();
    let how = if m.interrupted {
        "stopped early (Ctrl-C) after"
    } else {
        "recorded for"
    };
    let whom = match &m.command {
        Some(_) => format!("{} (command run)", m.container.name),
        None => format!("{} (pid {})", m.container.name, m.process.pid),
    };
    out.push_str(&format!(
        "{whom}: {} {:.1} s, {} samples ({} at {} Hz)\n",
        how,
        m.duration_recorded_s,
        thousands(m.sample_count),
        m.events.join(","),
        m.frequency_hz
    ));
    match &m.command {
        Some(run) => out.push_str(&format!(
            "ran `{}` as {} (the user of pid {}) in {}: {} after {:.3} s\n",
            crate::capture::command::display(&run.argv),
            run.user,
            m.process.pid,
            run.cwd,
            match run.exit_status {
                Some(0) => "exit status 0".to_string(),
                Some(s) => format!("exit status {}", crate::capture::command::status_words(s)),
                None => "stopped before it ended".to_string(),
            },
            run.wall_s
        )),
        None => out.push_str(&output::process_line(m)),
    }
    if let Some(mode) = &m.capture_mode {
        out.push_str(&format!("via {mode}\n"));
    }
    if !m.top_functions.is_empty() {
        out.push_str("heaviest functions (self samples):\n");
        for (name, count) in m.top_functions.iter().take(5) {
            let share = 100.0 * *count as f64 / m.sample_count.max(1) as f64;
            out.push_str(&format!("  {share:5.1}%  {name}\n"));
        }
    }
    if !m.parts.is_empty() {
        out.push_str(&format!(
            "a capture set of {} back-to-back windows (one recording cut by sample time):\n",
            m.parts.len()
        ));
        for p in &m.parts {
            out.push_str(&format!(
                "  window {:>2}  T+{:>6.2} s  {:>6.2} s  {:>8} samples  {:.2} cores\n",
                p.index,
                p.start_s,
                p.duration_s,
                thousands(p.samples),
                p.cpu_cores
            ));
        }
    }
    out.push_str(&output::files_written(
        &outcome.files,
        outcome.manifest.markers_kept,
    ));
    // Each flamegraph with the view it shows (Node captures have two).
    let dir = outcome.manifest_path.parent();
    for graph in &m.graphs {
        let path = dir.map_or_else(|| PathBuf::from(&graph.svg), |d| d.join(&graph.svg));
        out.push_str(&format!(
            "flamegraph ({}): {}\n",
            graph.view,
            path.display()
        ));
    }
    out
}

/// What its `--json` says beside the fields every capture has.
fn json_fields(outcome: &Captured) -> serde_json::Value {
    serde_json::json!({
        "samples": outcome.manifest.sample_count,
        "event": outcome.manifest.events.first(),
        "engine": outcome.manifest.engine,
        "runtime": outcome.manifest.runtime,
        "command": outcome.manifest.command,
        "top_functions": outcome.manifest.top_functions,
        "unsymbolized_share": outcome.manifest.unsymbolized_share,
        "stacks": outcome.manifest.stacks,
        "graphs": outcome.manifest.graphs,
        "perf_map": outcome.manifest.perf_map,
        "parts": outcome.manifest.parts,
    })
}
