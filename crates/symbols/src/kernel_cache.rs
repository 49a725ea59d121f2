//! A copy of the kernel's symbols kept per boot in a container's symbol cache, so a fold
//! does not have the kernel write out /proc/kallsyms again: the kernel formats its some
//! 120,000 lines one at a time (50-70 ms here, about 0.3 s through the engine), the longest
//! step of a native fold.
//!
//! Within one boot the core kernel's text does not move (KASLR places it at boot), and a
//! module's functions stay where they are while it stays loaded at the same address. The
//! copy is trusted for those only: the core text, and, while /proc/modules lists a module
//! live at the same place, the span from its first to its last listed function. Anything
//! else (BPF programs, ftrace trampolines, a module loaded since) is named from a live read.
//!
//! The copy holds kernel addresses, which `kptr_restrict` hides from most users: it is
//! written readable by its owner only. It records where it was read: a fold on the host
//! uses only copies of the host's own /proc/kallsyms, not one a container printed.

use super::kallsyms::Kallsyms;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

const KEY_PREFIX: &str = "kernel-";
const FILE: &str = "kallsyms";
const HEADER: &str = "devprof kernel symbols v2";

/// Where a copy was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// This host's /proc/kallsyms.
    Host,
    /// A container's, printed through the engine.
    Container,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::Host => "host",
            Source::Container => "container",
        }
    }
}

/// Which kernel, and which modules where: what a kept copy must match to be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIdentity {
    boot_id: String,
    /// `name size address` of each live module, sorted (use counts, which change with
    /// every container started, left out); empty on a kernel without modules.
    modules: String,
}

impl KernelIdentity {
    /// None unless `boot_id` looks like one (it names a directory: a container could
    /// print anything). `modules` is /proc/modules as read.
    pub fn new(boot_id: &str, modules: &str) -> Option<Self> {
        let boot_id = boot_id.trim();
        let plausible =
            boot_id.len() == 36 && boot_id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        plausible.then(|| KernelIdentity {
            boot_id: boot_id.to_ascii_lowercase(),
            modules: live_modules(modules),
        })
    }

    /// This host's kernel.
    pub fn of_this_host() -> Option<Self> {
        let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Self::new(
            &boot_id,
            &fs::read_to_string("/proc/modules").unwrap_or_default(),
        )
    }

    fn module_names(&self) -> Vec<String> {
        self.modules
            .lines()
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string)
            .collect()
    }
}

/// `name size address` of the modules /proc/modules shows live at a readable address,
/// sorted: `name size refs deps state address` lines.
fn live_modules(modules: &str) -> String {
    let mut live: Vec<String> = modules
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (name, size, state, address) = (
                fields.first()?,
                fields.get(1)?,
                fields.get(4)?,
                fields.get(5)?,
            );
            let hidden = address.trim_start_matches("0x").bytes().all(|b| b == b'0');
            (*state == "Live" && !hidden).then(|| format!("{name} {size} {address}"))
        })
        .collect();
    live.sort();
    live.join("\n")
}

/// The boot ids with a copy in `cache`: what a container is asked about.
pub fn kept_boots(cache: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(cache) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = KernelIdentity::new(name.strip_prefix(KEY_PREFIX)?, "")?;
            Some(id.boot_id)
        })
        .collect()
}

/// The kept copy for this kernel, trusted for the core text and its live modules; None
/// when there is none, the modules have changed since, or it came from a container and
/// `source` is the host.
pub fn load(cache: &Path, id: &KernelIdentity, source: Source) -> Option<Kallsyms> {
    let path = cache.join(format!("{KEY_PREFIX}{}", id.boot_id)).join(FILE);
    // Not through a link: the cache is devprof's own.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .ok()?;
    // Mapped where it lies: a copy is written once and renamed into place, never changed.
    // SAFETY: read-only, of a file of devprof's own cache that is replaced, not rewritten.
    let kept = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let body = body_start(std::str::from_utf8(&kept).ok()?, id, source)?;
    Some(Kallsyms::parse_mapped(kept, body)?.trusted_for(id.module_names()))
}

/// Keeps `kallsyms` (read live from `source`) for this kernel. Written under a new name and
/// renamed, so a fold reading at the same time sees the old copy or the new one, whole.
pub fn save(
    cache: &Path,
    id: &KernelIdentity,
    source: Source,
    kallsyms: &Kallsyms,
) -> io::Result<()> {
    let dir = cache.join(format!("{KEY_PREFIX}{}", id.boot_id));
    // Private, as the file is: kernel addresses are for this user only.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    if !fs::symlink_metadata(&dir)?.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let partial = dir.join(format!(".{FILE}.{}", std::process::id()));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        write!(
            file,
            "{HEADER}\nsource {}\nboot {}\nmodules {}\n{}",
            source.as_str(),
            id.boot_id,
            id.modules.len(),
            id.modules
        )?;
        file.write_all(kallsyms.text().as_bytes())?;
        fs::rename(&partial, dir.join(FILE))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&partial);
    }
    written
}

/// This host's kernel symbols: the copy of the host's kept in `cache` for this boot, or a
/// live read (then kept there). None when the kernel hides its addresses.
pub fn host_symbols(cache: Option<&Path>) -> Option<Kallsyms> {
    if let (Some(cache), Some(id)) = (cache, KernelIdentity::of_this_host()) {
        if let Some(kept) = load(cache, &id, Source::Host) {
            return Some(kept);
        }
    }
    host_live(cache)
}

