//! Binaries and the files profiles point into, taken out of a container through the
//! archive API: into a private temporary directory removed afterwards (`with_copy`), or once
//! into the store's symbol cache (`fetch_cached`); what is read from them is the symbols
//! crate's.

use crate::docker::archive::CopyLimit;
use crate::docker::{ContainerShell, Docker, Shell};
use crate::symbols::binary::{cache_key, private_temp_dir, GoBinary, SYMBOL_CACHE};
use crate::symbols::elf::{self, ElfReport};
use crate::text::quote;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The real file behind `path` in the container (symbolic links resolved), or why not.
pub async fn resolve(shell: &Shell, path: &str) -> Result<String, String> {
    let out = shell
        .run(&["readlink", "-f", path])
        .await
        .map_err(|e| e.to_string())?;
    let real = out.stdout.trim();
    if out.success() && real.starts_with('/') {
        Ok(real.to_string())
    } else {
        // No readlink (busybox-less images): take the path as it is.
        Ok(path.to_string())
    }
}

/// Copies `path` out of `container` and reads its ELF sections.
pub async fn read_from_container(
    docker: &Docker,
    container: &str,
    path: &str,
) -> Result<ElfReport, String> {
    with_copy(docker, container, path, |local| {
        elf::read_file(local).map_err(|e| e.to_string())
    })
    .await
}

/// Copies `path` out of `container` into a private temporary directory, runs `read` on
/// the copy (on a blocking thread) and removes the directory.
pub async fn with_copy<T: Send + 'static>(
    docker: &Docker,
    container: &str,
    path: &str,
    read: impl FnOnce(&std::path::Path) -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let temp = private_temp_dir()?;
    let dir = temp.path().to_path_buf();
    let name = path.rsplit('/').next().unwrap_or("binary").to_string();
    let wanted = name.clone();
    let result = async {
        let files = docker
            .download(container, path, &dir, CopyLimit::BINARY, move |entry| {
                (entry == std::path::Path::new(&wanted)).then(|| PathBuf::from(&wanted))
            })
            .await
            .map_err(|e| format!("cannot copy {path} out of {container}: {e}"))?;
        let local = files
            .into_iter()
            .next()
            .ok_or_else(|| format!("{path} in {container} is not a regular file"))?;
        tokio::task::spawn_blocking(move || read(&local))
            .await
            .map_err(|e| e.to_string())?
    }
    .await;
    drop(temp);
    result
}

/// What became of one file asked of `fetch_cached`.
#[derive(Debug)]
pub enum Fetched {
    /// Not in the container (any more).
    Missing,
    /// There, but could not be copied out.
    Failed(String),
    /// The local copy, its path relative to the store directory, and the inode it has in
    /// the container.
    Local {
        local: PathBuf,
        relative: PathBuf,
        inode: u64,
    },
}

/// At most this many files are copied out for one capture's symbols (a perf.data or heap
/// dump names what the target mapped, and the target decides that)...
pub const FETCH_FILES_BUDGET: usize = 512;
/// ...and at most this many bytes in all (each file has its own cap, `CopyLimit::BINARY`).
pub const FETCH_BYTES_BUDGET: u64 = 8 << 30;

/// Why the next copy of `size` bytes is refused after `copies` files and `copied` bytes,
/// if it is.
fn over_budget(copies: usize, copied: u64, size: u64) -> Option<String> {
    if copies >= FETCH_FILES_BUDGET {
        Some(format!(
            "not copied: {FETCH_FILES_BUDGET} files were copied out for this capture already"
        ))
    } else if copied.saturating_add(size) > FETCH_BYTES_BUDGET {
        Some(format!(
            "not copied: {} would pass the {} copied out for one capture",
            crate::units::human_bytes(size),
            crate::units::human_bytes(FETCH_BYTES_BUDGET)
        ))
    } else {
        None
    }
}

/// Fetches each of `paths` (as `container` has them) once into `dir/.symbols/<key>/`,
/// keyed by path, size and time in the container, so the next capture of the same files
/// copies nothing. `shell` judges them first, seeing them under `root` (empty in the
/// container itself; `/proc/<pid>/root` from a sidecar, whose own archive cannot reach
/// there: the copy then comes from the target container's). Copies within the budgets
/// above; past them a file is `Failed` with the reason (symbols then come from what was
/// copied).
pub async fn fetch_cached(
    shell: &Shell,
    root: &str,
    container: &str,
    paths: &[String],
    dir: &Path,
) -> Vec<Fetched> {
    fetch_cached_knowing(shell, root, container, paths, dir, &HashMap::new()).await
}

/// A file's size, mtime (seconds) and inode as `stat -L` gives them in the container.
pub type FileStat = (u64, i64, u64);

