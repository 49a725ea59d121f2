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

#[cfg(test)]
mod tests {
    use super::*;

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
