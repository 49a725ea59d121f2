//! The symbolizer: addresses of one file (an executable or shared library) to function
//! names. An offset in the mapped file is turned, through the file's PT_LOAD segments, into
//! the address the ELF file itself uses; that is looked up in the DWARF line tables (with
//! inlined frames) where the file has them, in the symbol table otherwise (only inside a
//! symbol's extent: an address past the end of the nearest symbol is not given that
//! symbol's name), or, for a stripped Go binary, in its pclntab (names, and for
//! `frames_at` also file:line and inlined calls). Names are demangled (Rust and C++). Heap profiles use it today; every
//! path that names frames itself should use this one.

use super::demangle::demangle_frame;
use super::elf_symbols::{function_symbols, Names, Symbol, Table};
use super::gopclntab::{GoFrame, PcLnTab};
use object::{Object, ObjectSegment};
use std::cell::OnceCell;
use std::path::{Path, PathBuf};

/// One loadable segment: bytes `file_offset..file_offset+file_size` of the file are
/// mapped at `address` (the ELF's own virtual address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub file_offset: u64,
    pub file_size: u64,
    pub address: u64,
}

/// Whether an ELF file was linked by Go's linker, the only files with a pclntab: looking
/// for one in another library (its relocations read, its data searched) cost a native
/// fold as much as that library's own symbols. Go's linker writes the build-id note and
/// the build info even with `-s -w`.
fn linked_by_go(file: &object::File<'_>) -> bool {
    [
        ".note.go.buildid",
        ".go.buildinfo",
        ".gopclntab",
        ".data.rel.ro.gopclntab",
    ]
    .iter()
    .any(|name| file.section_by_name(name).is_some())
}

/// Where a module's names come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SymbolKind {
    /// DWARF debug info (with inlined frames) and the symbol table.
    Dwarf,
    /// Only the symbol table (.symtab, else the exported .dynsym).
    Symtab,
    /// A Go binary's function table (`.gopclntab`; stripped Go binaries keep it).
    Gopclntab,
    /// A devprof symbol table file (`symbols` format, used for committed test data).
    Table,
}

/// A file's DWARF, opened when first asked for (inline frames, heap stacks): opening it
/// maps and indexes the debug sections (decompressing them where they are compressed),
/// which a fold without inline frames never reads.
#[derive(Default)]
struct LazyDwarf {
    path: Option<PathBuf>,
    loader: OnceCell<Option<addr2line::Loader>>,
}

impl LazyDwarf {
    fn get(&self) -> Option<&addr2line::Loader> {
        let path = self.path.as_ref()?;
        self.loader
            .get_or_init(|| addr2line::Loader::new(path).ok())
            .as_ref()
    }
}

/// The names of one file: its segments, its symbol table and, where present, DWARF (or,
/// for a stripped Go binary, its pclntab's source positions and inline trees).
pub struct ModuleSymbols {
    segments: Vec<Segment>,
    symbols: Vec<Symbol>,
    names: Names,
    dwarf: LazyDwarf,
    pclntab: Option<PcLnTab>,
    pub kind: SymbolKind,
}

impl ModuleSymbols {
    /// Opens the file's DWARF now (inline frames will be asked for): on a big binary it
    /// takes a while, better spent on a loading thread. Whether there is any.
    pub fn open_dwarf(&self) -> bool {
        self.dwarf.get().is_some()
    }

    /// Whether the file's DWARF was opened already.
    #[cfg(test)]
    pub(crate) fn dwarf_opened(&self) -> bool {
        matches!(self.dwarf.loader.get(), Some(Some(_)))
    }

    /// Reads an ELF file (executable or shared library).
    pub fn from_elf(path: &Path) -> Result<Self, String> {
        Self::from_files(&ModuleFiles::from(path.to_path_buf()))
    }

