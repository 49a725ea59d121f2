//! A program's binary taken out of a container (through the archive API, into a private
//! temporary directory that is removed afterwards) and read by `elf`; and the files
//! profiles point into, fetched once into the store's symbol cache (`fetch_cached`).

use crate::docker::{ContainerShell, Docker, Shell};
use crate::symbols::elf::{self, ElfReport};
use crate::text::quote;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

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
    static N: AtomicU32 = AtomicU32::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "devprof-binary-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let name = path.rsplit('/').next().unwrap_or("binary").to_string();
    let wanted = name.clone();
    let result = async {
        let files = docker
            .download(container, path, &dir, move |entry| {
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
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The symbol cache's directory in a store directory: one sub-directory per version of a
/// file (`cache_key`).
pub const SYMBOL_CACHE: &str = ".symbols";

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

/// Fetches each of `paths` (as seen in `container` through `shell`) once into
/// `dir/.symbols/<key>/`, keyed by path, size and time in the container, so the next
/// capture of the same files copies nothing.
pub async fn fetch_cached(
    shell: &Shell,
    container: &str,
    paths: &[String],
    dir: &Path,
) -> Vec<Fetched> {
    if paths.is_empty() {
        return Vec::new();
    }
    let script: String = paths
        .iter()
        .map(|p| {
            format!(
                "printf 'file\\t%s\\n' \"$(stat -L -c '%s %Y %i' -- {} 2>/dev/null)\"\n",
                quote(p)
            )
        })
        .collect();
    let stats: Vec<Option<(u64, i64, u64)>> = match shell.sh(&script).await {
        Ok(out) => {
            let lines: Vec<&str> = out
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix("file\t"))
                .collect();
            (0..paths.len())
                .map(|i| {
                    let mut f = lines.get(i)?.split_whitespace();
                    Some((
                        f.next()?.parse().ok()?,
                        f.next()?.parse().ok()?,
                        f.next()?.parse().ok()?,
                    ))
                })
                .collect()
        }
        Err(_) => vec![None; paths.len()],
    };
    let mut out = Vec::with_capacity(paths.len());
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
            let entry = PathBuf::from(crate::symbols::module::basename(path));
            let rel = relative.clone();
            let fetched = shell
                .docker()
                .download(container, path, dir, move |e| {
                    (e == entry).then(|| rel.clone())
                })
                .await;
            if let Err(e) = fetched {
                out.push(Fetched::Failed(e.to_string()));
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

/// A stable directory name for one version of a file: FNV-1a of path, size and time.
pub fn cache_key(path: &str, size: u64, mtime: i64) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in format!("{path}\0{size}\0{mtime}").bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_differ_by_version_and_are_plain_names() {
        let a = cache_key("/usr/local/bin/demo-node", 10, 1);
        assert_ne!(a, cache_key("/usr/local/bin/demo-node", 10, 2));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
