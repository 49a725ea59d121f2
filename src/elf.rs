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
    let build_id = file
        .build_id()
        .ok()
        .flatten()
        .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
    let has_eh_frame = section_size(&[".eh_frame"]) > 0;
    let has_debug_frame = section_size(&[".debug_frame", ".zdebug_frame"]) > 0;
    let frame_pointers = judge_frame_pointers(file, arch);
    let jemalloc = jemalloc_of(file);
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
    }
}

/// Function starts with their lengths: from `.symtab` when the binary has one, else from
/// the `.eh_frame` entries (which stripping keeps). Returns the starts and their source.
fn function_starts<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> (Vec<(u64, u64)>, &'static str) {
    let mut starts: Vec<(u64, u64)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .map(|s| (s.address(), s.size()))
        .filter(|(_, size)| *size >= MIN_FUNCTION_BYTES)
        .collect();
    if !starts.is_empty() {
        starts.sort_unstable();
        starts.dedup_by_key(|(a, _)| *a);
        return (starts, ".symtab function symbols");
    }
    (eh_frame_starts(file), ".eh_frame entries (the binary has no .symtab)")
}

fn eh_frame_starts<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Vec<(u64, u64)> {
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
    for &(address, _) in starts.iter().step_by(step) {
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
        basis: format!("prologues ({pattern}) of the functions at {source}"),
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
        fp.basis = format!("no function starts found (no .symtab, no .eh_frame) to read {pattern} at");
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

/// Which jemalloc configuration variable the binary reads, from its read-only data.
fn jemalloc_of<'data, R: object::ReadRef<'data>>(file: &object::File<'data, R>) -> Jemalloc {
    // jemalloc's messages start with "<jemalloc>: "; the variable's name alone could be
    // any program quoting it (devprof does).
    let (mut marker, mut prefixed, mut unprefixed) = (false, false, false);
    for section in file.sections() {
        let name = section.name().unwrap_or("");
        if !(name.starts_with(".rodata") || name == ".data.rel.ro") {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        marker |= contains(data, b"<jemalloc>: ");
        prefixed |= contains(data, b"_RJEM_MALLOC_CONF");
        unprefixed |= contains(data, b"MALLOC_CONF");
    }
    match (marker, prefixed, unprefixed) {
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
        assert!(x86_64_sets_up_frame_pointer(&[0x55, 0x48, 0x89, 0xe5, 0x41, 0x57]));
        // gcc -fcf-protection: endbr64 first
        assert!(x86_64_sets_up_frame_pointer(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        // rbp pushed as a callee-saved register only: push %rbp; push %rbx; sub $8,%rsp
        assert!(!x86_64_sets_up_frame_pointer(&[0x55, 0x53, 0x48, 0x83, 0xec, 0x08]));
        // no frame at all: sub $0x18,%rsp
        assert!(!x86_64_sets_up_frame_pointer(&[0x48, 0x83, 0xec, 0x18]));
        assert!(!x86_64_sets_up_frame_pointer(&[]));
    }

    #[test]
    fn aarch64_prologues() {
        let words = |ws: &[u32]| ws.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        // stp x29, x30, [sp, #-16]!; mov x29, sp
        assert!(aarch64_sets_up_frame_pointer(&words(&[0xa9bf7bfd, 0x910003fd])));
        // paciasp; sub sp, sp, #0x40; stp x29, x30, [sp, #0x30]; add x29, sp, #0x30
        assert!(aarch64_sets_up_frame_pointer(&words(&[
            0xd503233f, 0xd10103ff, 0xa9037bfd, 0x9100c3fd
        ])));
        // stp x19, x20, [sp, #-32]! only
        assert!(!aarch64_sets_up_frame_pointer(&words(&[0xa9be53f3, 0xd65f03c0])));
    }
}
