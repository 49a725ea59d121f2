//! The parts of perf.data that describe the records: the file header, the attributes,
//! and the EVENT_DESC and TRACING_DATA features (event names, tracepoint field offsets).
//! Every offset and size is checked against the data.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

pub(super) const MAGIC: &[u8; 8] = b"PERFILE2";

pub(super) const PERF_TYPE_TRACEPOINT: u32 = 2;

pub(super) const SAMPLE_IP: u64 = 1 << 0;
pub(super) const SAMPLE_TID: u64 = 1 << 1;
pub(super) const SAMPLE_TIME: u64 = 1 << 2;
pub(super) const SAMPLE_ADDR: u64 = 1 << 3;
pub(super) const SAMPLE_READ: u64 = 1 << 4;
pub(super) const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub(super) const SAMPLE_ID: u64 = 1 << 6;
pub(super) const SAMPLE_CPU: u64 = 1 << 7;
pub(super) const SAMPLE_PERIOD: u64 = 1 << 8;
pub(super) const SAMPLE_STREAM_ID: u64 = 1 << 9;
pub(super) const SAMPLE_RAW: u64 = 1 << 10;
pub(super) const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub(super) const SAMPLE_REGS_USER: u64 = 1 << 12;
pub(super) const SAMPLE_STACK_USER: u64 = 1 << 13;
pub(super) const SAMPLE_IDENTIFIER: u64 = 1 << 16;

pub(super) const RECORD_MMAP: u32 = 1;
pub(super) const RECORD_COMM: u32 = 3;
pub(super) const RECORD_EXIT: u32 = 4;
pub(super) const RECORD_FORK: u32 = 7;
pub(super) const RECORD_MMAP2: u32 = 10;
pub(super) const RECORD_SAMPLE: u32 = 9;
pub(super) const RECORD_SWITCH: u32 = 14;
pub(super) const RECORD_SWITCH_CPU_WIDE: u32 = 15;
pub(super) const RECORD_FINISHED_ROUND: u32 = 68;
pub(super) const RECORD_COMPRESSED: u32 = 81;
pub(super) const MISC_SWITCH_OUT: u16 = 1 << 13;

/// branch_sample_type: the branch unit records the call stack (`--call-graph lbr`).
pub(super) const BRANCH_CALL_STACK: u64 = 1 << 11;
/// A branch stack starts with the index of the hardware's newest entry.
pub(super) const BRANCH_HW_INDEX: u64 = 1 << 17;

pub(super) const FEAT_TRACING_DATA: usize = 1;
pub(super) const FEAT_EVENT_DESC: usize = 12;
pub(super) const FEAT_CLOCK_DATA: usize = 29;
/// perf_event_attr.use_clockid, a bit of the flags word.
const ATTR_USE_CLOCKID: u64 = 1 << 25;

pub(super) fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("perf.data: {}", what.into()),
    )
}

/// Little-endian field access over a byte slice, bounds-checked.
pub(super) struct Cursor<'a> {
    pub(super) data: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Cursor { data, at: 0 }
    }
    pub(super) fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or_else(|| invalid("record shorter than its fields"))?;
        let out = &self.data[self.at..end];
        self.at = end;
        Ok(out)
    }
    pub(super) fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub(super) fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    pub(super) fn skip(&mut self, n: usize) -> io::Result<()> {
        self.take(n).map(|_| ())
    }
}

