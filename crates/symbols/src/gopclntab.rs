//! Function names of a Go binary from its pclntab, the table the Go runtime itself uses to
//! name functions in tracebacks. Every Go binary carries it, stripped (`-ldflags="-s -w"`)
//! or not, so this names the frames of release builds that have no symbol table.
//!
//! With `gosource`, also file:line and inlined calls at a pc (Go 1.16+ / 1.18+).
//!
//! Layouts read: Go 1.2–1.15 (magic 0xfffffffb), 1.16–1.17 (0xfffffffa), 1.18–1.19
//! (0xfffffff0) and 1.20+ (0xfffffff1), either byte order, 4- or 8-byte pointers. The
//! table is found in the `.gopclntab` section, or, when section headers were removed, by
//! searching the read-only data for a header that parses. Everything is bounds-checked: a
//! corrupt table gives an error, never a panic. Also reads the Go version from
//! `.go.buildinfo`. Pure: works on bytes.

use super::gomoduledata;
use super::goread::Reader;
pub use super::goread::{Layout, PclnError};
pub use super::gosource::GoFrame;
use super::gosource::{Source, Tables};
use object::{Object, ObjectSection};
use std::collections::HashMap;
use std::sync::Arc;

const MAGIC_12: u32 = 0xffff_fffb;
const MAGIC_116: u32 = 0xffff_fffa;
const MAGIC_118: u32 = 0xffff_fff0;
const MAGIC_120: u32 = 0xffff_fff1;
/// More functions than this is not a real table (the largest Go programs have ~200k).
const MAX_FUNCS: u64 = 10_000_000;
/// The most name bytes all rows together may name (each row counted, as each becomes a
/// symbol): the largest Go programs name ~20 MiB; a table that points millions of rows
/// at one long name is refused rather than copied.
pub(super) const MAX_NAME_BYTES: u64 = 64 << 20;

/// One function: its code is `entry..end` (ELF addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFunc {
    pub entry: u64,
    pub end: u64,
    /// Shared by the rows that point at the same name.
    pub name: Arc<str>,
}

/// The functions of one pclntab, sorted by entry, and their source positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcLnTab {
    pub layout: Layout,
    funcs: Vec<GoFunc>,
    /// The tables of file:line and inlined calls (Go 1.16+ layouts).
    source: Option<Source>,
}

fn err<T>(what: impl Into<String>) -> Result<T, PclnError> {
    Err(PclnError(what.into()))
}

impl PcLnTab {
    /// Parses a pclntab starting at the first byte of `data`.
    pub fn parse(data: &[u8]) -> Result<Self, PclnError> {
        Self::parse_relocated(data, None)
    }

    /// Parses a pclntab whose text start (Go 1.18+) may be left zero in the file, to be
    /// filled by a dynamic relocation at load time (position-independent builds):
    /// `text_start` is then the value to use.
    pub fn parse_relocated(data: &[u8], text_start: Option<u64>) -> Result<Self, PclnError> {
        if data.len() < 16 {
            return err("shorter than its header");
        }
        let le = u32::from_le_bytes(data[0..4].try_into().expect("4 bytes"));
        let be = u32::from_be_bytes(data[0..4].try_into().expect("4 bytes"));
        let (magic, big) = match (layout_of(le), layout_of(be)) {
            (Some(l), _) => (l, false),
            (None, Some(l)) => (l, true),
            _ => return err(format!("unknown magic {le:#010x}")),
        };
        let (pad, min_lc, ptr) = (&data[4..6], data[6], data[7]);
        if pad != [0, 0] || !matches!(min_lc, 1 | 2 | 4) || !matches!(ptr, 4 | 8) {
            return err("header is not a pclntab header");
        }
        let r = Reader {
            data,
            big,
            ptr: ptr as usize,
        };
        let (funcs, source) = match magic {
            Layout::Go12 => (read_go12(&r)?, None),
            Layout::Go116 => {
                let (funcs, offsets) = read_go116(&r)?;
                (funcs, Source::new(&r, magic, tables(&r, 2)?, offsets))
            }
            // The header gained textStart before the table offsets.
            Layout::Go118 | Layout::Go120 => {
                let (funcs, offsets) = read_go118(&r, text_start)?;
                (funcs, Source::new(&r, magic, tables(&r, 3)?, offsets))
            }
        };
        Ok(PcLnTab {
            layout: magic,
            funcs,
            source,
        })
    }

