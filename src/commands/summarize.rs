//! `devprof summarize FILE.data`: the off-CPU fast-mode summary of a recorded perf.data,
//! computed locally by reading the file (no Docker, no perf). Also what the off-CPU
//! benchmark drives.

use crate::cli::SummarizeArgs;
use crate::error::{Error, Result};
use crate::profile::offcpu::summary::{Aggregator, Mode};
use crate::profile::offcpu::text::render_text;
use crate::profile::perfdata;
use crate::store::Manifest;

pub fn run(args: SummarizeArgs) -> Result<()> {
    let path = &args.input;
    // The capture's manifest, when it sits beside the file, knows the real window.
    let manifest: Option<Manifest> = std::fs::read_to_string(path.with_extension("json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let mut aggregator = match &manifest {
        Some(m) => Aggregator::for_events(Mode::Fast, &m.events),
        None => Aggregator::new(Mode::Fast),
    };
    let started = std::time::Instant::now();
    // However its call graphs were recorded (DWARF, LBR), every record is counted: the
    // fast summary reads no stacks, so it has none to lose.
    let records = perfdata::for_each_record(path, |r| aggregator.add(r)).map_err(|e| {
        Error::io(
            format!(
                "read {} (expected a perf.data written by `devprof offcpu`)",
                path.display()
            ),
            e,
        )
    })?;
    let window_s = manifest
        .as_ref()
        .map(|m| m.duration_recorded_s)
        .filter(|w| *w > 0.0)
        .unwrap_or_else(|| aggregator.span_s());
    let outcome = aggregator.finish(window_s, manifest.as_ref().and_then(|m| m.lost_chunks));
    let elapsed = started.elapsed().as_secs_f64();
    if outcome.summary.total_events == 0 {
        return Err(Error::EmptyProfile {
            path: path.display().to_string(),
            reason: Some(format!("{records} records, no samples")),
            hint: "record it again with events that fire while the process works".into(),
        });
    }
    if args.json {
        crate::ui::output::print_json(&outcome.summary);
    } else {
        crate::out!(
            "{}",
            render_text(
                &outcome.summary,
                &format!("{} (fast-mode summary)", path.display())
            )
        );
    }
    crate::say!(
        "{} records in {elapsed:.3} s ({:.0} events/s)",
        records,
        outcome.summary.total_events as f64 / elapsed.max(1e-9)
    );
    Ok(())
}
