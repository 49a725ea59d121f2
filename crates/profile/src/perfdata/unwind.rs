//! DWARF call graphs unwound natively: a `--call-graph dwarf` sample carries the user
//! registers and a copy of the top of the user stack; the user frames are recovered from
//! them with the binaries' unwind tables (`.eh_frame`, its search table, `.debug_frame`)
//! through framehop, as perf script does with libunwind. Each process gets an unwinder
//! holding the binaries it mapped (from the mmap records); code no table covers (JIT code
//! in anonymous memory) is walked by its frame pointers.

use super::header::*;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// perf's x86_64 register numbers (`PERF_REG_X86_*`).
const REG_BP: u32 = 6;
const REG_SP: u32 = 7;
const REG_IP: u32 = 8;
/// The page size mappings are aligned to (x86_64).
const PAGE: u64 = 4096;
/// How many frames perf script keeps of a user stack (PERF_MAX_STACK_DEPTH).
const MAX_FRAMES: usize = 127;

/// What a DWARF sample holds of the user side: the registers the unwinding starts from and
/// the bytes of the stack from the stack pointer up, borrowed from the mapped file (a
/// DWARF capture holds up to 8 KiB of them per sample: copying them was a tenth of a
/// fold's time) or copied where the record was decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserState<'a> {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: Cow<'a, [u8]>,
}

/// How much of a stack copy, from its top (the sampled frame), is asked into the cache
/// ahead of its unwinding: the innermost frames' return addresses and saved registers.
const PREFETCHED: usize = 1024;

/// Asks the CPU to bring the top of `stack` into its cache (a hint: nothing is read).
pub(super) fn prefetch(stack: &[u8]) {
    prefetch_range(stack, 0, PREFETCHED);
}

/// Asks the CPU to bring `bytes[from..from + len]` (what of it is in `bytes`) into its
/// cache, a line at a time (a hint: nothing is read).
pub(super) fn prefetch_range(bytes: &[u8], from: usize, len: usize) {
    let end = from.saturating_add(len).min(bytes.len());
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, end);
    #[cfg(target_arch = "x86_64")]
    for at in (from..end).step_by(64) {
        // SAFETY: a prefetch reads nothing and cannot fault; the address is in `bytes`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(at).cast(),
            )
        };
    }
}

/// Reads what follows the callchain and raw data of a sample: the branch stack (skipped),
/// the user registers and the user stack. None when the sample has no user state (a
/// kernel thread, or a sample the kernel could not copy the stack of).
pub(super) fn decode_user<'b, 'a>(
    c: &mut Cursor<'b>,
    attr: &Attr,
    held: super::StackBytes<'b, 'a>,
) -> io::Result<Option<UserState<'a>>> {
    let st = attr.sample_type;
    if st & SAMPLE_BRANCH_STACK != 0 {
        let nr = c.u64()? as usize;
        if attr.branch_sample_type & BRANCH_HW_INDEX != 0 {
            c.skip(8)?;
        }
        c.skip(
            nr.checked_mul(24)
                .ok_or_else(|| invalid("branch stack too long"))?,
        )?;
    }
    let mut regs = None;
    if st & SAMPLE_REGS_USER != 0 {
        let abi = c.u64()?;
        if abi != 0 {
            let mask = attr.sample_regs_user;
            let count = mask.count_ones() as usize;
            let values = c.take(count * 8)?;
            let reg = |n: u32| -> Option<u64> {
                if mask & (1 << n) == 0 {
                    return None;
                }
                let at = (mask & ((1u64 << n) - 1)).count_ones() as usize * 8;
                le_u64(values, at)
            };
            regs = match (reg(REG_IP), reg(REG_SP), reg(REG_BP)) {
                (Some(ip), Some(sp), Some(bp)) => Some((ip, sp, bp)),
                _ => None,
            };
        }
    }
    let mut stack: &'b [u8] = &[];
    if st & SAMPLE_STACK_USER != 0 {
        let size = c.u64()? as usize;
        if size != 0 {
            let bytes = c.take(size)?;
            // How much of the copy is real stack (the rest is padding).
            let dynamic = c.u64()? as usize;
            stack = &bytes[..dynamic.min(size)];
        }
    }
    Ok(regs.map(|(ip, sp, bp)| UserState {
        ip,
        sp,
        bp,
        stack: held(stack),
    }))
}