    /// Reads an ELF file with, where it has one, its separate debug file: the symbol table
    /// and DWARF a distribution stripped from it (perf names its frames from there).
    pub fn from_files(files: &ModuleFiles) -> Result<Self, String> {
        let path = files.binary.as_path();
        // Mapped, not read: only the headers and symbol tables are touched, where reading
        // a big binary whole (zeroing and filling megabytes of fresh pages) was most of the
        // time a native fold spent outside the kernel's kallsyms.
        let data = map_file(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let file = object::File::parse(&*data)
            .map_err(|e| format!("{}: not an ELF file: {e}", path.display()))?;
        let segments = file
            .segments()
            .filter_map(|s| {
                let (file_offset, file_size) = s.file_range();
                (file_size > 0).then_some(Segment {
                    file_offset,
                    file_size,
                    address: s.address(),
                })
            })
            .collect();
        let has_dwarf = file.section_by_name(".debug_info").is_some();
        let own = function_symbols(&file, Table::Static).filter(|(s, _)| !s.is_empty());
        let go = own.is_none() && linked_by_go(&file);
        drop(file);
        // A separate debug file: its code sections are empty (NOBITS), its symbols and
        // DWARF carry the binary's own addresses, so the binary's segments place them.
        // One that no longer reads leaves the binary's own names.
        let debug = files
            .debug
            .as_ref()
            .and_then(|d| Some((d, map_file(d).ok()?)))
            .and_then(|(d, debug_data)| {
                let debug_file = object::File::parse(&*debug_data).ok()?;
                let symbols = match own {
                    Some(_) => None,
                    None => function_symbols(&debug_file, Table::Static),
                }
                .filter(|(s, _)| !s.is_empty());
                let dwarf = debug_file.section_by_name(".debug_info").is_some();
                drop(debug_file);
                Some((d, debug_data, symbols, dwarf))
            });
        let mut dwarf_path = has_dwarf.then(|| path.to_path_buf());
        let mut table = own.map(|(symbols, range)| (symbols, range, None));
        if let Some((debug, debug_data, symbols, dwarf)) = debug {
            if dwarf_path.is_none() && dwarf {
                dwarf_path = Some(debug.clone());
            }
            if let Some((symbols, range)) = symbols {
                table = Some((symbols, range, Some(debug_data)));
            }
        }
        let mut pclntab = None;
        let (symbols, names) = match table {
            Some((symbols, (start, size), debug_data)) => (
                symbols,
                Names::Mapped {
                    file: debug_data.unwrap_or(data),
                    start: start as usize,
                    end: (start + size) as usize,
                },
            ),
            None => {
                let file = object::File::parse(&*data)
                    .map_err(|e| format!("{}: not an ELF file: {e}", path.display()))?;
                let dynamic = function_symbols(&file, Table::Dynamic);
                let dynamic_count = dynamic.as_ref().map_or(0, |(s, _)| s.len());
                // A stripped Go binary still names all its functions in its pclntab.
                if go {
                    if let Some(Ok(table)) = PcLnTab::from_elf(&file) {
                        if table.functions().len() > dynamic_count {
                            pclntab = Some(table);
                        }
                    }
                }
                drop(file);
                match (&pclntab, dynamic) {
                    (Some(table), _) => go_symbols(table),
                    (None, Some((symbols, (start, size)))) => (
                        symbols,
                        Names::Mapped {
                            file: data,
                            start: start as usize,
                            end: (start + size) as usize,
                        },
                    ),
                    (None, None) => (Vec::new(), Names::Owned(Vec::new())),
                }
            }
        };
        let kind = if dwarf_path.is_some() {
            SymbolKind::Dwarf
        } else if pclntab.is_some() {
            SymbolKind::Gopclntab
        } else {
            SymbolKind::Symtab
        };
        let dwarf = LazyDwarf {
            path: dwarf_path,
            loader: OnceCell::new(),
        };
        let mut module = Self::assemble(segments, symbols, names, dwarf, kind);
        module.pclntab = pclntab.filter(|_| kind == SymbolKind::Gopclntab);
        Ok(module)
    }

    /// Reads a devprof symbol table: lines `segment <file_offset> <file_size> <address>`
    /// and `symbol <address> <size> <name>` (hexadecimal numbers; names as in the file's
    /// symbol table, mangled), `#` comments. It is the same information `readelf -l` and
    /// `nm -S` print, which is how the committed test data is made.
    pub fn from_table(text: &str) -> Result<Self, String> {
        let hex = |s: Option<&str>, n: usize| -> Result<u64, String> {
            let s = s.ok_or_else(|| format!("line {n}: missing field"))?;
            u64::from_str_radix(s.trim_start_matches("0x"), 16)
                .map_err(|e| format!("line {n}: '{s}': {e}"))
        };
        let mut segments = Vec::new();
        let mut symbols = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.splitn(4, ' ');
            match parts.next() {
                Some("segment") => segments.push(Segment {
                    file_offset: hex(parts.next(), n)?,
                    file_size: hex(parts.next(), n)?,
                    address: hex(parts.next(), n)?,
                }),
                Some("symbol") => {
                    let address = hex(parts.next(), n)?;
                    let size = hex(parts.next(), n)?;
                    let name = parts
                        .next()
                        .ok_or_else(|| format!("line {n}: missing name"))?;
                    symbols.push((address, size, name));
                }
                Some(other) => return Err(format!("line {n}: unknown record '{other}'")),
                None => {}
            }
        }
        let (names, offsets) = Names::owned(symbols.iter().map(|(_, _, name)| *name));
        let symbols = symbols
            .iter()
            .zip(offsets)
            .map(|((address, size, _), name)| Symbol {
                address: *address,
                size: *size,
                name,
                binding: 0,
            })
            .collect();
        Ok(Self::assemble(
            segments,
            symbols,
            names,
            LazyDwarf::default(),
            SymbolKind::Table,
        ))
    }

