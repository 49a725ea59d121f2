//! `devprof export SESSION --format firefox|speedscope`: one devnet timeline. SESSION is a
//! session manifest (`profiling/sessions/session-….json`), its name, or `session` for the
//! newest. Each container of the session is one process (Firefox) or one profile
//! (speedscope), from its cpu capture (its offcpu capture when it has no cpu one): its
//! threads, samples and markers, on the session's shared clock: each timeline's clock record
//! maps perf's times to its endpoint's wall clock, and a session over several endpoints
//! shifts what each endpoint stamped (samples, log lines) by that endpoint's measured clock
//! offset onto this host's clock, with a note saying by how much. A capture without sample
//! times (py-spy, async-profiler, pprof) shows its totals at the start of its window, with a
//! note.

use super::export_out::{json_bytes, read_timeline, write_export};
use crate::error::{Error, Result};
use crate::export::{firefox_profile, speedscope_session, ProcessInput, Source, Unit};
use crate::profile::folded::Folded;
use crate::profile::markers::Markers;
use crate::profile::timeline::Timeline;
use crate::settings::store::{ExportFormat, ExportSettings};
use crate::store::catalog::Capture;
use crate::store::loader::{self, ProfileRef};
use crate::store::lookup;
use crate::store::names::Reference;
use crate::store::session::{clock_shift_of, ClockShift, SessionRecord};
use crate::store::{SESSION_FOLDED, SESSION_TIMELINE};
use std::path::{Path, PathBuf};

/// A session manifest and where it is.
pub struct Session {
    pub path: PathBuf,
    pub record: SessionRecord,
}

/// The session `what` names, if it names one: a session manifest's file, or a name in the
/// store that is a session's (`session`, `session-…`; see `store::names`).
pub fn find(what: &ProfileRef, output_dir: &Path) -> Result<Option<Session>> {
    let read = |path: PathBuf| -> Option<Session> {
        let text = std::fs::read_to_string(&path).ok()?;
        let record: SessionRecord = serde_json::from_str(&text).ok()?;
        (record.kind == "session").then_some(Session { path, record })
    };
    match what {
        ProfileRef::File(path) if path.extension().is_some_and(|e| e == "json") => {
            Ok(read(path.clone()))
        }
        ProfileRef::File(_) => Ok(None),
        ProfileRef::Newest(name) => match Reference::parse(name) {
            Some(Reference::Session(_)) => match lookup::find(output_dir, name)? {
                lookup::Found::Session { path, record } => Ok(Some(Session {
                    path,
                    record: *record,
                })),
                _ => Ok(None),
            },
            _ => Ok(None),
        },
    }
}

/// One container's capture, loaded.
struct Loaded {
    name: String,
    capture: Capture,
    folded: Folded,
    timeline: Option<Timeline>,
    markers: Option<Markers>,
    unit: Unit,
    note: Option<String>,
}

