//! Session manifests: `profiling/sessions/session-YYYYMMDD-HHMMSS.json`, one per
//! `devprof profile`, listing every capture it made (each still has its own manifest under
//! `profiling/<container>/`) and the closing table.

use crate::error::{Error, Result};
use crate::profile::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// The directory under the store that holds session manifests.
pub const SESSIONS_DIR: &str = "sessions";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionRecord {
    pub devprof_version: String,
    /// Always `session`: tells these apart from capture manifests.
    pub kind: String,
    pub created: String,
    /// How the containers were chosen: `named`, `project NAME`, `all`.
    pub targets: String,
    pub kinds: Vec<String>,
    pub duration_requested_s: f64,
    /// When every capture was ready and the recorders were told to start.
    pub started_at: String,
    pub interrupted: bool,
    pub rows: Vec<SessionRow>,
    pub captures: Vec<SessionCapture>,
    /// The verdict's thresholds, in words.
    pub thresholds: String,
    /// How closely the captures covered the same time, judged by what they recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment: Option<Alignment>,
    /// The container endpoints of a session over several (`TARGET@CONTEXT`), with their
    /// clocks against this host's; empty for a session on one endpoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<SessionEndpoint>,
}

/// One container endpoint of a session and its clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionEndpoint {
    /// The docker context (`default`: the endpoint the environment names).
    pub context: String,
    pub address: String,
    pub containers: Vec<String>,
    /// The endpoint's clock minus this host's, measured before and after the window
    /// (round trips through exec); what its containers stamp is on that clock.
    pub clock_before: Option<crate::profile::clock::ClockOffset>,
    pub clock_after: Option<crate::profile::clock::ClockOffset>,
    /// Why a clock could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_errors: Vec<String>,
}

/// How far an endpoint's clock is from this host's, as measured around a session's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockShift {
    /// The endpoint's clock minus this host's, in ns: subtracted from what the endpoint
    /// stamped (perf's sample times through its clock record, log lines) to put it on this
    /// host's clock.
    pub ns: i64,
    /// Half the best round trip of the exchanges it came from (the larger of the two
    /// measurements), in ms.
    pub uncertainty_ms: f64,
}

impl SessionEndpoint {
    /// The endpoint's clock shift: the mean of the offsets measured before and after the
    /// window (one when the other could not be read); None when neither could.
    pub fn clock_shift(&self) -> Option<ClockShift> {
        let measured: Vec<_> = [self.clock_before, self.clock_after]
            .into_iter()
            .flatten()
            .collect();
        if measured.is_empty() {
            return None;
        }
        let mean_ms = measured.iter().map(|c| c.offset_ms).sum::<f64>() / measured.len() as f64;
        Some(ClockShift {
            ns: (mean_ms * 1e6).round() as i64,
            uncertainty_ms: measured
                .iter()
                .map(|c| c.uncertainty_ms)
                .fold(0.0, f64::max),
        })
    }
}

/// The clock shift of `container`'s endpoint in a session over several, if measured.
pub fn clock_shift_of(endpoints: &[SessionEndpoint], container: &str) -> Option<ClockShift> {
    endpoints
        .iter()
        .find(|e| e.containers.iter().any(|c| c == container))?
        .clock_shift()
}

/// The session's windows as recorded: each capture's first and last sample (perf, from its
/// timeline) or the window its engine states (the others), and the spread of the perf
/// captures' first and last samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Alignment {
    pub captures: Vec<CaptureSpan>,
    /// Largest gap between two perf captures' first samples, in ms.
    pub first_sample_spread_ms: Option<u64>,
    /// Largest gap between two perf captures' last samples, in ms.
    pub last_sample_spread_ms: Option<u64>,
}

/// When one capture's recording really began and ended, by the Unix clock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaptureSpan {
    pub container: String,
    pub kind: String,
    /// `samples` (first and last sample times from the timeline), `samples in the
    /// session's window` (the same, from the copy cut to the session's window, when the
    /// recorder took samples outside it) or `stated window` (the window the engine says it
    /// covered).
    pub source: String,
    pub first_at: String,
    pub last_at: String,
}

