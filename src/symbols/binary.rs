//! A program's binary taken out of a container (through the archive API, into a private
//! temporary directory that is removed afterwards) and read by `elf`.

use crate::docker::archive::CopyLimit;
use crate::docker::{ContainerShell, Docker, Shell};
use crate::symbols::elf::{self, ElfReport};
use std::path::PathBuf;
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
