//! The native CPU fold: frame-pointer callchains read straight out of perf.data and named
//! by devprof's own symbolizer, so `perf script` is not on the critical path.
//!
//! Two steps, with the I/O between them left to the caller: `read` walks the file once
//! (samples with callchains, and the COMM, MMAP/MMAP2, FORK and EXIT records that say which
//! thread had which name and which file was mapped where) and keeps each distinct raw
//! stack with its count, plus which files the stacks point into; the caller fetches those
//! files; `fold` names the frames. Names follow the `perf script` reader's rules (`name`),
//! fed what `perf script -F comm,...,sym,dso --no-inline` would print for each frame, so
//! both paths give the same folded stacks.

use super::unwind::{DwarfUnwinder, Opener};
pub use super::unwind::{Image, UnwindStats};
use super::{callgraph, read_events, recorded_call_graph, Event, Wanted};
use crate::folded::Folded;
use crate::perfscript::name::frame_names;
use crate::perfscript::parse::StackLine;
use crate::perfscript::{SampleMeta, SampleSink};
use ahash::AHashMap as HashMap;
use devprof_symbols::kallsyms::Kallsyms;
use devprof_symbols::module::ModuleSymbols;
use devprof_symbols::perfmap::PerfMap;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// perf's callchain context markers (`PERF_CONTEXT_*`, as u64).
const CONTEXT_MAX: u64 = -4095i64 as u64;
const CONTEXT_KERNEL: u64 = -128i64 as u64;
const CONTEXT_USER: u64 = -512i64 as u64;

/// How perf names the kernel's module, and anything outside every known mapping.
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";
const UNKNOWN: &str = "[unknown]";

/// One frame before naming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    /// An offset in a mapped file (an index into `RawProfile::modules`).
    User {
        module: u32,
        offset: u64,
    },
    Kernel(u64),
    /// An address in anonymous executable memory (JIT-compiled code) of process `pid`,
    /// which only the runtime's perf map names.
    Jit {
        pid: u32,
        address: u64,
    },
    /// An address no mapping covers.
    Unmapped,
}

/// One sample, for a timeline.
#[derive(Debug, Clone, Copy)]
pub struct RawSample {
    pub time_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub comm: u32,
    pub stack: u32,
}

/// What `read` found: distinct stacks (thread name and frames, leaf first) with counts.
#[derive(Debug, Default)]
pub struct RawProfile {
    /// The mapped files the stacks point into, as the mmap records name them.
    pub modules: Vec<String>,
    pub comms: Vec<String>,
    /// (comm index, frames leaf first) and how many samples had it.
    pub stacks: Vec<((u32, Vec<Frame>), u64)>,
    /// Every sample in time order (only when asked for).
    pub samples: Vec<RawSample>,
    /// Samples folded (of the first event type, with a callchain).
    pub total: u64,
    pub event: Option<String>,
    pub other_events: u64,
    /// How the user stacks of a DWARF capture unwound.
    pub unwind: UnwindStats,
}

