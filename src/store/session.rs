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
