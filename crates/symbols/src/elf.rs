//! What a binary offers a profiler, read from its ELF sections: function symbols (named
//! frames rather than hex), DWARF debug info (inlined frames, lines), unwind tables
//! (`.eh_frame`, for `--call-graph dwarf`), whether its code keeps frame pointers (for
//! `--call-graph fp`) and how that was judged, and which jemalloc configuration variable
//! it reads. Pure: works on bytes (or a file read lazily through a cache, so a
//! gigabyte-sized node binary is not loaded whole); nothing here talks to Docker.

use addr2line::gimli::{self, UnwindSection};
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
use std::fmt;
use std::path::Path;

/// Functions shorter than this are thunks and stubs; they tell nothing about frame pointers.
const MIN_FUNCTION_BYTES: u64 = 16;
/// At most this many functions are examined (evenly spread over the binary).
const MAX_EXAMINED: usize = 50_000;
/// Above this share of functions setting up a frame pointer, the code keeps them.
pub const FP_YES_SHARE: f64 = 0.5;
/// Below this share, it omits them (the few that set one up need it for other reasons).
pub const FP_NO_SHARE: f64 = 0.2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    X86_64,
    Aarch64,
    Other,
}

/// The frame-pointer verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FpVerdict {
    /// Most functions set up a frame pointer: `--call-graph fp` walks the stacks.
    Yes,
    /// Between the thresholds: some objects were built with frame pointers, some without.
    Partly,
    /// Few or none do: fp call graphs break at every function; use `--call-graph dwarf`.
    No,
    /// Could not be judged (unknown architecture, no function starts).
    Unknown,
}

/// How the frame-pointer verdict was reached.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FramePointers {
    pub verdict: FpVerdict,
    /// Functions whose prologue was read.
    pub examined: usize,
    /// Of those, how many set up a frame pointer in their prologue.
    pub with_fp: usize,
    /// Where the function starts came from and what was looked for.
    pub basis: String,
}

impl FramePointers {
    pub fn share(&self) -> f64 {
        if self.examined == 0 {
            0.0
        } else {
            self.with_fp as f64 / self.examined as f64
        }
    }
}

/// Which jemalloc the program carries, by the configuration variable it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Jemalloc {
    /// No jemalloc built in (it may still be loaded as a shared library).
    None,
    /// tikv-jemallocator and other prefixed builds: `_RJEM_MALLOC_CONF`.
    Prefixed,
    /// Unprefixed jemalloc: `MALLOC_CONF`.
    Unprefixed,
}

impl Jemalloc {
    pub fn variable(self) -> Option<&'static str> {
        match self {
            Jemalloc::None => None,
            Jemalloc::Prefixed => Some("_RJEM_MALLOC_CONF"),
            Jemalloc::Unprefixed => Some("MALLOC_CONF"),
        }
    }
}

/// Everything read from one binary.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ElfReport {
    pub arch: Arch,
    /// Defined function symbols in `.symtab` (0: stripped).
    pub symtab_functions: usize,
    /// Defined function symbols in `.dynsym` (exports only; a few per program).
    pub dynsym_functions: usize,
    /// Size of `.debug_info` (0: no DWARF).
    pub debug_info_bytes: u64,
    pub has_debug_line: bool,
    /// `.gnu_debuglink`: the debug info lives in a separate file of this name.
    pub debuglink: Option<String>,
    pub build_id: Option<String>,
    pub has_eh_frame: bool,
    pub has_debug_frame: bool,
    pub frame_pointers: FramePointers,
    pub jemalloc: Jemalloc,
    /// Go's runtime tables (`.gopclntab` or `.go.buildinfo`): a Go program, whose names
    /// survive stripping.
    pub go_tables: bool,
}

