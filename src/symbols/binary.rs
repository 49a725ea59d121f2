//! A program's binary taken out of a container (through the archive API, into a private
//! temporary directory that is removed afterwards) and read by `elf`; and the files
//! profiles point into, fetched once into the store's symbol cache (`fetch_cached`).

use crate::docker::archive::CopyLimit;
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
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// How Go's build info (`.go.buildinfo`) starts.
pub const BUILDINFO_MAGIC: &[u8] = b"\xff Go buildinf:";

/// What devprof reads from a Go program's executable once per capture: the Go version
/// from its build info, and its names from `.gopclntab` when it has no symbol table.
pub struct GoBinary {
    /// The executable's path in the target's file system (as perf prints it).
    pub path: String,
    /// `go1.22.3`, from `.go.buildinfo`.
    pub version: Option<String>,
    /// Whether the symbol table was stripped (`-ldflags=-s`).
    pub stripped: bool,
    /// The pclntab's names, for a stripped binary. Behind a lock: the symbolizer's DWARF
    /// reader is not shareable between threads.
    pub symbols: Option<std::sync::Mutex<crate::symbols::module::ModuleSymbols>>,
}

impl GoBinary {
    /// Reads a Go executable copied to this host; None when it is not a Go binary.
    pub fn read(path_in_target: &str, local: &std::path::Path) -> Result<Option<Self>, String> {
        use crate::symbols::module::{ModuleSymbols, SymbolKind};
        use object::Object;
        let data = std::fs::read(local).map_err(|e| format!("read {}: {e}", local.display()))?;
        let file = object::File::parse(&*data).map_err(|e| format!("not an ELF file: {e}"))?;
        // Without section headers the build info is found by its magic.
        let buildinfo = data
            .windows(BUILDINFO_MAGIC.len())
            .position(|w| w == BUILDINFO_MAGIC);
        let is_go = buildinfo.is_some() || file.section_by_name(".gopclntab").is_some();
        if !is_go {
            return Ok(None);
        }
        let version = crate::symbols::gopclntab::go_version(&file)
            .or_else(|| crate::symbols::gopclntab::buildinfo_version(&data[buildinfo?..]));
        drop(file);
        drop(data);
        let symbols = ModuleSymbols::from_elf(local)?;
        let stripped = symbols.kind == SymbolKind::Gopclntab;
        Ok(Some(GoBinary {
            path: path_in_target.to_string(),
            version,
            stripped,
            symbols: stripped.then(|| std::sync::Mutex::new(symbols)),
        }))
    }

    /// Copies the executable `path` out of `container` and reads it (None: not Go, or
    /// unreadable; the capture then goes on without).
    pub async fn from_container(docker: &Docker, container: &str, path: &str) -> Option<Self> {
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
                .download(container, path, dir, CopyLimit::BINARY, move |e| {
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