    fn assemble(
        segments: Vec<Segment>,
        mut symbols: Vec<Symbol>,
        names: Names,
        dwarf: LazyDwarf,
        kind: SymbolKind,
    ) -> Self {
        // Sorted by address (a stable sort: aliases keep the table's order); of aliases,
        // the one perf names the address by: sized, then not weak, then global, then fewer
        // leading underscores, then the longest name (`__vdso_clock_gettime` over its weak
        // alias `clock_gettime`), the first listed among equals. Names are read for
        // aliases alone.
        symbols.sort_by_key(|s| s.address);
        let rank = |s: &Symbol| {
            let name = names.raw(s.name);
            let underscores = name.iter().take_while(|b| **b == b'_').count();
            (
                s.size == 0,
                s.binding,
                underscores,
                std::cmp::Reverse(name.len()),
            )
        };
        let symbols = symbols
            .chunk_by(|a, b| a.address == b.address)
            .map(|aliases| match aliases {
                [only] => *only,
                _ => *aliases
                    .iter()
                    .min_by_key(|s| rank(s))
                    .expect("a group has a symbol"),
            })
            .collect();
        ModuleSymbols {
            segments,
            symbols,
            names,
            dwarf,
            pclntab: None,
            kind,
        }
    }

    /// The ELF address of a file offset, through the segment that loads it.
    pub fn address_of_offset(&self, file_offset: u64) -> Option<u64> {
        // A file's segments may claim ranges past 2^64: they end there, and load nothing
        // past it.
        self.segments
            .iter()
            .find(|s| {
                s.file_offset <= file_offset
                    && file_offset < s.file_offset.saturating_add(s.file_size)
            })
            .and_then(|s| (file_offset - s.file_offset).checked_add(s.address))
    }

