//! Source positions of Go code from its pclntab: for a pc, the file and line (the
//! per-function pcfile/pcln tables) and the calls the compiler inlined there (the inline
//! tree, FUNCDATA_InlTree, indexed by PCDATA_InlTreeIndex), as the Go runtime's own
//! tracebacks expand them. Layouts: Go 1.16+ for file:line; the inline tree for Go 1.18+,
//! whose function data are offsets from `moduledata.gofunc` (found by `gomoduledata`).
//! Pure: works on bytes; bounds-checked, a corrupt table gives an error.

use super::goread::{Layout, PclnError, Reader};

/// `_PCDATA_InlTreeIndex` and `_FUNCDATA_InlTree` (runtime/symtab.go, unchanged since 1.12).
const PCDATA_INL_TREE_INDEX: u64 = 2;
const FUNCDATA_INL_TREE: u64 = 3;
/// Deeper inline chains than this are not real (the compiler's budget stops far sooner).
const MAX_INLINE_DEPTH: usize = 256;

/// One frame at a pc: the function and, where the tables say, its file and line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFrame {
    pub function: String,
    pub place: Option<(String, u32)>,
}

/// Where the fields of a `_func` record and an inline-tree entry are, by layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    pcfile: u64,
    pcln: u64,
    npcdata: u64,
    cu_offset: u64,
    nfuncdata: u64,
    /// Size of the fixed part, after which come the pcdata and funcdata offsets.
    size: u64,
    /// Inline-tree entries: their size and where their name and parent pc are.
    inl_size: u64,
    inl_name: u64,
    inl_parent_pc: u64,
}

impl Shape {
    fn of(layout: Layout, ptr: u64) -> Option<Self> {
        match layout {
            Layout::Go12 => None,
            // entry is a pointer; function data are absolute pointers (no tree read).
            Layout::Go116 => Some(Shape {
                pcfile: ptr + 16,
                pcln: ptr + 20,
                npcdata: ptr + 24,
                cu_offset: ptr + 28,
                nfuncdata: ptr + 35,
                size: ptr + 36,
                inl_size: 0,
                inl_name: 0,
                inl_parent_pc: 0,
            }),
            // inlinedCall{parent int16, funcID, _ byte, file, line, func_, parentPc int32}
            Layout::Go118 => Some(Shape {
                pcfile: 20,
                pcln: 24,
                npcdata: 28,
                cu_offset: 32,
                nfuncdata: 39,
                size: 40,
                inl_size: 20,
                inl_name: 12,
                inl_parent_pc: 16,
            }),
            // _func gained startLine; inlinedCall{funcID, _ [3]byte, nameOff, parentPc, startLine}
            Layout::Go120 => Some(Shape {
                pcfile: 20,
                pcln: 24,
                npcdata: 28,
                cu_offset: 32,
                nfuncdata: 43,
                size: 44,
                inl_size: 16,
                inl_name: 4,
                inl_parent_pc: 8,
            }),
        }
    }
}

/// The bytes at `moduledata.gofunc` (the `go:func.*` data the inline trees live in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoFuncData {
    pub address: u64,
    pub bytes: Vec<u8>,
}

/// What the source positions need of one pclntab: its bytes and the offsets of its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub(super) data: Vec<u8>,
    big: bool,
    ptr: u64,
    min_lc: u64,
    shape: Shape,
    funcname: u64,
    cutab: u64,
    filetab: u64,
    pctab: u64,
    /// Offset of each function's `_func` record, in the order of the function list.
    func_offsets: Vec<u64>,
    pub(super) gofunc: Option<GoFuncData>,
}

/// The table offsets `Source` reads from a pclntab header.
pub struct Tables {
    pub funcname: u64,
    pub cutab: u64,
    pub filetab: u64,
    pub pctab: u64,
}

