//! A reader for perf.data files, for the off-CPU fast mode: it walks the samples and
//! switch records of a downloaded perf.data directly, without `perf script` and without
//! unwinding or symbolizing, and hands the same `Record`s the text parser makes (with
//! tracepoint fields decoded from the file's own format descriptions) to the aggregator.
//!
//! Covered: the file header, attributes, EVENT_DESC and TRACING_DATA features, sample and
//! switch/comm records, zstd-compressed records (`perf record -z`), and perf's ordering of
//! events by time across per-CPU buffers (flushed at FINISHED_ROUND like perf does).

use crate::offcpu::script::{Fields, Record, Sample};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

const MAGIC: &[u8; 8] = b"PERFILE2";

const PERF_TYPE_TRACEPOINT: u32 = 2;

const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_ADDR: u64 = 1 << 3;
const SAMPLE_READ: u64 = 1 << 4;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_ID: u64 = 1 << 6;
const SAMPLE_CPU: u64 = 1 << 7;
const SAMPLE_PERIOD: u64 = 1 << 8;
const SAMPLE_STREAM_ID: u64 = 1 << 9;
const SAMPLE_RAW: u64 = 1 << 10;
const SAMPLE_IDENTIFIER: u64 = 1 << 16;

const RECORD_COMM: u32 = 3;
const RECORD_SAMPLE: u32 = 9;
const RECORD_SWITCH: u32 = 14;
const RECORD_SWITCH_CPU_WIDE: u32 = 15;
const RECORD_FINISHED_ROUND: u32 = 68;
const RECORD_COMPRESSED: u32 = 81;
const MISC_SWITCH_OUT: u16 = 1 << 13;

const FEAT_TRACING_DATA: usize = 1;
const FEAT_EVENT_DESC: usize = 12;

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("perf.data: {}", what.into()),
    )
}

/// Little-endian field access over a byte slice, bounds-checked.
struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(data: &'a [u8]) -> Self {
        Cursor { data, at: 0 }
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or_else(|| invalid("record shorter than its fields"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn skip(&mut self, n: usize) -> io::Result<()> {
        self.take(n).map(|_| ())
    }
}

fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    bytes
        .get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// One field of a tracepoint's format.
#[derive(Debug, Clone, PartialEq)]
struct FieldFormat {
    offset: usize,
    size: usize,
    signed: bool,
}

#[derive(Debug, Clone, Default)]
struct Tracepoint {
    fields: HashMap<String, FieldFormat>,
}

impl Tracepoint {
    fn int(&self, raw: &[u8], name: &str) -> Option<i64> {
        let f = self.fields.get(name)?;
        let bytes = raw.get(f.offset..f.offset + f.size)?;
        Some(match (f.size, f.signed) {
            (8, _) => i64::from_le_bytes(bytes.try_into().ok()?),
            (4, true) => i64::from(i32::from_le_bytes(bytes.try_into().ok()?)),
            (4, false) => i64::from(u32::from_le_bytes(bytes.try_into().ok()?)),
            (2, true) => i64::from(i16::from_le_bytes(bytes.try_into().ok()?)),
            (2, false) => i64::from(u16::from_le_bytes(bytes.try_into().ok()?)),
            (1, _) => i64::from(bytes[0]),
            _ => return None,
        })
    }
}

/// Parses the `format:` text of one tracepoint: its ID and field offsets.
fn parse_format(text: &str) -> Option<(u64, String, Tracepoint)> {
    let mut id = None;
    let mut name = None;
    let mut tp = Tracepoint::default();
    for line in text.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("field:") {
            // field:unsigned long ret;	offset:16;	size:8;	signed:1;
            let mut parts = rest.split(';').map(str::trim);
            let decl = parts.next()?;
            let field_name = decl
                .rsplit(|c: char| c.is_whitespace() || c == '*')
                .next()?
                .split('[')
                .next()?
                .to_string();
            let mut f = FieldFormat {
                offset: 0,
                size: 0,
                signed: false,
            };
            for part in parts {
                if let Some(v) = part.strip_prefix("offset:") {
                    f.offset = v.parse().ok()?;
                } else if let Some(v) = part.strip_prefix("size:") {
                    f.size = v.parse().ok()?;
                } else if let Some(v) = part.strip_prefix("signed:") {
                    f.signed = v == "1";
                }
            }
            tp.fields.insert(field_name, f);
        }
    }
    Some((id?, name?, tp))
}

/// The event format texts inside a TRACING_DATA feature section.
fn parse_tracing_data(data: &[u8]) -> io::Result<HashMap<u64, Tracepoint>> {
    let mut c = Cursor::new(data);
    let magic = c.take(10)?;
    if &magic[..3] != b"\x17\x08\x44" || &magic[3..] != b"tracing" {
        return Err(invalid("tracing data has an unknown magic"));
    }
    let version = read_cstr(&mut c)?;
    let big_endian = c.take(1)?[0] != 0;
    if big_endian {
        return Err(invalid("big-endian tracing data is not supported"));
    }
    c.skip(1)?; // long size
    c.skip(4)?; // page size
    for expected in ["header_page", "header_event"] {
        let name = read_cstr(&mut c)?;
        if name != expected {
            return Err(invalid(format!(
                "tracing data: expected {expected}, found {name}"
            )));
        }
        let size = c.u64()? as usize;
        c.skip(size)?;
    }
    let _ = version;
    // ftrace's own formats, then each system's.
    let ftrace = c.u32()?;
    for _ in 0..ftrace {
        let size = c.u64()? as usize;
        c.skip(size)?;
    }
    let mut out = HashMap::new();
    let systems = c.u32()?;
    for _ in 0..systems {
        let system = read_cstr(&mut c)?;
        let count = c.u32()?;
        for _ in 0..count {
            let size = c.u64()? as usize;
            let text = String::from_utf8_lossy(c.take(size)?);
            if let Some((id, _name, tp)) = parse_format(&text) {
                let _ = &system;
                out.insert(id, tp);
            }
        }
    }
    Ok(out)
}

fn read_cstr(c: &mut Cursor<'_>) -> io::Result<String> {
    let rest = &c.data[c.at..];
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .ok_or_else(|| invalid("unterminated string"))?;
    let s = String::from_utf8_lossy(&rest[..end]).into_owned();
    c.at += end + 1;
    Ok(s)
}

#[derive(Debug, Clone)]
struct Attr {
    kind: u32,
    config: u64,
    sample_type: u64,
    name: String,
}

/// Everything needed to decode records: attributes by id, tracepoint formats.
struct Layout {
    attrs: Vec<Attr>,
    by_id: HashMap<u64, usize>,
    tracepoints: HashMap<u64, Tracepoint>,
}

impl Layout {
    /// Any attribute: the sample_id_all trailer layout is the same for all of perf's events.
    fn trailer_type(&self) -> u64 {
        self.attrs.first().map(|a| a.sample_type).unwrap_or(0)
    }
}

fn read_at(file: &mut File, offset: u64, size: u64) -> io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; size as usize];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

