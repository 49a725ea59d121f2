//! The profile store: `profiling/<container>/<kind>-YYYYMMDD-HHMMSS.*`. `manifest` describes
//! each capture and lists the files devprof wrote; `catalog` lists captures from their
//! manifests and plans retention; `names` is the grammar of the names the store answers to,
//! `lookup` what a name stands for; `loader` reads profiles back. Only files a manifest lists
//! are ever deleted.

pub mod catalog;
pub mod index;
pub mod loader;
pub mod lookup;
pub mod manifest;
pub mod names;
pub mod session;

pub use manifest::{
    file_size, units, CommandRecord, ContainerRecord, FileRecord, GraphRecord, Manifest,
    PartRecord, PerfRecord, ProcessRecord,
};

use crate::error::{Error, Result};
use chrono::{DateTime, Local};
use std::fs;
use std::path::{Path, PathBuf};

/// Every extension a capture may write next to its stem (for discarding, and for
/// reclaiming the leftovers of a capture that was killed).
pub const ARTIFACT_EXTENSIONS: &[&str] = &[
    "data",
    // A download under way: renamed to `data` once complete.
    "data.part",
    "folded",
    "svg",
    "script",
    "txt",
    "offcpu.folded",
    "offcpu.svg",
    "node-preset.folded",
    "node-preset.svg",
    "timeline",
    "html",
    "asprof.html",
    "pb.gz",
    // Counters (`stat`).
    "csv",
    HEAP_PLOT,
    THREADS_PLOT,
    BANDWIDTH_PLOT,
    "markers",
];

/// The plots written beside a capture's report (their extensions after the stem): the heap
/// in use per dump over time, off-CPU time per thread over the window, I/O bandwidth over
/// the window.
pub const HEAP_PLOT: &str = "dumps.svg";
pub const THREADS_PLOT: &str = "threads.svg";
pub const BANDWIDTH_PLOT: &str = "bandwidth.svg";

/// A session's perf capture that sampled outside the session's window also has these,
/// cut to that window (capture/alignment.rs), beside its whole recording's files.
pub const SESSION_FOLDED: &str = "session.folded";
pub const SESSION_TIMELINE: &str = "session.timeline";
pub const SESSION_SVG: &str = "session.svg";

/// A capture's file stem, e.g. `profiling/demo-seq/perf-20261122-101500`. Reserving one
/// creates its manifest file, so two captures in the same second never share a stem.
#[derive(Debug, Clone)]
pub struct Stem {
    dir: PathBuf,
    name: String,
}

impl Stem {
    /// Reserves the first free stem `<prefix>-<timestamp>[-N]` in `dir` (created if needed,
    /// private: [`create_private_dirs`]).
    pub fn reserve(dir: &Path, prefix: &str, now: DateTime<Local>) -> Result<Stem> {
        create_private_dirs(dir).map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
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

    /// The stem of a capture already written, from its manifest's path (`<stem>.json`).
    pub fn of_manifest(manifest_path: &Path) -> Option<Stem> {
        let name = manifest_path.file_name()?.to_str()?.strip_suffix(".json")?;
        Some(Stem {
            dir: manifest_path.parent()?.to_path_buf(),
            name: name.to_string(),
        })
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
        // The markers file is written by the window itself, whatever the kind.
        for ext in extensions.iter().chain([&"json", &"markers"]) {
            let _ = fs::remove_file(self.path(ext));
        }
        // Leave no empty container directory behind.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Creates `dir` and whichever of its parents are missing with mode 0700: the store holds
/// recordings (perf.data with kernel addresses, heap dumps) and copies of the targets'
/// binaries, which other users of the machine have no business reading. Directories that
/// exist already keep the mode they have.
pub fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The directory of one container's captures.
pub fn container_dir(output_dir: &Path, container: &str) -> PathBuf {
    output_dir.join(sanitize(container))
}

/// Docker container names are `[a-zA-Z0-9][a-zA-Z0-9_.-]*`; the store's directories are
/// named after them.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-".contains(c)
}

/// Whether a directory name in the store is a container name.
pub fn valid_container_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric()) && chars.all(is_name_char)
}

/// Any character a container name cannot have is replaced, so a name can never become a
/// path.
fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .collect();
    match cleaned.trim_start_matches('.') {
        "" => "_".to_string(),
        s => s.to_string(),
    }
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
    fn the_store_directories_a_stem_creates_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let store = root.path().join("profiling");
        let dir = store.join("demo-seq");
        Stem::reserve(&dir, "perf", Local::now()).unwrap();
        for made in [&store, &dir] {
            let mode = fs::metadata(made).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", made.display());
        }
        // A directory the user made keeps its mode.
        let shared = root.path().join("shared");
        fs::create_dir(&shared).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
        Stem::reserve(&shared, "perf", Local::now()).unwrap();
        let mode = fs::metadata(&shared).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn container_names_cannot_become_paths() {
        let base = Path::new("profiling");
        assert_eq!(container_dir(base, "demo-seq"), base.join("demo-seq"));
        assert_eq!(container_dir(base, "../x"), base.join("_x"));
        assert_eq!(container_dir(base, ".."), base.join("_"));
    }
}
