//! The symbolizer: addresses of one file (an executable or shared library) to function
//! names. An offset in the mapped file is turned, through the file's PT_LOAD segments, into
//! the address the ELF file itself uses; that is looked up in the DWARF line tables (with
//! inlined frames) where the file has them, in the symbol table otherwise (only inside a
//! symbol's extent: an address past the end of the nearest symbol is not given that
//! symbol's name), or, for a stripped Go binary, in its pclntab (names, and for
//! `frames_at` also file:line and inlined calls). Names are demangled (Rust and C++). Heap profiles use it today; every
//! path that names frames itself should use this one.

use super::demangle::demangle_frame;
use super::gopclntab::{GoFrame, PcLnTab};
use object::{Object, ObjectSegment, ObjectSymbol, ObjectSymbolTable};
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

#[derive(Debug, Clone, PartialEq, Eq)]
struct Symbol {
    address: u64,
    size: u64,
    name: String,
    /// How perf ranks the symbol's binding among aliases: global 0, local 1, weak 2.
    binding: u8,
}

/// The binding rank of `Symbol` for an ELF symbol.
fn binding_rank(sym: &object::Symbol<'_, '_>) -> u8 {
    if sym.is_weak() {
        2
    } else if sym.is_global() {
        0
    } else {
        1
    }
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
    dwarf: LazyDwarf,
    pclntab: Option<PcLnTab>,
    pub kind: SymbolKind,
}

impl ModuleSymbols {
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
        let text_symbols = |table: object::SymbolTable<'_, '_>| -> Vec<Symbol> {
            table
                .symbols()
                .filter(|sym| {
                    sym.kind() == object::SymbolKind::Text
                        && sym.is_definition()
                        && sym.address() != 0
                })
                .filter_map(|sym| {
                    let name = sym.name().ok().filter(|n| !n.is_empty())?;
                    Some(Symbol {
                        address: sym.address(),
                        size: sym.size(),
                        name: name.to_string(),
                        binding: binding_rank(&sym),
                    })
                })
                .collect()
        };
        let mut symbols = file.symbol_table().map(text_symbols).unwrap_or_default();
        let mut has_dwarf = file.section_by_name(".debug_info").is_some();
        let mut dwarf_path = path.to_path_buf();
        // A separate debug file: its code sections are empty (NOBITS), its symbols and
        // DWARF carry the binary's own addresses, so the binary's segments place them.
        // One that no longer reads leaves the binary's own names.
        let debug_data = files
            .debug
            .as_ref()
            .and_then(|d| Some((d, map_file(d).ok()?)));
        let debug_elf = debug_data
            .as_ref()
            .and_then(|(d, data)| Some((*d, object::File::parse(&**data).ok()?)));
        if let Some((debug, debug_file)) = debug_elf {
            if symbols.is_empty() {
                symbols = debug_file
                    .symbol_table()
                    .map(text_symbols)
                    .unwrap_or_default();
            }
            if !has_dwarf && debug_file.section_by_name(".debug_info").is_some() {
                has_dwarf = true;
                dwarf_path = debug.clone();
            }
        }
        let mut pclntab = None;
        if symbols.is_empty() {
            symbols = file
                .dynamic_symbol_table()
                .map(text_symbols)
                .unwrap_or_default();
            // A stripped Go binary still names all its functions in its pclntab.
            if let Some(Ok(table)) = PcLnTab::from_elf(&file) {
                if table.functions().len() > symbols.len() {
                    symbols = go_symbols(&table);
                    pclntab = Some(table);
                }
            }
        }
        drop(file);
        drop(data);
        let dwarf = LazyDwarf {
            path: has_dwarf.then_some(dwarf_path),
            loader: OnceCell::new(),
        };
        let kind = if has_dwarf {
            SymbolKind::Dwarf
        } else if pclntab.is_some() {
            SymbolKind::Gopclntab
        } else {
            SymbolKind::Symtab
        };
        let mut module = Self::assemble(segments, symbols, dwarf, kind);
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
                Some("symbol") => symbols.push(Symbol {
                    address: hex(parts.next(), n)?,
                    size: hex(parts.next(), n)?,
                    name: parts
                        .next()
                        .ok_or_else(|| format!("line {n}: missing name"))?
                        .to_string(),
                    binding: 0,
                }),
                Some(other) => return Err(format!("line {n}: unknown record '{other}'")),
                None => {}
            }
        }
        Ok(Self::assemble(
            segments,
            symbols,
            LazyDwarf::default(),
            SymbolKind::Table,
        ))
    }

    fn assemble(
        segments: Vec<Segment>,
        mut symbols: Vec<Symbol>,
        dwarf: LazyDwarf,
        kind: SymbolKind,
    ) -> Self {
        // Sorted by address; among aliases the one perf names the address by: sized, then
        // not weak, then global, then fewer leading underscores, then the longest name
        // (`__vdso_clock_gettime` over its weak alias `clock_gettime`).
        let underscores = |s: &Symbol| s.name.bytes().take_while(|b| *b == b'_').count();
        symbols.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then((b.size > 0).cmp(&(a.size > 0)))
                .then(a.binding.cmp(&b.binding))
                .then(underscores(a).cmp(&underscores(b)))
                .then(b.name.len().cmp(&a.name.len()))
        });
        symbols.dedup_by_key(|s| s.address);
        ModuleSymbols {
            segments,
            symbols,
            dwarf,
            pclntab: None,
            kind,
        }
    }

    /// The ELF address of a file offset, through the segment that loads it.
    pub fn address_of_offset(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| s.file_offset <= file_offset && file_offset < s.file_offset + s.file_size)
            .map(|s| file_offset - s.file_offset + s.address)
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
        if let Some(loader) = self.dwarf.get() {
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
        match (frames.last_mut(), symbol) {
            (Some(last), Some(sym)) if !is_mangled(last) && is_mangled(&sym.name) => {
                *last = sym.name.clone()
            }
            (None, Some(sym)) => frames.push(sym.name.clone()),
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
            .map(|sym| clean_name(&demangle_frame(&sym.name)))
    }

    fn symbol_at(&self, address: u64) -> Option<&Symbol> {
        let i = self
            .symbols
            .partition_point(|s| s.address <= address)
            .checked_sub(1)?;
        let sym = &self.symbols[i];
        let end = if sym.size > 0 {
            sym.address + sym.size
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

/// The modules `load_all` read, and the error of each file that did not read.
pub struct Loaded<K> {
    pub modules: Vec<(K, ModuleSymbols)>,
    pub failed: Vec<(K, String)>,
}

/// Reads every `(name, file)` pair's symbols, several files at once; with `dwarf` (inline
/// frames will be asked for) also opens their DWARF, which on a big binary takes a while.
pub fn load_all<K: Send, F: Into<ModuleFiles>>(files: Vec<(K, F)>, dwarf: bool) -> Loaded<K> {
    let files: Vec<(K, ModuleFiles)> = files.into_iter().map(|(k, f)| (k, f.into())).collect();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let queue = std::sync::Mutex::new(files.into_iter());
    let results = std::sync::Mutex::new(Loaded {
        modules: Vec::new(),
        failed: Vec::new(),
    });
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let next = queue.lock().expect("module queue").next();
                let Some((key, path)) = next else { break };
                let read = ModuleSymbols::from_files(&path);
                if let (true, Ok(module)) = (dwarf, &read) {
                    module.dwarf.get();
                }
                let mut results = results.lock().expect("module results");
                match read {
                    Ok(module) => results.modules.push((key, module)),
                    Err(e) => results.failed.push((key, e)),
                }
            });
        }
    });
    results.into_inner().expect("module results")
}

