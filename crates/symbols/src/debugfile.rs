//! A stripped file's separate debug file: where distributions put the symbol table and
//! DWARF they strip from a binary (`libc6-dbg`, `-dbgsym`, `-debuginfo` packages), found
//! the way perf and gdb find it, by build-id (`/usr/lib/debug/.build-id/ab/cdef….debug`)
//! and by `.gnu_debuglink` beside the binary and under `/usr/lib/debug`. perf names frames
//! of a stripped library from there (`__libc_start_call_main`, `__libc_start_main@@GLIBC_2.34`),
//! so the native fold must too to fold the same stacks.

use object::{Object, ObjectSymbolTable};
use std::path::{Component, Path, PathBuf};

/// The build-id of an ELF file's bytes, in hex (perf's and the debug tree's spelling).
pub fn build_id_hex<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Option<String> {
    let id = file.build_id().ok().flatten()?;
    (!id.is_empty()).then(|| id.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the debug file of a binary with this build-id is, relative to a root (`/`, a
/// `--symfs` tree, a container's): `usr/lib/debug/.build-id/ab/cdef….debug`.
pub fn build_id_path(build_id: &str) -> Option<PathBuf> {
    let ok = build_id.len() > 2 && build_id.bytes().all(|b| b.is_ascii_hexdigit());
    ok.then(|| {
        PathBuf::from(format!(
            "usr/lib/debug/.build-id/{}/{}.debug",
            &build_id[..2],
            &build_id[2..]
        ))
    })
}

/// What a binary says of its debug file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DebugLink {
    pub build_id: Option<String>,
    /// `.gnu_debuglink`'s file name (a plain name: one with a `/` is not taken).
    pub link: Option<String>,
}

impl DebugLink {
    pub fn of<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Self {
        let link = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, _crc)| std::str::from_utf8(name).ok())
            .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
            .map(str::to_string);
        DebugLink {
            build_id: build_id_hex(file),
            link,
        }
    }

    /// The places to look, relative to the root, in perf's order of preference: by
    /// build-id, then the debuglink under /usr/lib/debug, beside the binary, and in its
    /// `.debug` directory. `recorded` is the binary's path in the root.
    fn candidates(&self, recorded: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self
            .build_id
            .as_deref()
            .and_then(build_id_path)
            .into_iter()
            .collect();
        if let Some(link) = &self.link {
            let dir = Path::new(recorded.trim_start_matches('/'))
                .parent()
                .unwrap_or(Path::new(""));
            out.push(Path::new("usr/lib/debug").join(dir).join(link));
            out.push(dir.join(link));
            out.push(dir.join(".debug").join(link));
        }
        out
    }
}

/// The debug file of the binary recorded at `recorded`, looked for under `root`: a regular
/// file inside the root (a link that leads out of it is not followed there), an ELF file
/// with a symbol table or DWARF, and with the binary's build-id where the binary has one
/// (a debuglink's name alone can match another build's file). None when there is none.
pub fn find(root: &Path, recorded: &str, wanted: &DebugLink) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    wanted
        .candidates(recorded)
        .into_iter()
        .find_map(|relative| {
            if relative
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
            {
                return None;
            }
            let path = root.join(relative).canonicalize().ok()?;
            let fits = path.starts_with(&root)
                && std::fs::metadata(&path).is_ok_and(|m| m.is_file())
                && is_debug_file_for(&path, wanted.build_id.as_deref());
            fits.then_some(path)
        })
}

/// The debug file of the binary at `binary` (recorded at `recorded`), under `root`; looked
/// for only when the binary lacks a symbol table or DWARF, as a stripped one does.
pub fn find_for(root: &Path, recorded: &str, binary: &Path) -> Option<PathBuf> {
    let file = std::fs::File::open(binary).ok()?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let (symtab, dwarf) = names_in(&elf);
    let stripped = !symtab || !dwarf;
    let wanted = DebugLink::of(&elf);
    drop(elf);
    stripped.then(|| find(root, recorded, &wanted)).flatten()
}

/// Whether `path` is an ELF file with names in it and, when `build_id` is given, that id.
fn is_debug_file_for(path: &Path, build_id: Option<&str>) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let cache = object::ReadCache::new(file);
    let Ok(elf) = object::File::parse(&cache) else {
        return false;
    };
    let (symtab, dwarf) = names_in(&elf);
    (symtab || dwarf) && build_id.is_none_or(|id| build_id_hex(&elf).as_deref() == Some(id))
}

