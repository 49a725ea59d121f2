//! How closely a session's captures covered the same time, judged by what they recorded:
//! a perf capture by its first and last sample (its timeline's times, mapped to the Unix
//! clock of its endpoint, then to this host's through the endpoint's measured clock
//! shift), any other by the window its engine states (`window_started_at`/`_stopped_at`,
//! stamped on this host).

use super::Captured;
use crate::profile::timeline::Timeline;
use crate::store::session::{clock_shift_of, Alignment, CaptureSpan, SessionEndpoint};
use chrono::{DateTime, Local, SecondsFormat, TimeZone};
use std::path::Path;

/// The session's alignment from its finished captures: (container, kind, capture).
pub fn measure<'a>(
    captures: impl IntoIterator<Item = (&'a str, &'a str, &'a Captured)>,
    endpoints: &[SessionEndpoint],
) -> Alignment {
    let mut alignment = Alignment::default();
    let mut firsts = Vec::new();
    let mut lasts = Vec::new();
    for (container, kind, done) in captures {
        let timeline = done
            .files
            .iter()
            .find(|(p, _)| p.extension().is_some_and(|e| e == "timeline"));
        let shift = clock_shift_of(endpoints, container).map_or(0, |s| s.ns);
        let span = match timeline.and_then(|(p, _)| sample_span(p)) {
            Some((first, last)) => {
                let (first, last) = (first - shift, last - shift);
                firsts.push(first);
                lasts.push(last);
                Some(("samples", unix_text(first), unix_text(last)))
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
    fn instants_are_written_with_milliseconds() {
        let text = unix_text(1_700_000_000_123_456_789);
        let parsed = DateTime::parse_from_rfc3339(&text).unwrap();
        assert_eq!(parsed.timestamp_millis(), 1_700_000_000_123);
    }
}
