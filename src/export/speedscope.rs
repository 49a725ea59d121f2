//! speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
//! `sampled` profile per thread, its samples in time order (root-first frame indexes into
//! the shared frame table) with their weights, so that each thread's total is the
//! capture's. speedscope's sampled profiles carry no timestamps of their own: each
//! profile's `startValue`/`endValue` span its weights, and the thread's first and last
//! sample times (ns after the capture's first sample) are kept in its name.

use super::{Sampled, Source};
use serde_json::{json, Value};

pub fn speedscope_json(source: &Source<'_>) -> Value {
    let sampled = Sampled::of(source);
    let unit = match source.unit.unit {
        "bytes" => "bytes",
        "microseconds" => "microseconds",
        _ => "none",
    };
    let profiles: Vec<Value> = sampled
        .threads
        .iter()
        .map(|thread| {
            let total: u64 = thread.samples.iter().map(|s| s.2).sum();
            let times: Vec<u64> = thread.samples.iter().filter_map(|s| s.0).collect();
            let mut name = match thread.tid {
                Some(tid) => format!("{} ({tid})", thread.name),
                None => thread.name.clone(),
            };
            if let (Some(first), Some(last)) = (times.first(), times.last()) {
                name.push_str(&format!(
                    " {:.3}-{:.3} s",
                    *first as f64 / 1e9,
                    *last as f64 / 1e9
                ));
            }
            json!({
                "type": "sampled",
                "name": name,
                "unit": unit,
                "startValue": 0,
                "endValue": total,
                "samples": thread.samples.iter().map(|s| &sampled.stacks[s.1 as usize]).collect::<Vec<_>>(),
                "weights": thread.samples.iter().map(|s| s.2).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": source.name,
        "exporter": format!("devprof {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": {
            "frames": sampled.frames.iter().map(|f| json!({"name": f})).collect::<Vec<_>>(),
        },
        "profiles": profiles,
    })
}