/// One container's line of the closing table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionRow {
    pub container: String,
    /// CPU time of the process over the window, as a share of one core.
    pub cpu_cores: Option<f64>,
    pub pid: Option<u32>,
    /// CPU samples of the cpu capture.
    pub samples: Option<u64>,
    pub heap_growth_bytes: Option<i64>,
    pub offcpu_s: Option<f64>,
    pub verdict: Option<Verdict>,
    /// Why a capture (kind: reason) or the CPU reading failed; empty when all went well.
    pub errors: Vec<String>,
}

/// One capture of the session.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SessionCapture {
    pub container: String,
    pub kind: String,
    /// Its manifest, relative to the store (`demo-seq/perf-20261123-101500.json`).
    pub manifest: Option<String>,
    pub window_started_at: Option<String>,
    pub window_stopped_at: Option<String>,
    pub error: Option<String>,
}

/// How far apart the captures' windows started, in milliseconds: their start instants are
/// taken on this host (when each recorder's first line arrived), so they share one clock
/// whatever endpoint ran them. None with fewer than two starts.
pub fn start_spread_ms(captures: &[SessionCapture]) -> Option<f64> {
    let starts: Vec<chrono::DateTime<chrono::FixedOffset>> = captures
        .iter()
        .filter_map(|c| c.window_started_at.as_deref())
        .filter_map(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .collect();
    let first = starts.iter().min()?;
    let last = starts.iter().max()?;
    (starts.len() > 1).then(|| (*last - *first).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e3)
}

/// The sessions in the store, oldest first, with their manifest paths. Files that are not
/// session manifests are skipped.
pub fn list(output_dir: &Path) -> Result<Vec<(PathBuf, SessionRecord)>> {
    let dir = output_dir.join(SESSIONS_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("read {}", dir.display()), e)),
    };
    let mut sessions: Vec<(PathBuf, SessionRecord)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| {
            let record = serde_json::from_str::<SessionRecord>(&fs::read_to_string(&p).ok()?)
                .ok()
                .filter(|r| r.kind == "session")?;
            Some((p, record))
        })
        .collect();
    sessions.sort_by(|a, b| a.1.created.cmp(&b.1.created).then(a.0.cmp(&b.0)));
    Ok(sessions)
}