impl RawProfile {
    /// The files the stacks point into (not anonymous or special mappings): what must be
    /// fetched to name their frames.
    pub fn files_used(&self) -> Vec<String> {
        let mut used = vec![false; self.modules.len()];
        for ((_, frames), _) in &self.stacks {
            for frame in frames {
                if let Frame::User { module, .. } = frame {
                    used[*module as usize] = true;
                }
            }
        }
        self.modules
            .iter()
            .zip(used)
            .filter(|(path, used)| *used && is_file(path))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// The processes with frames in JIT code: whose perf maps are worth reading.
    pub fn jit_pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .stacks
            .iter()
            .flat_map(|((_, frames), _)| frames.iter())
            .filter_map(|f| match f {
                Frame::Jit { pid, .. } => Some(*pid),
                _ => None,
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Whether any stack has a kernel frame (kallsyms is then worth reading).
    pub fn has_kernel_frames(&self) -> bool {
        self.kernel_addresses().next().is_some()
    }

    /// The addresses of the kernel frames, as often as they occur in the stacks.
    pub fn kernel_addresses(&self) -> impl Iterator<Item = u64> + '_ {
        self.stacks.iter().flat_map(|((_, frames), _)| {
            frames.iter().filter_map(|f| match f {
                Frame::Kernel(ip) => Some(*ip),
                _ => None,
            })
        })
    }

    /// Whether `kernel` can name every kernel frame (a kept copy covers only part of the
    /// kernel's addresses).
    pub fn kernel_covered_by(&self, kernel: &Kallsyms) -> bool {
        self.kernel_addresses().all(|ip| kernel.covers(ip))
    }
}

#[derive(Debug, Clone, Copy)]
struct Mapping {
    end: u64,
    pgoff: u64,
    module: u32,
}

/// What is known about the processes while walking the file.
#[derive(Default)]
struct Tasks {
    comms: HashMap<u32, String>,
    /// Per process: mappings by start address.
    maps: HashMap<u32, BTreeMap<u64, Mapping>>,
    module_ids: HashMap<String, u32>,
    /// By module id: whether it is JIT code (asked for every frame, so asked once).
    jit_modules: Vec<bool>,
    /// The mapping the last frame was found in, by pid and start: a stack's frames
    /// mostly lie in the mapping of the frame before.
    last: Option<(u32, u64, Mapping)>,
}

/// Distinct stacks, found by a hash of their frames. The frames are kept once, in
/// `RawProfile::stacks`, and the index maps the hash to the stack's id, so that growing
/// it moves numbers, not frame lists: in a DWARF capture nearly every sample's user
/// addresses differ, and rehashing the lists was the read's largest cost after the
/// unwinding itself.
#[derive(Default)]
struct StackIndex {
    hasher: ahash::RandomState,
    by_hash: HashMap<u64, u32>,
    /// Stacks whose hash an earlier, different stack has.
    collided: HashMap<(u32, Vec<Frame>), u32>,
}

type Stacks = [((u32, Vec<Frame>), u64)];

impl StackIndex {
    fn hash(&self, key: &(u32, Vec<Frame>)) -> u64 {
        self.hasher.hash_one(key)
    }

    fn find(&self, stacks: &Stacks, key: &(u32, Vec<Frame>), hash: u64) -> Option<u32> {
        match self.by_hash.get(&hash) {
            Some(id) if stacks[*id as usize].0 == *key => Some(*id),
            Some(_) => self.collided.get(key).copied(),
            None => None,
        }
    }

    fn insert(&mut self, key: &(u32, Vec<Frame>), hash: u64, id: u32) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.by_hash.entry(hash) {
            slot.insert(id);
        } else {
            self.collided.insert(key.clone(), id);
        }
    }
}

impl Tasks {
    fn module_id(&mut self, name: &str, modules: &mut Vec<String>) -> u32 {
        if let Some(id) = self.module_ids.get(name) {
            return *id;
        }
        let id = modules.len() as u32;
        modules.push(name.to_string());
        self.module_ids.insert(name.to_string(), id);
        self.jit_modules.push(is_jit(name));
        id
    }

    /// A new process starts with its parent's mappings.
    fn fork(&mut self, parent: u32, child: u32) {
        if let Some(maps) = self.maps.get(&parent).cloned() {
            self.maps.insert(child, maps);
            self.last = None;
        }
    }

    /// A new mapping replaces whatever it overlaps, as in the kernel. One whose file
    /// offsets would pass 2^64 is no mapping perf records: it is skipped, and the offsets
    /// of what is mapped never overflow.
    fn map(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, module: u32) {
        if pgoff.checked_add(len).is_none() {
            return;
        }
        self.last = None;
        let end = start.saturating_add(len);
        let maps = self.maps.entry(pid).or_default();
        let overlapping: Vec<u64> = maps
            .range(..end)
            .rev()
            .take_while(|(s, m)| m.end > start || **s >= start)
            .filter(|(_, m)| m.end > start)
            .map(|(s, _)| *s)
            .collect();
        for s in overlapping {
            let old = maps.remove(&s).expect("listed");
            if s < start {
                maps.insert(s, Mapping { end: start, ..old });
            }
            if old.end > end {
                maps.insert(
                    end,
                    Mapping {
                        end: old.end,
                        pgoff: old.pgoff + (end - s),
                        module: old.module,
                    },
                );
            }
        }
        maps.insert(start, Mapping { end, pgoff, module });
    }