impl Source {
    /// None for layouts without per-CU file tables (before Go 1.16).
    pub(super) fn new(
        r: &Reader<'_>,
        layout: Layout,
        tables: Tables,
        func_offsets: Vec<u64>,
    ) -> Option<Self> {
        let min_lc = u64::from(*r.data.get(6)?);
        Some(Source {
            data: r.data.to_vec(),
            big: r.big,
            ptr: r.ptr as u64,
            min_lc,
            shape: Shape::of(layout, r.ptr as u64)?,
            funcname: tables.funcname,
            cutab: tables.cutab,
            filetab: tables.filetab,
            pctab: tables.pctab,
            func_offsets,
            gofunc: None,
        })
    }

    /// Offset of the function-name table from the pclntab's start.
    pub fn funcname_offset(&self) -> u64 {
        self.funcname
    }

    /// Whether inline trees can be read (Go 1.18+ with its `gofunc` data found).
    pub fn has_inline_trees(&self) -> bool {
        self.gofunc.is_some()
    }

    /// Gives the `go:func.*` data, for the inline trees. Only Go 1.18+ tables use it.
    pub fn set_gofunc(&mut self, gofunc: GoFuncData) {
        if self.shape.inl_size > 0 {
            self.gofunc = Some(gofunc);
        }
    }

    fn reader(&self) -> Reader<'_> {
        Reader {
            data: &self.data,
            big: self.big,
            ptr: self.ptr as usize,
        }
    }

    /// The frames at `pc` in function `index` (entry `entry`, named `name`), innermost
    /// (the most deeply inlined call) first, the function itself last. `inline` expands
    /// the inline tree; without it, or without a tree, the one frame of the function.
    pub fn frames(
        &self,
        index: usize,
        entry: u64,
        name: &str,
        pc: u64,
        inline: bool,
    ) -> Result<Vec<GoFrame>, PclnError> {
        let r = self.reader();
        let func = *self
            .func_offsets
            .get(index)
            .ok_or_else(|| PclnError(format!("no function {index}")))?;
        let f = FuncRecord {
            src: self,
            r: &r,
            func,
            entry,
        };
        let mut frames = Vec::new();
        let mut pc = pc;
        if let (true, Some((tree, gofunc))) = (inline, f.inline_tree()?) {
            let g = Reader {
                data: &gofunc.bytes,
                big: self.big,
                ptr: self.ptr as usize,
            };
            while let Some(ix) = f.pcdata(PCDATA_INL_TREE_INDEX, pc)? {
                if frames.len() >= MAX_INLINE_DEPTH {
                    return Err(PclnError(format!("inline chain at {pc:#x} too deep")));
                }
                let at = tree + u64::from(ix) * self.shape.inl_size;
                let name_off = g.u32(at + self.shape.inl_name)?;
                let parent_pc = g.u32(at + self.shape.inl_parent_pc)?;
                frames.push(GoFrame {
                    function: r.cstr(self.funcname + u64::from(name_off))?,
                    place: f.place(pc)?,
                });
                // The parent's frame is placed at an instruction of the call site.
                pc = entry.checked_add(u64::from(parent_pc)).ok_or_else(|| {
                    PclnError(format!("inline call site past the end at {entry:#x}"))
                })?;
            }
        }
        frames.push(GoFrame {
            function: name.to_string(),
            place: f.place(pc)?,
        });
        Ok(frames)
    }
}

#[cfg(test)]
impl Source {
    /// The largest inline-tree index function `index` uses anywhere in `entry..end`.
    pub(super) fn max_inline_index(&self, index: usize, entry: u64, end: u64) -> Option<u32> {
        let r = self.reader();
        let f = FuncRecord {
            src: self,
            r: &r,
            func: *self.func_offsets.get(index)?,
            entry,
        };
        (entry..end)
            .filter_map(|pc| f.pcdata(PCDATA_INL_TREE_INDEX, pc).ok().flatten())
            .max()
    }
}

/// One `_func` record of a Source.
struct FuncRecord<'s> {
    src: &'s Source,
    r: &'s Reader<'s>,
    func: u64,
    entry: u64,
}

