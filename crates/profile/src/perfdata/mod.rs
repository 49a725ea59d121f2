//! A reader for perf.data files, for the off-CPU fast mode: it walks the samples and
//! switch records of a downloaded perf.data directly, without `perf script` and without
//! unwinding or symbolizing, and hands the same `Record`s the text parser makes (with
//! tracepoint fields decoded from the file's own format descriptions) to the aggregator.
//!
//! Covered: the file header, attributes, EVENT_DESC and TRACING_DATA features, sample and
//! switch/comm records, zstd-compressed records (`perf record -z`), and perf's ordering of
//! events by time across per-CPU buffers (flushed at FINISHED_ROUND like perf does).
//! `stacks` reads the same records with their callchains and the process events (mmap,
//! fork, exit) for the native CPU fold; it refuses files whose stacks need unwinding
//! (`callgraph`), where it would keep part of every stack. `for_each_record` reads no
//! stacks, so its counts are whole whatever the call graphs.

mod callgraph;
mod header;
mod order;
mod pager;
pub mod stacks;
pub mod unwind;

pub use callgraph::{recorded_call_graph, CallGraph};

use crate::offcpu::script::{Fields, Record, Sample};
use header::*;
use order::{Emitter, MAX_HELD_BYTES};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::Path;

/// A decoded event, small enough to hold a round's worth for sorting.
/// Borrows from the mapped file where it can (a DWARF sample's stack bytes).
#[derive(Debug, Clone)]
enum Event<'a> {
    Sample {
        attr: usize,
        pid: u32,
        tid: u32,
        time: u64,
        fields: Fields,
        /// Frame-pointer callchain with perf's context markers (only when asked for).
        callchain: Vec<u64>,
        /// The user registers and stack of a DWARF sample (only when asked for).
        user: Option<Box<unwind::UserState<'a>>>,
    },
    Switch {
        tid: u32,
        time: u64,
        out: bool,
    },
    Comm {
        tid: u32,
        time: u64,
        comm: String,
    },
    Mmap {
        pid: u32,
        time: u64,
        start: u64,
        len: u64,
        pgoff: u64,
        filename: String,
    },
    /// FORK (`exit` false) and EXIT records.
    Task {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
        exit: bool,
    },
}

impl Event<'_> {
    fn time(&self) -> u64 {
        match self {
            Event::Sample { time, .. }
            | Event::Switch { time, .. }
            | Event::Comm { time, .. }
            | Event::Mmap { time, .. }
            | Event::Task { time, .. } => *time,
        }
    }
}

/// Size of the sample_id_all trailer for a sample_type.
fn trailer_size(sample_type: u64) -> usize {
    let mut size = 0;
    for (bit, bytes) in [
        (SAMPLE_TID, 8),
        (SAMPLE_TIME, 8),
        (SAMPLE_ID, 8),
        (SAMPLE_STREAM_ID, 8),
        (SAMPLE_CPU, 8),
        (SAMPLE_IDENTIFIER, 8),
    ] {
        if sample_type & bit != 0 {
            size += bytes;
        }
    }
    size
}

/// (tid, time) from the sample_id_all trailer of a non-sample record body.
fn trailer_tid_time(body: &[u8], sample_type: u64) -> (Option<u32>, u64) {
    let size = trailer_size(sample_type);
    if body.len() < size {
        return (None, 0);
    }
    let mut c = Cursor::new(&body[body.len() - size..]);
    let mut tid = None;
    let mut time = 0;
    if sample_type & SAMPLE_TID != 0 {
        let _pid = c.u32().ok();
        tid = c.u32().ok();
    }
    if sample_type & SAMPLE_TIME != 0 {
        time = c.u64().unwrap_or(0);
    }
    (tid, time)
}

/// Which records a pass over perf.data decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// The samples with their fields, and the comm and switch records.
    Samples,
    /// The same with the samples' callchains and user stacks, and the process records
    /// (mmap, fork, exit) that name them.
    Stacks,
    /// The mmap records alone: which binaries a DWARF capture's stacks need.
    Mappings,
}