    /// The pclntab of an ELF file: its `.gopclntab` section (`.data.rel.ro.gopclntab` in
    /// position-independent builds), else the first header found in the read-only data
    /// that parses; None when the file is not a Go binary. The `go:func.*` data its
    /// inline trees live in is looked up too (Go 1.18+; without it, no inlined frames).
    pub fn from_elf(file: &object::File<'_>) -> Option<Result<Self, PclnError>> {
        let image = gomoduledata::Image::new(file);
        let named = [".gopclntab", ".data.rel.ro.gopclntab"]
            .iter()
            .find_map(|name| file.section_by_name(name));
        let (mut table, address) = if let Some(section) = named {
            match section.data() {
                Ok(data) => {
                    let text = image.text_start(section.address(), data);
                    match Self::parse_relocated(data, text) {
                        Ok(table) => (table, section.address()),
                        Err(e) => return Some(Err(e)),
                    }
                }
                Err(e) => return Some(err(format!("cannot read .gopclntab: {e}"))),
            }
        } else {
            [".data.rel.ro", ".noptrdata", ".rodata"]
                .iter()
                .filter_map(|name| file.section_by_name(name))
                .find_map(|section| {
                    let data = section.data().ok()?;
                    let (at, table) = search(data, |at| {
                        image.text_start(section.address().checked_add(at as u64)?, &data[at..])
                    })?;
                    Some((table, section.address().checked_add(at as u64)?))
                })?
        };
        let layout = table.layout;
        if let Some(source) = table.source.as_mut() {
            if let Some(gofunc) = image.gofunc(address, layout, source.funcname_offset()) {
                source.set_gofunc(gofunc);
            }
        }
        Some(Ok(table))
    }

    /// Whether inlined calls can be expanded (the inline trees were found).
    pub fn has_inline_trees(&self) -> bool {
        self.source.as_ref().is_some_and(Source::has_inline_trees)
    }

    /// The frames at `pc`, innermost first (inlined callees before the function they were
    /// inlined into), with file:line where the table has them; `inline` expands inlined
    /// calls. None when no function holds `pc`; the function's name alone when the table
    /// has no source positions (before Go 1.16).
    pub fn frames(&self, pc: u64, inline: bool) -> Option<Result<Vec<GoFrame>, PclnError>> {
        let i = self.index_of(pc)?;
        let f = &self.funcs[i];
        Some(match &self.source {
            Some(source) => source.frames(i, f.entry, &f.name, pc, inline),
            None => Ok(vec![GoFrame {
                function: f.name.to_string(),
                place: None,
            }]),
        })
    }

    pub fn functions(&self) -> &[GoFunc] {
        &self.funcs
    }

    /// The function whose code holds `pc`.
    pub fn lookup(&self, pc: u64) -> Option<&GoFunc> {
        self.index_of(pc).map(|i| &self.funcs[i])
    }

    fn index_of(&self, pc: u64) -> Option<usize> {
        let i = self
            .funcs
            .partition_point(|f| f.entry <= pc)
            .checked_sub(1)?;
        (pc < self.funcs[i].end).then_some(i)
    }
}

fn layout_of(magic: u32) -> Option<Layout> {
    match magic {
        MAGIC_12 => Some(Layout::Go12),
        MAGIC_116 => Some(Layout::Go116),
        MAGIC_118 => Some(Layout::Go118),
        MAGIC_120 => Some(Layout::Go120),
        _ => None,
    }
}

/// The first pclntab in `data` and its offset (headers are pointer-aligned; 4-byte steps
/// cover both); `text_start` gives the relocated text start of a candidate at an offset.
fn search(data: &[u8], text_start: impl Fn(usize) -> Option<u64>) -> Option<(usize, PcLnTab)> {
    (0..data.len().saturating_sub(16))
        .step_by(4)
        .filter(|&i| {
            let word = [data[i], data[i + 1], data[i + 2], data[i + 3]];
            layout_of(u32::from_le_bytes(word)).is_some()
                || layout_of(u32::from_be_bytes(word)).is_some()
        })
        .find_map(|i| Some((i, PcLnTab::parse_relocated(&data[i..], text_start(i)).ok()?)))
}

/// The offsets of the name, CU, file and pc-value tables: header words `first..first+4`.
fn tables(r: &Reader<'_>, first: u64) -> Result<Tables, PclnError> {
    Ok(Tables {
        funcname: r.table_offset(first)?,
        cutab: r.table_offset(first + 1)?,
        filetab: r.table_offset(first + 2)?,
        pctab: r.table_offset(first + 3)?,
    })
}

fn count(n: u64) -> Result<u64, PclnError> {
    if n == 0 || n > MAX_FUNCS {
        return err(format!("implausible function count {n}"));
    }
    Ok(n)
}

/// Builds the function list from (entry, name) pairs and the end of the last function;
/// entries must ascend (the runtime binary-searches them too).
fn finish(entries: Vec<(u64, Arc<str>)>, text_end: u64) -> Result<Vec<GoFunc>, PclnError> {
    let mut funcs = Vec::with_capacity(entries.len());
    for (i, (entry, name)) in entries.iter().enumerate() {
        let end = entries.get(i + 1).map(|e| e.0).unwrap_or(text_end);
        if end < *entry {
            return err(format!("function table not sorted at {entry:#x}"));
        }
        funcs.push(GoFunc {
            entry: *entry,
            end,
            name: name.clone(),
        });
    }
    Ok(funcs)
}

/// Function names read once per offset and shared by the rows naming them, within a
/// budget of bytes over all rows.
#[derive(Default)]
struct SharedNames {
    by_offset: HashMap<u64, Arc<str>>,
    row_bytes: u64,
}