/// The sessions `clean --older AGE` removes: created before `now - older` (unreadable
/// instants count as old), and none of whose captures stays in the store (`kept`: the
/// manifests, relative to the store, that this clean leaves), so that `--keep-last` also
/// keeps the sessions of the captures it keeps.
pub fn expired(
    sessions: &[(PathBuf, SessionRecord)],
    now: chrono::DateTime<chrono::FixedOffset>,
    older: std::time::Duration,
    kept: &std::collections::HashSet<PathBuf>,
) -> Vec<usize> {
    let cutoff = chrono::Duration::from_std(older)
        .ok()
        .and_then(|age| now.checked_sub_signed(age));
    sessions
        .iter()
        .enumerate()
        .filter(|(_, (_, record))| {
            let old = match (
                chrono::DateTime::parse_from_rfc3339(&record.created),
                cutoff,
            ) {
                (Ok(created), Some(cutoff)) => created < cutoff,
                (Err(_), Some(_)) => true,
                (_, None) => false,
            };
            let lists_a_kept_capture = record
                .captures
                .iter()
                .filter_map(|c| c.manifest.as_deref())
                .any(|m| kept.contains(Path::new(m)));
            old && !lists_a_kept_capture
        })
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoints_clock_shift_is_the_mean_of_its_measurements_with_the_wider_uncertainty() {
        use crate::profile::clock::ClockOffset;
        let offset = |offset_ms, uncertainty_ms| ClockOffset {
            offset_ms,
            uncertainty_ms,
            exchanges: 8,
        };
        let endpoint = |before, after| SessionEndpoint {
            context: "podman".into(),
            address: "unix:///run/p.sock".into(),
            containers: vec!["pod-demo-seq".into()],
            clock_before: before,
            clock_after: after,
            clock_errors: Vec::new(),
        };
        let both = endpoint(Some(offset(5003.6, 46.5)), Some(offset(5009.5, 92.4)));
        assert_eq!(
            both.clock_shift(),
            Some(ClockShift {
                ns: 5_006_550_000,
                uncertainty_ms: 92.4
            })
        );
        let one = endpoint(None, Some(offset(-12.0, 3.0)));
        assert_eq!(one.clock_shift().unwrap().ns, -12_000_000);
        assert_eq!(endpoint(None, None).clock_shift(), None);
        let endpoints = [both];
        assert_eq!(
            clock_shift_of(&endpoints, "pod-demo-seq").map(|s| s.ns),
            Some(5_006_550_000)
        );
        assert_eq!(clock_shift_of(&endpoints, "demo-seq"), None);
    }

    #[test]
    fn the_start_spread_is_between_the_first_and_last_start() {
        let capture = |start: Option<&str>| SessionCapture {
            container: "c".into(),
            kind: "cpu".into(),
            manifest: None,
            window_started_at: start.map(str::to_string),
            window_stopped_at: None,
            error: None,
        };
        let captures = [
            capture(Some("2026-11-26T14:00:00.120+00:00")),
            capture(None),
            // Another zone, same clock: 40 ms before the first.
            capture(Some("2026-11-26T15:00:00.080+01:00")),
            capture(Some("2026-11-26T14:00:00.200+00:00")),
        ];
        assert_eq!(start_spread_ms(&captures), Some(120.0));
        assert_eq!(start_spread_ms(&captures[..2]), None);
    }

    fn session(created: &str, manifests: &[&str]) -> (PathBuf, SessionRecord) {
        let record = SessionRecord {
            devprof_version: "0".into(),
            kind: "session".into(),
            created: created.into(),
            targets: "named".into(),
            kinds: vec!["cpu".into()],
            duration_requested_s: 5.0,
            started_at: created.into(),
            interrupted: false,
            rows: Vec::new(),
            captures: manifests
                .iter()
                .map(|m| SessionCapture {
                    container: "c".into(),
                    kind: "cpu".into(),
                    manifest: Some(m.to_string()),
                    window_started_at: None,
                    window_stopped_at: None,
                    error: None,
                })
                .collect(),
            thresholds: String::new(),
            alignment: None,
            endpoints: Vec::new(),
        };
        (
            PathBuf::from(format!("sessions/session-{created}.json")),
            record,
        )
    }

    #[test]
    fn old_sessions_expire_unless_a_capture_they_list_stays() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-23T12:00:00+00:00").unwrap();
        let day = std::time::Duration::from_secs(86_400);
        let sessions = vec![
            session("2026-11-20T12:00:00.000+00:00", &["a/perf-1.json"]),
            session("2026-11-20T13:00:00.000+00:00", &["a/perf-2.json"]),
            session("2026-11-23T11:00:00.000+00:00", &[]),
            session("not a date", &[]),
        ];
        let kept: std::collections::HashSet<PathBuf> =
            [PathBuf::from("a/perf-2.json")].into_iter().collect();
        assert_eq!(expired(&sessions, now, day, &kept), vec![0, 3]);
        // Nothing is older than ten days.
        assert!(expired(&sessions[..3], now, day * 10, &kept).is_empty());
    }

    #[test]
    fn lists_session_manifests_only() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join(SESSIONS_DIR);
        fs::create_dir_all(&dir).unwrap();
        let record = SessionRecord {
            devprof_version: "0".into(),
            kind: "session".into(),
            created: "2026-11-23T10:00:00.000+00:00".into(),
            targets: "project demo".into(),
            kinds: vec!["cpu".into()],
            duration_requested_s: 5.0,
            started_at: "2026-11-23T10:00:01.000+00:00".into(),
            interrupted: false,
            rows: Vec::new(),
            captures: Vec::new(),
            thresholds: String::new(),
            alignment: None,
            endpoints: Vec::new(),
        };
        fs::write(
            dir.join("session-1.json"),
            serde_json::to_string(&record).unwrap(),
        )
        .unwrap();
        fs::write(dir.join("other.json"), "{\"kind\": \"cpu\"}").unwrap();
        fs::write(dir.join("session-2.json"), "").unwrap();
        let found = list(out.path()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1, record);
        assert!(list(&out.path().join("absent")).unwrap().is_empty());
    }
}
