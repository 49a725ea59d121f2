//! Safe extraction of the tar archives the Docker archive API sends. Only regular files
//! and directories are accepted; an absolute path, a `..` component, a link or a device
//! entry rejects the archive, and nothing is written outside the destination directory.
//! Files are created new, never overwriting, and never through an existing symlink.
//! `Docker::download` streams the archive from the engine into the extractor;
//! `Docker::upload_files` sends chosen host files into a container directory.

use super::{api_error, pipe, Docker};
use crate::error::{Error, Result as DevprofResult};
use bollard::query_parameters::{
    DownloadFromContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The most one copy-out may bring home. What is copied is named by the container (a
/// heap dump lists the files it maps, a recording can grow without end), so every copy has
/// a bound, and the error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimit {
    pub bytes: u64,
    /// What is copied, for the error: "a heap dump".
    pub what: &'static str,
}

impl CopyLimit {
    /// The error for `size` bytes of `entry` brought out of `container`, past this limit.
    pub fn exceeded(&self, container: &str, entry: &str, size: u64) -> Error {
        Error::CopyTooLarge {
            container: container.to_string(),
            entry: entry.to_string(),
            size,
            limit: self.bytes,
            what: self.what,
        }
    }

    pub const HEAP_DUMP: CopyLimit = CopyLimit {
        bytes: 1 << 30,
        what: "a heap dump",
    };
    pub const BINARY: CopyLimit = CopyLimit {
        bytes: 2 << 30,
        what: "a binary",
    };
    pub const RECORDING: CopyLimit = CopyLimit {
        bytes: 64 << 30,
        what: "a recording",
    };
    pub const REPORT: CopyLimit = CopyLimit {
        bytes: 256 << 20,
        what: "a report",
    };
}

#[derive(Debug)]
pub enum ArchiveError {
    Unsafe {
        entry: String,
        why: String,
    },
    Io {
        context: String,
        source: io::Error,
    },
    /// The archive holds more than the copy's limit.
    TooLarge {
        entry: String,
        size: u64,
        limit: CopyLimit,
    },
}

impl ArchiveError {
    pub fn into_error(self, container: &str) -> Error {
        match self {
            ArchiveError::Unsafe { entry, why } => Error::UnsafeArchive {
                container: container.to_string(),
                entry,
                why,
            },
            ArchiveError::TooLarge { entry, size, limit } => Error::CopyTooLarge {
                container: container.to_string(),
                entry,
                size,
                limit: limit.bytes,
                what: limit.what,
            },
            ArchiveError::Io { context, source } => Error::io(context, source),
        }
    }
}

/// Extracts `reader` into `dest`. `rename` maps each entry's (validated, relative) path to
/// the path to write under `dest`, or None to skip it. More than `limit` bytes of files in
/// all is refused (by the entry's declared size, before anything of it is written). On any
/// error the files written so far are removed again.
pub fn extract<R, F>(
    reader: R,
    dest: &Path,
    mut rename: F,
    limit: CopyLimit,
) -> Result<Vec<PathBuf>, ArchiveError>
where
    R: Read,
    F: FnMut(&Path) -> Option<PathBuf>,
{
    let mut written = Vec::new();
    let result = extract_into(reader, dest, &mut rename, &mut written, limit);
    if result.is_err() {
        for path in &written {
            let _ = fs::remove_file(path);
        }
    }
    result.map(|_| written)
}

fn extract_into<R, F>(
    reader: R,
    dest: &Path,
    rename: &mut F,
    written: &mut Vec<PathBuf>,
    limit: CopyLimit,
) -> Result<(), ArchiveError>
where
    R: Read,
    F: FnMut(&Path) -> Option<PathBuf>,
{
    let io_err = |context: String| move |source| ArchiveError::Io { context, source };
    let mut archive = tar::Archive::new(reader);
    let mut total: u64 = 0;
    let entries = archive
        .entries()
        .map_err(io_err("read archive".to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(io_err("read archive entry".to_string()))?;
        let raw = entry
            .path()
            .map_err(io_err("read archive entry name".to_string()))?
            .into_owned();
        let shown = raw.display().to_string();
        let relative = checked_relative(&raw).map_err(|why| ArchiveError::Unsafe {
            entry: shown.clone(),
            why,
        })?;
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            continue; // directories are created on demand for the files inside them
        }
        if !kind.is_file() {
            return Err(ArchiveError::Unsafe {
                entry: shown,
                why: format!("is a {kind:?} entry; only regular files are accepted"),
            });
        }
        let Some(target) = rename(&relative) else {
            continue;
        };
        // The entry's size, a pax record's where there is one: a Go tar writer (the
        // engine's) puts a size past 8 GiB there and 0 in the header.
        let size = entry.size();
        total = total.saturating_add(size);
        if total > limit.bytes {
            return Err(ArchiveError::TooLarge {
                entry: shown,
                size,
                limit,
            });
        }
        let target_relative = checked_relative(&target).map_err(|why| ArchiveError::Unsafe {
            entry: shown.clone(),
            why: format!("maps to '{}', which {why}", target.display()),
        })?;
        let path = dest.join(&target_relative);
        create_parents_inside(dest, &target_relative)?;
        // Private (0600): what comes out of a container (recordings, heap dumps, binaries
        // for symbols) is for this user only.
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_err(format!("create {}", path.display())))?;
        written.push(path.clone());
        // The declared size bounds the read too: tar stops an entry at its size.
        io::copy(&mut (&mut entry).take(size), &mut file)
            .map_err(io_err(format!("write {}", path.display())))?;
    }
    Ok(())
}