impl ElfReport {
    pub fn has_symbols(&self) -> bool {
        self.symtab_functions > 0
    }
    pub fn has_debug_info(&self) -> bool {
        self.debug_info_bytes > 0
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfError(pub String);

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ElfError {}

/// Reads a binary from disk, lazily (only the headers, symbol tables, code and read-only
/// data are read).
pub fn read_file(path: &Path) -> Result<ElfReport, ElfError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ElfError(format!("cannot open {}: {e}", path.display())))?;
    let cache = object::ReadCache::new(file);
    let object = object::File::parse(&cache)
        .map_err(|e| ElfError(format!("{} is not an ELF binary ({e})", path.display())))?;
    Ok(analyze(&object))
}

/// Reads a binary held in memory.
pub fn read_bytes(data: &[u8]) -> Result<ElfReport, ElfError> {
    let object =
        object::File::parse(data).map_err(|e| ElfError(format!("not an ELF binary ({e})")))?;
    Ok(analyze(&object))
}

fn analyze<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> ElfReport {
    let arch = match file.architecture() {
        object::Architecture::X86_64 => Arch::X86_64,
        object::Architecture::Aarch64 => Arch::Aarch64,
        _ => Arch::Other,
    };
    let count_functions = |symbols: &mut dyn Iterator<Item = object::Symbol<'data, '_, R>>| {
        symbols
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .count()
    };
    let symtab_functions = count_functions(&mut file.symbols());
    let dynsym_functions = count_functions(&mut file.dynamic_symbols());
    let section_size = |names: &[&str]| -> u64 {
        names
            .iter()
            .filter_map(|n| file.section_by_name(n))
            .map(|s| s.size())
            .sum()
    };
    let debug_info_bytes = section_size(&[".debug_info", ".zdebug_info"]);
    let has_debug_line = section_size(&[".debug_line", ".zdebug_line"]) > 0;
    let debuglink = file
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
    let build_id = crate::debugfile::build_id_hex(file);
    let has_eh_frame = section_size(&[".eh_frame"]) > 0;
    let has_debug_frame = section_size(&[".debug_frame", ".zdebug_frame"]) > 0;
    let frame_pointers = judge_frame_pointers(file, arch);
    let jemalloc = jemalloc_of(file);
    let go_tables = file.section_by_name(".gopclntab").is_some()
        || file.section_by_name(".go.buildinfo").is_some();
    ElfReport {
        arch,
        symtab_functions,
        dynsym_functions,
        debug_info_bytes,
        has_debug_line,
        debuglink,
        build_id,
        has_eh_frame,
        has_debug_frame,
        frame_pointers,
        jemalloc,
        go_tables,
    }
}

/// Crates of the Rust standard library and its dependencies: precompiled, with the
/// settings of the toolchain's release rather than the program's (since Rust 1.79 with
/// frame pointers), so they say nothing about how the program was built.
const SYSROOT_CRATES: &[&str] = &[
    "std",
    "core",
    "alloc",
    "proc_macro",
    "test",
    "compiler_builtins",
    "panic_unwind",
    "panic_abort",
    "unwind",
    "std_detect",
    "hashbrown",
    "gimli",
    "addr2line",
    "object",
    "miniz_oxide",
    "adler",
    "adler2",
    "memchr",
    "rustc_demangle",
    "cfg_if",
    "libc",
    "rustc_std_workspace_core",
    "rustc_std_workspace_alloc",
    "__rustc",
];

/// The crate a Rust symbol belongs to (`demo_node` for
/// `<demo_node::State as core::fmt::Debug>::fmt`); None for other languages.
pub fn rust_crate_of(symbol: &str) -> Option<String> {
    let demangled = rustc_demangle::try_demangle(symbol).ok()?;
    let text = format!("{demangled:#}");
    let first = text.trim_start_matches('<').split("::").next()?.to_string();
    first
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(first)
}