    /// The frames at an ELF address, innermost (inlined callee) first, demangled; empty
    /// when nothing names it. A stripped Go binary's frames carry their place,
    /// `main.mix (main.go:9)`, from its pclntab.
    pub fn frames_at(&self, address: u64) -> Vec<String> {
        if let Some(Ok(frames)) = self.pclntab.as_ref().and_then(|t| t.frames(address, true)) {
            return frames.iter().map(go_frame_name).collect();
        }
        let symbol = self.symbol_at(address);
        let mut frames: Vec<String> = Vec::new();
        // addr2line looks up `[address, address + 1)`, which overflows at the top of the
        // address space (a debug build panics there); no code lies in its last byte.
        if let Some(loader) = self.dwarf.get().filter(|_| address < u64::MAX) {
            if let Ok(mut iter) = loader.find_frames(address) {
                while let Ok(Some(frame)) = iter.next() {
                    if let Some(name) = frame.function.as_ref().and_then(|f| f.raw_name().ok()) {
                        frames.push(name.into_owned());
                    }
                }
            }
        }
        // The outermost frame is the symbol itself: its symbol-table name carries the full
        // path where DWARF may only have the short name.
        let symbol = symbol.map(|sym| self.names.get(sym.name));
        match (frames.last_mut(), symbol) {
            (Some(last), Some(name)) if !is_mangled(last) && is_mangled(&name) => {
                *last = name.into_owned()
            }
            (None, Some(name)) => frames.push(name.into_owned()),
            _ => {}
        }
        frames
            .iter()
            .map(|f| clean_name(&demangle_frame(f)))
            .collect()
    }

    /// The frames at an ELF address as perf's `--inline` output names a symbol, outermost
    /// first and joined by `->` (`caller->inlined callee`); None when nothing names it.
    pub fn inline_chain(&self, address: u64) -> Option<String> {
        let mut frames = self.frames_at(address);
        frames.reverse();
        (!frames.is_empty()).then(|| frames.join("->"))
    }

    /// The name of the symbol-table function containing an ELF address, demangled (what
    /// `perf script --no-inline` prints).
    pub fn function_at(&self, address: u64) -> Option<String> {
        self.symbol_at(address)
            .map(|sym| clean_name(&demangle_frame(&self.names.get(sym.name))))
    }

    fn symbol_at(&self, address: u64) -> Option<&Symbol> {
        let i = self
            .symbols
            .partition_point(|s| s.address <= address)
            .checked_sub(1)?;
        let sym = &self.symbols[i];
        let end = if sym.size > 0 {
            // A symbol's size is the file's number: it ends at 2^64 at the latest.
            sym.address.saturating_add(sym.size)
        } else {
            // Unsized (hand-written assembly): up to the next symbol.
            self.symbols
                .get(i + 1)
                .map(|n| n.address)
                .unwrap_or(u64::MAX)
        };
        (address < end).then_some(sym)
    }

    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }
}

/// A file mapped read-only: devprof's symbol cache (whose files are written once, under
/// new names) or a `--symfs` tree the user names. A file of that tree rewritten in place
/// during the fold can end it with SIGBUS, as with the DWARF loader's own mapping.
fn map_file(path: &Path) -> std::io::Result<memmap2::Mmap> {
    let file = std::fs::File::open(path)?;
    // SAFETY: read-only, of a file devprof does not modify while it is mapped (see
    // above); the DWARF loader maps the same files the same way.
    unsafe { memmap2::Mmap::map(&file) }
}

/// The files one module's names come from: the binary (or library) and, where it was
/// stripped into one, its separate debug file (`debugfile::find`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleFiles {
    pub binary: PathBuf,
    pub debug: Option<PathBuf>,
}

impl From<PathBuf> for ModuleFiles {
    fn from(binary: PathBuf) -> Self {
        ModuleFiles {
            binary,
            debug: None,
        }
    }
}