/// The functions of a Go pclntab as sized symbols.
fn go_symbols(table: &PcLnTab) -> Vec<Symbol> {
    table
        .functions()
        .iter()
        .map(|f| Symbol {
            address: f.entry,
            size: f.end - f.entry,
            name: f.name.to_string(),
            binding: 0,
        })
        .collect()
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

    #[test]
    fn load_all_reads_every_file_and_names_each_that_failed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/go");
        let files = vec![
            ("a", dir.join("tiny-stripped")),
            ("b", dir.join("tiny-pie-stripped")),
            ("c", dir.join("no-such-file")),
            ("d", dir.join("tiny-full.nm")),
            // This test's own executable: a debug build, with DWARF.
            ("e", std::env::current_exe().unwrap()),
        ];
        let loaded = load_all(files, true);
        let mut read: Vec<_> = loaded.modules.iter().map(|(k, m)| (*k, m.kind)).collect();
        read.sort_by_key(|(k, _)| *k);
        assert_eq!(
            read,
            [
                ("a", SymbolKind::Gopclntab),
                ("b", SymbolKind::Gopclntab),
                ("e", SymbolKind::Dwarf)
            ]
        );
        // Asked for inline frames: the DWARF is opened on the loading threads.
        let (_, own) = loaded.modules.iter().find(|(k, _)| *k == "e").unwrap();
        assert!(matches!(own.dwarf.loader.get(), Some(Some(_))));
        let mut failed: Vec<_> = loaded
            .failed
            .iter()
            .map(|(k, e)| (*k, e.as_str()))
            .collect();
        failed.sort();
        assert_eq!(failed.len(), 2);
        assert!(
            failed[0].0 == "c" && failed[0].1.contains("no-such-file"),
            "{failed:?}"
        );
        assert!(
            failed[1].0 == "d" && failed[1].1.contains("not an ELF file"),
            "{failed:?}"
        );
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
}