/// Function starts to read prologues at, and where they came from: the program's own Rust
/// code when its symbols show it, else every function in `.symtab`, else the `.eh_frame`
/// entries (which stripping keeps).
fn function_starts<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> (Vec<u64>, String) {
    let functions: Vec<(u64, Option<String>)> = file
        .symbols()
        .filter(|s| {
            s.kind() == SymbolKind::Text && s.is_definition() && s.size() >= MIN_FUNCTION_BYTES
        })
        .map(|s| (s.address(), s.name().ok().and_then(rust_crate_of)))
        .collect();
    let own: Vec<u64> = functions
        .iter()
        .filter(|(_, krate)| {
            krate
                .as_deref()
                .is_some_and(|k| !SYSROOT_CRATES.contains(&k))
        })
        .map(|(a, _)| *a)
        .collect();
    let finish = |mut starts: Vec<u64>| {
        starts.sort_unstable();
        starts.dedup();
        starts
    };
    if own.len() >= 10 {
        return (
            finish(own),
            "the program's own Rust functions in .symtab (the precompiled standard library left out)".to_string(),
        );
    }
    if !functions.is_empty() {
        return (
            finish(functions.into_iter().map(|(a, _)| a).collect()),
            "every function in .symtab".to_string(),
        );
    }
    (
        finish(eh_frame_starts(file).into_iter().map(|(a, _)| a).collect()),
        "the .eh_frame entries (no .symtab: the program's code cannot be told from the libraries linked in)"
            .to_string(),
    )
}

fn eh_frame_starts<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> Vec<(u64, u64)> {
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut eh_frame = gimli::EhFrame::new(data, endian);
    eh_frame.set_address_size(if file.is_64() { 8 } else { 4 });
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(hdr) = file.section_by_name(".eh_frame_hdr") {
        bases = bases.set_eh_frame_hdr(hdr.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut starts = Vec::new();
    let mut entries = eh_frame.entries(&bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(gimli::EhFrame::cie_from_offset) {
                if fde.len() >= MIN_FUNCTION_BYTES {
                    starts.push((fde.initial_address(), fde.len()));
                }
            }
        }
    }
    starts.sort_unstable();
    starts.dedup_by_key(|(a, _)| *a);
    starts
}

/// Reads the prologue of each function (an even sample of at most `MAX_EXAMINED`) and
/// counts those that set up a frame pointer.
fn judge_frame_pointers<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
    arch: Arch,
) -> FramePointers {
    let pattern = match arch {
        Arch::X86_64 => "push %rbp; mov %rsp,%rbp",
        Arch::Aarch64 => "stp x29, x30 then add x29, sp",
        Arch::Other => {
            return FramePointers {
                verdict: FpVerdict::Unknown,
                examined: 0,
                with_fp: 0,
                basis: "prologues are read for x86_64 and aarch64 only".to_string(),
            }
        }
    };
    // Go keeps frame pointers on amd64 and arm64 (since Go 1.7); its prologues start
    // with a stack check, not the frame set-up.
    if file.section_by_name(".gopclntab").is_some()
        || file.section_by_name(".go.buildinfo").is_some()
    {
        return FramePointers {
            verdict: FpVerdict::Yes,
            examined: 0,
            with_fp: 0,
            basis: "a Go binary (.gopclntab): Go keeps frame pointers on amd64 and arm64"
                .to_string(),
        };
    }
    let (starts, source) = function_starts(file);
    let code: Vec<(u64, &[u8])> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((s.address(), s.data().ok()?)))
        .filter(|(_, d)| !d.is_empty())
        .collect();
    let step = starts.len().div_ceil(MAX_EXAMINED).max(1);
    let mut examined = 0;
    let mut with_fp = 0;
    for &address in starts.iter().step_by(step) {
        let Some(bytes) = code.iter().find_map(|(base, data)| {
            let offset = address.checked_sub(*base)? as usize;
            (offset < data.len()).then(|| &data[offset..data.len().min(offset + 24)])
        }) else {
            continue;
        };
        examined += 1;
        let sets_up = match arch {
            Arch::X86_64 => x86_64_sets_up_frame_pointer(bytes),
            Arch::Aarch64 => aarch64_sets_up_frame_pointer(bytes),
            Arch::Other => false,
        };
        if sets_up {
            with_fp += 1;
        }
    }
    let mut fp = FramePointers {
        verdict: FpVerdict::Unknown,
        examined,
        with_fp,
        basis: format!("the prologues ({pattern}) of {source}"),
    };
    if examined > 0 {
        let share = fp.share();
        fp.verdict = if share >= FP_YES_SHARE {
            FpVerdict::Yes
        } else if share < FP_NO_SHARE {
            FpVerdict::No
        } else {
            FpVerdict::Partly
        };
    } else {
        fp.basis =
            format!("no function starts found (no .symtab, no .eh_frame) to read {pattern} at");
    }
    fp
}