fn parse_attr(bytes: &[u8]) -> io::Result<Attr> {
    let mut c = Cursor::new(bytes);
    let kind = c.u32()?;
    let _size = c.u32()?;
    let config = c.u64()?;
    let _period = c.u64()?;
    let sample_type = c.u64()?;
    let _read_format = c.u64()?;
    Ok(Attr {
        kind,
        config,
        sample_type,
        name: String::new(),
    })
}

fn read_layout(file: &mut File) -> io::Result<(Layout, u64, u64)> {
    let header = read_at(file, 0, 104)?;
    if &header[..8] != MAGIC {
        return Err(invalid("not a perf.data file (or a big-endian one)"));
    }
    let mut c = Cursor::new(&header[8..]);
    let _header_size = c.u64()?;
    let attr_size = c.u64()?;
    let (attrs_off, attrs_size) = (c.u64()?, c.u64()?);
    let (data_off, data_size) = (c.u64()?, c.u64()?);
    c.skip(16)?; // event_types
    let mut features = [0u64; 4];
    for f in &mut features {
        *f = c.u64()?;
    }

    let mut attrs = Vec::new();
    let mut by_id = HashMap::new();
    if attr_size == 0 {
        return Err(invalid("no event attributes"));
    }
    let table = read_at(file, attrs_off, attrs_size)?;
    for (index, entry) in table.chunks_exact(attr_size as usize).enumerate() {
        let attr = parse_attr(entry)?;
        let ids_section = &entry[entry.len() - 16..];
        let (ids_off, ids_size) = (
            le_u64(ids_section, 0).unwrap_or(0),
            le_u64(ids_section, 8).unwrap_or(0),
        );
        let ids = read_at(file, ids_off, ids_size)?;
        for id in ids.chunks_exact(8) {
            by_id.insert(u64::from_le_bytes(id.try_into().expect("8 bytes")), index);
        }
        attrs.push(attr);
    }

    // Feature sections follow the data, one perf_file_section per set bit, in bit order.
    let set: Vec<usize> = (0..256)
        .filter(|bit| features[bit / 64] & (1u64 << (bit % 64)) != 0)
        .collect();
    let sections = read_at(file, data_off + data_size, set.len() as u64 * 16).unwrap_or_default();
    let mut tracepoints = HashMap::new();
    for (i, bit) in set.iter().enumerate() {
        let Some(off) = le_u64(&sections, i * 16) else {
            break;
        };
        let size = le_u64(&sections, i * 16 + 8).unwrap_or(0);
        match *bit {
            FEAT_TRACING_DATA => {
                let data = read_at(file, off, size)?;
                tracepoints = parse_tracing_data(&data)?;
            }
            FEAT_EVENT_DESC => {
                let data = read_at(file, off, size)?;
                apply_event_desc(&data, &mut attrs, &by_id)?;
            }
            _ => {}
        }
    }
    Ok((
        Layout {
            attrs,
            by_id,
            tracepoints,
        },
        data_off,
        data_size,
    ))
}