/// The functions of a Go pclntab as sized symbols, with their names.
fn go_symbols(table: &PcLnTab) -> (Vec<Symbol>, Names) {
    let functions = table.functions();
    let (names, offsets) = Names::owned(functions.iter().map(|f| &*f.name));
    let symbols = functions
        .iter()
        .zip(offsets)
        .map(|(f, name)| Symbol {
            address: f.entry,
            size: f.end - f.entry,
            name,
            binding: 0,
        })
        .collect();
    (symbols, names)
}

/// A Go frame as devprof names it: `main.mix (main.go:9)`, the file without its
/// directories as py-spy's frames (the package path is in the function's name).
fn go_frame_name(frame: &GoFrame) -> String {
    let name = clean_name(&frame.function);
    match &frame.place {
        Some((file, line)) => format!("{name} ({}:{line})", clean_name(basename(file))),
        None => name,
    }
}

fn is_mangled(name: &str) -> bool {
    name.starts_with("_ZN") || name.starts_with("_R") || name.starts_with("_Z")
}

/// A name safe in folded text: `;` separates frames there.
fn clean_name(name: &str) -> String {
    name.replace(';', ":")
}

/// The file name of a path.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn devprof_symbolize_probe_function(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(31).rotate_left(7))
    }

    /// This test binary's own executable mapping from /proc/self/maps.
    fn own_mapping_of(address: u64) -> (u64, u64, u64, String) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let (s, e) = parts[0].split_once('-').unwrap();
            let (s, e) = (
                u64::from_str_radix(s, 16).unwrap(),
                u64::from_str_radix(e, 16).unwrap(),
            );
            if s <= address && address < e {
                return (
                    s,
                    e,
                    u64::from_str_radix(parts[2], 16).unwrap(),
                    parts[5..].join(" "),
                );
            }
        }
        panic!("no mapping for {address:#x}");
    }

    #[test]
    fn names_a_function_of_this_test_binary_through_its_dwarf() {
        let f = devprof_symbolize_probe_function as fn(u64) -> u64 as usize as u64;
        assert_eq!(devprof_symbolize_probe_function(1), 31u64.rotate_left(7));
        let (start, _, offset, path) = own_mapping_of(f);
        let module = ModuleSymbols::from_elf(Path::new(&path)).unwrap();
        assert_eq!(
            module.kind,
            SymbolKind::Dwarf,
            "test binaries carry debug info"
        );
        // Opened when first asked for: a fold without inline frames never pays for it.
        assert!(module.dwarf.loader.get().is_none());
        assert!(module.function_at(module.symbols[0].address).is_some());
        assert!(module.dwarf.loader.get().is_none());
        // A return address inside the function: a few bytes past its start.
        let elf_address = module.address_of_offset(f + 4 - start + offset).unwrap();
        let frames = module.frames_at(elf_address);
        assert!(matches!(module.dwarf.loader.get(), Some(Some(_))));
        assert!(
            frames
                .last()
                .is_some_and(|f| f.ends_with("devprof_symbolize_probe_function")),
            "{frames:?}"
        );
        assert!(
            frames.iter().all(|f| !f.starts_with("_ZN")),
            "demangled: {frames:?}"
        );
    }

    #[test]
    fn symbol_table_lookup_stays_inside_symbol_extents() {
        let table = "# test\nsegment 0 1000 400000\nsymbol 400100 20 _ZN4demo5first17h0123456789abcdefE\nsymbol 400200 0 asm_entry\nsymbol 400300 10 last\n";
        let m = ModuleSymbols::from_table(table).unwrap();
        assert_eq!(m.address_of_offset(0x110), Some(0x400110));
        assert_eq!(m.address_of_offset(0x1000), None);
        assert_eq!(m.frames_at(0x400110), vec!["demo::first"]);
        assert!(m.frames_at(0x400130).is_empty(), "past the end of 'first'");
        assert_eq!(
            m.frames_at(0x4002f0),
            vec!["asm_entry"],
            "unsized: up to the next symbol"
        );
        assert!(m.frames_at(0x4000ff).is_empty());
        assert!(m.frames_at(0x400310).is_empty());
        assert!(ModuleSymbols::from_table("bogus 1 2\n").is_err());
    }

    #[test]
    fn stripped_go_binary_is_named_from_its_pclntab() {
        let dir = format!("{}/../../tests/data/go", env!("CARGO_MANIFEST_DIR"));
        let module = ModuleSymbols::from_elf(Path::new(&format!("{dir}/tiny-stripped"))).unwrap();
        assert_eq!(module.kind, SymbolKind::Gopclntab);
        let nm = std::fs::read_to_string(format!("{dir}/tiny-full.nm")).unwrap();
        let spin = nm
            .lines()
            .find_map(|l| l.strip_suffix(" main.spin"))
            .map(|a| u64::from_str_radix(a, 16).unwrap())
            .unwrap();
        // perf prints offsets in the file; the text segment of a Go executable is at 0x400000.
        let address = module.address_of_offset(spin - 0x400000 + 8).unwrap();
        assert_eq!(module.function_at(address).as_deref(), Some("main.spin"));
    }

    /// The names `object`'s generic symbol reader gives a file's addresses, with aliases
    /// chosen as perf chooses them: how the symbolizer read tables before it read the raw
    /// entries, kept as the reference.
    fn generic_reader_names(path: &Path, dynamic: bool) -> Vec<(u64, String)> {
        use object::{ObjectSymbol, ObjectSymbolTable};
        let data = std::fs::read(path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let table = if dynamic {
            file.dynamic_symbol_table()
        } else {
            file.symbol_table()
        };
        let mut symbols: Vec<(u64, u64, u8, String)> = table
            .unwrap()
            .symbols()
            .filter(|sym| {
                sym.kind() == object::SymbolKind::Text && sym.is_definition() && sym.address() != 0
            })
            .filter_map(|sym| {
                let name = sym.name().ok().filter(|n| !n.is_empty())?;
                let binding = if sym.is_weak() {
                    2
                } else if sym.is_global() {
                    0
                } else {
                    1
                };
                Some((sym.address(), sym.size(), binding, name.to_string()))
            })
            .collect();
        let underscores = |n: &str| n.bytes().take_while(|b| *b == b'_').count();
        symbols.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then((b.1 > 0).cmp(&(a.1 > 0)))
                .then(a.2.cmp(&b.2))
                .then(underscores(&a.3).cmp(&underscores(&b.3)))
                .then(b.3.len().cmp(&a.3.len()))
        });
        symbols.dedup_by_key(|s| s.0);
        symbols.into_iter().map(|(a, _, _, n)| (a, n)).collect()
    }

    /// The file this test process maps `needle` from (a shared library of the host).
    fn mapped_library(needle: &str) -> PathBuf {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains(needle))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("this test maps no {needle}"))
    }

    /// Reading the raw symbol entries (names left in the file until asked for) names every
    /// function as the generic reader did: this test binary's .symtab (thousands of Rust
    /// functions and their aliases) and the host libc's .dynsym (weak aliases, IFUNCs).
    #[test]
    fn raw_symbol_tables_name_every_function_as_the_generic_reader_did() {
        let exe = std::env::current_exe().unwrap();
        let libc = mapped_library("libc.so");
        for path in [exe, libc] {
            // The table the module is named from: .symtab where the file keeps one.
            let dynamic = {
                let data = std::fs::read(&path).unwrap();
                let file = object::File::parse(&*data).unwrap();
                {
                    use object::ObjectSymbolTable;
                    file.symbol_table()
                        .is_none_or(|t| t.symbols().next().is_none())
                }
            };
            let module = ModuleSymbols::from_elf(&path).unwrap();
            let reference = generic_reader_names(&path, dynamic);
            assert!(
                reference.len() > 500,
                "{}: {}",
                path.display(),
                reference.len()
            );
            assert_eq!(module.symbol_count(), reference.len(), "{}", path.display());
            for (address, name) in &reference {
                let want = clean_name(&demangle_frame(name));
                assert_eq!(
                    module.function_at(*address).as_deref(),
                    Some(want.as_str()),
                    "{} at {address:#x}",
                    path.display()
                );
            }
        }
    }

    /// The file offset of an ELF address, through the module's segments.
    fn offset_of(module: &ModuleSymbols, address: u64) -> u64 {
        let s = module
            .segments
            .iter()
            .find(|s| s.address <= address && address < s.address + s.file_size)
            .unwrap();
        address - s.address + s.file_offset
    }

    #[test]
    fn stripped_go_frames_carry_places_and_inlined_calls_with_names_alone_kept() {
        let dir = format!("{}/../../tests/data/go", env!("CARGO_MANIFEST_DIR"));
        for (binary, expectations) in [
            ("tiny-stripped", "tiny.addr2line"),
            ("tiny-pie-stripped", "tiny-pie.addr2line"),
        ] {
            let module = ModuleSymbols::from_elf(Path::new(&format!("{dir}/{binary}"))).unwrap();
            assert_eq!(module.kind, SymbolKind::Gopclntab, "{binary}");
            let expected = crate::gopclntab::tests::addr2line_expectations(expectations);
            let (address, want) = expected
                .iter()
                .find(|(_, f)| f.len() == 2 && f[0].0 == "main.mix")
                .unwrap_or_else(|| panic!("{expectations}: main.mix inlined"));
            // As perf gives it: an offset in the file, mapped back through the segments.
            let elf = module
                .address_of_offset(offset_of(&module, *address))
                .unwrap();
            assert_eq!(elf, *address, "{binary}");
            let named: Vec<String> = want
                .iter()
                .map(|(f, file, line)| format!("{f} ({}:{line})", basename(file)))
                .collect();
            assert_eq!(module.frames_at(elf), named, "{binary}");
            assert_eq!(
                module.inline_chain(elf),
                Some(format!("{}->{}", named[1], named[0]))
            );
            // Names alone, as without --inline.
            assert_eq!(module.function_at(elf).as_deref(), Some("main.spin"));
        }
    }

    #[test]
    fn a_symbol_or_segment_reaching_past_2_pow_64_ends_there_not_an_overflow() {
        let module = ModuleSymbols::from_table(
            "segment fffffffffffff000 2000 fffffffffffff000\n\
             segment 0 1000 ffffffffffffff00\n\
             symbol fffffffffffffff0 100 huge\n",
        )
        .unwrap();
        assert_eq!(module.function_at(u64::MAX - 1).as_deref(), Some("huge"));
        assert_eq!(module.function_at(0x10), None);
        assert_eq!(
            module.address_of_offset(0xffff_ffff_ffff_f010),
            Some(0xffff_ffff_ffff_f010)
        );
        // In the second segment, at an address past 2^64: no address.
        assert_eq!(module.address_of_offset(0x200), None);
        assert_eq!(module.address_of_offset(0x10), Some(0xffff_ffff_ffff_ff10));
    }

    #[test]
    fn dwarf_is_not_asked_about_the_last_address_of_the_address_space() {
        // Found by fuzzing (fuzz/fuzz_targets/elf_symbols.rs): addr2line 0.25 adds 1 to
        // the address it looks up.
        let path = format!(
            "{}/../../tests/data/native/host-dwarf-loop.root/tmp/devprof-dwarf-golden/dwarf-loop",
            env!("CARGO_MANIFEST_DIR")
        );
        let module = ModuleSymbols::from_elf(Path::new(&path)).unwrap();
        assert!(module.open_dwarf());
        assert!(module.frames_at(u64::MAX).is_empty());
        assert_eq!(module.inline_chain(u64::MAX), None);
    }
}
