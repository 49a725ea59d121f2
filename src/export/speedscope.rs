//! speedscope's file format (https://www.speedscope.app/file-format-schema.json): one
//! `sampled` profile per thread, its samples in time order (root-first frame indexes into
//! the shared frame table) with their weights, so that each thread's total is the
//! capture's. speedscope's sampled profiles carry no timestamps of their own: each
//! profile's `startValue`/`endValue` span its weights, and the thread's first and last
//! sample times (ns after the capture's first sample) are kept in its name.
//!
//! The format has no markers; what comes closest is an `evented` profile, whose frames open
//! and close at given times: each marker name becomes one, its intervals (the line's
//! elapsed time, else since the previous marker of the name) as frames named by the
//! marker, on the same clock as the others' names. Overlapping intervals cannot nest
//! there and are left out (the Firefox export keeps them all).

use super::{ProcessInput, Sampled, Source};
use crate::profile::markers::{intervals, Markers};
use serde_json::{json, Value};

pub fn speedscope_json(source: &Source<'_>, markers: Option<&Markers>) -> Value {
    let sampled = Sampled::of(source);
    let unit = unit_of(source);
    let mut frames: Vec<Value> = sampled.frames.iter().map(|f| json!({"name": f})).collect();
    let mut profiles: Vec<Value> = sampled
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
    if let Some(markers) = markers {
        let input = ProcessInput {
            source,
            markers: Some(markers),
            name: source.name.clone(),
            pid: 0,
            note: None,
        };
        let origin = input.first_unix_ns();
        profiles.extend(marker_profiles(&source.name, markers, origin, &mut frames));
    }
    document(&source.name, frames, profiles)
}

/// A session: one sampled profile per capture (its threads' samples together, in time
/// order), and its markers, on the session's clock (0 is the earliest instant).
pub fn speedscope_session(name: &str, processes: &[ProcessInput<'_>]) -> Value {
    let origin = processes
        .iter()
        .map(ProcessInput::earliest_unix_ns)
        .min()
        .unwrap_or(0);
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_ids: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut profiles = Vec::new();
    for p in processes {
        let sampled = Sampled::of(p.source);
        let ids: Vec<usize> = sampled
            .frames
            .iter()
            .map(|f| {
                *frame_ids.entry(f.clone()).or_insert_with(|| {
                    frames.push(json!({"name": f}));
                    frames.len() - 1
                })
            })
            .collect();
        let mut samples: Vec<(u64, Vec<usize>, u64)> = sampled
            .threads
            .iter()
            .flat_map(|t| t.samples.iter())
            .map(|(time, stack, weight)| {
                let frames = sampled.stacks[*stack as usize]
                    .iter()
                    .map(|f| ids[*f as usize])
                    .collect();
                (time.unwrap_or(0), frames, *weight)
            })
            .collect();
        samples.sort_by_key(|s| s.0);
        let total: u64 = samples.iter().map(|s| s.2).sum();
        let mut title = p.name.clone();
        if let Some(note) = &p.note {
            title.push_str(&format!(" ({note})"));
        }
        profiles.push(json!({
            "type": "sampled",
            "name": title,
            "unit": unit_of(p.source),
            "startValue": 0,
            "endValue": total,
            "samples": samples.iter().map(|s| &s.1).collect::<Vec<_>>(),
            "weights": samples.iter().map(|s| s.2).collect::<Vec<_>>(),
        }));
        if let Some(markers) = p.markers {
            profiles.extend(marker_profiles(&p.name, markers, origin, &mut frames));
        }
    }
    document(name, frames, profiles)
}

fn unit_of(source: &Source<'_>) -> &'static str {
    match source.unit.unit {
        "bytes" => "bytes",
        "microseconds" => "microseconds",
        _ => "none",
    }
}

fn document(name: &str, frames: Vec<Value>, profiles: Vec<Value>) -> Value {
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "name": name,
        "exporter": format!("devprof {}", env!("CARGO_PKG_VERSION")),
        "activeProfileIndex": 0,
        "shared": {"frames": frames},
        "profiles": profiles,
    })
}

/// One evented profile per marker name: its intervals as frames, in ns after `origin`.
fn marker_profiles(
    owner: &str,
    markers: &Markers,
    origin: i64,
    frames: &mut Vec<Value>,
) -> Vec<Value> {
    markers
        .names()
        .iter()
        .map(|name| {
            let mut events = Vec::new();
            let mut end_of_last = i64::MIN;
            for i in intervals(&markers.markers, Some(name), markers.header.since_ns) {
                let (start, end) = (i.start_ns - origin, i.end_ns - origin);
                if start < end_of_last || end < start {
                    continue;
                }
                end_of_last = end;
                let m = &markers.markers[i.marker];
                frames.push(json!({"name": m.label(), "file": m.line}));
                let frame = frames.len() - 1;
                events.push(json!({"type": "O", "frame": frame, "at": start}));
                events.push(json!({"type": "C", "frame": frame, "at": end}));
            }
            let first = events.first().map_or(0, |e| e["at"].as_i64().unwrap_or(0));
            let last = events.last().map_or(0, |e| e["at"].as_i64().unwrap_or(0));
            json!({
                "type": "evented",
                "name": format!("{owner} markers: {name}"),
                "unit": "nanoseconds",
                "startValue": first,
                "endValue": last,
                "events": events,
            })
        })
        .collect()
}