pub(super) fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    bytes
        .get(at..at + 8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// One field of a tracepoint's format.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FieldFormat {
    pub(super) offset: usize,
    pub(super) size: usize,
    pub(super) signed: bool,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Tracepoint {
    pub(super) fields: HashMap<String, FieldFormat>,
}

impl Tracepoint {
    pub(super) fn int(&self, raw: &[u8], name: &str) -> Option<i64> {
        let f = self.fields.get(name)?;
        // Offsets and sizes are the file's numbers: one past usize::MAX reads nothing.
        let bytes = raw.get(f.offset..f.offset.checked_add(f.size)?)?;
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
pub(super) fn parse_format(text: &str) -> Option<(u64, String, Tracepoint)> {
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
pub(super) fn parse_tracing_data(data: &[u8]) -> io::Result<HashMap<u64, Tracepoint>> {
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

pub(super) fn read_cstr(c: &mut Cursor<'_>) -> io::Result<String> {
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
pub(super) struct Attr {
    pub(super) kind: u32,
    pub(super) config: u64,
    pub(super) sample_type: u64,
    /// Which branches a branch stack holds (0 in attributes older than the field).
    pub(super) branch_sample_type: u64,
    /// Which user registers a DWARF sample carries, one bit per register in perf's order.
    pub(super) sample_regs_user: u64,
    pub(super) name: String,
    /// The clock of the sample times (`perf record -k`); None: perf's own clock.
    pub(super) clockid: Option<i32>,
}

/// Everything needed to decode records: attributes by id, tracepoint formats.
pub(super) struct Layout {
    pub(super) attrs: Vec<Attr>,
    pub(super) by_id: HashMap<u64, usize>,
    pub(super) tracepoints: HashMap<u64, Tracepoint>,
    /// CLOCK_DATA (perf 5.11+ with -k): the clock id, then the wall clock and that clock
    /// read one after the other when recording began, in ns.
    pub(super) clock_data: Option<(u32, u64, u64)>,
}

impl Layout {
    /// Any attribute: the sample_id_all trailer layout is the same for all of perf's events.
    pub(super) fn trailer_type(&self) -> u64 {
        self.attrs.first().map(|a| a.sample_type).unwrap_or(0)
    }
}

/// `size` bytes at `offset`, refused when they would reach past the end of the file (a
/// hostile header must not size an allocation).
pub(super) fn read_at(file: &mut File, offset: u64, size: u64) -> io::Result<Vec<u8>> {
    let len = file.metadata()?.len();
    if offset.checked_add(size).is_none_or(|end| end > len) {
        return Err(invalid(format!(
            "a section of {size} bytes at offset {offset} reaches past the end of the file ({len} bytes)"
        )));
    }
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; size as usize];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// The sizes an attribute entry can have: perf_event_attr (64 bytes in its first version,
/// a few hundred today) plus the 16-byte ids section.
const ATTR_ENTRY_SIZES: std::ops::RangeInclusive<u64> = 80..=4096;

/// Where branch_sample_type sits in perf_event_attr (its third version, 80 bytes, added it).
const BRANCH_SAMPLE_TYPE_AT: usize = 72;
/// Where sample_regs_user sits (the fourth version, 96 bytes, added it with the stack size).
const SAMPLE_REGS_USER_AT: usize = 80;

pub(super) fn parse_attr(bytes: &[u8]) -> io::Result<Attr> {
    let mut c = Cursor::new(bytes);
    let kind = c.u32()?;
    let attr_size = c.u32()? as usize;
    let config = c.u64()?;
    let _period = c.u64()?;
    let sample_type = c.u64()?;
    let _read_format = c.u64()?;
    // The entry ends with the 16-byte ids section, which is not part of the attribute.
    let attr_len = attr_size.min(bytes.len().saturating_sub(16));
    let branch_sample_type = if attr_len >= BRANCH_SAMPLE_TYPE_AT + 8 {
        le_u64(bytes, BRANCH_SAMPLE_TYPE_AT).unwrap_or(0)
    } else {
        0
    };
    let sample_regs_user = if attr_len >= SAMPLE_REGS_USER_AT + 8 {
        le_u64(bytes, SAMPLE_REGS_USER_AT).unwrap_or(0)
    } else {
        0
    };
    let flags = c.u64()?;
    // clockid sits at byte 92 of attributes of 96 bytes and more (PERF_ATTR_SIZE_VER4+).
    let clockid = (flags & ATTR_USE_CLOCKID != 0 && attr_len >= 96)
        .then(|| bytes.get(92..96))
        .flatten()
        .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")));
    Ok(Attr {
        kind,
        config,
        sample_type,
        branch_sample_type,
        sample_regs_user,
        name: String::new(),
        clockid,
    })
}

pub(super) fn read_layout(file: &mut File) -> io::Result<(Layout, u64, u64)> {
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
    if !ATTR_ENTRY_SIZES.contains(&attr_size) {
        return Err(invalid(format!(
            "attribute size {attr_size} is not one perf writes ({} to {} bytes)",
            ATTR_ENTRY_SIZES.start(),
            ATTR_ENTRY_SIZES.end()
        )));
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
    let sections_at = data_off
        .checked_add(data_size)
        .ok_or_else(|| invalid("data section offset and size overflow"))?;
    let sections = read_at(file, sections_at, set.len() as u64 * 16).unwrap_or_default();
    let mut tracepoints = HashMap::new();
    let mut clock_data = None;
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
            FEAT_CLOCK_DATA if size >= 24 => {
                let data = read_at(file, off, 24)?;
                let mut c = Cursor::new(&data);
                let _version = c.u32()?;
                clock_data = Some((c.u32()?, c.u64()?, c.u64()?));
            }
            _ => {}
        }
    }
    Ok((
        Layout {
            attrs,
            by_id,
            tracepoints,
            clock_data,
        },
        data_off,
        data_size,
    ))
}

/// EVENT_DESC: the event names, matched to attributes by their ids.
pub(super) fn apply_event_desc(
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
