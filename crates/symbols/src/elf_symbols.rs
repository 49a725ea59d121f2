//! A module's function symbols read straight from an ELF file's symbol-table entries,
//! their names left where they lie in the mapped file until a frame asks for one.

use object::read::elf::{ElfFile, FileHeader, SectionHeader, Sym};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Symbol {
    pub address: u64,
    pub size: u64,
    /// Where its name starts in the module's `Names`.
    pub name: u32,
    /// How perf ranks the symbol's binding among aliases: global 0, local 1, weak 2.
    pub binding: u8,
}

/// The binding rank of `Symbol` for an ELF symbol's `st_bind`.
fn binding_rank(bind: u8) -> u8 {
    match bind {
        object::elf::STB_WEAK => 2,
        object::elf::STB_LOCAL => 1,
        _ => 0,
    }
}

/// Where a module's symbol names lie, each ended by a NUL: an ELF string table in the
/// mapped file, read only for the functions a profile names (a big library lists tens of
/// thousands, and copying every name out was most of a native fold's time in its
/// symbols), or names held in memory (a table file, Go's pclntab).
pub(crate) enum Names {
    Mapped {
        file: memmap2::Mmap,
        start: usize,
        end: usize,
    },
    Owned(Vec<u8>),
}

impl Names {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Names::Mapped { file, start, end } => file.get(*start..*end).unwrap_or_default(),
            Names::Owned(bytes) => bytes,
        }
    }

    /// The name at `offset`, up to its NUL (or the table's end).
    pub fn raw(&self, offset: u32) -> &[u8] {
        let rest = self.bytes().get(offset as usize..).unwrap_or_default();
        &rest[..memchr::memchr(0, rest).unwrap_or(rest.len())]
    }

    pub fn get(&self, offset: u32) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.raw(offset))
    }

    /// Names held in memory, and where each starts.
    pub fn owned<'a>(names: impl Iterator<Item = &'a str>) -> (Names, Vec<u32>) {
        let mut bytes = Vec::new();
        let offsets = names
            .map(|name| {
                let at = bytes.len() as u32;
                bytes.extend_from_slice(name.as_bytes());
                bytes.push(0);
                at
            })
            .collect();
        (Names::Owned(bytes), offsets)
    }
}

/// Which of an ELF file's symbol tables.
#[derive(Clone, Copy)]
pub(crate) enum Table {
    Static,
    Dynamic,
}

/// The defined function symbols of one of an ELF file's symbol tables, and the byte range
/// of the file its names lie in (their offsets are into it); None where the file has no
/// such table. The symbols `object`'s generic reader gives as defined text with an
/// address and a name (and those whose name is no UTF-8 or runs to the table's end, which
/// it skips and a frame is named by lossily), read from the raw entries: that reader finds
/// each name's end on the way, which is what a native fold of a big library spent its
/// symbols' time on.
pub(crate) fn function_symbols(
    file: &object::File<'_>,
    table: Table,
) -> Option<(Vec<Symbol>, (u64, u64))> {
    match file {
        object::File::Elf32(elf) => elf_function_symbols(elf, table),
        object::File::Elf64(elf) => elf_function_symbols(elf, table),
        _ => None,
    }
}

fn elf_function_symbols<Elf: FileHeader<Endian = object::Endianness>>(
    elf: &ElfFile<'_, Elf>,
    table: Table,
) -> Option<(Vec<Symbol>, (u64, u64))> {
    let endian = elf.endian();
    let symtab = match table {
        Table::Static => elf.elf_symbol_table(),
        Table::Dynamic => elf.elf_dynamic_symbol_table(),
    };
    if symtab.is_empty() {
        return None;
    }
    let strings = elf
        .elf_section_table()
        .section(symtab.string_section())
        .ok()?
        .file_range(endian)?;
    let names = elf
        .data()
        .get(strings.0 as usize..)
        .and_then(|rest| rest.get(..strings.1 as usize))?;
    let mut symbols = Vec::with_capacity(symtab.symbols().len());
    let functions = symtab
        .symbols()
        .iter()
        // Index 0 is the null symbol.
        .skip(1)
        .filter(|sym| {
            let name = sym.st_name(endian);
            // STT_FUNC alone: what the generic reader calls text (FUNC, GNU_IFUNC) and a
            // definition (FUNC, OBJECT, sized NOTYPE) at once.
            sym.st_type() == object::elf::STT_FUNC
                && sym.is_definition(endian)
                && sym.st_value(endian).into() != 0
                && names.get(name as usize).is_some_and(|first| *first != 0)
        })
        .map(|sym| Symbol {
            address: sym.st_value(endian).into(),
            size: sym.st_size(endian).into(),
            name: sym.st_name(endian),
            binding: binding_rank(sym.st_bind()),
        });
    symbols.extend(functions);
    Some((symbols, strings))
}
