//! What devprof reads from a program's binary once it is on this host: a Go program's build
//! info and names (`GoBinary`), the private temporary directory binaries are copied into,
//! and the symbol cache's layout in a store directory. Copying them out of a container is
//! the capture side's (devprof's `docker::binary`).

/// A new directory in the temporary directory, readable by this user alone, for binaries
/// copied out of containers: made fresh under a random name (never an existing directory
/// or link, whoever made it), removed when dropped.
pub fn private_temp_dir() -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("devprof-binary-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            format!(
                "cannot create a private directory in {}: {e}",
                std::env::temp_dir().display()
            )
        })
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
    pub symbols: Option<std::sync::Mutex<crate::module::ModuleSymbols>>,
}

impl GoBinary {
    /// Reads a Go executable copied to this host; None when it is not a Go binary.
    pub fn read(path_in_target: &str, local: &std::path::Path) -> Result<Option<Self>, String> {
        use crate::module::{ModuleSymbols, SymbolKind};
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
        let version = crate::gopclntab::go_version(&file)
            .or_else(|| crate::gopclntab::buildinfo_version(&data[buildinfo?..]));
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
}

/// The symbol cache's directory in a store directory: one sub-directory per version of a
/// file (`cache_key`).
pub const SYMBOL_CACHE: &str = ".symbols";

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
    fn binary_temp_dir_is_made_fresh_and_private_never_an_existing_one() {
        use std::os::unix::fs::PermissionsExt;
        let a = private_temp_dir().unwrap();
        let b = private_temp_dir().unwrap();
        assert_ne!(a.path(), b.path());
        let meta = std::fs::symlink_metadata(a.path()).unwrap();
        assert!(meta.is_dir() && !meta.file_type().is_symlink());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        // The old name was predictable (`devprof-binary-<pid>-<n>`): one planted there, as
        // a link or a directory, is never taken.
        let planted = std::env::temp_dir().join(format!("devprof-binary-{}-0", std::process::id()));
        let _ = std::os::unix::fs::symlink("/", &planted);
        let c = private_temp_dir().unwrap();
        assert_ne!(c.path(), planted.as_path());
        let _ = std::fs::remove_file(&planted);
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "removed when dropped");
    }

    #[test]
    fn cache_keys_differ_by_version_and_are_plain_names() {
        let a = cache_key("/usr/local/bin/demo-node", 10, 1);
        assert_ne!(a, cache_key("/usr/local/bin/demo-node", 10, 2));
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
