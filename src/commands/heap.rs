//! `devprof heap`: obtain and render the heap dumps, then print the closing summary.

use crate::capture::heap::run_heap;
use crate::capture::{CaptureCtx, Captured};
use crate::cli::HeapArgs;
use crate::error::Result;
use crate::settings::HeapSettings;
use crate::store::HEAP_PLOT;
use crate::ui::output;
use crate::units::{human_bytes, thousands};
use std::path::PathBuf;

pub async fn run(args: HeapArgs, output_dir: PathBuf, ctx: &mut CaptureCtx) -> Result<()> {
    let settings = HeapSettings::from_args(args, output_dir)?;
    let outcome = run_heap(&settings, ctx).await?;
    let flags = (settings.json, settings.open);
    super::closing(&outcome, flags, ctx, json_fields, human_summary)
}

fn human_summary(outcome: &Captured) -> String {
    let m = &outcome.manifest;
    let heap = m.heap.clone().unwrap_or_default();
    let mut out = String::new();
    let source = if heap.dumps.is_empty() {
        // A Go heap: one profile from the runtime, no dumps.
        heap.how.clone()
    } else {
        format!(
            "from {} dump{} ({})",
            heap.dumps.len(),
            if heap.dumps.len() == 1 { "" } else { "s" },
            heap.how
        )
    };
    out.push_str(&format!(
        "{} (pid {}): {} bytes {} in {} objects, {source}\n",
        m.container.name,
        m.process.pid,
        heap.measure,
        human_bytes(heap.total_bytes),
        thousands(heap.total_objects),
    ));
    out.push_str(&output::process_line(m));
    for d in &heap.dumps {
        out.push_str(&format!("  dump {} (seq {}, {})\n", d.name, d.seq, d.kind));
    }
    let (heading, sites) = if heap.own_sites.is_empty() {
        ("largest allocation sites:", &heap.top_self)
    } else {
        (
            "largest allocation sites in the program's own code:",
            &heap.own_sites,
        )
    };
    if !sites.is_empty() {
        out.push_str(heading);
        out.push('\n');
        for (name, bytes) in sites.iter().take(5) {
            let share = 100.0 * *bytes as f64 / heap.total_bytes.max(1) as f64;
            out.push_str(&format!(
                "  {share:5.1}%  {:>10}  {name}\n",
                human_bytes(*bytes)
            ));
        }
    }
    out.push_str(&output::files_written(
        &outcome.files,
        outcome.manifest.markers_kept,
    ));
    for (path, _) in &outcome.files {
        let name = path.to_string_lossy();
        match path.extension().and_then(|e| e.to_str()) {
            Some("svg") if name.ends_with(&format!(".{HEAP_PLOT}")) => {
                out.push_str(&format!("heap per dump over time: {}\n", path.display()))
            }
            Some("svg") => out.push_str(&format!("memory flamegraph: {}\n", path.display())),
            Some("txt") => out.push_str(&format!("report: {}\n", path.display())),
            _ => {}
        }
    }
    out
}

/// What its `--json` says beside the fields every capture has.
fn json_fields(outcome: &Captured) -> serde_json::Value {
    let heap = outcome.manifest.heap.clone().unwrap_or_default();
    serde_json::json!({
        "measure": heap.measure,
        "how": heap.how,
        "dumps": heap.dumps,
        "total_bytes": heap.total_bytes,
        "total_objects": heap.total_objects,
        "header_total_bytes": heap.header_total_bytes,
        "header_gap_percent": heap.header_gap_percent,
        "stacks": heap.stacks,
        "addresses": heap.addresses,
        "addresses_symbolized": heap.addresses_symbolized,
        "own_sites": heap.own_sites,
        "top_self": heap.top_self,
        "top_inclusive": heap.top_inclusive,
        "modules": heap.modules,
        "timings_ms": outcome.manifest.timings_ms,
    })
}
