//! The jemalloc options compiled into a program: jemalloc reads the `const char *` global
//! `malloc_conf` (`_rjem_malloc_conf` in prefixed builds such as tikv-jemallocator) before
//! its config file and environment variable, and `malloc_conf_2_conf_harder` after them.
//! jemalloc defines both as weak NULLs, so only a program that sets one has a string there.
//! Read from the file: the pointer is either stored in the section (non-PIE) or, in a PIE,
//! is the addend of a relative relocation at the symbol's address.

use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags};
use std::path::Path;

/// The longest option string accepted (jemalloc's own buffer is PATH_MAX).
const MAX_CONF: usize = 4096;

/// The option strings a binary sets: (symbol name, text), in the order jemalloc reads them
/// relative to each other (`malloc_conf` before `malloc_conf_2_conf_harder`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompiledConf {
    /// Set in `[_rjem_]malloc_conf`: read before /etc/malloc.conf and the variable.
    pub early: Option<(String, String)>,
    /// Set in `[_rjem_]malloc_conf_2_conf_harder`: read after them, so it wins.
    pub late: Option<(String, String)>,
}

/// Reads the compiled-in jemalloc options of the ELF file at `path`.
pub fn compiled_conf(path: &Path) -> Result<CompiledConf, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache)
        .map_err(|e| format!("{} is not an ELF binary ({e})", path.display()))?;
    let read = |names: &[&str]| {
        names.iter().find_map(|name| {
            let value = string_of_symbol(&elf, name)?;
            Some((name.to_string(), value))
        })
    };
    Ok(CompiledConf {
        early: read(&["_rjem_malloc_conf", "malloc_conf"]),
        late: read(&[
            "_rjem_malloc_conf_2_conf_harder",
            "malloc_conf_2_conf_harder",
        ]),
    })
}

/// The NUL-terminated string a pointer-sized global points at; None for NULL, a symbol
/// that is absent, or anything that cannot be read.
fn string_of_symbol<'data, R: object::ReadRef<'data>>(
    elf: &object::File<'data, R>,
    name: &str,
) -> Option<String> {
    let symbol = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .find(|s| s.is_definition() && s.name() == Ok(name))?;
    let at = symbol.address();
    let relocated = elf.dynamic_relocations().and_then(|mut relocs| {
        relocs.find_map(|(offset, r)| {
            let relative = matches!(
                r.flags(),
                // R_X86_64_RELATIVE, R_AARCH64_RELATIVE
                RelocationFlags::Elf { r_type: 8 } | RelocationFlags::Elf { r_type: 1027 }
            );
            (offset == at && relative).then(|| r.addend() as u64)
        })
    });
    let pointer = match relocated {
        Some(p) => p,
        None => {
            let bytes = bytes_at(elf, at, 8)?;
            let raw: [u8; 8] = bytes.try_into().ok()?;
            if elf.is_little_endian() {
                u64::from_le_bytes(raw)
            } else {
                u64::from_be_bytes(raw)
            }
        }
    };
    if pointer == 0 {
        return None;
    }
    let tail = bytes_at_most(elf, pointer, MAX_CONF)?;
    let end = tail.iter().position(|&b| b == 0)?;
    String::from_utf8(tail[..end].to_vec()).ok()
}

/// Exactly `len` bytes of the file's image at virtual address `at`.
fn bytes_at<'data, R: object::ReadRef<'data>>(
    elf: &object::File<'data, R>,
    at: u64,
    len: usize,
) -> Option<Vec<u8>> {
    let bytes = bytes_at_most(elf, at, len)?;
    (bytes.len() == len).then_some(bytes)
}

/// Up to `len` bytes at `at`, within the one section that holds the address.
fn bytes_at_most<'data, R: object::ReadRef<'data>>(
    elf: &object::File<'data, R>,
    at: u64,
    len: usize,
) -> Option<Vec<u8>> {
    let section = elf
        .sections()
        .find(|s| s.address() <= at && at < s.address().saturating_add(s.size()) && s.size() > 0)?;
    let data = section.data().ok()?;
    let start = usize::try_from(at - section.address()).ok()?;
    let end = start.checked_add(len)?.min(data.len());
    data.get(start..end).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Compiles `source` with the host's C compiler (jemalloc's build needs one, so it is
    /// there wherever this crate builds) and returns the binary.
    fn compile(dir: &Path, name: &str, source: &str, flags: &[&str]) -> std::path::PathBuf {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, source).unwrap();
        let out = dir.join(name);
        let status = Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("a C compiler (cc)");
        assert!(status.success(), "cc {name}");
        out
    }

    #[test]
    fn reads_the_options_a_program_compiles_in_pie_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let source = r#"
            #include <stdio.h>
            const char *_rjem_malloc_conf = "prof:true,prof_prefix:/tmp/jeprof";
            const char *_rjem_malloc_conf_2_conf_harder = "lg_prof_sample:17";
            int main(void) { puts(_rjem_malloc_conf); puts(_rjem_malloc_conf_2_conf_harder); return 0; }
        "#;
        for (name, flags) in [("pie", &["-fPIE", "-pie"][..]), ("nopie", &["-no-pie"][..])] {
            let exe = compile(dir.path(), name, source, flags);
            let conf = compiled_conf(&exe).unwrap();
            assert_eq!(
                conf.early,
                Some((
                    "_rjem_malloc_conf".to_string(),
                    "prof:true,prof_prefix:/tmp/jeprof".to_string()
                )),
                "{name}"
            );
            assert_eq!(
                conf.late,
                Some((
                    "_rjem_malloc_conf_2_conf_harder".to_string(),
                    "lg_prof_sample:17".to_string()
                )),
                "{name}"
            );
        }
    }

    #[test]
    fn an_unset_pointer_or_no_symbol_reads_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // jemalloc's own weak default: NULL (in .bss).
        let null = compile(
            dir.path(),
            "null",
            "const char *malloc_conf = 0; int main(void) { return malloc_conf != 0; }",
            &[],
        );
        assert_eq!(compiled_conf(&null).unwrap(), CompiledConf::default());
        let none = compile(dir.path(), "none", "int main(void) { return 0; }", &[]);
        assert_eq!(compiled_conf(&none).unwrap(), CompiledConf::default());
        let unprefixed = compile(
            dir.path(),
            "plain",
            "const char *malloc_conf = \"prof:true\"; int main(void) { return malloc_conf == 0; }",
            &[],
        );
        assert_eq!(
            compiled_conf(&unprefixed).unwrap().early,
            Some(("malloc_conf".to_string(), "prof:true".to_string()))
        );
        let text = dir.path().join("not-elf");
        std::fs::write(&text, "#!/bin/sh\n").unwrap();
        assert!(compiled_conf(&text).unwrap_err().contains("not an ELF"));
    }
}
