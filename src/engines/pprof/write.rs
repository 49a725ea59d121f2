//! A fetched Go profile written into the store: the original, folded stacks, a flamegraph
//! and the manifest.

use super::{Fetched, PprofKind, PprofTarget, PPROF_EXTENSIONS};
use crate::error::{Error, Result};
use crate::profile::pprof::Profile;
use crate::render::{write_folded_file, write_svg_file, SvgSpec};
use crate::store::{self, GraphRecord, Manifest, Stem};
use crate::units::{human_bytes, human_duration, thousands};
use chrono::{DateTime, Local, SecondsFormat};
use std::path::PathBuf;
use std::time::Duration;

/// A finished pprof capture.
#[derive(Debug)]
pub struct PprofOutcome {
    pub manifest: Manifest,
    pub manifest_path: PathBuf,
    pub files: Vec<(PathBuf, u64)>,
    pub warnings: Vec<String>,
    /// The endpoint the profile came from.
    pub url: String,
    /// Bytes (heap) or samples (cpu) in the profile's chosen value.
    pub total: u64,
}

impl Fetched {
    /// The window the profile really covers, by this host's clock: a CPU profile opens
    /// when the runtime receives the request and lasts the duration the profile states; a
    /// heap profile is a snapshot taken while the request was answered.
    pub fn window(&self) -> (DateTime<Local>, DateTime<Local>) {
        let lasted = Duration::from_nanos(self.profile.duration_nanos.max(0) as u64);
        if lasted.is_zero() {
            return (self.requested_at, self.answered_at);
        }
        let closed = self.requested_at + chrono::Duration::from_std(lasted).unwrap_or_default();
        (self.requested_at, closed.min(self.answered_at))
    }
}

/// An instant in manifests: RFC 3339 with milliseconds.
fn instant_text(at: &DateTime<Local>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// Writes the capture at `stem`: `.pb.gz` as served, `.folded`, `.svg`, and `manifest`
/// (the capture's identity, from the caller) completed with what the profile says.
pub fn write_capture(
    target: &PprofTarget<'_>,
    kind: PprofKind,
    fetched: &Fetched,
    mut manifest: Manifest,
    stem: &Stem,
) -> Result<PprofOutcome> {
    let Fetched {
        url,
        bytes,
        profile,
        folded,
        fetched_ms,
        ..
    } = fetched;
    let (url, fetched_ms) = (url.as_str(), *fetched_ms);
    let container = &target.container.name;
    std::fs::write(stem.path("pb.gz"), bytes)
        .map_err(|e| Error::io(format!("write {}", stem.path("pb.gz").display()), e))?;
    write_folded_file(folded, &stem.path("folded"))?;
    let total = folded.total();
    let duration = Duration::from_nanos(profile.duration_nanos.max(0) as u64);
    let spec = match kind {
        PprofKind::Cpu { .. } => {
            let title = format!(
                "{container} — CPU (Go runtime pprof) — {} — {} samples",
                human_duration(duration),
                thousands(total)
            );
            SvgSpec::cpu(title, None)
        }
        PprofKind::Heap { allocated } => {
            let title = format!(
                "{container} — Go heap, {} — {}",
                if allocated {
                    "allocated since start (alloc_space)"
                } else {
                    "in use (inuse_space)"
                },
                human_bytes(total)
            );
            let mut spec = SvgSpec::cpu(title, None);
            spec.count_name = store::units::BYTES.into();
            spec.palette = inferno::flamegraph::color::Palette::Basic(
                inferno::flamegraph::color::BasicPalette::Mem,
            );
            spec
        }
    };
    let mut spec = spec;
    if let PprofKind::Cpu { .. } = kind {
        spec.subtitle = Some(format!(
            "{} — pid {} — Go's SIGPROF sampling ({} Hz)",
            target.program,
            target.pid,
            hz(profile)
        ));
    }
    write_svg_file(folded, &spec, &stem.path("svg"))?;

    let (opened, closed) = fetched.window();
    manifest.window_started_at = Some(instant_text(&opened));
    manifest.window_stopped_at = Some(instant_text(&closed));
    manifest.engine = "pprof".into();
    manifest.perf.path = url.to_string();
    manifest.perf.version = "net/http/pprof".into();
    manifest.capture_mode = Some(
        "Go runtime's net/http/pprof, fetched inside the container's network namespace".into(),
    );
    manifest.events = vec![match kind {
        // Go samples CPU time with SIGPROF timers; `samples` counts them.
        PprofKind::Cpu { .. } => "cpu (Go runtime)".to_string(),
        PprofKind::Heap { .. } => kind.sample_type().to_string(),
    }];
    manifest.duration_recorded_s = duration.as_secs_f64();
    if let PprofKind::Cpu { seconds } = kind {
        manifest.duration_requested_s = seconds as f64;
        manifest.frequency_hz = hz(profile);
    }
    manifest.sample_count = total;
    manifest.unsymbolized_share = (folded.unsymbolized_share() * 1000.0).round() / 1000.0;
    manifest.top_functions = folded.top_self(10);
    manifest.timings_ms.insert("fetch".into(), fetched_ms);
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name("svg"),
        folded: stem.file_name("folded"),
        view: "unfiltered".into(),
        unit: match kind {
            PprofKind::Cpu { .. } => store::units::SAMPLES,
            PprofKind::Heap { .. } => store::units::BYTES,
        }
        .into(),
    });
    manifest.notes.push(format!(
        "profile from {url}; the original is kept as {}",
        stem.file_name("pb.gz")
    ));
    if let PprofKind::Heap { allocated } = kind {
        manifest.heap = Some(crate::profile::heap::HeapRecord {
            measure: if allocated { "allocated" } else { "in-use" }.into(),
            how: format!(
                "Go runtime heap profile from {url} ({})",
                kind.sample_type()
            ),
            total_bytes: total,
            total_objects: profile
                .value_index(if allocated {
                    "alloc_objects"
                } else {
                    "inuse_objects"
                })
                .map(|i| profile.total(i))
                .unwrap_or(0),
            stacks: folded.stacks.len(),
            top_self: folded.top_self(25),
            top_inclusive: crate::profile::top::by_inclusive(folded, 25)
                .into_iter()
                .map(|r| (r.name, r.samples))
                .collect(),
            ..Default::default()
        });
    }
    let mut files = manifest.record_stem_files(stem, PPROF_EXTENSIONS);
    let manifest_path = manifest.write(stem)?;
    files.push((manifest_path.clone(), store::file_size(&manifest_path)));
    Ok(PprofOutcome {
        manifest,
        manifest_path,
        files,
        warnings: Vec::new(),
        url: url.to_string(),
        total,
    })
}

/// Go's CPU sampling rate from the profile's period (10 ms: 100 Hz).
fn hz(profile: &Profile) -> u32 {
    match profile.period_type.as_ref() {
        Some((kind, unit)) if kind == "cpu" && unit == "nanoseconds" && profile.period > 0 => {
            (1_000_000_000 / profile.period) as u32
        }
        _ => 0,
    }
}
