//! `devprof offcpu`: run the capture, then print the summary and the files written.

use crate::capture::offcpu::run_offcpu;
use crate::capture::{CaptureCtx, Captured};
use crate::cli::OffcpuArgs;
use crate::error::Result;
use crate::render::plot;
use crate::settings::OffcpuSettings;
use crate::ui::output;
use std::path::PathBuf;

pub async fn run(args: OffcpuArgs, output_dir: PathBuf, ctx: &mut CaptureCtx) -> Result<()> {
    let settings = OffcpuSettings::from_args(args, output_dir)?;
    let outcome = run_offcpu(&settings, ctx).await?;
    let flags = (settings.json, settings.open);
    super::closing(&outcome, flags, ctx, json_fields, human_summary)
}

fn human_summary(outcome: &Captured) -> String {
    let mut out = outcome.text.clone().unwrap_or_default();
    out.push_str(&output::process_line(&outcome.manifest));
    out.push('\n');
    out.push_str(&output::files_written(
        &outcome.files,
        outcome.manifest.markers_kept,
    ));
    for (path, _) in &outcome.files {
        let name = path.to_string_lossy();
        if name.ends_with(&format!(".{}", plot::THREADS_PLOT)) {
            out.push_str(&format!("off-CPU time per thread: {}\n", path.display()));
        } else if name.ends_with(&format!(".{}", plot::BANDWIDTH_PLOT)) {
            out.push_str(&format!("I/O bandwidth over time: {}\n", path.display()));
        } else if name.ends_with(".offcpu.svg") {
            out.push_str(&format!("off-CPU time flamegraph: {}\n", path.display()));
        } else if name.ends_with(".svg") {
            out.push_str(&format!("event flamegraph: {}\n", path.display()));
        }
    }
    out
}

/// What its `--json` says beside the fields every capture has.
fn json_fields(outcome: &Captured) -> serde_json::Value {
    serde_json::json!({
        "config": outcome.manifest.config,
        "summary": outcome.manifest.offcpu,
    })
}