/// The path as a plain relative path, or why it is not one.
fn checked_relative(path: &Path) -> Result<PathBuf, String> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("climbs out with '..'".into()),
            Component::RootDir | Component::Prefix(_) => return Err("is an absolute path".into()),
        }
    }
    if out.as_os_str().is_empty() {
        return Err("has an empty name".into());
    }
    Ok(out)
}

/// Creates the directories between `dest` and the file, refusing to pass through a
/// symlink that could lead outside `dest`.
fn create_parents_inside(dest: &Path, relative: &Path) -> Result<(), ArchiveError> {
    let mut current = dest.to_path_buf();
    let parents: Vec<_> = relative
        .parent()
        .map(|p| p.components().collect())
        .unwrap_or_default();
    for component in parents {
        current.push(component);
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ArchiveError::Unsafe {
                    entry: relative.display().to_string(),
                    why: format!("would be written through the symlink {}", current.display()),
                })
            }
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(ArchiveError::Io {
                    context: format!("{} exists and is not a directory", current.display()),
                    source: io::Error::from(io::ErrorKind::AlreadyExists),
                })
            }
            Err(_) => fs::DirBuilder::new()
                .mode(0o700)
                .create(&current)
                .map_err(|source| ArchiveError::Io {
                    context: format!("create {}", current.display()),
                    source,
                })?,
        }
    }
    Ok(())
}