/// Writes the session's timeline. `kind`: the kind each container contributes (default
/// its cpu capture, else its offcpu one).
pub fn run(settings: &ExportSettings, session: &Session, kind: Option<&str>) -> Result<()> {
    if !matches!(
        settings.format,
        ExportFormat::Firefox | ExportFormat::Speedscope
    ) {
        return Err(Error::Usage(
            "a session exports as one timeline: --format firefox or speedscope".into(),
        ));
    }
    let mut containers: Vec<&str> = session
        .record
        .captures
        .iter()
        .map(|c| c.container.as_str())
        .collect();
    containers.dedup();
    let kinds: Vec<&str> = match kind {
        Some(k @ ("cpu" | "offcpu")) => vec![k],
        Some(k) => {
            return Err(Error::Usage(format!(
                "a session exports its cpu or offcpu captures as one timeline, not {k}: --kind cpu or offcpu"
            )))
        }
        None => vec!["cpu", "offcpu"],
    };
    let mut loaded = Vec::new();
    for container in containers {
        let chosen = kinds.iter().find_map(|kind| {
            session
                .record
                .captures
                .iter()
                .find(|c| c.container == container && c.kind == *kind && c.manifest.is_some())
        });
        let Some(manifest) = chosen.and_then(|c| c.manifest.as_ref()) else {
            crate::note!(
                "{container}: no {} capture in the session; left out",
                kinds.join(" or ")
            );
            continue;
        };
        let mut one = load(container, &settings.output_dir.join(manifest))?;
        if let Some(shift) = clock_shift_of(&session.record.endpoints, container) {
            shift_clock(&mut one, shift);
        }
        loaded.push(one);
    }
    if loaded.is_empty() {
        return Err(Error::EmptyProfile {
            path: session.path.display().to_string(),
            reason: Some("the session has no cpu or offcpu capture".into()),
            hint: "record one with devprof profile --kinds cpu".into(),
        });
    }
    let sources: Vec<Source<'_>> = loaded
        .iter()
        .map(|l| Source {
            folded: &l.folded,
            timeline: l.timeline.as_ref(),
            unit: l.unit,
            name: l.name.clone(),
            start_unix_ns: window_start_ns(&l.capture),
            duration_ns: (l.capture.manifest.duration_recorded_s * 1e9) as i64,
            period_ns: (l.capture.manifest.frequency_hz > 0)
                .then(|| 1_000_000_000 / i64::from(l.capture.manifest.frequency_hz)),
            program: l.capture.manifest.process.exe.clone(),
        })
        .collect();
    let inputs: Vec<ProcessInput<'_>> = loaded
        .iter()
        .zip(&sources)
        .map(|(l, source)| ProcessInput {
            source,
            markers: l.markers.as_ref(),
            name: l.name.clone(),
            pid: l.capture.manifest.process.pid,
            note: l.note.clone(),
        })
        .collect();
    let title = session
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let value = match settings.format {
        ExportFormat::Firefox => firefox_profile(&title, &inputs),
        _ => speedscope_session(&title, &inputs),
    };
    let default = PathBuf::from(format!("{title}.{}", settings.format.extension()));
    write_export(settings, &json_bytes(&value), &default).map(|_| ())
}

fn load(container: &str, manifest: &Path) -> Result<Loaded> {
    let capture = loader::capture_of_file(manifest).ok_or_else(|| {
        Error::Usage(format!(
            "the session lists {}, which is not a capture's manifest (removed by clean?)",
            manifest.display()
        ))
    })?;
    // A capture cut to the session's window is exported as cut; its other files hold the
    // whole recording.
    let cut_file = |ext: &str| -> Option<PathBuf> {
        let path = capture.manifest_path.with_extension(ext);
        let name = path.file_name()?.to_str()?;
        let listed = capture.manifest.files.iter().any(|f| f.name == name);
        (listed && path.is_file()).then_some(path)
    };
    let cut = cut_file(SESSION_FOLDED).zip(cut_file(SESSION_TIMELINE));
    let folded_path = match &cut {
        Some((folded, _)) => folded.clone(),
        None => capture
            .main_folded()
            .ok_or_else(|| Error::Usage(format!("{} lists no .folded file", manifest.display())))?,
    };
    let folded = loader::read(&folded_path)?;
    let timeline_path = match &cut {
        Some((_, timeline)) => Some(timeline.clone()),
        None => capture.file_with_extension("timeline"),
    };
    let timeline = match timeline_path.filter(|p| p.is_file()) {
        Some(path) => Some(read_timeline(&path)?),
        None => None,
    };
    let markers = match capture.file_with_extension("markers") {
        Some(path) => Markers::read_path(&path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e))?,
        None => None,
    };
    let engine = if capture.manifest.engine.is_empty() {
        "perf".to_string()
    } else {
        capture.manifest.engine.clone()
    };
    let note = match &timeline {
        None => Some(format!(
            "{engine} records no sample times: its {} samples are its totals, shown at the start of its window",
            folded.total()
        )),
        Some(t) if t.clock.is_none() => Some(
            "its timeline does not say which clock perf used: placed from the capture's start".into(),
        ),
        // A cut capture's manifest says what was left out; a note here would show as one
        // more marker among the node's own.
        Some(_) => None,
    };
    let unit = if capture.manifest.kind == "offcpu" {
        Unit::EVENTS
    } else {
        Unit::SAMPLES
    };
    Ok(Loaded {
        name: format!("{container} ({})", capture.name()),
        capture,
        folded,
        timeline,
        markers,
        unit,
        note,
    })
}