/// `fetch_cached`, with the files in `known` judged already (read while the recording
/// was copied out): only the others cost an exec.
pub async fn fetch_cached_knowing(
    shell: &Shell,
    root: &str,
    container: &str,
    paths: &[String],
    dir: &Path,
    known: &HashMap<String, FileStat>,
) -> Vec<Fetched> {
    if paths.is_empty() {
        return Vec::new();
    }
    let unknown: Vec<&String> = paths.iter().filter(|p| !known.contains_key(*p)).collect();
    let judged = if unknown.is_empty() {
        Vec::new()
    } else {
        stat_files(shell, root, &unknown).await
    };
    let mut judged = judged.into_iter();
    let stats: Vec<Option<FileStat>> = paths
        .iter()
        .map(|p| match known.get(p) {
            Some(stat) => Some(*stat),
            None => judged.next().flatten(),
        })
        .collect();
    let mut out = Vec::with_capacity(paths.len());
    let (mut copies, mut copied) = (0usize, 0u64);
    for (path, stat) in paths.iter().zip(stats) {
        let Some((size, mtime, inode)) = stat else {
            out.push(Fetched::Missing);
            continue;
        };
        let relative = PathBuf::from(SYMBOL_CACHE)
            .join(cache_key(path, size, mtime))
            .join(crate::symbols::module::basename(path));
        let local = dir.join(&relative);
        let present =
            std::fs::symlink_metadata(&local).is_ok_and(|m| m.is_file() && m.len() == size);
        if !present {
            // A partial copy from an interrupted run: this cache is devprof's own.
            if std::fs::symlink_metadata(&local).is_ok_and(|m| m.is_file()) {
                let _ = std::fs::remove_file(&local);
            }
            if let Some(why) = over_budget(copies, copied, size) {
                out.push(Fetched::Failed(why));
                continue;
            }
            let entry = PathBuf::from(crate::symbols::module::basename(path));
            let rel = relative.clone();
            let fetched = shell
                .docker()
                .download(container, path, dir, CopyLimit::BINARY, move |e| {
                    (e == entry).then(|| rel.clone())
                })
                .await;
            copies += 1;
            // What landed counts, whatever the container said the size was.
            let landed = std::fs::symlink_metadata(&local)
                .map(|m| m.len())
                .unwrap_or(0);
            copied = copied.saturating_add(landed.max(size));
            if let Err(e) = fetched {
                out.push(Fetched::Failed(e.to_string()));
                continue;
            }
            // A file replaced since it was judged is not kept under the old one's key
            // (the next capture judges it again).
            if landed != size {
                let _ = std::fs::remove_file(&local);
                out.push(Fetched::Failed(format!(
                    "{path} changed while it was copied out ({size} bytes judged, {landed} copied)"
                )));
                continue;
            }
        }
        out.push(Fetched::Local {
            local,
            relative,
            inode,
        });
    }
    out
}

/// Each of `paths` judged by `stat -L` under `root` in one exec, in order (None: not
/// there, or the exec failed).
async fn stat_files(shell: &Shell, root: &str, paths: &[&String]) -> Vec<Option<FileStat>> {
    let script: String = paths
        .iter()
        .map(|p| {
            format!(
                "printf 'file\\t%s\\n' \"$(stat -L -c '%s %Y %i' -- {} 2>/dev/null)\"\n",
                quote(&format!("{root}{p}"))
            )
        })
        .collect();
    match shell.sh(&script).await {
        Ok(out) => {
            let lines: Vec<&str> = out
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("file\t"))
                .collect();
            (0..paths.len())
                .map(|i| parse_stat(lines.get(i)?))
                .collect()
        }
        Err(_) => vec![None; paths.len()],
    }
}

/// `SIZE MTIME INODE`, as the stat scripts print them.
pub fn parse_stat(text: &str) -> Option<FileStat> {
    let mut f = text.split_whitespace();
    let stat = (
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
    );
    f.next().is_none().then_some(stat)
}

/// Copies the executable `path` out of `container` and reads it (None: not Go, or
/// unreadable; the capture then goes on without).
pub async fn go_binary_from_container(
    docker: &Docker,
    container: &str,
    path: &str,
) -> Option<GoBinary> {
    if !path.starts_with('/') {
        return None;
    }
    let owned = path.to_string();
    with_copy(docker, container, path, move |local| {
        GoBinary::read(&owned, local)
    })
    .await
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_out_for_one_capture_stops_at_its_file_and_byte_budgets() {
        assert_eq!(over_budget(0, 0, 1 << 20), None);
        assert_eq!(over_budget(FETCH_FILES_BUDGET - 1, 0, 1), None);
        let files = over_budget(FETCH_FILES_BUDGET, 0, 1).unwrap();
        assert!(files.contains("512 files"), "{files}");
        assert_eq!(over_budget(3, FETCH_BYTES_BUDGET - 10, 10), None);
        let bytes = over_budget(3, FETCH_BYTES_BUDGET - 10, 11).unwrap();
        assert!(
            bytes.contains("8.0 GiB") || bytes.contains("8 GiB"),
            "{bytes}"
        );
        // A size the container lies about cannot wrap the sum.
        assert!(over_budget(1, FETCH_BYTES_BUDGET, u64::MAX).is_some());
    }
}
