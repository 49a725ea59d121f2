//! `devprof offcpu`: run the capture, then print the summary and the files written.

use crate::capture::offcpu::{run_offcpu, OffcpuOutcome};
use crate::cli::OffcpuArgs;
use crate::commands::cpu::human_bytes;
use crate::error::Result;
use crate::settings::OffcpuSettings;
use crate::signals::Interrupts;
use std::path::PathBuf;

pub async fn run(args: OffcpuArgs, output_dir: PathBuf, interrupts: &mut Interrupts) -> Result<()> {
    let settings = OffcpuSettings::from_args(args, output_dir)?;
    let outcome = run_offcpu(&settings, interrupts).await?;
    if settings.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json_summary(&outcome)).unwrap_or_default()
        );
    } else {
        print!("{}", human_summary(&outcome));
    }
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

fn json_summary(outcome: &OffcpuOutcome) -> serde_json::Value {
    serde_json::json!({
        "manifest": outcome.manifest_path,
        "files": outcome.files.iter().map(|(p, b)| serde_json::json!({"path": p, "bytes": b})).collect::<Vec<_>>(),
        "events": outcome.manifest.events,
        "config": outcome.manifest.config,
        "duration_s": outcome.manifest.duration_recorded_s,
        "interrupted": outcome.manifest.interrupted,
        "summary": outcome.manifest.offcpu,
        "warnings": outcome.warnings,
    })
}

fn human_summary(outcome: &OffcpuOutcome) -> String {
    let mut out = outcome.summary_text.clone();
    out.push_str("\nfiles written:\n");
    for (path, bytes) in &outcome.files {
        out.push_str(&format!(
            "  {:>10}  {}\n",
            human_bytes(*bytes),
            path.display()
        ));
    }
    for (path, _) in &outcome.files {
        let name = path.to_string_lossy();
        if name.ends_with(".offcpu.svg") {
            out.push_str(&format!("off-CPU time flamegraph: {}\n", path.display()));
        } else if name.ends_with(".svg") {
            out.push_str(&format!("event flamegraph: {}\n", path.display()));
        }
    }
    out
}