/// How a DWARF sample's stack bytes are held: borrowed from the mapped file, or copied out
/// of a decompression buffer that is reused.
pub(super) type StackBytes<'b, 'a> = fn(&'b [u8]) -> Cow<'a, [u8]>;

fn decode<'b, 'a>(
    kind: u32,
    misc: u16,
    body: &'b [u8],
    layout: &Layout,
    wanted: Wanted,
    stack: StackBytes<'b, 'a>,
) -> io::Result<Option<Event<'a>>> {
    if wanted == Wanted::Mappings && !matches!(kind, RECORD_MMAP | RECORD_MMAP2) {
        return Ok(None);
    }
    match kind {
        RECORD_SAMPLE => decode_sample(body, layout, wanted == Wanted::Stacks, stack).map(Some),
        RECORD_SWITCH | RECORD_SWITCH_CPU_WIDE => {
            let (tid, time) = trailer_tid_time(body, layout.trailer_type());
            Ok(tid.map(|tid| Event::Switch {
                tid,
                time,
                out: misc & MISC_SWITCH_OUT != 0,
            }))
        }
        RECORD_COMM => {
            let mut c = Cursor::new(body);
            let _pid = c.u32()?;
            let tid = c.u32()?;
            let rest = &body[8..];
            let comm =
                String::from_utf8_lossy(rest.split(|b| *b == 0).next().unwrap_or(&[])).into_owned();
            let (_, time) = trailer_tid_time(body, layout.trailer_type());
            Ok(Some(Event::Comm { tid, time, comm }))
        }
        RECORD_MMAP | RECORD_MMAP2 if wanted != Wanted::Samples => {
            let mut c = Cursor::new(body);
            let pid = c.u32()?;
            let _tid = c.u32()?;
            let (start, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
            if kind == RECORD_MMAP2 {
                // device and inode (or a build id), then prot and flags
                c.skip(24 + 8)?;
            }
            let filename = read_cstr(&mut c)?;
            let (_, time) = trailer_tid_time(body, layout.trailer_type());
            Ok(Some(Event::Mmap {
                pid,
                time,
                start,
                len,
                pgoff,
                filename,
            }))
        }
        RECORD_FORK | RECORD_EXIT if wanted == Wanted::Stacks => {
            let mut c = Cursor::new(body);
            let (pid, ppid, tid, ptid) = (c.u32()?, c.u32()?, c.u32()?, c.u32()?);
            let (_, time) = trailer_tid_time(body, layout.trailer_type());
            Ok(Some(Event::Task {
                pid,
                ppid,
                tid,
                ptid,
                time,
                exit: kind == RECORD_EXIT,
            }))
        }
        _ => Ok(None),
    }
}

fn decode_sample<'b, 'a>(
    body: &'b [u8],
    layout: &Layout,
    callchains: bool,
    stack: StackBytes<'b, 'a>,
) -> io::Result<Event<'a>> {
    // Which event: perf puts the id first (IDENTIFIER) when the events' layouts differ,
    // else at the ID position, which all its events then share.
    let common = layout.trailer_type();
    let id = if common & SAMPLE_IDENTIFIER != 0 {
        le_u64(body, 0)
    } else if common & SAMPLE_ID != 0 {
        let before = [SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_ADDR]
            .iter()
            .filter(|b| common & **b != 0)
            .count();
        le_u64(body, before * 8)
    } else {
        None
    };
    let attr_index = match id {
        Some(id) => *layout
            .by_id
            .get(&id)
            .ok_or_else(|| invalid(format!("sample with unknown id {id}")))?,
        None if layout.attrs.len() == 1 => 0,
        None => return Err(invalid("samples carry no event id")),
    };
    let attr = &layout.attrs[attr_index];
    let st = attr.sample_type;
    let mut c = Cursor::new(body);
    if st & SAMPLE_IDENTIFIER != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_IP != 0 {
        c.skip(8)?;
    }
    let (mut pid, mut tid) = (0, 0);
    if st & SAMPLE_TID != 0 {
        pid = c.u32()?;
        tid = c.u32()?;
    }
    let mut time = 0;
    if st & SAMPLE_TIME != 0 {
        time = c.u64()?;
    }
    if st & SAMPLE_ADDR != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_ID != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_STREAM_ID != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_CPU != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_PERIOD != 0 {
        c.skip(8)?;
    }
    if st & SAMPLE_READ != 0 {
        return Err(invalid(
            "samples with read values are not supported by the fast reader",
        ));
    }
    let mut callchain = Vec::new();
    if st & SAMPLE_CALLCHAIN != 0 {
        let nr = c.u64()? as usize;
        let ips = c.take(
            nr.checked_mul(8)
                .ok_or_else(|| invalid("callchain too long"))?,
        )?;
        if callchains {
            callchain = ips
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect();
        }
    }
    let mut fields = Fields::default();
    if st & SAMPLE_RAW != 0 {
        let size = c.u32()? as usize;
        let raw = c.take(size)?;
        if let Some(tp) = layout
            .tracepoints
            .get(&attr.config)
            .filter(|_| attr.kind == PERF_TYPE_TRACEPOINT)
        {
            fields.ret = tp.int(raw, "ret");
            fields.prev_state = tp.int(raw, "prev_state").map(state_letters);
            fields.bytes = tp.int(raw, "bytes").and_then(|b| u64::try_from(b).ok());
        }
    }
    let user = if callchains && st & (SAMPLE_REGS_USER | SAMPLE_STACK_USER) != 0 {
        unwind::decode_user(&mut c, attr, stack)?.map(Box::new)
    } else {
        None
    };
    Ok(Event::Sample {
        attr: attr_index,
        pid,
        tid,
        time,
        fields,
        callchain,
        user,
    })
}

