//! The profile store: `profiling/<container>/<kind>-YYYYMMDD-HHMMSS.*`, the manifests that
//! describe each capture and list the files devprof wrote.

use crate::error::{Error, Result};
use chrono::{DateTime, Local};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A capture's file stem, e.g. `profiling/demo-seq/perf-20261122-101500`. Reserving one
/// creates its manifest file, so two captures in the same second never share a stem.
#[derive(Debug, Clone)]
pub struct Stem {
    dir: PathBuf,
    name: String,
}

impl Stem {
    /// Reserves the first free stem `<prefix>-<timestamp>[-N]` in `dir` (created if needed).
    pub fn reserve(dir: &Path, prefix: &str, now: DateTime<Local>) -> Result<Stem> {
        fs::create_dir_all(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
        let base = format!("{prefix}-{}", now.format("%Y%m%d-%H%M%S"));
        for n in 1..1000 {
            let name = if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            let stem = Stem {
                dir: dir.to_path_buf(),
                name,
            };
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(stem.path("json"))
            {
                Ok(_) => return Ok(stem),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(Error::io(
                        format!("create {}", stem.path("json").display()),
                        e,
                    ))
                }
            }
        }
        Err(Error::io(
            format!("reserve a file name for {base} in {}", dir.display()),
            std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        ))
    }

    pub fn path(&self, extension: &str) -> PathBuf {
        self.dir.join(format!("{}.{extension}", self.name))
    }

    pub fn file_name(&self, extension: &str) -> String {
        format!("{}.{extension}", self.name)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes every file of this stem that devprof may have written (used when a capture
    /// ends with nothing worth keeping).
    pub fn discard(&self, extensions: &[&str]) {
        for ext in extensions.iter().chain(std::iter::once(&"json")) {
            let _ = fs::remove_file(self.path(ext));
        }
        // Leave no empty container directory behind.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The directory of one container's captures.
pub fn container_dir(output_dir: &Path, container: &str) -> PathBuf {
    output_dir.join(sanitize(container))
}

/// Container names are `[a-zA-Z0-9][a-zA-Z0-9_.-]*`; anything else is replaced so a name
/// can never become a path.
fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "_".to_string(),
        s => s.to_string(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileRecord {
    pub name: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContainerRecord {
    pub name: String,
    pub id: String,
    pub image: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProcessRecord {
    pub pid: u32,
    pub command_line: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PerfRecord {
    pub path: String,
    pub version: String,
    pub record_command: Vec<String>,
}

/// What a capture was and which files it wrote; the store knows devprof's files by these.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Manifest {
    pub devprof_version: String,
    pub kind: String,
    pub created: String,
    pub target: String,
    pub container: ContainerRecord,
    pub process: ProcessRecord,
    pub perf: PerfRecord,
    /// How perf was run: exec in the container, or a sidecar and its privileges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<String>,
    pub events: Vec<String>,
    pub frequency_hz: u32,
    pub call_graph: String,
    pub duration_requested_s: f64,
    pub duration_recorded_s: f64,
    pub interrupted: bool,
    pub sample_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_reported_samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_chunks: Option<u64>,
    pub unsymbolized_share: f64,
    pub top_functions: Vec<(String, u64)>,
    pub timings_ms: BTreeMap<String, u64>,
    pub files: Vec<FileRecord>,
    pub notes: Vec<String>,
    /// The event config an off-CPU capture used (its path, or `built-in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The off-CPU summary (counts by group, off-CPU time, bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offcpu: Option<crate::offcpu::summary::Summary>,
    /// A heap capture: the dumps merged, totals, symbols and top allocation sites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<crate::heap::HeapRecord>,
}

impl Manifest {
    /// Lists `dir/name` among the files devprof wrote, with its size on disk; returns the
    /// path and size for the closing summary.
    pub fn record_file(&mut self, dir: &Path, name: &str) -> (PathBuf, u64) {
        let path = dir.join(name);
        let bytes = file_size(&path);
        self.files.push(FileRecord {
            name: name.to_string(),
            bytes,
        });
        (path, bytes)
    }

    /// `record_file` for each of a stem's extensions.
    pub fn record_stem_files(&mut self, stem: &Stem, extensions: &[&str]) -> Vec<(PathBuf, u64)> {
        extensions
            .iter()
            .map(|ext| self.record_file(stem.dir(), &stem.file_name(ext)))
            .collect()
    }

    /// Writes the manifest to the stem's .json, listing itself among the files.
    pub fn write(&mut self, stem: &Stem) -> Result<PathBuf> {
        let path = stem.path("json");
        let own_name = stem.file_name("json");
        self.files.retain(|f| f.name != own_name);
        // The manifest's own size is not known before writing; record it as 0 and let
        // readers stat it.
        self.files.push(FileRecord {
            name: own_name,
            bytes: 0,
        });
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::io("serialize manifest", std::io::Error::other(e)))?;
        let tmp = stem.dir().join(format!(".{}.json.tmp", stem.name()));
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        Ok(path)
    }
}

/// Size of a file on disk, 0 when it is gone.
pub fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn two_captures_in_the_same_second_get_distinct_stems() {
        let dir = tempfile::tempdir().unwrap();
        let now = Local.with_ymd_and_hms(2026, 11, 22, 10, 15, 0).unwrap();
        let a = Stem::reserve(dir.path(), "perf", now).unwrap();
        let b = Stem::reserve(dir.path(), "perf", now).unwrap();
        assert_eq!(a.name(), "perf-20261122-101500");
        assert_eq!(b.name(), "perf-20261122-101500-2");
        assert!(a.path("json").exists() && b.path("json").exists());
    }

    #[test]
    fn container_names_cannot_become_paths() {
        let base = Path::new("profiling");
        assert_eq!(container_dir(base, "demo-seq"), base.join("demo-seq"));
        assert_eq!(container_dir(base, "../x"), base.join("_x"));
        assert_eq!(container_dir(base, ".."), base.join("_"));
    }

    #[test]
    fn manifest_lists_itself_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "perf", Local::now()).unwrap();
        let mut m = Manifest {
            kind: "cpu".into(),
            sample_count: 42,
            ..Default::default()
        };
        let path = m.write(&stem).unwrap();
        let back: Manifest = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back.sample_count, 42);
        assert_eq!(back.files.len(), 1);
    }
}