/// The bytes of a binary: mapped from a file, or held (the vdso, tests).
pub enum Image {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for Image {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Image::Mapped(m) => m,
            Image::Owned(v) => v,
        }
    }
}

impl Image {
    /// Maps the file at `path` (read-only; devprof does not change the files it maps).
    pub fn map(path: &std::path::Path) -> io::Result<Self> {
        let file = std::fs::File::open(path)?;
        // SAFETY: a read-only mapping of a file devprof does not modify while it is mapped.
        Ok(Image::Mapped(unsafe { memmap2::Mmap::map(&file)? }))
    }
}

/// One section of an image, as framehop reads it.
#[derive(Clone)]
pub struct Section {
    image: Arc<Image>,
    range: Range<usize>,
}

impl Deref for Section {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.image[self.range.clone()]
    }
}

/// What the unwinder needs of one binary, read once.
struct Binary {
    image: Arc<Image>,
    /// (file offset, file size, address, executable) of each loadable segment.
    segments: Vec<(u64, u64, u64, bool)>,
    /// Name, address range and file range of the sections framehop uses.
    sections: Vec<(&'static str, Range<u64>, Range<usize>)>,
}

impl Binary {
    fn read(image: Image) -> Option<Binary> {
        let image = Arc::new(image);
        let file = object::File::parse(&image[..]).ok()?;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                let executable = matches!(
                    s.flags(),
                    object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
                );
                (offset, size, s.address(), executable)
            })
            .filter(|(_, size, _, _)| *size > 0)
            .collect();
        let mut sections = Vec::new();
        for name in [
            ".text",
            ".eh_frame",
            ".eh_frame_hdr",
            ".got",
            ".debug_frame",
        ] {
            let Some(section) = file.section_by_name(name) else {
                continue;
            };
            // A compressed .debug_frame would need inflating; .eh_frame never is.
            let Ok(range) = section.compressed_file_range() else {
                continue;
            };
            if range.format != object::CompressionFormat::None {
                continue;
            }
            let start = range.offset as usize;
            let Some(end) = start.checked_add(range.compressed_size as usize) else {
                continue;
            };
            if end > image.len() {
                continue;
            }
            // A hostile header's address and size may pass 2^64: no such section is read.
            let Some(address_end) = section.address().checked_add(section.size()) else {
                continue;
            };
            sections.push((name, section.address()..address_end, start..end));
        }
        Some(Binary {
            image: image.clone(),
            segments,
            sections,
        })
    }

    fn section_info(&self) -> ExplicitModuleSectionInfo<Section> {
        let find = |name: &str| self.sections.iter().find(|(n, _, _)| *n == name);
        let data = |name: &str| {
            find(name).map(|(_, _, range)| Section {
                image: self.image.clone(),
                range: range.clone(),
            })
        };
        let address = |name: &str| find(name).map(|(_, a, _)| a.clone());
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: address(".text"),
            text: data(".text"),
            got_svma: address(".got"),
            eh_frame_svma: address(".eh_frame"),
            eh_frame: data(".eh_frame"),
            eh_frame_hdr_svma: address(".eh_frame_hdr"),
            eh_frame_hdr: data(".eh_frame_hdr"),
            debug_frame: data(".debug_frame"),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        }
    }

    /// Where address 0 of the binary lies in a process that mapped file offset `pgoff` at
    /// `start`. The mapping is the one the loader made for the segment that starts in its
    /// first page: where segments are not page-aligned in the file (lld's layout, a text
    /// segment at offset 0x33b20 and address 0x34b20), that page also holds the end of the
    /// segment before, and taking that one put the base a page off, so every frame past
    /// the first was unwound with the wrong function's rules.
    fn base_avma(&self, start: u64, pgoff: u64) -> u64 {
        // Of the segments that start in the page, the executable one: a small lld binary
        // starts its read-only and its text segment in the same first page, and the
        // mappings unwinding sees are the executable ones.
        let starts_here = |(offset, ..): &&(u64, u64, u64, bool)| {
            (pgoff..pgoff.saturating_add(PAGE)).contains(offset)
        };
        let segment = self
            .segments
            .iter()
            .filter(starts_here)
            .max_by_key(|(.., executable)| *executable)
            .or_else(|| {
                self.segments.iter().find(|(offset, size, ..)| {
                    (*offset..offset.saturating_add(*size)).contains(&pgoff)
                })
            })
            .or_else(|| self.segments.first());
        match segment {
            Some((offset, _, address, _)) => start
                .wrapping_sub(pgoff.wrapping_sub(*offset))
                .wrapping_sub(*address),
            None => start.wrapping_sub(pgoff),
        }
    }
}

