//! `devprof cpu`: run the capture, then print the closing summary.

use crate::capture::{self, cpu::CpuOutcome};
use crate::cli::CpuArgs;
use crate::error::Result;
use crate::settings::CpuSettings;
use crate::signals::Interrupts;
use crate::ui::output;
use crate::units::thousands;
use std::path::PathBuf;

pub async fn run(args: CpuArgs, output_dir: PathBuf, interrupts: &mut Interrupts) -> Result<()> {
    let settings = CpuSettings::from_args(args, output_dir)?;
    let outcome = capture::cpu::run_cpu(&settings, interrupts).await?;
    output::emit(
        settings.json,
        || json_summary(&outcome),
        || human_summary(&outcome),
        &outcome.warnings,
    );
    Ok(())
}

fn json_summary(outcome: &CpuOutcome) -> serde_json::Value {
    serde_json::json!({
        "manifest": outcome.manifest_path,
        "files": output::files_json(&outcome.files),
        "samples": outcome.manifest.sample_count,
        "event": outcome.manifest.events.first(),
        "engine": outcome.manifest.engine,
        "runtime": outcome.manifest.runtime,
        "process": outcome.manifest.process,
        "duration_s": outcome.manifest.duration_recorded_s,
        "interrupted": outcome.manifest.interrupted,
        "top_functions": outcome.manifest.top_functions,
        "unsymbolized_share": outcome.manifest.unsymbolized_share,
        "stacks": outcome.manifest.stacks,
        "graphs": outcome.manifest.graphs,
        "perf_map": outcome.manifest.perf_map,
        "warnings": outcome.warnings,
    })
}

pub fn human_summary(outcome: &CpuOutcome) -> String {
    let m = &outcome.manifest;
    let mut out = String::new();
    let how = if m.interrupted {
        "stopped early (Ctrl-C) after"
    } else {
        "recorded for"
    };
    out.push_str(&format!(
        "{} (pid {}): {} {:.1} s, {} samples ({} at {} Hz)\n",
        m.container.name,
        m.process.pid,
        how,
        m.duration_recorded_s,
        thousands(m.sample_count),
        m.events.join(","),
        m.frequency_hz
    ));
    out.push_str(&output::process_line(m));
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
    out.push_str(&output::files_written(&outcome.files));
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