/// x86-64: `push %rbp` (55) then `mov %rsp,%rbp` (48 89 e5, or 48 8b ec), after an
/// optional `endbr64` (f3 0f 1e fa).
pub fn x86_64_sets_up_frame_pointer(code: &[u8]) -> bool {
    let code = code.strip_prefix(&[0xf3, 0x0f, 0x1e, 0xfa]).unwrap_or(code);
    code.starts_with(&[0x55, 0x48, 0x89, 0xe5]) || code.starts_with(&[0x55, 0x48, 0x8b, 0xec])
}

/// AArch64: within the first instructions, `stp x29, x30, [sp, ...]` (pre-indexed or
/// offset) followed by `add x29, sp, #imm` (`mov x29, sp`); pointer-authentication and
/// BTI landing pads before them are skipped.
pub fn aarch64_sets_up_frame_pointer(code: &[u8]) -> bool {
    let words: Vec<u32> = code
        .chunks_exact(4)
        .take(6)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let is_stp_fp_lr = |w: u32| {
        let masked = w & 0xffc0_7fff;
        masked == 0xa980_7bfd || masked == 0xa900_7bfd
    };
    let is_add_fp_sp = |w: u32| w & 0xffc0_03ff == 0x9100_03fd;
    match words.iter().position(|w| is_stp_fp_lr(*w)) {
        Some(i) => words[i + 1..].iter().any(|w| is_add_fp_sp(*w)),
        None => false,
    }
}