/// Puts what the capture's endpoint stamped on this host's clock: its timeline's mapping to
/// Unix time and its markers move by the endpoint's clock offset (its window start was
/// stamped on this host already).
fn shift_clock(loaded: &mut Loaded, shift: ClockShift) {
    if shift.ns == 0 {
        return;
    }
    if let Some(clock) = loaded.timeline.as_mut().and_then(|t| t.clock.as_mut()) {
        clock.to_unix_ns = clock.to_unix_ns.saturating_sub(shift.ns);
    }
    if let Some(markers) = loaded.markers.as_mut() {
        for marker in &mut markers.markers {
            marker.time_ns = marker.time_ns.saturating_sub(shift.ns);
        }
    }
    let said = format!(
        "its endpoint's clock was {:+.1} ms ± {:.1} ms from this host's: its sample and marker times are moved by that",
        shift.ns as f64 / 1e6,
        shift.uncertainty_ms
    );
    loaded.note = Some(match loaded.note.take() {
        Some(note) => format!("{note}; {said}"),
        None => said,
    });
}

/// The capture's window start, ns since the epoch (its creation when the manifest has none).
fn window_start_ns(capture: &Capture) -> i64 {
    capture
        .manifest
        .window_started_at
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .unwrap_or(capture.created)
        .timestamp_nanos_opt()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::markers::Marker;
    use crate::profile::timeline::Clock;

    #[test]
    fn an_endpoints_stamps_move_onto_this_hosts_clock_and_say_so() {
        let timeline = Timeline {
            clock: Some(Clock {
                name: "CLOCK_MONOTONIC".into(),
                to_unix_ns: 1_000_000_000_000,
                error_ns: 0,
            }),
            ..Timeline::default()
        };
        let markers = Markers {
            markers: vec![Marker {
                time_ns: 2_000_000_000_000,
                name: "block".into(),
                set: "reth".into(),
                number: Some(7),
                elapsed_ns: None,
                hash: None,
                slot: None,
                line: "block 7 imported".into(),
            }],
            ..Markers::default()
        };
        let mut loaded = Loaded {
            name: "pod-demo-seq".into(),
            capture: Capture {
                container: "pod-demo-seq".into(),
                dir: "profiling/pod-demo-seq".into(),
                manifest_path: "profiling/pod-demo-seq/perf-1.json".into(),
                manifest: crate::store::Manifest::default(),
                created: chrono::DateTime::parse_from_rfc3339("2026-11-26T10:00:00+00:00").unwrap(),
            },
            folded: Folded::default(),
            timeline: Some(timeline),
            markers: Some(markers),
            unit: Unit::SAMPLES,
            note: None,
        };
        shift_clock(
            &mut loaded,
            ClockShift {
                ns: 5_000_000_000,
                uncertainty_ms: 46.5,
            },
        );
        assert_eq!(
            loaded.timeline.unwrap().clock.unwrap().to_unix_ns,
            995_000_000_000
        );
        assert_eq!(
            loaded.markers.unwrap().markers[0].time_ns,
            1_995_000_000_000
        );
        let note = loaded.note.unwrap();
        assert!(note.contains("+5000.0 ms ± 46.5 ms"), "{note}");
    }
}
