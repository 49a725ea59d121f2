//! `profiling/index.json`: which directory of the store holds which container and compose
//! service, for people and scripts browsing the store (the layout is one directory per
//! container, named after it, which a compose service's name does not give away).
//!
//! It is derived from the manifests and never read by devprof to find a capture (the
//! manifests stay the truth; a lost or stale index changes nothing but itself). Each capture
//! refreshes its directory's entry when it writes its manifest, `ls` and `clean` rebuild it
//! whole. Writers take an advisory lock on `.index.lock`, so that two captures of one session
//! finishing together do not each drop the other's entry.

use crate::error::{Error, Result};
use crate::store::catalog::{self, Capture};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

pub const INDEX_FILE: &str = "index.json";
const LOCK_FILE: &str = ".index.lock";
/// An index larger than this is not read back (it is rebuilt instead): it is devprof's own
/// file, but the store directory may be shared.
const MAX_INDEX_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Index {
    pub about: String,
    pub directories: Vec<Entry>,
}

/// One container directory: what its newest manifest says of the container, and what the
/// directory holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub dir: String,
    pub container: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub captures: usize,
    pub kinds: Vec<String>,
    pub newest: String,
}

const ABOUT: &str = "Which directory holds which container and compose service. Derived from \
the captures' manifests (<dir>/<capture>.json), which stay the truth; rewritten by every \
capture, `devprof ls` and `devprof clean`.";

/// The entry of one directory from its captures (oldest first, as `catalog` lists them);
/// `None` when it has none.
pub fn entry_of(dir: &str, captures: &[&Capture]) -> Option<Entry> {
    let newest = captures.iter().max_by_key(|c| c.created)?;
    let mut kinds: Vec<String> = captures.iter().map(|c| c.manifest.kind.clone()).collect();
    kinds.sort();
    kinds.dedup();
    let container = &newest.manifest.container;
    Some(Entry {
        dir: dir.to_string(),
        container: container.name.clone(),
        id: container.id.chars().take(12).collect(),
        project: container.project.clone(),
        service: container.service.clone(),
        captures: captures.len(),
        kinds,
        newest: newest.manifest.created.clone(),
    })
}

/// The index of a whole store, one entry per directory with captures, sorted by directory.
pub fn index_of(captures: &[Capture]) -> Index {
    let mut dirs: Vec<&str> = captures.iter().map(|c| c.container.as_str()).collect();
    dirs.sort();
    dirs.dedup();
    let directories = dirs
        .into_iter()
        .filter_map(|dir| {
            let own: Vec<&Capture> = captures.iter().filter(|c| c.container == dir).collect();
            entry_of(dir, &own)
        })
        .collect();
    Index {
        about: ABOUT.to_string(),
        directories,
    }
}

/// Rewrites the whole index from every manifest in the store.
pub fn rebuild(output_dir: &Path) -> Result<()> {
    if !output_dir.is_dir() {
        return Ok(());
    }
    let _lock = Lock::take(output_dir)?;
    let captures = catalog::list(output_dir, None)?;
    write(output_dir, &index_of(&captures))
}

/// Rewrites the whole index from every capture of the store, just listed by the caller.
pub fn rebuild_from(output_dir: &Path, captures: &[Capture]) -> Result<()> {
    let _lock = Lock::take(output_dir)?;
    write(output_dir, &index_of(captures))
}

/// Replaces one directory's entry (after a capture wrote its manifest there); rebuilds the
/// whole index when there is none yet or it cannot be read.
pub fn refresh(output_dir: &Path, dir: &str) -> Result<()> {
    let _lock = Lock::take(output_dir)?;
    let Some(mut index) = read(output_dir) else {
        let captures = catalog::list(output_dir, None)?;
        return write(output_dir, &index_of(&captures));
    };
    let own = catalog::list(output_dir, Some(dir))?;
    index.directories.retain(|e| e.dir != dir);
    index
        .directories
        .extend(entry_of(dir, &own.iter().collect::<Vec<_>>()));
    index.directories.sort_by(|a, b| a.dir.cmp(&b.dir));
    index.about = ABOUT.to_string();
    write(output_dir, &index)
}

/// The index as written, if it is there, small and parses.
pub fn read(output_dir: &Path) -> Option<Index> {
    let path = output_dir.join(INDEX_FILE);
    let meta = fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > MAX_INDEX_BYTES {
        return None;
    }
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn write(output_dir: &Path, index: &Index) -> Result<()> {
    let path = output_dir.join(INDEX_FILE);
    let tmp = output_dir.join(format!(".{INDEX_FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(index)
        .map_err(|e| Error::io("serialize the store index", std::io::Error::other(e)))?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(format!("write {}", path.display()), e)
    })
}

/// An exclusive advisory lock on the store's `.index.lock`, released when dropped.
struct Lock(fs::File);

impl Lock {
    fn take(output_dir: &Path) -> Result<Lock> {
        let path = output_dir.join(LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("open {}", path.display()), e))?;
        // SAFETY: flock on a descriptor this File owns for the whole call.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(Error::io(
                format!("lock {}", path.display()),
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Lock(file))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: as above; closing the file would release it too.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ContainerRecord, Manifest};
    use chrono::DateTime;

    fn capture(dir: &str, kind: &str, created: &str, service: Option<&str>) -> Capture {
        Capture {
            container: dir.into(),
            dir: dir.into(),
            manifest_path: format!("{dir}/{kind}.json").into(),
            manifest: Manifest {
                kind: kind.into(),
                created: created.into(),
                container: ContainerRecord {
                    name: dir.into(),
                    id: "4f2a9c0123456789abcdef".into(),
                    image: "node:latest".into(),
                    project: service.map(|_| "devnet".into()),
                    service: service.map(str::to_string),
                },
                ..Manifest::default()
            },
            created: DateTime::parse_from_rfc3339(created).unwrap(),
        }
    }

    #[test]
    fn an_entry_names_the_service_of_its_directory_and_what_it_holds() {
        let captures = [
            capture(
                "devnet-op-reth-seq-1",
                "offcpu",
                "2026-11-26T10:00:00+00:00",
                None,
            ),
            capture(
                "devnet-op-reth-seq-1",
                "cpu",
                "2026-11-26T11:00:00+00:00",
                Some("op-reth-seq"),
            ),
            capture("demo-seq", "cpu", "2026-11-26T09:00:00+00:00", None),
        ];
        let index = index_of(&captures);
        let dirs: Vec<&str> = index.directories.iter().map(|e| e.dir.as_str()).collect();
        assert_eq!(dirs, ["demo-seq", "devnet-op-reth-seq-1"]);
        let reth = &index.directories[1];
        assert_eq!(
            reth.service.as_deref(),
            Some("op-reth-seq"),
            "from the newest manifest"
        );
        assert_eq!(reth.project.as_deref(), Some("devnet"));
        assert_eq!(reth.captures, 2);
        assert_eq!(reth.kinds, ["cpu", "offcpu"]);
        assert_eq!(reth.newest, "2026-11-26T11:00:00+00:00");
        assert_eq!(reth.id, "4f2a9c012345");
        assert_eq!(index.directories[0].service, None);
    }

    #[test]
    fn a_directory_without_captures_has_no_entry() {
        assert_eq!(entry_of("empty", &[]), None);
    }
}