/// EVENT_DESC: the event names, matched to attributes by their ids.
fn apply_event_desc(
    data: &[u8],
    attrs: &mut [Attr],
    by_id: &HashMap<u64, usize>,
) -> io::Result<()> {
    let mut c = Cursor::new(data);
    let count = c.u32()?;
    let attr_size = c.u32()? as usize;
    for _ in 0..count {
        c.skip(attr_size)?;
        let nr_ids = c.u32()?;
        let len = c.u32()? as usize;
        let raw = c.take(len)?;
        let name =
            String::from_utf8_lossy(raw.split(|b| *b == 0).next().unwrap_or(raw)).into_owned();
        for _ in 0..nr_ids {
            let id = c.u64()?;
            if let Some(index) = by_id.get(&id) {
                attrs[*index].name = name.clone();
            }
        }
    }
    Ok(())
}

/// A decoded event, small enough to hold a round's worth for sorting.
#[derive(Debug, Clone)]
enum Event {
    Sample {
        attr: usize,
        pid: u32,
        tid: u32,
        time: u64,
        fields: Fields,
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
}

impl Event {
    fn time(&self) -> u64 {
        match self {
            Event::Sample { time, .. } | Event::Switch { time, .. } | Event::Comm { time, .. } => {
                *time
            }
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

fn decode(kind: u32, misc: u16, body: &[u8], layout: &Layout) -> io::Result<Option<Event>> {
    match kind {
        RECORD_SAMPLE => decode_sample(body, layout).map(Some),
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
        _ => Ok(None),
    }
}

fn decode_sample(body: &[u8], layout: &Layout) -> io::Result<Event> {
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
    if st & SAMPLE_CALLCHAIN != 0 {
        let nr = c.u64()? as usize;
        c.skip(
            nr.checked_mul(8)
                .ok_or_else(|| invalid("callchain too long"))?,
        )?;
    }
    let mut fields = Fields::default();
    if st & SAMPLE_RAW != 0 && attr.kind == PERF_TYPE_TRACEPOINT {
        let size = c.u32()? as usize;
        let raw = c.take(size)?;
        if let Some(tp) = layout.tracepoints.get(&attr.config) {
            fields.ret = tp.int(raw, "ret");
            fields.prev_state = tp.int(raw, "prev_state").map(state_letters);
            fields.bytes = tp.int(raw, "bytes").and_then(|b| u64::try_from(b).ok());
        }
    }
    Ok(Event::Sample {
        attr: attr_index,
        pid,
        tid,
        time,
        fields,
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
/// switch record; returns how many were handed over.
pub fn for_each_record<F>(path: &Path, mut on_record: F) -> io::Result<u64>
where
    F: FnMut(Record<'_>),
{
    let mut file = File::open(path)?;
    let (layout, data_off, data_size) = read_layout(&mut file)?;
    file.seek(SeekFrom::Start(data_off))?;
    let mut reader = BufReader::with_capacity(1 << 20, file.take(data_size));

    let mut state = Emitter {
        comms: HashMap::new(),
        pending: Vec::new(),
        flush_limit: 0,
        round_max: 0,
        count: 0,
    };
    let mut decompressor: Option<zstd::stream::raw::Decoder<'static>> = None;
    let mut inflated: Vec<u8> = Vec::new();
    let mut header = [0u8; 8];
    let mut body = Vec::new();
    loop {
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let kind = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let misc = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
        let size = u16::from_le_bytes(header[6..8].try_into().expect("2 bytes")) as usize;
        if size < 8 {
            return Err(invalid(
                "record with a size below its header (truncated file?)",
            ));
        }
        body.resize(size - 8, 0);
        match reader.read_exact(&mut body) {
            Ok(()) => {}
            // A truncated tail: stop at the last whole record.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        match kind {
            RECORD_COMPRESSED => {
                let decoder = match &mut decompressor {
                    Some(d) => d,
                    None => decompressor.insert(zstd::stream::raw::Decoder::new()?),
                };
                inflate(decoder, &body, &mut inflated)?;
                let used = state.take_records(&inflated, &layout, &mut on_record)?;
                inflated.drain(..used);
            }
            RECORD_FINISHED_ROUND => state.finish_round(&layout, &mut on_record),
            _ => {
                if let Some(event) = decode(kind, misc, &body, &layout)? {
                    state.push(event);
                }
            }
        }
    }
    state.flush_all(&layout, &mut on_record);
    Ok(state.count)
}

fn inflate(
    decoder: &mut zstd::stream::raw::Decoder<'static>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<()> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut src = InBuffer::around(input);
    let mut chunk = vec![0u8; 256 * 1024];
    while src.pos < input.len() {
        let mut dst = OutBuffer::around(&mut chunk[..]);
        decoder.run(&mut src, &mut dst)?;
        let written = dst.pos();
        out.extend_from_slice(&chunk[..written]);
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
        out.extend_from_slice(&chunk[..written]);
    }
    Ok(())
}

/// Holds decoded events until perf's round protocol says they can be emitted in order.
struct Emitter {
    comms: HashMap<u32, String>,
    pending: Vec<Event>,
    flush_limit: u64,
    round_max: u64,
    count: u64,
}

impl Emitter {
    fn push(&mut self, event: Event) {
        self.round_max = self.round_max.max(event.time());
        self.pending.push(event);
    }

    /// Whole records out of decompressed bytes; returns the bytes used.
    fn take_records<F: FnMut(Record<'_>)>(
        &mut self,
        bytes: &[u8],
        layout: &Layout,
        on_record: &mut F,
    ) -> io::Result<usize> {
        let mut at = 0;
        while bytes.len() - at >= 8 {
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
            let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().expect("2 bytes"));
            let size =
                u16::from_le_bytes(bytes[at + 6..at + 8].try_into().expect("2 bytes")) as usize;
            if size < 8 {
                return Err(invalid("compressed record with a size below its header"));
            }
            if bytes.len() - at < size {
                break;
            }
            let body = &bytes[at + 8..at + size];
            if kind == RECORD_FINISHED_ROUND {
                self.finish_round(layout, on_record);
            } else if let Some(event) = decode(kind, misc, body, layout)? {
                self.push(event);
            }
            at += size;
        }
        Ok(at)
    }

    /// perf's rule: at the end of a round, everything up to the previous round's latest
    /// timestamp is complete and can go out sorted.
    fn finish_round<F: FnMut(Record<'_>)>(&mut self, layout: &Layout, on_record: &mut F) {
        let limit = self.flush_limit;
        self.flush_limit = self.round_max;
        self.pending.sort_by_key(Event::time);
        let split = self.pending.partition_point(|e| e.time() <= limit);
        let ready: Vec<Event> = self.pending.drain(..split).collect();
        for event in ready {
            self.emit(event, layout, on_record);
        }
    }

    fn flush_all<F: FnMut(Record<'_>)>(&mut self, layout: &Layout, on_record: &mut F) {
        self.pending.sort_by_key(Event::time);
        let ready: Vec<Event> = std::mem::take(&mut self.pending);
        for event in ready {
            self.emit(event, layout, on_record);
        }
    }

    fn emit<F: FnMut(Record<'_>)>(&mut self, event: Event, layout: &Layout, on_record: &mut F) {
        match event {
            Event::Comm { tid, comm, .. } => {
                self.comms.insert(tid, comm);
            }
            Event::Switch { tid, time, out } => {
                self.count += 1;
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
            } => {
                self.count += 1;
                let comm = self
                    .comms
                    .get(&tid)
                    .map(String::as_str)
                    .unwrap_or("[unknown]");
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
        }
    }
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
    fn prev_state_reads_like_perf_prints_it() {
        assert_eq!(state_letters(0), "R");
        assert_eq!(state_letters(1), "S");
        assert_eq!(state_letters(2), "D");
        assert_eq!(state_letters(0x100), "R+");
    }
}