impl Docker {
    /// Copies `source` (a file or directory in the container) into `dest_dir` through the
    /// archive API. Entries are renamed by `rename` (None skips one); any entry that would
    /// land outside `dest_dir` fails the whole download, and so does more than `limit`
    /// (the stream is cut there). Returns the files written.
    pub async fn download<F>(
        &self,
        container: &str,
        source: &str,
        dest_dir: &Path,
        limit: CopyLimit,
        rename: F,
    ) -> DevprofResult<Vec<PathBuf>>
    where
        F: FnMut(&Path) -> Option<PathBuf> + Send + 'static,
    {
        let options = DownloadFromContainerOptionsBuilder::default()
            .path(source)
            .build();
        let mut stream = self
            .client
            .download_from_container(container, Some(options));
        let (tx, reader) = pipe::channel();
        let dest = dest_dir.to_path_buf();
        let container_name = container.to_string();
        let source_path = source.to_string();
        let extractor = tokio::task::spawn_blocking(move || {
            extract(reader, &dest, rename, limit).map_err(|e| {
                match e {
                    // The path asked for says more than the archive's entry name.
                    ArchiveError::TooLarge { size, limit, .. } => ArchiveError::TooLarge {
                        entry: source_path,
                        size,
                        limit,
                    },
                    other => other,
                }
                .into_error(&container_name)
            })
        });
        let mut fetch_error = None;
        // Tar headers and padding on top of the files; past that the stream is cut.
        let stream_limit = limit.bytes.saturating_add(1 << 20);
        let mut received: u64 = 0;
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(bytes) => {
                    received = received.saturating_add(bytes.len() as u64);
                    if received > stream_limit {
                        fetch_error = Some(limit.exceeded(container, source, received));
                        break;
                    }
                    if tx.send(bytes).await.is_err() {
                        break; // the extractor stopped (it reports why)
                    }
                }
                Err(e) => {
                    fetch_error = Some(api_error(&format!("copy {source} out of {container}"), e));
                    break;
                }
            }
        }
        drop(tx);
        let extracted = extractor
            .await
            .map_err(|e| Error::io("archive extraction", std::io::Error::other(e)))?;
        match (fetch_error, extracted) {
            (Some(e), Ok(files)) => {
                for f in files {
                    let _ = std::fs::remove_file(f);
                }
                Err(e)
            }
            // The extractor's own account of a cut stream is less clear than the limit.
            (Some(e @ Error::CopyTooLarge { .. }), Err(_)) => Err(e),
            (_, result) => result,
        }
    }
}

/// One host file to send into a container: where it is, its path relative to the
/// destination directory (plain components only), and its mode.
#[derive(Debug, Clone)]
pub struct UploadFile {
    pub source: PathBuf,
    pub name: String,
    pub mode: u32,
}

/// A tar archive of `files`, owned by `uid:gid` (directories made as needed).
pub fn archive_of(files: &[UploadFile], uid: u32, gid: u32) -> io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut dirs: Vec<String> = Vec::new();
    for file in files {
        let relative = Path::new(&file.name);
        if relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(io::Error::other(format!(
                "{} is not a plain relative path",
                file.name
            )));
        }
        let mut parent = String::new();
        for part in relative.parent().into_iter().flat_map(|p| p.components()) {
            parent = format!("{parent}{}/", part.as_os_str().to_string_lossy());
            if !dirs.contains(&parent) {
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_uid(uid.into());
                header.set_gid(gid.into());
                header.set_size(0);
                builder.append_data(&mut header, &parent, io::empty())?;
                dirs.push(parent.clone());
            }
        }
        let data = fs::read(&file.source)?;
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(file.mode);
        header.set_uid(uid.into());
        header.set_gid(gid.into());
        header.set_size(data.len() as u64);
        builder.append_data(&mut header, &file.name, data.as_slice())?;
    }
    builder.into_inner()
}