    fn frame(&mut self, pid: u32, ip: u64, kernel: bool) -> Frame {
        if kernel {
            return Frame::Kernel(ip);
        }
        let cached = match &self.last {
            Some((p, start, m)) if *p == pid && *start <= ip && ip < m.end => Some((*start, *m)),
            _ => None,
        };
        let found = cached.or_else(|| {
            let (start, m) = self.maps.get(&pid)?.range(..=ip).next_back()?;
            self.last = Some((pid, *start, *m));
            Some((*start, *m))
        });
        match found {
            Some((start, m)) if ip < m.end => {
                if self.jit_modules[m.module as usize] {
                    Frame::Jit { pid, address: ip }
                } else {
                    Frame::User {
                        module: m.module,
                        offset: ip - start + m.pgoff,
                    }
                }
            }
            _ => Frame::Unmapped,
        }
    }
}

/// Told of each file the stacks point into (as `RawProfile::files_used` lists them) when
/// the read first meets a frame in it: its symbols can be read while the rest of the
/// perf.data is.
pub type FileSeen<'a> = dyn FnMut(&str) + 'a;

/// Reads the samples of `path` with their callchains; `keep_samples` also keeps every
/// sample in order (for a timeline). A DWARF capture is refused: its user frames need the
/// binaries (`read_unwound`).
pub fn read(path: &Path, keep_samples: bool, seen: &mut FileSeen<'_>) -> io::Result<RawProfile> {
    let call_graph = recorded_call_graph(path)?;
    if call_graph.needs_unwinding() {
        return Err(callgraph::not_native(call_graph));
    }
    read_with(path, keep_samples, None, seen)
}

/// Reads the samples of `path` like `read`, unwinding the user stacks of a DWARF capture
/// with the binaries `open` finds by the paths the mmap records give.
pub fn read_unwound(
    path: &Path,
    keep_samples: bool,
    open: &Opener<'_>,
    seen: &mut FileSeen<'_>,
) -> io::Result<RawProfile> {
    let mut unwinder = DwarfUnwinder::new(open);
    let mut raw = read_with(path, keep_samples, Some(&mut unwinder), seen)?;
    raw.unwind = unwinder.stats;
    unwinder.release();
    Ok(raw)
}

/// The file-backed executable mappings of a capture (by the names the mmap records give):
/// the binaries a DWARF capture's user stacks are unwound with.
pub fn mapped_files(path: &Path) -> io::Result<Vec<String>> {
    let mut files = std::collections::BTreeSet::new();
    read_events(path, Wanted::Mappings, |event, _| {
        if let Event::Mmap { pid, filename, .. } = event {
            if pid != u32::MAX && is_file(&filename) {
                files.insert(filename);
            }
        }
    })?;
    Ok(files.into_iter().collect())
}

fn read_with(
    path: &Path,
    keep_samples: bool,
    mut unwinder: Option<&mut DwarfUnwinder<'_>>,
    seen: &mut FileSeen<'_>,
) -> io::Result<RawProfile> {
    let mut raw = RawProfile::default();
    // By module id: whether `seen` was told of it.
    let mut told: Vec<bool> = Vec::new();
    let mut user_ips: Vec<u64> = Vec::new();
    let mut tasks = Tasks::default();
    let mut stack_ids = StackIndex::default();
    let mut comm_ids: HashMap<String, u32> = HashMap::new();
    let mut first_attr: Option<usize> = None;
    let mut frames: Vec<Frame> = Vec::new();
    read_events(path, Wanted::Stacks, |event, layout| match event {
        Event::Comm { tid, comm, .. } => {
            tasks.comms.insert(tid, comm);
        }
        Event::Mmap {
            pid,
            start,
            len,
            pgoff,
            filename,
            ..
        } => {
            // The kernel's own mappings (pid -1) are named from kallsyms instead.
            if pid != u32::MAX {
                if let Some(unwinder) = unwinder.as_deref_mut() {
                    unwinder.map(pid, start, len, pgoff, &filename);
                }
                let module = tasks.module_id(&filename, &mut raw.modules);
                tasks.map(pid, start, len, pgoff, module);
            }
        }
        Event::Task {
            pid,
            ppid,
            tid,
            ptid,
            exit: false,
            ..
        } => {
            if let Some(comm) = tasks.comms.get(&ptid).cloned() {
                tasks.comms.insert(tid, comm);
            }
            if pid != ppid {
                tasks.fork(ppid, pid);
                if let Some(unwinder) = unwinder.as_deref_mut() {
                    unwinder.fork(ppid, pid);
                }
            }
        }
        Event::Task { .. } | Event::Switch { .. } => {}
        Event::Sample {
            attr,
            pid,
            tid,
            time,
            callchain,
            user,
            ..
        } => {
            let wanted = *first_attr.get_or_insert(attr);
            if wanted != attr {
                raw.other_events += 1;
                return;
            }
            if raw.event.is_none() {
                raw.event = layout.attrs.get(attr).map(|a| a.name.clone());
            }
            frames.clear();
            let mut kernel = false;
            // A DWARF sample: the callchain holds the kernel frames, the user frames are
            // unwound from the registers and stack copy.
            let unwinding = unwinder.is_some() && user.is_some();
            for ip in callchain {
                if ip >= CONTEXT_MAX {
                    match ip {
                        CONTEXT_KERNEL => kernel = true,
                        CONTEXT_USER => kernel = false,
                        // hypervisor or guest contexts: not what a container runs
                        _ => break,
                    }
                    continue;
                }
                if unwinding && !kernel {
                    continue;
                }
                frames.push(tasks.frame(pid, ip, kernel));
            }
            if let (Some(unwinder), Some(user)) = (unwinder.as_deref_mut(), user.as_deref()) {
                user_ips.clear();
                unwinder.unwind(pid, user, &mut user_ips);
                for ip in &user_ips {
                    frames.push(tasks.frame(pid, *ip, false));
                }
            }
            if frames.is_empty() {
                return;
            }
            let comm = tasks.comms.get(&tid).map(String::as_str).unwrap_or(UNKNOWN);
            let comm = match comm_ids.get(comm) {
                Some(id) => *id,
                None => {
                    let id = raw.comms.len() as u32;
                    raw.comms.push(comm.to_string());
                    comm_ids.insert(comm.to_string(), id);
                    id
                }
            };
            let key = (comm, std::mem::take(&mut frames));
            let hash = stack_ids.hash(&key);
            let stack = match stack_ids.find(&raw.stacks, &key, hash) {
                Some(id) => {
                    raw.stacks[id as usize].1 += 1;
                    frames = key.1;
                    id
                }
                None => {
                    // Only a new stack can point into a file no stack did.
                    for frame in &key.1 {
                        if let Frame::User { module, .. } = frame {
                            let module = *module as usize;
                            if told.len() <= module {
                                told.resize(raw.modules.len().max(module + 1), false);
                            }
                            if !told[module] {
                                told[module] = true;
                                let path = &raw.modules[module];
                                if is_file(path) {
                                    seen(path);
                                }
                            }
                        }
                    }
                    let id = raw.stacks.len() as u32;
                    stack_ids.insert(&key, hash, id);
                    raw.stacks.push((key, 1));
                    id
                }
            };
            raw.total += 1;
            if keep_samples {
                raw.samples.push(RawSample {
                    time_ns: time,
                    pid,
                    tid,
                    comm,
                    stack,
                });
            }
        }
    })?;
    Ok(raw)
}

/// Where names come from: the symbols of each mapped file that could be read (by the name
/// the mmap records give it) and the kernel's, when readable.
#[derive(Default)]
pub struct Symbols {
    pub modules: HashMap<String, ModuleSymbols>,
    pub kernel: Option<Kallsyms>,
    /// The perf maps of processes with JIT code, by pid.
    pub perf_maps: HashMap<u32, PerfMap>,
}

/// Folded stacks and how much of them the native path could stand behind.
#[derive(Debug, Default)]
pub struct NativeFold {
    pub folded: Folded,
    pub samples: u64,
    /// Samples with a frame in a file whose symbols were not available.
    pub unresolved_samples: u64,
    /// Samples with a frame in JIT-compiled code (anonymous executable memory) of a
    /// process whose perf map was not available (perf script reads it where it is).
    pub jit_samples: u64,
    /// DWARF samples whose user stack could not be unwound to its first function (perf
    /// script may not unwind them either; they are folded as far as they go).
    pub unwind_incomplete: u64,
    /// Files the stacks point into whose symbols were not available.
    pub missing_modules: Vec<String>,
}

impl NativeFold {
    /// The share of samples the native path could not name as perf would.
    pub fn doubtful_share(&self) -> f64 {
        if self.samples == 0 {
            return 0.0;
        }
        (self.unresolved_samples + self.jit_samples) as f64 / self.samples as f64
    }
}

pub use super::unwind::is_file;

/// Anonymous executable memory: where JIT compilers put code.
fn is_jit(module: &str) -> bool {
    module.starts_with("//anon")
        || module.starts_with("[anon")
        || module.starts_with("/memfd:")
        || module.starts_with("/tmp/perf-")
}

/// Names the frames of `raw` with `symbols`; `inline` adds inlined frames (from DWARF).
/// `sink` receives every kept sample in order, with ids for the folded stacks.
pub fn fold(
    raw: &RawProfile,
    symbols: &Symbols,
    inline: bool,
    mut sink: Option<&mut dyn SampleSink>,
) -> NativeFold {
    // Each frame named once; each stack's string made once per raw stack and kept once
    // per folded stack, with its id and count together (this loop runs per raw stack).
    let mut names: HashMap<(Frame, bool), String> = HashMap::new();
    let mut folded: HashMap<String, (u32, u64)> = HashMap::new();
    let mut out = NativeFold {
        samples: raw.total,
        unwind_incomplete: raw.unwind.incomplete,
        ..NativeFold::default()
    };
    let roots: Vec<(String, bool)> = raw
        .comms
        .iter()
        .map(|comm| {
            let root = comm.replace(' ', "_");
            let java = root.starts_with("java");
            (root, java)
        })
        .collect();
    let unnamed: Vec<bool> = raw
        .modules
        .iter()
        .map(|path| is_file(path) && !symbols.modules.contains_key(path))
        .collect();
    let mut missing = vec![false; raw.modules.len()];
    let mut folded_ids: Vec<u32> = Vec::with_capacity(raw.stacks.len());
    let mut buffer: Vec<String> = Vec::new();
    for ((comm, frames), count) in &raw.stacks {
        let (root, java) = &roots[*comm as usize];
        let java = *java;
        let mut stack = root.clone();
        let (mut unresolved, mut jit) = (false, false);
        for frame in frames.iter().rev() {
            match frame {
                Frame::User { module, .. } if unnamed[*module as usize] => {
                    unresolved = true;
                    missing[*module as usize] = true;
                }
                Frame::Jit { pid, .. } => jit |= !symbols.perf_maps.contains_key(pid),
                _ => {}
            }
            let name = names.entry((*frame, java)).or_insert_with(|| {
                buffer.clear();
                name_frame(raw, symbols, *frame, inline, java, &mut buffer);
                buffer.join(";")
            });
            if !name.is_empty() {
                stack.push(';');
                stack.push_str(name);
            }
        }
        if unresolved {
            out.unresolved_samples += count;
        }
        if jit {
            out.jit_samples += count;
        }
        let next = folded.len() as u32;
        let id = match folded.entry(stack) {
            std::collections::hash_map::Entry::Occupied(mut known) => {
                known.get_mut().1 += count;
                known.get().0
            }
            std::collections::hash_map::Entry::Vacant(new) => {
                if let Some(sink) = sink.as_deref_mut() {
                    sink.new_stack(next, new.key());
                }
                new.insert((next, *count));
                next
            }
        };
        folded_ids.push(id);
    }
    if let Some(sink) = sink {
        for s in &raw.samples {
            sink.sample(
                &SampleMeta {
                    time_ns: Some(s.time_ns),
                    pid: Some(s.pid),
                    tid: s.tid,
                    comm: &raw.comms[s.comm as usize],
                    weight: 1,
                },
                folded_ids[s.stack as usize],
            );
        }
    }
    out.missing_modules = raw
        .modules
        .iter()
        .zip(missing)
        .filter(|(_, m)| *m)
        .map(|(p, _)| p.clone())
        .collect();
    out.folded = Folded::from_pairs(folded.into_iter().map(|(stack, (_, count))| (stack, count)));
    out
}

/// The names of one frame, outermost first: what perf would print for it, named by the
/// same rules as the `perf script` reader.
fn name_frame(
    raw: &RawProfile,
    symbols: &Symbols,
    frame: Frame,
    inline: bool,
    java: bool,
    out: &mut Vec<String>,
) {
    let (symbol, module): (String, &str) = match frame {
        Frame::Kernel(ip) => (
            symbols
                .kernel
                .as_ref()
                .and_then(|k| k.name_at(ip))
                .unwrap_or(UNKNOWN)
                .to_string(),
            KERNEL_MODULE,
        ),
        Frame::Unmapped => (UNKNOWN.to_string(), UNKNOWN),
        Frame::Jit { pid, address } => {
            let name = symbols
                .perf_maps
                .get(&pid)
                .and_then(|map| map.name_at(address))
                .unwrap_or(UNKNOWN)
                .to_string();
            // perf names the code after the map file, whether or not it exists.
            let module = format!("/tmp/perf-{pid}.map");
            return frame_names(
                &StackLine {
                    pc: "",
                    symbol: &name,
                    module: &module,
                },
                java,
                out,
            );
        }
        Frame::User { module, offset } => {
            let path = raw.modules[module as usize].as_str();
            let named = symbols.modules.get(path).and_then(|m| {
                let address = m.address_of_offset(offset)?;
                if inline {
                    m.inline_chain(address)
                } else {
                    m.function_at(address)
                }
            });
            (named.unwrap_or_else(|| UNKNOWN.to_string()), path)
        }
    };
    frame_names(
        &StackLine {
            pc: "",
            symbol: &symbol,
            module,
        },
        java,
        out,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two different stacks given one hash (as a 64-bit hash may, seldom): each is found
    /// as itself, neither as the other.
    #[test]
    fn stacks_whose_hashes_collide_stay_apart() {
        let a = (0, vec![Frame::Kernel(1)]);
        let b = (0, vec![Frame::Kernel(2)]);
        let mut index = StackIndex::default();
        let mut stacks = vec![(a.clone(), 1)];
        index.insert(&a, 7, 0);
        assert_eq!(index.find(&stacks, &a, 7), Some(0));
        assert_eq!(index.find(&stacks, &b, 7), None);
        stacks.push((b.clone(), 1));
        index.insert(&b, 7, 1);
        assert_eq!(index.find(&stacks, &b, 7), Some(1));
        assert_eq!(index.find(&stacks, &a, 7), Some(0));
        assert_eq!(index.find(&stacks, &a, index.hash(&a)), None);
    }

    /// The mapping remembered from the frame before is not used once a new mapping, or a
    /// fork, changed what is mapped where.
    #[test]
    fn a_frame_is_named_by_the_mapping_that_holds_it_now() {
        let mut modules = Vec::new();
        let mut tasks = Tasks::default();
        let (lib, other, jit) = (
            tasks.module_id("/lib/a.so", &mut modules),
            tasks.module_id("/lib/b.so", &mut modules),
            tasks.module_id("//anon", &mut modules),
        );
        tasks.map(1, 0x1000, 0x1000, 0x100, lib);
        let user = |module, offset| Frame::User { module, offset };
        assert_eq!(tasks.frame(1, 0x1500, false), user(lib, 0x600));
        assert_eq!(tasks.frame(1, 0x1600, false), user(lib, 0x700));
        tasks.map(1, 0x1400, 0x400, 0, other);
        assert_eq!(tasks.frame(1, 0x1500, false), user(other, 0x100));
        assert_eq!(tasks.frame(1, 0x1900, false), user(lib, 0xa00));
        assert_eq!(tasks.frame(1, 0x2000, false), Frame::Unmapped);
        assert_eq!(tasks.frame(2, 0x1500, false), Frame::Unmapped);
        tasks.fork(1, 2);
        assert_eq!(tasks.frame(2, 0x1500, false), user(other, 0x100));
        tasks.map(2, 0x1000, 0x1000, 0, jit);
        assert_eq!(
            tasks.frame(2, 0x1500, false),
            Frame::Jit {
                pid: 2,
                address: 0x1500
            }
        );
        assert_eq!(tasks.frame(1, 0x1500, false), user(other, 0x100));
        assert_eq!(tasks.frame(1, 0x1500, true), Frame::Kernel(0x1500));
    }

    #[test]
    fn a_mapping_whose_file_offsets_pass_2_pow_64_is_skipped_not_an_overflow() {
        let mut modules = Vec::new();
        let mut tasks = Tasks::default();
        let lib = tasks.module_id("/lib/a.so", &mut modules);
        tasks.map(1, 0x1000, 0x1000, u64::MAX - 0x10, lib);
        // Nothing mapped to cut, or to find a frame in.
        tasks.map(1, 0x1200, 0x100, 0, lib);
        assert_eq!(tasks.frame(1, 0x1500, false), Frame::Unmapped);
        // One that ends at 2^64 exactly is a mapping; one cut out of its middle leaves
        // its end at the offset it had.
        tasks.map(1, 0x1000, 0x1000, u64::MAX - 0x1000, lib);
        tasks.map(1, 0x1200, 0x100, 0, lib);
        let user = |module, offset| Frame::User { module, offset };
        assert_eq!(tasks.frame(1, 0x1fff, false), user(lib, u64::MAX - 1));
        assert_eq!(tasks.frame(1, 0x1300, false), user(lib, u64::MAX - 0xd00));
    }
}
