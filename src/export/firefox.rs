//! The Firefox Profiler's processed format, written with `fxprof-processed-profile` (the
//! crate samply writes with, which follows the format's versions): one process per
//! capture, its threads with their samples and times, and the capture's markers with their
//! fields (a marker that reports its elapsed time is an interval ending at its log line,
//! others are instants). Several captures (a session) share one clock: the Unix epoch,
//! through each timeline's clock record. A capture without sample times (py-spy,
//! async-profiler, pprof) is its totals, at the start of its window, with a note.

use super::{ProcessInput, Sampled, Source};
use crate::profile::markers::{Marker, Markers};
use fxprof_processed_profile::{
    CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, MarkerFieldFlags, MarkerFieldFormat,
    MarkerTiming, Profile, ReferenceTimestamp, SamplingInterval, StaticSchemaMarker,
    StaticSchemaMarkerField, StringHandle, ThreadHandle, Timestamp, WeightType,
};
use serde_json::Value;

/// The profile of one capture.
pub fn firefox_json(source: &Source<'_>, markers: Option<&Markers>) -> Value {
    let input = ProcessInput {
        source,
        markers,
        name: source.name.clone(),
        pid: 0,
        note: None,
    };
    firefox_profile(&source.name, std::slice::from_ref(&input))
}

/// One profile of several captures on one clock (the earliest instant any shows is 0).
pub fn firefox_profile(product: &str, processes: &[ProcessInput<'_>]) -> Value {
    let origin = processes
        .iter()
        .map(ProcessInput::earliest_unix_ns)
        .min()
        .unwrap_or(0);
    let interval = processes
        .iter()
        .find_map(|p| p.source.period_ns)
        .map_or(SamplingInterval::from_millis(1), |ns| {
            SamplingInterval::from_nanos(ns as u64)
        });
    let mut profile = Profile::new(
        product,
        ReferenceTimestamp::from_millis_since_unix_epoch(origin as f64 / 1e6),
        interval,
    );
    profile.set_symbolicated(true);
    let at = |unix_ns: i64| {
        Timestamp::from_nanos_since_reference(unix_ns.saturating_sub(origin).max(0) as u64)
    };
    for input in processes {
        add_process(&mut profile, input, &at);
    }
    serde_json::to_value(&profile).unwrap_or(Value::Null)
}

fn add_process(profile: &mut Profile, input: &ProcessInput<'_>, at: &dyn Fn(i64) -> Timestamp) {
    let source = input.source;
    let start = at(input.first_unix_ns());
    let process = profile.add_process(&input.name, input.pid, start);
    let sampled = Sampled::of(source);
    let weight_type = || match source.unit.unit {
        "bytes" => WeightType::Bytes,
        _ => WeightType::Samples,
    };
    let first = input.first_unix_ns();
    let mut first_thread: Option<ThreadHandle> = None;
    for (i, t) in sampled.threads.iter().enumerate() {
        let is_main = t.pid.is_some() && t.pid == t.tid;
        let thread = profile.add_thread(process, t.tid.unwrap_or(i as u32), start, is_main);
        profile.set_thread_name(thread, &t.name);
        profile.set_thread_samples_weight_type(thread, weight_type());
        first_thread.get_or_insert(thread);
        let mut stacks: Vec<Option<Option<fxprof_processed_profile::StackHandle>>> =
            vec![None; sampled.stacks.len()];
        for (time, stack, weight) in &t.samples {
            let handle = *stacks[*stack as usize].get_or_insert_with(|| {
                let frames: Vec<FrameInfo> = sampled.stacks[*stack as usize]
                    .iter()
                    .map(|f| FrameInfo {
                        frame: Frame::Label(profile.intern_string(&sampled.frames[*f as usize])),
                        category_pair: CategoryHandle::OTHER.into(),
                        flags: FrameFlags::empty(),
                    })
                    .collect();
                profile.intern_stack_frames(thread, frames.into_iter())
            });
            let when = at(first.saturating_add(time.unwrap_or(0) as i64));
            // Weights are i32 in the format: a larger one becomes several samples.
            let mut left = *weight;
            while left > 0 {
                let part = left.min(i32::MAX as u64);
                profile.add_sample(thread, when, handle, CpuDelta::ZERO, part as i32);
                left -= part;
            }
        }
    }
    let thread = match first_thread {
        Some(t) => t,
        None => {
            let t = profile.add_thread(process, input.pid, start, true);
            profile.set_thread_name(t, &input.name);
            t
        }
    };
    if let Some(note) = &input.note {
        let text = profile.intern_string(note);
        let name = profile.intern_string("note");
        let marker = LogLineMarker::note(name, text, profile);
        profile.add_marker(thread, MarkerTiming::Instant(start), marker);
    }
    if let Some(markers) = input.markers {
        for m in &markers.markers {
            let timing = match m.elapsed_ns {
                Some(e) => {
                    MarkerTiming::Interval(at(m.time_ns.saturating_sub(e as i64)), at(m.time_ns))
                }
                None => MarkerTiming::Instant(at(m.time_ns)),
            };
            let marker = LogLineMarker::of(m, profile);
            profile.add_marker(thread, timing, marker);
        }
    }
}

/// A log line a marker rule matched, with its fields.
#[derive(Debug, Clone)]
struct LogLineMarker {
    name: StringHandle,
    /// line, rule set, number, elapsed, hash, slot
    fields: [StringHandle; 6],
}

impl LogLineMarker {
    fn of(m: &Marker, profile: &mut Profile) -> LogLineMarker {
        let text = |v: Option<String>, profile: &mut Profile| {
            profile.intern_string(v.as_deref().unwrap_or(""))
        };
        LogLineMarker {
            name: profile.intern_string(&m.name),
            fields: [
                profile.intern_string(&m.line),
                profile.intern_string(&m.set),
                text(m.number.map(|n| n.to_string()), profile),
                text(
                    m.elapsed_ns.map(crate::profile::markers::rules::human_ns),
                    profile,
                ),
                text(m.hash.clone(), profile),
                text(m.slot.map(|n| n.to_string()), profile),
            ],
        }
    }

    fn note(name: StringHandle, text: StringHandle, profile: &mut Profile) -> LogLineMarker {
        let empty = profile.intern_string("");
        LogLineMarker {
            name,
            fields: [text, empty, empty, empty, empty, empty],
        }
    }
}

const fn field(key: &'static str, label: &'static str) -> StaticSchemaMarkerField {
    StaticSchemaMarkerField {
        key,
        label,
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::SEARCHABLE,
    }
}

impl StaticSchemaMarker for LogLineMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "DevprofLogLine";
    const DESCRIPTION: Option<&'static str> =
        Some("A line of the container's log that a marker rule matched");
    const CHART_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.number}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("{marker.name} {marker.data.number} {marker.data.elapsed}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.data.line}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        field("line", "Log line"),
        field("set", "Rule set"),
        field("number", "Number"),
        field("elapsed", "Elapsed"),
        field("hash", "Hash"),
        field("slot", "Slot"),
    ];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        self.fields[field_index as usize]
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}