/// sched_switch's prev_state as perf prints it (`S`, `D`, `R`, `R+` ...).
fn state_letters(state: i64) -> String {
    const LETTERS: [(i64, &str); 8] = [
        (0x1, "S"),
        (0x2, "D"),
        (0x4, "T"),
        (0x8, "t"),
        (0x10, "X"),
        (0x20, "Z"),
        (0x40, "P"),
        (0x80, "I"),
    ];
    // TASK_REPORT_MAX (0x100) marks a preempted, still runnable task.
    if state & 0x100 != 0 {
        return "R+".into();
    }
    let letters: Vec<&str> = LETTERS
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, l)| *l)
        .collect();
    if letters.is_empty() {
        "R".into()
    } else {
        letters.join("|")
    }
}

/// Reads the records of `path` in time order and calls `on_record` for each sample and
/// CLOCK_REALTIME and CLOCK_MONOTONIC, as the kernel numbers them.
const CLOCK_REALTIME: i32 = 0;
const CLOCK_MONOTONIC: i32 = 1;
/// gettimeofday, which perf reads beside the other clock for CLOCK_DATA, has microseconds.
const CLOCK_DATA_ERROR_NS: u64 = 1_000;

/// The clock a recording's sample times are on and how it maps to the Unix epoch: the
/// samples' own when recorded with `-k CLOCK_REALTIME`; with another clock, the offset
/// perf measured when recording began (its CLOCK_DATA feature: the wall clock and that
/// clock read one after the other). None when perf used its own clock (no `-k`) or wrote
/// no clock data.
pub fn recording_clock(path: &Path) -> io::Result<Option<crate::timeline::Clock>> {
    let mut file = File::open(path)?;
    let (layout, _, _) = read_layout(&mut file)?;
    let Some(clockid) = layout.attrs.iter().find_map(|a| a.clockid) else {
        return Ok(None);
    };
    if clockid == CLOCK_REALTIME {
        return Ok(Some(crate::timeline::Clock::realtime()));
    }
    Ok(layout
        .clock_data
        .filter(|(id, _, _)| *id as i32 == clockid)
        .map(|(_, wall_ns, clock_ns)| crate::timeline::Clock {
            name: match clockid {
                CLOCK_MONOTONIC => "CLOCK_MONOTONIC".to_string(),
                other => format!("clock {other}"),
            },
            to_unix_ns: (wall_ns as i64).wrapping_sub(clock_ns as i64),
            error_ns: CLOCK_DATA_ERROR_NS,
        }))
}