/// This host's /proc/kallsyms, read now, and kept in `cache` for the rest of the boot.
pub fn host_live(cache: Option<&Path>) -> Option<Kallsyms> {
    let before = KernelIdentity::of_this_host();
    let kallsyms = Kallsyms::parse(fs::read_to_string("/proc/kallsyms").ok()?)?;
    // A module that came or went during the read may be half in the list: not kept.
    if let (Some(cache), Some(id)) = (cache, before) {
        if KernelIdentity::of_this_host().as_ref() == Some(&id) {
            // A copy that cannot be kept only costs the next fold a live read.
            let _ = save(cache, &id, Source::Host, &kallsyms);
        }
    }
    Some(kallsyms)
}

/// Where the kallsyms text starts in a kept file, when its header names this kernel and
/// a source `wanted` accepts (a container's copy serves container folds only).
fn body_start(text: &str, id: &KernelIdentity, wanted: Source) -> Option<usize> {
    let rest = text.strip_prefix(HEADER)?.strip_prefix("\nsource ")?;
    let (source, rest) = rest.split_once('\n')?;
    let acceptable = source == Source::Host.as_str()
        || (wanted == Source::Container && source == Source::Container.as_str());
    if !acceptable {
        return None;
    }
    let rest = rest
        .strip_prefix("boot ")?
        .strip_prefix(id.boot_id.as_str())?;
    let rest = rest.strip_prefix("\nmodules ")?;
    let newline = rest.find('\n')?;
    let length: usize = rest[..newline].parse().ok()?;
    let modules = rest.get(newline + 1..newline + 1 + length)?;
    (modules == id.modules).then(|| text.len() - rest.len() + newline + 1 + length)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "8f9dabeb-f799-40c6-af4b-86868d0cc3c7";
    // Cut from this VM's /proc/kallsyms (its kernel has no modules) with the lines of one
    // module added in the form a modular kernel prints them.
    const KALLSYMS: &str = "ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff81001000 T do_syscall_64\nffffffff822090c8 T _etext\nffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]\nffffffffc0400000 t ovl_open\t[overlay]\nffffffffc0400100 t ovl_read\t[overlay]\n";
    const MODULES: &str = "overlay 151552 2 - Live 0xffffffffc0400000\n";

    fn temp_cache(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "devprof-kernel-cache-{name}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn keep_test_list(cache: &Path, id: &KernelIdentity) {
        save(cache, id, Source::Host, &Kallsyms::parse(KALLSYMS).unwrap()).unwrap();
    }

    #[test]
    fn a_kept_copy_and_its_directories_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = temp_cache("private");
        let cache = root.join(".symbols");
        let id = KernelIdentity::new(BOOT, MODULES).unwrap();
        keep_test_list(&cache, &id);
        let dir = cache.join(format!("{KEY_PREFIX}{BOOT}"));
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join(FILE)), 0o600);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&cache), 0o700);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_kept_copy_is_trusted_for_the_core_text_and_live_modules_only() {
        let cache = temp_cache("trust");
        let id = KernelIdentity::new(BOOT, MODULES).unwrap();
        keep_test_list(&cache, &id);
        let kept = load(&cache, &id, Source::Host).unwrap();
        assert_eq!(kept.name_at(0xffffffff81001010), Some("do_syscall_64"));
        assert!(kept.covers(0xffffffff81001010));
        assert!(kept.covers(0xffffffffc0400010));
        assert!(
            !kept.covers(0xffffffffc0201010),
            "ftrace trampolines come and go"
        );
        assert_eq!(kept_boots(&cache), vec![BOOT.to_string()]);
        let mode = fs::metadata(cache.join(format!("kernel-{BOOT}/kallsyms")))
            .unwrap()
            .permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o600
        );
        fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_copy_from_another_boot_or_with_modules_moved_is_not_used() {
        let cache = temp_cache("stale");
        let id = KernelIdentity::new(BOOT, MODULES).unwrap();
        keep_test_list(&cache, &id);
        let reloaded = KernelIdentity::new(BOOT, &MODULES.replace("c0400000", "c0500000")).unwrap();
        assert!(load(&cache, &reloaded, Source::Host).is_none());
        let rebooted =
            KernelIdentity::new("00000000-f799-40c6-af4b-86868d0cc3c7", MODULES).unwrap();
        assert!(load(&cache, &rebooted, Source::Host).is_none());
        // A container started or stopped changes overlay's use count, nothing else.
        let used_more = KernelIdentity::new(BOOT, &MODULES.replace(" 2 ", " 7 ")).unwrap();
        assert!(load(&cache, &used_more, Source::Host).is_some());
        fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_container_copy_serves_container_folds_only() {
        let cache = temp_cache("source");
        let id = KernelIdentity::new(BOOT, "").unwrap();
        let listed = Kallsyms::parse(KALLSYMS).unwrap();
        save(&cache, &id, Source::Container, &listed).unwrap();
        assert!(load(&cache, &id, Source::Host).is_none());
        assert!(load(&cache, &id, Source::Container).is_some());
        save(&cache, &id, Source::Host, &listed).unwrap();
        assert!(load(&cache, &id, Source::Host).is_some());
        assert!(load(&cache, &id, Source::Container).is_some());
        fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn a_boot_id_that_could_leave_the_cache_is_refused() {
        assert!(KernelIdentity::new("../../../../etc/passwd-aaaaaaaaaaaaaaaaaa", "").is_none());
        assert!(KernelIdentity::new("", "").is_none());
        assert!(KernelIdentity::new(&format!("{BOOT}\n"), "").is_some());
    }

    #[test]
    fn modules_loading_unloading_or_hidden_are_not_trusted() {
        let listing = "overlay 151552 2 - Live 0xffffffffc0400000\nveth 40960 0 - Unloading 0xffffffffc0600000\nbridge 311296 0 - Live 0x0000000000000000\n";
        let id = KernelIdentity::new(BOOT, listing).unwrap();
        assert_eq!(id.module_names(), vec!["overlay".to_string()]);
    }
}