/// Finds the bytes of a binary by the path its mmap record gives (`[vdso]` included).
pub type Opener<'a> = dyn Fn(&str) -> Option<Image> + 'a;

/// How the user stacks unwound.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UnwindStats {
    /// Samples whose user stack was unwound.
    pub unwound: u64,
    /// Of them, those unwound no further than the sampled function: no unwind table
    /// covered it and no frame pointer led out of it. (An error at the end of a stack is
    /// not counted: unwinding ends that way at most thread entries, for perf too.)
    pub incomplete: u64,
}

/// The unwinders of every process in a capture.
pub struct DwarfUnwinder<'a> {
    open: &'a Opener<'a>,
    binaries: HashMap<String, Option<Arc<Binary>>>,
    processes: HashMap<u32, UnwinderX86_64<Section>>,
    cache: CacheX86_64,
    pub stats: UnwindStats,
}

impl<'a> DwarfUnwinder<'a> {
    pub fn new(open: &'a Opener<'a>) -> Self {
        DwarfUnwinder {
            open,
            binaries: HashMap::new(),
            processes: HashMap::new(),
            cache: CacheX86_64::new(),
            stats: UnwindStats::default(),
        }
    }

    /// The paths of the binaries that could be opened.
    pub fn opened(&self) -> impl Iterator<Item = &str> {
        self.binaries
            .iter()
            .filter(|(_, b)| b.is_some())
            .map(|(p, _)| p.as_str())
    }

    /// An mmap record: `filename` mapped at `start` from file offset `pgoff`.
    pub fn map(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, filename: &str) {
        let unwinder = self.processes.entry(pid).or_default();
        // Whatever was mapped at that address before is gone.
        unwinder.remove_module(start);
        if !(is_file(filename) || filename == "[vdso]") {
            return;
        }
        let open = self.open;
        let binary = self
            .binaries
            .entry(filename.to_string())
            .or_insert_with(|| open(filename).and_then(Binary::read).map(Arc::new));
        let Some(binary) = binary else {
            return;
        };
        let end = start.saturating_add(len);
        unwinder.add_module(Module::new(
            filename.to_string(),
            start..end,
            binary.base_avma(start, pgoff),
            binary.section_info(),
        ));
    }

    /// Lets the binaries' mappings go on a thread of their own (see `drop_aside`).
    pub fn release(self) {
        super::drop_aside((self.binaries, self.processes));
    }

    /// A new process starts with its parent's mappings.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(unwinder) = self.processes.get(&parent).cloned() {
            self.processes.insert(child, unwinder);
        }
    }

    /// The user frames of a sample of process `pid`, leaf first, as addresses to name
    /// (return addresses less one, as perf looks them up).
    pub fn unwind(&mut self, pid: u32, user: &UserState<'_>, out: &mut Vec<u64>) {
        self.stats.unwound += 1;
        let Some(unwinder) = self.processes.get(&pid) else {
            out.push(user.ip);
            self.stats.incomplete += 1;
            return;
        };
        let (sp, stack) = (user.sp, &*user.stack);
        let mut read_stack = |address: u64| -> Result<u64, ()> {
            let at = usize::try_from(address.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let regs = UnwindRegsX86_64::new(user.ip, user.sp, user.bp);
        let mut frames = unwinder.iter_frames(user.ip, regs, &mut self.cache, &mut read_stack);
        let start = out.len();
        while let Ok(Some(frame)) = frames.next() {
            out.push(frame.address_for_lookup());
            if out.len() - start >= MAX_FRAMES {
                break;
            }
        }
        if out.len() == start {
            out.push(user.ip);
        }
        if out.len() - start == 1 {
            self.stats.incomplete += 1;
        }
    }
}

/// The vdso of this process, which every process on this kernel maps: its unwind tables and
/// symbols name the vdso frames of a capture made on this host.
pub fn own_vdso() -> Option<Vec<u8>> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let range = line.split_whitespace().next()?;
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let len = end.checked_sub(start)?;
    // SAFETY: the kernel maps the vdso readable for the life of the process, at the range
    // /proc/self/maps gives for it.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
    Some(bytes.to_vec())
}