impl FuncRecord<'_> {
    fn field(&self, at: u64) -> Result<u32, PclnError> {
        self.r.u32(self.func + at)
    }

    /// The file and line at `pc`; None where the tables have none.
    fn place(&self, pc: u64) -> Result<Option<(String, u32)>, PclnError> {
        let shape = &self.src.shape;
        let file = self.value(self.field(shape.pcfile)?, pc)?;
        let line = self.value(self.field(shape.pcln)?, pc)?;
        let (Some(file), Some(line)) = (file, line) else {
            return Ok(None);
        };
        let (Ok(file), Ok(line)) = (u32::try_from(file), u32::try_from(line)) else {
            return Ok(None);
        };
        let cu = u64::from(self.field(shape.cu_offset)?);
        let offset = self.r.u32(self.src.cutab + (cu + u64::from(file)) * 4)?;
        if offset == u32::MAX {
            return Ok(None);
        }
        let name = self.r.cstr(self.src.filetab + u64::from(offset))?;
        Ok(Some((name, line)))
    }

    /// The value of pcdata table `table` at `pc`; None when the function has no such
    /// table or the value is negative (outside any inlined call).
    fn pcdata(&self, table: u64, pc: u64) -> Result<Option<u32>, PclnError> {
        let shape = &self.src.shape;
        if table >= u64::from(self.field(shape.npcdata)?) {
            return Ok(None);
        }
        let offset = self.r.u32(self.func + shape.size + table * 4)?;
        Ok(self.value(offset, pc)?.and_then(|v| u32::try_from(v).ok()))
    }

    /// Offset in the gofunc data of this function's inline tree, and that data, if the
    /// function has a tree and the data was found.
    fn inline_tree(&self) -> Result<Option<(u64, &GoFuncData)>, PclnError> {
        let shape = &self.src.shape;
        let Some(gofunc) = &self.src.gofunc else {
            return Ok(None);
        };
        let nfuncdata = u64::from(self.r.bytes(self.func + shape.nfuncdata, 1)?[0]);
        if FUNCDATA_INL_TREE >= nfuncdata {
            return Ok(None);
        }
        let npcdata = u64::from(self.field(shape.npcdata)?);
        let at = self.func + shape.size + npcdata * 4 + FUNCDATA_INL_TREE * 4;
        let offset = self.r.u32(at)?;
        Ok((offset != u32::MAX).then_some((u64::from(offset), gofunc)))
    }

    /// Decodes the pc-value table at `offset` in pctab up to `pc` (runtime.pcvalue):
    /// pairs of zigzag value deltas and pc deltas (in units of the minimum instruction
    /// size), starting from -1 at the entry. None for no table, a pc past its end, or -1.
    fn value(&self, offset: u32, pc: u64) -> Result<Option<i32>, PclnError> {
        if offset == 0 {
            return Ok(None);
        }
        let mut at = self.src.pctab + u64::from(offset);
        let mut value: i32 = -1;
        let mut cur = self.entry;
        let mut first = true;
        loop {
            let (delta, used) = self.varint(at)?;
            if delta == 0 && !first {
                return Ok(None);
            }
            at += used;
            let step = -((delta & 1) as i32) ^ (delta >> 1) as i32;
            value = value.wrapping_add(step);
            let (pc_delta, used) = self.varint(at)?;
            at += used;
            cur = cur
                .checked_add(u64::from(pc_delta) * self.src.min_lc)
                .ok_or_else(|| PclnError("pc table overflows".into()))?;
            if pc < cur {
                return Ok((value != -1).then_some(value));
            }
            first = false;
        }
    }

    /// A 32-bit unsigned varint and its length.
    fn varint(&self, at: u64) -> Result<(u32, u64), PclnError> {
        let mut value = 0u32;
        for i in 0..5u64 {
            let b = self.r.bytes(at + i, 1)?[0];
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((value, i + 1));
            }
        }
        Err(PclnError(format!("varint at {at:#x} too long")))
    }
}