/// Which jemalloc the binary carries: by its function symbols when it has them
/// (`_rjem_mallocx` in prefixed builds, `mallocx` and `malloc_stats_print` unprefixed),
/// else by jemalloc's messages ("<jemalloc>: ...") and the variable named in its
/// read-only data.
fn jemalloc_of<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Jemalloc {
    let mut any_symbols = false;
    let (mut prefixed, mut unprefixed_api, mut stats) = (false, false, false);
    for symbol in file.symbols().chain(file.dynamic_symbols()) {
        if symbol.kind() != SymbolKind::Text || !symbol.is_definition() {
            continue;
        }
        any_symbols = true;
        match symbol.name().unwrap_or("") {
            "_rjem_mallocx" | "_rjem_mallctl" => prefixed = true,
            "mallocx" | "je_mallocx" => unprefixed_api = true,
            "malloc_stats_print" | "je_malloc_stats_print" => stats = true,
            _ => {}
        }
    }
    if prefixed {
        return Jemalloc::Prefixed;
    }
    if unprefixed_api && stats {
        return Jemalloc::Unprefixed;
    }
    if any_symbols && file.symbols().next().is_some() {
        return Jemalloc::None;
    }
    // No .symtab: read-only data. The needles are put together at run time so that
    // devprof's own binary (which quotes them) does not look like jemalloc.
    let marker = [&b"<jema"[..], b"lloc>: "].concat();
    let prefixed_var = [&b"_RJEM_"[..], b"MALLOC_CONF"].concat();
    let (mut has_marker, mut has_prefixed, mut has_unprefixed) = (false, false, false);
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if !(name.starts_with(".rodata") || name == ".data.rel.ro") {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        has_marker |= contains(data, &marker);
        has_prefixed |= contains(data, &prefixed_var);
        has_unprefixed |= contains(data, &prefixed_var[6..]);
    }
    match (has_marker, has_prefixed, has_unprefixed) {
        (true, true, _) => Jemalloc::Prefixed,
        (true, false, true) => Jemalloc::Unprefixed,
        _ => Jemalloc::None,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x86_64_prologues() {
        // demo-node (force-frame-pointers=yes): push %rbp; mov %rsp,%rbp; push %r15
        assert!(x86_64_sets_up_frame_pointer(&[
            0x55, 0x48, 0x89, 0xe5, 0x41, 0x57
        ]));
        // gcc -fcf-protection: endbr64 first
        assert!(x86_64_sets_up_frame_pointer(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        // rbp pushed as a callee-saved register only: push %rbp; push %rbx; sub $8,%rsp
        assert!(!x86_64_sets_up_frame_pointer(&[
            0x55, 0x53, 0x48, 0x83, 0xec, 0x08
        ]));
        // no frame at all: sub $0x18,%rsp
        assert!(!x86_64_sets_up_frame_pointer(&[0x48, 0x83, 0xec, 0x18]));
        assert!(!x86_64_sets_up_frame_pointer(&[]));
    }

    #[test]
    fn crates_of_rust_symbols() {
        assert_eq!(
            rust_crate_of("_ZN9demo_node9workloads10hash_chain17h0123456789abcdefE").as_deref(),
            Some("demo_node")
        );
        assert_eq!(
            rust_crate_of("_ZN4core3ptr13drop_in_place17h0123456789abcdefE").as_deref(),
            Some("core")
        );
        assert_eq!(rust_crate_of("je_malloc"), None);
        assert_eq!(
            rust_crate_of("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            None,
            "C++"
        );
    }

    /// Real binaries: the demo node as the test bed builds it (frame pointers, full
    /// debuginfo) and stripped; devprof itself (same flags).
    #[test]
    fn reads_real_binaries() {
        let exe = std::env::current_exe().unwrap();
        let report = read_file(&exe).unwrap();
        assert!(report.has_symbols() && report.has_eh_frame);
        assert_eq!(report.arch, Arch::X86_64);
        assert_eq!(
            report.jemalloc,
            Jemalloc::None,
            "devprof quotes the variables but has no jemalloc"
        );
        // .cargo/config.toml builds this workspace with frame pointers.
        assert_eq!(
            report.frame_pointers.verdict,
            FpVerdict::Yes,
            "{:?}",
            report.frame_pointers
        );
        assert!(report.frame_pointers.basis.contains("own Rust functions"));
        assert!(
            report.frame_pointers.share() > 0.9,
            "{:?}",
            report.frame_pointers
        );
    }

    #[test]
    fn not_elf_is_an_error() {
        assert!(read_bytes(b"#!/bin/sh\necho hi\n")
            .unwrap_err()
            .0
            .contains("not an ELF"));
    }

    #[test]
    fn aarch64_prologues() {
        let words = |ws: &[u32]| ws.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        // stp x29, x30, [sp, #-16]!; mov x29, sp
        assert!(aarch64_sets_up_frame_pointer(&words(&[
            0xa9bf7bfd, 0x910003fd
        ])));
        // paciasp; sub sp, sp, #0x40; stp x29, x30, [sp, #0x30]; add x29, sp, #0x30
        assert!(aarch64_sets_up_frame_pointer(&words(&[
            0xd503233f, 0xd10103ff, 0xa9037bfd, 0x9100c3fd
        ])));
        // stp x19, x20, [sp, #-32]! only
        assert!(!aarch64_sets_up_frame_pointer(&words(&[
            0xa9be53f3, 0xd65f03c0
        ])));
    }
}