/// Whether an ELF file has a symbol table with symbols, and DWARF.
fn names_in<'data, R: object::ReadRef<'data>>(elf: &object::File<'data, R>) -> (bool, bool) {
    let symtab = elf
        .symbol_table()
        .is_some_and(|t| t.symbols().next().is_some());
    (symtab, elf.section_by_name(".debug_info").is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_are_perfs_and_refuse_what_is_no_hex() {
        assert_eq!(
            build_id_path("93ac61ec5a").unwrap(),
            Path::new("usr/lib/debug/.build-id/93/ac61ec5a.debug")
        );
        assert!(build_id_path("../etc").is_none());
        assert!(build_id_path("ab").is_none());
    }

    #[test]
    fn candidates_come_in_perfs_order_and_a_link_with_a_slash_is_not_taken() {
        let link = DebugLink {
            build_id: Some("abcdef".into()),
            link: Some("libc.so.6.debug".into()),
        };
        let got = link.candidates("/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(
            got,
            [
                "usr/lib/debug/.build-id/ab/cdef.debug",
                "usr/lib/debug/lib/x86_64-linux-gnu/libc.so.6.debug",
                "lib/x86_64-linux-gnu/libc.so.6.debug",
                "lib/x86_64-linux-gnu/.debug/libc.so.6.debug",
            ]
            .map(PathBuf::from)
        );
    }

    /// A tree with a binary stripped of its names and its debug file, made by this host's
    /// objcopy from this test's own executable (which has a symbol table and DWARF).
    fn stripped_with_debug_file(tree: &Path) -> Option<(PathBuf, DebugLink)> {
        let own = std::env::current_exe().ok()?;
        let data = std::fs::read(&own).ok()?;
        let elf = object::File::parse(&*data).ok()?;
        let id = build_id_hex(&elf)?;
        let bin = tree.join("opt/app/bin");
        std::fs::create_dir_all(bin.parent()?).ok()?;
        let debug = tree.join(build_id_path(&id)?);
        std::fs::create_dir_all(debug.parent()?).ok()?;
        let run = |args: &[&std::ffi::OsStr]| {
            std::process::Command::new("objcopy")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        let made = run(&[
            "--only-keep-debug".as_ref(),
            own.as_os_str(),
            debug.as_os_str(),
        ]) && run(&["--strip-all".as_ref(), own.as_os_str(), bin.as_os_str()]);
        made.then_some((
            bin,
            DebugLink {
                build_id: Some(id),
                link: None,
            },
        ))
    }

    #[inline(never)]
    fn devprof_debugfile_probe(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(17).rotate_left(3))
    }

    #[test]
    fn a_stripped_binary_is_named_from_its_debug_file_as_the_unstripped_one() {
        use crate::module::{ModuleFiles, ModuleSymbols, SymbolKind};
        assert_eq!(devprof_debugfile_probe(1), 17u64.rotate_left(3));
        let tree = tempfile::tempdir().unwrap();
        let (bin, _) = stripped_with_debug_file(tree.path()).expect("objcopy made the tree");
        let own = ModuleSymbols::from_elf(&std::env::current_exe().unwrap()).unwrap();
        let alone = ModuleSymbols::from_elf(&bin).unwrap();
        let debug = find_for(tree.path(), "/opt/app/bin", &bin).expect("its debug file");
        let with = ModuleSymbols::from_files(&ModuleFiles {
            binary: bin,
            debug: Some(debug),
        })
        .unwrap();
        assert_eq!(with.kind, SymbolKind::Dwarf);
        assert_eq!(with.symbol_count(), own.symbol_count());
        assert!(alone.symbol_count() < own.symbol_count() / 10, "stripped");
        // The probe's address in the file, a few bytes into it.
        let f = devprof_debugfile_probe as fn(u64) -> u64 as usize as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let (start, offset) = maps
            .lines()
            .find_map(|l| {
                let p: Vec<&str> = l.split_whitespace().collect();
                let (s, e) = p[0].split_once('-')?;
                let (s, e) = (
                    u64::from_str_radix(s, 16).ok()?,
                    u64::from_str_radix(e, 16).ok()?,
                );
                (s <= f && f < e).then(|| (s, u64::from_str_radix(p[2], 16).unwrap()))
            })
            .unwrap();
        let address = with.address_of_offset(f + 4 - start + offset).unwrap();
        let named = with.function_at(address).unwrap();
        assert!(named.ends_with("devprof_debugfile_probe"), "{named}");
        assert_eq!(Some(named), own.function_at(address));
        assert_eq!(with.frames_at(address), own.frames_at(address));
    }

    #[test]
    fn a_stripped_binarys_debug_file_is_found_by_build_id_inside_the_root_only() {
        let tree = tempfile::tempdir().unwrap();
        let Some((_, wanted)) = stripped_with_debug_file(tree.path()) else {
            // objcopy comes with the binutils that link every Rust test binary here: its
            // absence is a broken machine, not a reason to pass.
            panic!("objcopy could not make the test tree");
        };
        let found = find(tree.path(), "/opt/app/bin", &wanted).expect("found by build-id");
        assert!(found.ends_with(build_id_path(wanted.build_id.as_deref().unwrap()).unwrap()));
        // Another build's id: the file by that name is not this binary's.
        let other = DebugLink {
            build_id: Some("00".repeat(20)),
            link: None,
        };
        assert_eq!(find(tree.path(), "/opt/app/bin", &other), None);
        // A link in the tree that leads out of it is not followed.
        let outside = tempfile::tempdir().unwrap();
        let Some((_, wanted_out)) = stripped_with_debug_file(outside.path()) else {
            panic!("objcopy could not make the outside tree");
        };
        let relative = build_id_path(wanted_out.build_id.as_deref().unwrap()).unwrap();
        std::fs::remove_file(tree.path().join(&relative)).unwrap();
        std::os::unix::fs::symlink(outside.path().join(&relative), tree.path().join(&relative))
            .unwrap();
        assert_eq!(find(tree.path(), "/opt/app/bin", &wanted_out), None);
    }
}