/// switch record; returns how many were handed over.
pub fn for_each_record<F>(path: &Path, mut on_record: F) -> io::Result<u64>
where
    F: FnMut(Record<'_>),
{
    let mut comms: HashMap<u32, String> = HashMap::new();
    let mut count = 0u64;
    read_events(path, Wanted::Samples, |event, layout| match event {
        Event::Comm { tid, comm, .. } => {
            comms.insert(tid, comm);
        }
        Event::Switch { tid, time, out } => {
            count += 1;
            on_record(Record::Switch {
                tid,
                time_ns: time,
                out,
            });
        }
        Event::Sample {
            attr,
            pid,
            tid,
            time,
            fields,
            ..
        } => {
            count += 1;
            let comm = comms.get(&tid).map(String::as_str).unwrap_or("[unknown]");
            let name = layout
                .attrs
                .get(attr)
                .map(|a| a.name.as_str())
                .unwrap_or("unknown");
            on_record(Record::Sample(Sample {
                comm,
                pid,
                tid,
                time_ns: time,
                event: name,
                trace: "",
                frames: &[],
                fields: Some(fields),
            }));
        }
        Event::Mmap { .. } | Event::Task { .. } => {}
    })?;
    Ok(count)
}

/// Reads the records of `path` and hands them to `on_event` in perf's time order;
/// `wanted` says which records are decoded.
fn read_events<F>(path: &Path, wanted: Wanted, mut on_event: F) -> io::Result<()>
where
    F: FnMut(Event<'_>, &Layout),
{
    let mut file = File::open(path)?;
    let (layout, data_off, data_size) = read_layout(&mut file)?;
    let call_graph = CallGraph::of_attrs(&layout.attrs);
    if wanted != Wanted::Samples && !call_graph.folds_natively() {
        return Err(callgraph::not_native(call_graph));
    }
    let len = file.metadata()?.len();
    if data_off > len {
        return Err(invalid(format!(
            "the data section starts at {data_off}, past the end of the file ({len} bytes)"
        )));
    }
    // Mapped, not read: the records are decoded where they lie, without copying hundreds
    // of megabytes of a DWARF capture's stack copies through a buffer first. The file is
    // devprof's download or one the user names, not rewritten while it is read.
    // SAFETY: read-only; see above (the symbolizer maps binaries the same way).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let _ = map.advise(memmap2::Advice::Sequential);
    let start = data_off as usize;
    let end = data_off.saturating_add(data_size).min(len) as usize;
    let read = pager::paged(&map, start..end, |progress| {
        decode_records(&map, start..end, &layout, wanted, progress, &mut |event| {
            on_event(event, &layout)
        })
    });
    drop_aside(map);
    read
}

/// Drops `value` on a thread of its own, where one can be had: unmapping the populated
/// pages of a big mapping (a DWARF capture's tens of megabytes, a library's unwind tables)
/// took a native fold's reader milliseconds its caller need not wait for.
pub(crate) fn drop_aside<T: Send + 'static>(value: T) {
    // Without a thread, `value` is dropped here.
    let _ = std::thread::Builder::new()
        .name("unmap".into())
        .spawn(move || drop(value));
}

/// Decodes the records of `map[data]` and emits them in perf's time order.
fn decode_records<'m>(
    map: &'m memmap2::Mmap,
    data: std::ops::Range<usize>,
    layout: &Layout,
    wanted: Wanted,
    progress: &pager::Progress<'_>,
    emit: &mut impl FnMut(Event<'m>),
) -> io::Result<()> {
    let start = data.start;
    let data = &map[data];
    let mut at = 0usize;

    let mut state = Emitter::new(wanted, MAX_HELD_BYTES);
    let mut decompressor: Option<zstd::stream::raw::Decoder<'static>> = None;
    let mut inflated: Vec<u8> = Vec::new();
    let mut inflate_left = inflate_budget(data.len());
    while let Some(header) = data.get(at..at + 8) {
        progress.reached(start + at);
        let kind = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let misc = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
        let size = u16::from_le_bytes(header[6..8].try_into().expect("2 bytes")) as usize;
        if size < 8 {
            return Err(invalid(
                "record with a size below its header (truncated file?)",
            ));
        }
        // A truncated tail: stop at the last whole record.
        let Some(body) = data.get(at + 8..at + size) else {
            break;
        };
        at += size;
        prefetch_next(data, at);
        match kind {
            RECORD_COMPRESSED => {
                let decoder = match &mut decompressor {
                    Some(d) => d,
                    None => decompressor.insert(zstd::stream::raw::Decoder::new()?),
                };
                inflate(decoder, body, &mut inflated, &mut inflate_left)?;
                let used = state.take_records(&inflated, layout, emit)?;
                inflated.drain(..used);
            }
            RECORD_FINISHED_ROUND => state.finish_round(emit),
            _ => {
                if let Some(event) = decode(kind, misc, body, layout, wanted, Cow::Borrowed)? {
                    state.push(event, emit);
                }
            }
        }
    }
    state.flush_all(emit);
    Ok(())
}

/// Asks the CPU for the record at `at` a turn before it is decoded: its header (asked a
/// turn ago) gives its size, and with it where its head (a sample's fields, callchain and
/// user registers), its tail (a DWARF sample's stack size) and the next header lie. Each is
/// in the mapped file, in no cache, and read at once by its decoding.
fn prefetch_next(data: &[u8], at: usize) {
    let Some(header) = data.get(at..at + 8) else {
        return;
    };
    let size = u16::from_le_bytes(header[6..8].try_into().expect("2 bytes")) as usize;
    unwind::prefetch_range(data, at, size.min(RECORD_HEAD));
    if size > RECORD_HEAD {
        unwind::prefetch_range(data, at + size - 8, 8);
    }
    unwind::prefetch_range(data, at + size, 8);
}

/// The part of a record asked for whole: a sample up to its user registers, most often.
const RECORD_HEAD: usize = 512;

/// Most decompressed bytes held at once: perf compresses one ring-buffer read per record
/// (megabytes), so far more than this is a hostile file, not a capture.
const MAX_INFLATED: usize = 256 << 20;

/// How many times its data section a file's compressed records may inflate into, all
/// together (and at least `MAX_INFLATED`): perf's zstd makes a capture a few times
/// smaller, while a 64 KiB record can claim 256 MiB, and a 10 MiB file 40 GiB.
const MAX_INFLATE_RATIO: usize = 100;

/// The bytes all the compressed records of a data section of `data_len` bytes may inflate
/// into.
fn inflate_budget(data_len: usize) -> usize {
    data_len.saturating_mul(MAX_INFLATE_RATIO).max(MAX_INFLATED)
}

/// Inflates one compressed record onto `out`, within the per-record bound and what is
/// `left` of the file's.
fn inflate(
    decoder: &mut zstd::stream::raw::Decoder<'static>,
    input: &[u8],
    out: &mut Vec<u8>,
    left: &mut usize,
) -> io::Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut src = InBuffer::around(input);
    let mut chunk = vec![0u8; 256 * 1024];
    let mut room = |out: &Vec<u8>, more: usize| {
        if out.len().saturating_add(more) > MAX_INFLATED {
            return Err(invalid(format!(
                "a compressed record inflates past {} MiB",
                MAX_INFLATED >> 20
            )));
        }
        *left = left.checked_sub(more).ok_or_else(|| {
            invalid(format!(
                "the compressed records inflate past {MAX_INFLATE_RATIO} times the file's data (or {} MiB)",
                MAX_INFLATED >> 20
            ))
        })?;
        Ok(())
    };
    while src.pos < input.len() {
        let before = src.pos;
        let mut dst = OutBuffer::around(&mut chunk[..]);
        decoder.run(&mut src, &mut dst)?;
        let written = dst.pos();
        room(out, written)?;
        out.extend_from_slice(&chunk[..written]);
        if written == 0 && src.pos == before {
            return Err(invalid("a compressed record makes no progress"));
        }
    }
    // Drain what the decoder still holds.
    loop {
        let mut dst = OutBuffer::around(&mut chunk[..]);
        let mut empty = InBuffer::around(&[][..]);
        decoder.run(&mut empty, &mut dst)?;
        let written = dst.pos();
        if written == 0 {
            break;
        }
        room(out, written)?;
        out.extend_from_slice(&chunk[..written]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_tracepoint_format() {
        let text = "name: sys_exit_read\nID: 774\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                    \tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n\n\
                    print fmt: \"0x%lx\", REC->ret\n";
        let (id, name, tp) = parse_format(text).unwrap();
        assert_eq!((id, name.as_str()), (774, "sys_exit_read"));
        assert_eq!(
            tp.fields["ret"],
            FieldFormat {
                offset: 16,
                size: 8,
                signed: true
            }
        );
        let mut raw = vec![0u8; 24];
        raw[16..24].copy_from_slice(&(-11i64).to_le_bytes());
        assert_eq!(tp.int(&raw, "ret"), Some(-11));
    }

    #[test]
    fn a_tracepoint_field_whose_offset_passes_usize_reads_nothing_not_an_overflow() {
        let text = format!(
            "name: sys_exit_read\nID: 774\nformat:\n\tfield:long ret;\toffset:{};\tsize:8;\tsigned:1;\n",
            usize::MAX - 3
        );
        let (_, _, tp) = parse_format(&text).unwrap();
        assert_eq!(tp.int(&[0u8; 64], "ret"), None);
    }

    /// A perf.data header whose attribute size is 2^48, as a hostile file would carry.
    fn header_with_attr_size(attr_size: u64) -> Vec<u8> {
        let mut h = b"PERFILE2".to_vec();
        for v in [104u64, attr_size, 104, 1 << 20, 104, 0, 0, 0, 0, 0, 0, 0] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.resize(104 + 64, 0);
        h
    }

    #[test]
    fn a_2_pow_48_attribute_size_is_an_error_not_an_allocation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostile.data");
        std::fs::write(&path, header_with_attr_size(1 << 48)).unwrap();
        let err = for_each_record(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("attribute size"), "{err}");
        // A plausible size whose table reaches past the end of the file.
        std::fs::write(&path, header_with_attr_size(136)).unwrap();
        let err = for_each_record(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("past the end"), "{err}");
    }

    /// A perf.data of one attribute (tid and time in every record's trailer) and the
    /// records `data`.
    fn perf_data_of(data: &[u8]) -> Vec<u8> {
        let mut attr = Vec::new();
        attr.extend_from_slice(&0u32.to_le_bytes()); // type
        attr.extend_from_slice(&64u32.to_le_bytes()); // size
        attr.extend_from_slice(&0u64.to_le_bytes()); // config
        attr.extend_from_slice(&0u64.to_le_bytes()); // period
        attr.extend_from_slice(&(SAMPLE_TID | SAMPLE_TIME).to_le_bytes());
        attr.resize(80, 0); // the rest, and an empty ids section
        let (attrs_off, data_off) = (104u64, 104 + attr.len() as u64);
        let mut file = b"PERFILE2".to_vec();
        for v in [
            104,
            attr.len() as u64,
            attrs_off,
            attr.len() as u64,
            data_off,
        ] {
            file.extend_from_slice(&v.to_le_bytes());
        }
        file.extend_from_slice(&(data.len() as u64).to_le_bytes());
        file.resize(104, 0);
        file.extend_from_slice(&attr);
        file.extend_from_slice(data);
        file
    }

    fn record(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    #[test]
    fn a_perf_data_whose_compressed_records_inflate_past_its_budget_is_refused() {
        // 16 MiB of records of a kind nobody reads, a few KiB compressed: 20 such records
        // (a 100 KiB file) once inflated into 320 MiB, and with samples in them, held
        // every event until the end.
        let skipped = record(99, &[0u8; 65520]);
        let plain = skipped.repeat(256);
        let packed = zstd::bulk::compress(&plain, 3).unwrap();
        let compressed = record(RECORD_COMPRESSED, &packed);
        let file = perf_data_of(&compressed.repeat(20));
        assert!(file.len() < 200 << 10, "{}", file.len());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hostile.data");
        std::fs::write(&path, &file).unwrap();
        let err = for_each_record(&path, |_| {}).unwrap_err();
        assert!(err.to_string().contains("inflate past 100 times"), "{err}");
        // Within the budget (15 of them: 240 MiB) the file reads.
        std::fs::write(&path, perf_data_of(&compressed.repeat(15))).unwrap();
        assert_eq!(for_each_record(&path, |_| {}).unwrap(), 0);
    }

    #[test]
    fn prev_state_reads_like_perf_prints_it() {
        assert_eq!(state_letters(0), "R");
        assert_eq!(state_letters(1), "S");
        assert_eq!(state_letters(2), "D");
        assert_eq!(state_letters(0x100), "R+");
    }
}