impl Docker {
    /// Sends `files` into the existing directory `dest_dir` of the container, owned by
    /// `uid:gid`, through the archive API.
    pub async fn upload_files(
        &self,
        container: &str,
        dest_dir: &str,
        files: &[UploadFile],
        uid: u32,
        gid: u32,
    ) -> DevprofResult<()> {
        let archive = archive_of(files, uid, gid)
            .map_err(|e| Error::io(format!("pack files for {container}"), e))?;
        let options = UploadToContainerOptionsBuilder::default()
            .path(dest_dir)
            .no_overwrite_dir_non_dir("true")
            .build();
        self.client
            .upload_to_container(container, Some(options), bollard::body_full(archive.into()))
            .await
            .map_err(|e| api_error(&format!("copy files into {dest_dir} of {container}"), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_are_packed_with_their_directories_modes_and_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("asprof");
        fs::write(&src, b"binary").unwrap();
        let files = [UploadFile {
            source: src.clone(),
            name: "bin/asprof".into(),
            mode: 0o755,
        }];
        let packed = archive_of(&files, 1000, 1001).unwrap();
        let mut archive = tar::Archive::new(packed.as_slice());
        let entries: Vec<(String, u32, u64, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.mode().unwrap(),
                    h.uid().unwrap(),
                    h.gid().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            vec![
                ("bin/".to_string(), 0o755, 1000, 1001),
                ("bin/asprof".to_string(), 0o755, 1000, 1001)
            ]
        );
        let escaping = [UploadFile {
            source: src,
            name: "../etc/passwd".into(),
            mode: 0o644,
        }];
        assert!(archive_of(&escaping, 0, 0).is_err());
    }

    /// A tar stream with raw header names, including ones `tar::Builder` refuses to
    /// write; real engines never send these, so the hostile archives are hand-made here.
    fn hand_made_tar(entries: &[(&str, tar::EntryType, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, kind, data) in entries {
            let mut header = tar::Header::new_gnu();
            let raw = header.as_old_mut();
            raw.name[..name.len()].copy_from_slice(name.as_bytes());
            header.set_entry_type(*kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            if kind.is_symlink() {
                header.set_link_name("/etc/passwd").unwrap();
            }
            header.set_cksum();
            out.extend_from_slice(header.as_bytes());
            out.extend_from_slice(data);
            let pad = (512 - data.len() % 512) % 512;
            out.extend(std::iter::repeat_n(0u8, pad));
        }
        out.extend(std::iter::repeat_n(0u8, 1024));
        out
    }

    fn keep_name(p: &Path) -> Option<PathBuf> {
        Some(p.to_path_buf())
    }

    #[test]
    fn extracts_a_regular_file_under_its_new_name() {
        let dir = tempfile::tempdir().unwrap();
        let tar = hand_made_tar(&[("perf.data", tar::EntryType::Regular, b"PERFILE2")]);
        let files = extract(
            &tar[..],
            dir.path(),
            |_| Some("perf-1.data".into()),
            CopyLimit::HEAP_DUMP,
        )
        .unwrap();
        assert_eq!(files, vec![dir.path().join("perf-1.data")]);
        assert_eq!(fs::read(&files[0]).unwrap(), b"PERFILE2");
    }

    #[test]
    fn rejects_entry_climbing_out_with_dotdot_hostile_tar() {
        let outer = tempfile::tempdir().unwrap();
        let dest = outer.path().join("store");
        fs::create_dir(&dest).unwrap();
        let tar = hand_made_tar(&[
            ("ok.txt", tar::EntryType::Regular, b"fine"),
            ("../escaped.txt", tar::EntryType::Regular, b"evil"),
        ]);
        let err = extract(&tar[..], &dest, keep_name, CopyLimit::HEAP_DUMP).unwrap_err();
        assert!(matches!(err, ArchiveError::Unsafe { ref why, .. } if why.contains("..")));
        assert!(!outer.path().join("escaped.txt").exists());
        assert!(!dest.join("ok.txt").exists(), "partial output is removed");
    }

    #[test]
    fn rejects_absolute_entry_hostile_tar() {
        let dir = tempfile::tempdir().unwrap();
        let tar = hand_made_tar(&[("/tmp/devprof-abs-escape", tar::EntryType::Regular, b"x")]);
        let err = extract(&tar[..], dir.path(), keep_name, CopyLimit::HEAP_DUMP).unwrap_err();
        assert!(matches!(err, ArchiveError::Unsafe { ref why, .. } if why.contains("absolute")));
    }

    #[test]
    fn rejects_symlink_entry_hostile_tar() {
        let dir = tempfile::tempdir().unwrap();
        let tar = hand_made_tar(&[("link", tar::EntryType::Symlink, b"")]);
        assert!(matches!(
            extract(&tar[..], dir.path(), keep_name, CopyLimit::HEAP_DUMP),
            Err(ArchiveError::Unsafe { .. })
        ));
        assert!(fs::symlink_metadata(dir.path().join("link")).is_err());
    }

    #[test]
    fn refuses_to_write_through_an_existing_symlinked_directory() {
        let outside = tempfile::tempdir().unwrap();
        let dest = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dest.path().join("sub")).unwrap();
        let tar = hand_made_tar(&[("sub/file", tar::EntryType::Regular, b"x")]);
        assert!(extract(&tar[..], dest.path(), keep_name, CopyLimit::HEAP_DUMP).is_err());
        assert!(!outside.path().join("file").exists());
    }

    #[test]
    fn refuses_an_entry_larger_than_the_limit_before_writing_it_hostile_tar() {
        let dir = tempfile::tempdir().unwrap();
        let mut tar = hand_made_tar(&[("ok", tar::EntryType::Regular, b"fine")]);
        // A header that declares 2^40 bytes and then ends: nothing of it may be written.
        let mut header = tar::Header::new_gnu();
        header.set_path("huge.heap").unwrap();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(1 << 40);
        header.set_mode(0o644);
        header.set_cksum();
        tar.splice(0..0, header.as_bytes().iter().copied());
        let err = extract(&tar[..], dir.path(), keep_name, CopyLimit::HEAP_DUMP).unwrap_err();
        assert!(
            matches!(err, ArchiveError::TooLarge { ref entry, size, limit } if entry == "huge.heap" && size == 1 << 40 && limit == CopyLimit::HEAP_DUMP),
            "{err:?}"
        );
        assert!(files_in(dir.path()).is_empty());
        let shown = err.into_error("c").to_string();
        assert!(
            shown.contains("limit of 1.0 GiB for a heap dump"),
            "{shown}"
        );

        // The size in a pax record (as the engine writes a file of 8 GiB or more), with 0
        // in the entry's own header: refused by that size, before a byte is read.
        let record = b"19 size=8589934592\n";
        let mut pax = tar::Header::new_ustar();
        pax.set_path("PaxHeaders/huge.heap").unwrap();
        pax.set_entry_type(tar::EntryType::XHeader);
        pax.set_size(record.len() as u64);
        pax.set_mode(0o644);
        pax.set_cksum();
        let mut plain = tar::Header::new_ustar();
        plain.set_path("huge.heap").unwrap();
        plain.set_entry_type(tar::EntryType::Regular);
        plain.set_size(0);
        plain.set_mode(0o644);
        plain.set_cksum();
        let mut padded_record = record.to_vec();
        padded_record.resize(512, 0);
        let mut pax_tar: Vec<u8> = pax.as_bytes().to_vec();
        pax_tar.extend(padded_record);
        pax_tar.extend(plain.as_bytes());
        pax_tar.extend(hand_made_tar(&[("ok", tar::EntryType::Regular, b"fine")]));
        let err = extract(&pax_tar[..], dir.path(), keep_name, CopyLimit::HEAP_DUMP).unwrap_err();
        assert!(
            matches!(err, ArchiveError::TooLarge { size, .. } if size == 8 << 30),
            "{err:?}"
        );
        assert!(files_in(dir.path()).is_empty());

        // Several entries count together.
        let small = CopyLimit {
            bytes: 6,
            what: "a test",
        };
        let two = hand_made_tar(&[
            ("a", tar::EntryType::Regular, b"1234"),
            ("b", tar::EntryType::Regular, b"5678"),
        ]);
        assert!(matches!(
            extract(&two[..], dir.path(), keep_name, small),
            Err(ArchiveError::TooLarge { .. })
        ));
        assert!(files_in(dir.path()).is_empty(), "partial output is removed");
    }

    fn files_in(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect()
    }

    #[test]
    fn never_overwrites_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), b"old").unwrap();
        let tar = hand_made_tar(&[("a", tar::EntryType::Regular, b"new")]);
        assert!(extract(&tar[..], dir.path(), keep_name, CopyLimit::HEAP_DUMP).is_err());
        assert_eq!(fs::read(dir.path().join("a")).unwrap(), b"old");
    }
}