/// How perf names the vdso's mapping.
pub const VDSO: &str = "[vdso]";

/// This host's vdso written as a file in `dir` (rewritten only when it changed), for a
/// symbolizer that reads files: the kernel maps the same vdso into every process on it,
/// containers' too. None when it cannot be written: its frames then stay unnamed.
pub fn own_vdso_file(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let bytes = own_vdso()?;
    let path = dir.join("vdso.so");
    if std::fs::read(&path).ok().as_deref() != Some(bytes.as_slice()) {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        // Private, as the rest of the symbol cache it sits in.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut file| file.write_all(&bytes))
            .ok()?;
    }
    Some(path)
}

/// Files perf names frames in: real paths, not anonymous or special mappings.
pub fn is_file(module: &str) -> bool {
    module.starts_with('/') && !module.starts_with("//") && !module.starts_with("/memfd:")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// demo-node (linked by lld): the read-only segment ends at file offset 0x33b18 and the
    /// text segment starts at 0x33b20 (address 0x34b20), so the loader maps the text from
    /// page 0x33000 at address 0x34000 past the base. The base came out a page low, and
    /// the frames above a thread's workload fell to garbage (`_fini`) or were lost.
    #[test]
    fn the_base_comes_from_the_segment_that_starts_in_the_mapped_page() {
        let binary = Binary {
            image: Arc::new(Image::Owned(Vec::new())),
            segments: vec![
                (0, 0x33b18, 0, false),
                (0x33b20, 0xc4280, 0x34b20, true),
                (0xf7da0, 0x97e8, 0xf9da0, false),
            ],
            sections: Vec::new(),
        };
        let base = 0x5555_5555_4000;
        assert_eq!(binary.base_avma(base + 0x34000, 0x33000), base);
        // gcc's layout: segments page-aligned in the file, offset and address equal.
        let aligned = Binary {
            segments: vec![(0, 0x5f8, 0, false), (0x1000, 0x2000, 0x1000, true)],
            ..binary
        };
        assert_eq!(aligned.base_avma(base + 0x1000, 0x1000), base);
        // A small lld binary: read-only and text segments start in the same first page.
        let small = Binary {
            segments: vec![(0, 0x5f8, 0, false), (0x600, 0x200, 0x1600, true)],
            ..aligned
        };
        assert_eq!(small.base_avma(base + 0x1000, 0), base);
    }

    fn attr(sample_type: u64, regs: u64) -> Attr {
        Attr {
            kind: 1,
            config: 0,
            sample_type,
            branch_sample_type: 0,
            sample_regs_user: regs,
            name: String::new(),
            clockid: None,
        }
    }

    #[test]
    fn user_registers_are_found_by_their_bit_in_the_mask() {
        // perf's x86_64 mask: AX..SS and R8..R15 (no segment registers).
        let mask = 0xff_0fff;
        let mut body = Vec::new();
        body.extend_from_slice(&2u64.to_le_bytes()); // ABI_64
        for n in 0..64u64 {
            if mask & (1 << n) != 0 {
                body.extend_from_slice(&(0x1000 + n).to_le_bytes());
            }
        }
        body.extend_from_slice(&16u64.to_le_bytes());
        body.extend_from_slice(&[7u8; 16]);
        body.extend_from_slice(&8u64.to_le_bytes());
        let a = attr(SAMPLE_REGS_USER | SAMPLE_STACK_USER, mask);
        let user = decode_user(&mut Cursor::new(&body), &a, Cow::Borrowed)
            .unwrap()
            .unwrap();
        assert_eq!((user.ip, user.sp, user.bp), (0x1008, 0x1007, 0x1006));
        assert_eq!(
            &*user.stack,
            &[7u8; 8][..],
            "only the dynamic size is stack"
        );
        // A kernel thread: no user registers (ABI_NONE) and an empty stack copy.
        let mut body = 0u64.to_le_bytes().to_vec();
        body.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(
            decode_user(&mut Cursor::new(&body), &a, Cow::Borrowed).unwrap(),
            None
        );
        // A stack size past the record is an error, not a panic.
        let mut body = 2u64.to_le_bytes().to_vec();
        body.extend_from_slice(&[0u8; 8 * 20]);
        body.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_user(&mut Cursor::new(&body), &a, Cow::Borrowed).is_err());
    }

    #[test]
    fn own_vdso_is_an_elf_with_unwind_tables() {
        let Some(vdso) = own_vdso() else {
            panic!("this kernel maps a vdso into every process");
        };
        let binary = Binary::read(Image::Owned(vdso)).expect("an ELF image");
        assert!(binary.sections.iter().any(|(n, _, _)| *n == ".eh_frame"));
    }

    /// A little ELF64 of one `.text` section at `address`, 16 bytes long.
    fn elf_with_text_at(address: u64) -> Vec<u8> {
        let names = b"\0.shstrtab\0.text\0";
        let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1];
        elf.resize(16, 0);
        elf.extend_from_slice(&3u16.to_le_bytes()); // ET_DYN
        elf.extend_from_slice(&62u16.to_le_bytes()); // x86_64
        elf.extend_from_slice(&1u32.to_le_bytes());
        elf.extend_from_slice(&0u64.to_le_bytes()); // entry
        elf.extend_from_slice(&0u64.to_le_bytes()); // no program headers
        elf.extend_from_slice(&104u64.to_le_bytes()); // section headers
        elf.extend_from_slice(&0u32.to_le_bytes());
        for half in [64u16, 56, 0, 64, 3, 1] {
            elf.extend_from_slice(&half.to_le_bytes());
        }
        elf.extend_from_slice(names);
        elf.extend_from_slice(&[0x90; 16]);
        elf.resize(104, 0);
        let mut section = |name: u32, kind: u32, flags: u64, addr: u64, offset: u64, size: u64| {
            elf.extend_from_slice(&name.to_le_bytes());
            elf.extend_from_slice(&kind.to_le_bytes());
            for v in [flags, addr, offset, size] {
                elf.extend_from_slice(&v.to_le_bytes());
            }
            elf.extend_from_slice(&[0; 8]);
            elf.extend_from_slice(&1u64.to_le_bytes());
            elf.extend_from_slice(&0u64.to_le_bytes());
        };
        section(0, 0, 0, 0, 0, 0);
        section(1, 3, 0, 0, 64, names.len() as u64);
        section(11, 1, 6, address, 64 + names.len() as u64, 16);
        elf
    }

    #[test]
    fn a_section_whose_addresses_pass_2_pow_64_is_not_read_not_an_overflow() {
        let binary = Binary::read(Image::Owned(elf_with_text_at(u64::MAX - 8))).unwrap();
        assert!(binary.sections.is_empty());
        let binary = Binary::read(Image::Owned(elf_with_text_at(0x1000))).unwrap();
        assert_eq!(binary.sections.len(), 1);
        assert_eq!(binary.sections[0].1, 0x1000..0x1010);
    }

    #[test]
    fn a_segment_whose_file_range_passes_2_pow_64_is_searched_not_an_overflow() {
        let binary = Binary {
            image: Arc::new(Image::Owned(Vec::new())),
            segments: vec![(u64::MAX - 0x10, 0x100, 0x5000, true)],
            sections: Vec::new(),
        };
        // The mapping's page holds no segment's start; the one that holds its offset is
        // found, though its file range passes 2^64.
        assert_eq!(
            binary.base_avma(0x7000, u64::MAX - 8),
            0x7000u64.wrapping_sub(8).wrapping_sub(0x5000)
        );
    }
}
