//! How closely a session's captures covered the same time, judged by what they recorded:
//! a perf capture by its first and last sample (its timeline's times, mapped to the Unix
//! clock of its endpoint, then to this host's through the endpoint's measured clock
//! shift), any other by the window its engine states (`window_started_at`/`_stopped_at`,
//! stamped on this host).

use super::Captured;
use crate::error::Result;
use crate::profile::timeline::{Sample, Timeline};
use crate::render::{write_svg_file, SvgSpec};
use crate::store::session::{clock_shift_of, Alignment, CaptureSpan, SessionEndpoint};
use crate::store::{units, GraphRecord, Stem, SESSION_FOLDED, SESSION_SVG, SESSION_TIMELINE};
use crate::units::thousands;
use chrono::{DateTime, Local, SecondsFormat, TimeZone};
use std::path::{Path, PathBuf};

/// A span's source when its samples are those of the capture cut to the session's window.
pub const CUT_SOURCE: &str = "samples in the session's window";

/// How far outside the session's window a capture's samples may lie before it is cut: the
/// window's own instants are known to about this (a release line and a clock read).
const CUT_SLACK_NS: i64 = 10_000_000;

/// The session's alignment from its finished captures: (container, kind, capture).
pub fn measure<'a>(
    captures: impl IntoIterator<Item = (&'a str, &'a str, &'a Captured)>,
    endpoints: &[SessionEndpoint],
) -> Alignment {
    let mut alignment = Alignment::default();
    let mut firsts = Vec::new();
    let mut lasts = Vec::new();
    for (container, kind, done) in captures {
        let timeline = session_timeline(done);
        let shift = clock_shift_of(endpoints, container).map_or(0, |s| s.ns);
        let cut = timeline.is_some_and(|(p, _)| {
            p.to_string_lossy()
                .ends_with(&format!(".{SESSION_TIMELINE}"))
        });
        let span = match timeline.and_then(|(p, _)| sample_span(p)) {
            Some((first, last)) => {
                let (first, last) = (first - shift, last - shift);
                firsts.push(first);
                lasts.push(last);
                let source = if cut { CUT_SOURCE } else { "samples" };
                Some((source, unix_text(first), unix_text(last)))
            }
            None => done
                .manifest
                .window_started_at
                .clone()
                .zip(done.manifest.window_stopped_at.clone())
                .map(|(a, b)| ("stated window", a, b)),
        };
        if let Some((source, first_at, last_at)) = span {
            alignment.captures.push(CaptureSpan {
                container: container.to_string(),
                kind: kind.to_string(),
                source: source.into(),
                first_at,
                last_at,
            });
        }
    }
    alignment.first_sample_spread_ms = spread_ms(&firsts);
    alignment.last_sample_spread_ms = spread_ms(&lasts);
    alignment
}

/// The timeline a session judges a capture by: the one cut to the session's window where
/// there is one, else the whole recording's (never a `--repeat` part's).
fn session_timeline(done: &Captured) -> Option<&(PathBuf, u64)> {
    let named = |suffix: &str| {
        done.files
            .iter()
            .find(|(p, _)| p.to_string_lossy().ends_with(suffix))
    };
    let stem = Stem::of_manifest(&done.manifest_path)?;
    named(&format!(".{SESSION_TIMELINE}")).or_else(|| named(&stem.file_name("timeline")))
}

/// Cuts every perf capture whose samples reach outside the session's window, `start_ns` to
/// `end_ns` (ns since the Unix epoch on this host's clock), to that window: a perf recorder
/// on a loaded host may take its last samples a few hundred ms after the stop was asked
/// for. The whole recording stays as it is; the cut is written beside it
/// (`<stem>.session.folded`, `.session.timeline` and its flamegraph `.session.svg`),
/// listed in the capture's manifest
/// with a note saying how many samples fell outside. Returns each capture's failure to be
/// cut, which leaves its whole recording to stand for it.
pub fn cut_to_window<'a>(
    captures: impl IntoIterator<Item = (&'a str, &'a mut Captured)>,
    endpoints: &[SessionEndpoint],
    start_ns: i64,
    end_ns: i64,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (container, done) in captures {
        let shift = clock_shift_of(endpoints, container).map_or(0, |s| s.ns);
        if let Err(e) = cut_one(done, shift, start_ns, end_ns) {
            failures.push(format!("{container}: not cut to the session's window: {e}"));
        }
    }
    failures
}

