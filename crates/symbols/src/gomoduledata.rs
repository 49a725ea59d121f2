//! What a Go binary's pclntab needs from the rest of its ELF file: the runtime's
//! `moduledata` record, found without symbols by the pointer to the pclntab that is its
//! first field, and through it `moduledata.gofunc` (the `go:func.*` data whose offsets the
//! Go 1.18+ function data are; stripped binaries do not name it). Position-independent
//! builds may leave pointers zero in the file for the dynamic loader to fill: their
//! values are the addends of the RELATIVE relocations, which are read where the file
//! has zero.

use super::goread::Layout;
use super::gosource::GoFuncData;
use object::{Object, ObjectSection, RelocationTarget};
use std::collections::HashMap;

/// The field of `moduledata` holding `gofunc`, in pointer-sized words: 18 words of slices
/// and 19 of addresses precede it in Go 1.18/1.19 (runtime/symtab.go); 1.20 added
/// `covctrs, ecovctrs` before it (unchanged through 1.25).
fn gofunc_field(layout: Layout) -> Option<u64> {
    match layout {
        Layout::Go118 => Some(38),
        Layout::Go120 => Some(40),
        Layout::Go12 | Layout::Go116 => None,
    }
}

/// An ELF file's loaded bytes by address, with relocated words.
pub struct Image<'d, 'f> {
    file: &'f object::File<'d>,
    /// Address -> value, for the words a RELATIVE relocation fills.
    relocated: HashMap<u64, u64>,
    big: bool,
    ptr: u64,
}

impl<'d, 'f> Image<'d, 'f> {
    pub fn new(file: &'f object::File<'d>) -> Self {
        let relocated = file
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .filter(|(_, r)| matches!(r.target(), RelocationTarget::Absolute) && r.addend() > 0)
            .map(|(at, r)| (at, r.addend() as u64))
            .collect();
        Image {
            file,
            relocated,
            big: !file.is_little_endian(),
            ptr: if file.is_64() { 8 } else { 4 },
        }
    }

    /// A word of the file's byte order.
    fn decode(&self, raw: &[u8]) -> u64 {
        let fold = |v: u64, b: &u8| v << 8 | u64::from(*b);
        if self.big {
            raw.iter().fold(0, fold)
        } else {
            raw.iter().rev().fold(0, fold)
        }
    }

    /// The bytes from `address` to the end of the section holding it.
    fn rest_of_section(&self, address: u64) -> Option<&'d [u8]> {
        self.file.sections().find_map(|s| {
            let start = s.address();
            if address < start || address >= start.checked_add(s.size())? {
                return None;
            }
            s.data().ok()?.get(usize::try_from(address - start).ok()?..)
        })
    }

    /// The pointer-sized word at `address`, as loaded (a relocation's value where the
    /// file has zero).
    fn word(&self, address: u64) -> Option<u64> {
        let bytes = self.rest_of_section(address)?;
        match self.decode(bytes.get(..self.ptr as usize)?) {
            0 => self.relocated.get(&address).copied().or(Some(0)),
            v => Some(v),
        }
    }

    /// The text start of the Go 1.18+ pclntab at `address` (bytes `header`) when the file
    /// leaves it zero: the relocation's value, else the `.text` section's address.
    pub fn text_start(&self, address: u64, header: &[u8]) -> Option<u64> {
        let ptr = u64::from(*header.get(7)?);
        self.relocated
            .get(&address.checked_add(8 + 2 * ptr)?)
            .copied()
            .or_else(|| self.file.section_by_name(".text").map(|s| s.address()))
    }

    /// The `go:func.*` data of the module whose pclntab is at `pclntab`: moduledata is
    /// the record whose first word points at the pclntab and whose second (the function
    /// name table's slice) at the pclntab plus `funcname_offset`; `gofunc` lies at or
    /// after its `rodata` field. None when no such record is found.
    pub fn gofunc(&self, pclntab: u64, layout: Layout, funcname_offset: u64) -> Option<GoFuncData> {
        let field = gofunc_field(layout)?;
        let funcnametab = pclntab.checked_add(funcname_offset)?;
        self.pointers_to(pclntab).into_iter().find_map(|m| {
            if self.word(m.checked_add(self.ptr)?)? != funcnametab {
                return None;
            }
            let gofunc = self.word(m.checked_add(field * self.ptr)?)?;
            let rodata = self.word(m.checked_add((field - 1) * self.ptr)?)?;
            if gofunc < rodata || gofunc >= pclntab {
                return None;
            }
            Some(GoFuncData {
                address: gofunc,
                bytes: self.rest_of_section(gofunc)?.to_vec(),
            })
        })
    }

    /// Addresses of aligned words in the writable data that hold `target`, in the file or
    /// through a relocation.
    fn pointers_to(&self, target: u64) -> Vec<u64> {
        let mut found: Vec<u64> = self
            .relocated
            .iter()
            .filter(|(_, v)| **v == target)
            .map(|(at, _)| *at)
            .collect();
        let n = self.ptr as usize;
        for name in [".noptrdata", ".data", ".data.rel.ro"] {
            let Some(section) = self.file.section_by_name(name) else {
                continue;
            };
            let Ok(data) = section.data() else {
                continue;
            };
            for (i, chunk) in data.chunks_exact(n).enumerate() {
                if self.decode(chunk) == target {
                    found.push(section.address() + (i * n) as u64);
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }
}