impl SharedNames {
    fn at(&mut self, r: &Reader<'_>, offset: u64) -> Result<Arc<str>, PclnError> {
        let name = match self.by_offset.get(&offset) {
            Some(name) => name.clone(),
            None => {
                let name: Arc<str> = r.cstr(offset)?.into();
                self.by_offset.insert(offset, name.clone());
                name
            }
        };
        self.row_bytes += name.len() as u64;
        if self.row_bytes > MAX_NAME_BYTES {
            return err(format!(
                "function names exceed {} MiB over {} rows",
                MAX_NAME_BYTES >> 20,
                self.by_offset.len().max(1)
            ));
        }
        Ok(name)
    }
}

/// Go 1.18+: 32-bit entries relative to the text start, names in their own table. Also
/// gives the offset of each function's record. A text start left zero for a relocation
/// to fill is taken from `relocated`.
fn read_go118(
    r: &Reader<'_>,
    relocated: Option<u64>,
) -> Result<(Vec<GoFunc>, Vec<u64>), PclnError> {
    let nfunc = count(r.header_word(0)?)?;
    let text_start = match r.header_word(2)? {
        0 => relocated.unwrap_or(0),
        start => start,
    };
    let funcname = r.table_offset(3)?;
    let pcln = r.table_offset(7)?;
    let mut entries = Vec::new();
    let mut offsets = Vec::new();
    let mut names = SharedNames::default();
    for i in 0..nfunc {
        let at = pcln + i * 8;
        let entry_off = r.u32(at)?;
        let func_off = r.u32(at + 4)?;
        let func = pcln + u64::from(func_off);
        if r.u32(func)? != entry_off {
            return err(format!("function {i}: entry does not match its table row"));
        }
        let name_off = u64::from(r.u32(func + 4)?);
        let name = names.at(r, funcname + name_off)?;
        entries.push((address_in_text(text_start, entry_off)?, name));
        offsets.push(func);
    }
    let end = address_in_text(text_start, r.u32(pcln + nfunc * 8)?)?;
    Ok((finish(entries, end)?, offsets))
}

/// `text_start + offset`, an error where a corrupt text start makes it overflow.
fn address_in_text(text_start: u64, offset: u32) -> Result<u64, PclnError> {
    text_start
        .checked_add(u64::from(offset))
        .ok_or_else(|| PclnError(format!("text start {text_start:#x} is corrupt")))
}

/// Go 1.16–1.17: pointer-sized absolute entries, names in their own table.
fn read_go116(r: &Reader<'_>) -> Result<(Vec<GoFunc>, Vec<u64>), PclnError> {
    let nfunc = count(r.header_word(0)?)?;
    let funcname = r.table_offset(2)?;
    let pcln = r.table_offset(6)?;
    read_word_table(r, nfunc, pcln, funcname)
}

/// Go 1.2–1.15: pointer-sized absolute entries right after the header; names are offsets
/// from the table's start.
fn read_go12(r: &Reader<'_>) -> Result<Vec<GoFunc>, PclnError> {
    let nfunc = count(r.header_word(0)?)?;
    Ok(read_word_table(r, nfunc, 8 + r.ptr as u64, 0)?.0)
}

fn read_word_table(
    r: &Reader<'_>,
    nfunc: u64,
    table: u64,
    names: u64,
) -> Result<(Vec<GoFunc>, Vec<u64>), PclnError> {
    let row = 2 * r.ptr as u64;
    let mut entries = Vec::new();
    let mut offsets = Vec::new();
    let mut shared = SharedNames::default();
    for i in 0..nfunc {
        let entry = r.word(table + i * row)?;
        let func = table
            .checked_add(r.word(table + i * row + r.ptr as u64)?)
            .ok_or_else(|| PclnError(format!("function {i}: record offset overflows")))?;
        if r.word(func)? != entry {
            return err(format!("function {i}: entry does not match its table row"));
        }
        let name_off = u64::from(r.u32(func + r.ptr as u64)?);
        entries.push((entry, shared.at(r, names + name_off)?));
        offsets.push(func);
    }
    let end = r.word(table + nfunc * row)?;
    Ok((finish(entries, end)?, offsets))
}

/// The Go version a binary was built with (`go1.19.8`), from `.go.buildinfo` (Go 1.18+
/// inline form); None for other binaries and older forms.
pub fn go_version(file: &object::File<'_>) -> Option<String> {
    let data = file.section_by_name(".go.buildinfo")?.data().ok()?;
    buildinfo_version(data)
}

/// The version string of a `.go.buildinfo` section's bytes.
pub fn buildinfo_version(data: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\xff Go buildinf:";
    if !data.starts_with(MAGIC) || data.len() < 32 {
        return None;
    }
    // Flag bit 2: the strings follow the 32-byte header, each prefixed by its varint length.
    if data[15] & 2 == 0 {
        return None;
    }
    let (len, used) = uvarint(&data[32..])?;
    let start = 32 + used;
    let bytes = data.get(start..start.checked_add(usize::try_from(len).ok()?)?)?;
    let version = std::str::from_utf8(bytes).ok()?;
    version.starts_with("go").then(|| version.to_string())
}

fn uvarint(data: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in data.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

#[cfg(test)]
#[path = "gopclntab_tests.rs"]
pub(super) mod tests;