fn cut_one(done: &mut Captured, shift: i64, start_ns: i64, end_ns: i64) -> Result<()> {
    // CPU samples only: an off-CPU timeline holds intervals, which a cut would have to split.
    if done.manifest.kind != "cpu" {
        return Ok(());
    }
    let Some(stem) = Stem::of_manifest(&done.manifest_path) else {
        return Ok(());
    };
    let path = stem.path("timeline");
    if !done.files.iter().any(|(p, _)| *p == path) {
        return Ok(()); // no per-sample times: the engine states its window instead
    }
    let timeline = super::repeat::read_timeline(&stem)?;
    let Some(offset) = timeline.to_unix_ns() else {
        return Ok(()); // a timeline that does not know its clock cannot be placed
    };
    let (inside, before, after) = within(
        &timeline.samples,
        start_ns - CUT_SLACK_NS + shift - offset,
        end_ns + CUT_SLACK_NS + shift - offset,
    );
    if before == 0 && after == 0 {
        return Ok(());
    }
    let folded =
        super::repeat::write_samples(&timeline, &inside, &stem, SESSION_FOLDED, SESSION_TIMELINE)?;
    let manifest = &mut done.manifest;
    let spec = SvgSpec::cpu(
        format!(
            "{} — CPU ({}) — the session's window — {} samples",
            manifest.container.name,
            manifest.events.join(", "),
            thousands(folded.total())
        ),
        Some(format!(
            "cut from the whole recording ({}) to the window the session's captures share",
            stem.file_name("svg")
        )),
    );
    write_svg_file(&folded, &spec, &stem.path(SESSION_SVG))?;
    manifest.graphs.push(GraphRecord {
        svg: stem.file_name(SESSION_SVG),
        folded: stem.file_name(SESSION_FOLDED),
        view: "the session's window".into(),
        unit: units::SAMPLES.into(),
    });
    let files = manifest.record_stem_files(&stem, &[SESSION_FOLDED, SESSION_TIMELINE, SESSION_SVG]);
    manifest.notes.push(format!(
        "cut to the session's window in {}, {} and {}: {before} samples before it and {after} \
         after it (the recorder stopping late) are left out there; the other files hold the \
         whole recording",
        stem.file_name(SESSION_FOLDED),
        stem.file_name(SESSION_TIMELINE),
        stem.file_name(SESSION_SVG),
    ));
    manifest.write(&stem)?;
    done.files.extend(files);
    Ok(())
}

/// The samples from `lo` to `hi` (timeline ns, inclusive), and how many fell before and
/// after.
fn within(samples: &[Sample], lo: i64, hi: i64) -> (Vec<Sample>, usize, usize) {
    let (mut before, mut after) = (0, 0);
    let inside = samples
        .iter()
        .filter(|s| {
            let t = s.time_ns as i64;
            before += usize::from(t < lo);
            after += usize::from(t > hi);
            (lo..=hi).contains(&t)
        })
        .copied()
        .collect();
    (inside, before, after)
}

/// The first and last sample of a timeline, in ns since the Unix epoch (None when the
/// timeline cannot be read, holds no sample or does not know its clock).
pub fn sample_span(path: &Path) -> Option<(i64, i64)> {
    let file = std::fs::File::open(path).ok()?;
    let timeline = Timeline::read(std::io::BufReader::new(file)).ok()?;
    let offset = timeline.to_unix_ns()?;
    let (first, last) = timeline.span_ns()?;
    Some((first as i64 + offset, last as i64 + offset))
}

/// The largest gap between the instants (ns), in ms; None with fewer than two.
pub fn spread_ms(instants: &[i64]) -> Option<u64> {
    if instants.len() < 2 {
        return None;
    }
    let min = instants.iter().min()?;
    let max = instants.iter().max()?;
    Some(((max - min) / 1_000_000) as u64)
}

fn unix_text(ns: i64) -> String {
    let at: DateTime<Local> = Local.timestamp_nanos(ns);
    at.to_rfc3339_opts(SecondsFormat::Millis, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_is_the_widest_gap_and_needs_two_captures() {
        assert_eq!(spread_ms(&[]), None);
        assert_eq!(spread_ms(&[5_000_000_000]), None);
        assert_eq!(
            spread_ms(&[5_000_000_000, 5_120_000_000, 4_990_000_000]),
            Some(130)
        );
    }

    #[test]
    fn a_cut_keeps_the_samples_inside_the_window_and_counts_the_rest() {
        let at = |t: u64| Sample {
            time_ns: t,
            thread: 0,
            stack: 0,
            weight: 1,
        };
        let samples: Vec<Sample> = [90, 100, 150, 200, 201, 260].map(at).to_vec();
        let (inside, before, after) = within(&samples, 100, 200);
        assert_eq!(
            inside.iter().map(|s| s.time_ns).collect::<Vec<_>>(),
            [100, 150, 200]
        );
        assert_eq!((before, after), (1, 2));
    }

    #[test]
    fn instants_are_written_with_milliseconds() {
        let text = unix_text(1_700_000_000_123_456_789);
        let parsed = DateTime::parse_from_rfc3339(&text).unwrap();
        assert_eq!(parsed.timestamp_millis(), 1_700_000_000_123);
    }
}
