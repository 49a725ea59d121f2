//! A runtime's jitdump (`jit-<pid>.dump`, perf's format for JIT code: V8 with
//! `--perf-prof`, a JVM with perf's JVMTI agent), read for the names of its code. perf
//! itself needs `perf inject --jit` to use one; devprof reads the code loads and moves
//! directly, as it reads a perf map. The runtime maps the file executable so that the
//! recording names it; its path comes from the recording, its bytes from the profiled
//! process: both are data. Records are bounded by the file, a truncated last record (the
//! runtime was still writing) ends the read, and nothing in it can make the reader panic.

use crate::perfmap::PerfMap;

/// `JiTD` as the writer's byte order wrote it.
const MAGIC: u32 = 0x4A69_5444;
const HEADER_MIN: usize = 40;
const RECORD_HEADER: usize = 16;
const CODE_LOAD: u32 = 0;
const CODE_MOVE: u32 = 1;
/// The fixed part of a code load: pid, tid, vma, code address, code size, code index.
const LOAD_FIXED: usize = 4 + 4 + 8 + 8 + 8 + 8;
/// A move: pid, tid, vma, old address, new address, code size, code index.
const MOVE_FIXED: usize = 4 + 4 + 8 + 8 + 8 + 8 + 8;
/// Longest name kept; a longer one is cut (names are shown, never used as paths).
const NAME_LIMIT: usize = 4096;

/// Why a file is no jitdump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JitdumpError {
    TooShort,
    NotJitdump,
    BadHeader,
}

impl std::fmt::Display for JitdumpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JitdumpError::TooShort => "shorter than a jitdump header",
            JitdumpError::NotJitdump => "no jitdump magic (JiTD) at its start",
            JitdumpError::BadHeader => "its header gives a size outside the file",
        })
    }
}

impl std::error::Error for JitdumpError {}

/// What a jitdump says: the pid that wrote it and its code by address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jitdump {
    pub pid: u32,
    pub map: PerfMap,
    /// Code loads read.
    pub loads: usize,
    /// Whether the file ended inside a record (the runtime was writing it).
    pub truncated: bool,
}

/// Reads the fields of one byte order.
#[derive(Clone, Copy)]
struct Order {
    big: bool,
}

impl Order {
    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let bytes: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        })
    }

    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let bytes: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.big {
            u64::from_be_bytes(bytes)
        } else {
            u64::from_le_bytes(bytes)
        })
    }
}

/// Parses `bytes`, a whole jitdump or the part of one written so far.
pub fn parse(bytes: &[u8]) -> Result<Jitdump, JitdumpError> {
    if bytes.len() < HEADER_MIN {
        return Err(JitdumpError::TooShort);
    }
    let order = match (
        Order { big: false }.u32(bytes, 0),
        Order { big: true }.u32(bytes, 0),
    ) {
        (Some(MAGIC), _) => Order { big: false },
        (_, Some(MAGIC)) => Order { big: true },
        _ => return Err(JitdumpError::NotJitdump),
    };
    let header_size = order.u32(bytes, 8).ok_or(JitdumpError::TooShort)? as usize;
    if header_size < HEADER_MIN || header_size > bytes.len() {
        return Err(JitdumpError::BadHeader);
    }
    let pid = order.u32(bytes, 20).ok_or(JitdumpError::TooShort)?;
    let mut entries: Vec<(u64, u64, String)> = Vec::new();
    // The latest entry at each start, for moves; and the bytes of names kept, which moves
    // copy: bounded by the file's own size, so a file of moves cannot make more of them.
    let mut latest: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut name_bytes = 0usize;
    let mut loads = 0;
    let mut at = header_size;
    let mut truncated = false;
    while at < bytes.len() {
        let (Some(id), Some(size)) = (order.u32(bytes, at), order.u32(bytes, at + 4)) else {
            truncated = true;
            break;
        };
        let size = size as usize;
        let Some(record) = at
            .checked_add(size)
            .filter(|_| size >= RECORD_HEADER)
            .and_then(|end| bytes.get(at..end))
        else {
            // Cut short, or a size no record can have: nothing after it can be framed.
            truncated = true;
            break;
        };
        let body = &record[RECORD_HEADER..];
        match id {
            CODE_LOAD => {
                if let Some(entry) = code_load(order, body) {
                    name_bytes += entry.2.len();
                    latest.insert(entry.0, entries.len());
                    entries.push(entry);
                    loads += 1;
                }
            }
            CODE_MOVE => {
                let moved = code_move(order, body).and_then(|(old, new, size)| {
                    let name = &entries[*latest.get(&old)?].2;
                    let end = new.checked_add(size).filter(|_| size > 0)?;
                    (name_bytes + name.len() <= bytes.len()).then(|| (new, end, name.clone()))
                });
                // The code keeps its name at its new place.
                if let Some(entry) = moved {
                    name_bytes += entry.2.len();
                    latest.insert(entry.0, entries.len());
                    entries.push(entry);
                }
            }
            // Debug and unwinding information, close: not needed for names.
            _ => {}
        }
        at += size;
    }
    Ok(Jitdump {
        pid,
        map: PerfMap::from_entries(entries),
        loads,
        truncated,
    })
}

/// A code load's address range and name.
fn code_load(order: Order, body: &[u8]) -> Option<(u64, u64, String)> {
    let address = order.u64(body, 16)?;
    let size = order.u64(body, 24)?;
    let end = address.checked_add(size).filter(|_| size > 0)?;
    let rest = body.get(LOAD_FIXED..)?;
    let name_len = rest.iter().position(|&b| b == 0)?;
    // Shown and kept as a perf map's line: no control character may end it early.
    let name: String = String::from_utf8_lossy(&rest[..name_len.min(NAME_LIMIT)])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    let name = name.trim();
    (!name.is_empty()).then(|| (address, end, name.to_string()))
}

/// A move: the old address, the new one, the size.
fn code_move(order: Order, body: &[u8]) -> Option<(u64, u64, u64)> {
    if body.len() < MOVE_FIXED {
        return None;
    }
    Some((
        order.u64(body, 16)?,
        order.u64(body, 24)?,
        order.u64(body, 32)?,
    ))
}

/// Whether `path` (as a recording's mmap record names it) is the jitdump of `pid`:
/// `<dir>/jit-<pid>.dump`, absolute, with no `..` in it.
pub fn is_jitdump_of(path: &str, pid: u32) -> bool {
    path.starts_with('/')
        && !path.split('/').any(|part| part == "..")
        && path
            .rsplit('/')
            .next()
            .is_some_and(|name| name == format!("jit-{pid}.dump"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jitdump as V8 writes it (little-endian), built field by field.
    struct Writer(Vec<u8>);

    impl Writer {
        fn new(pid: u32) -> Self {
            let mut b = Vec::new();
            b.extend(MAGIC.to_le_bytes());
            b.extend(1u32.to_le_bytes());
            b.extend(40u32.to_le_bytes());
            b.extend(62u32.to_le_bytes());
            b.extend(0u32.to_le_bytes());
            b.extend(pid.to_le_bytes());
            b.extend(0u64.to_le_bytes());
            b.extend(0u64.to_le_bytes());
            Writer(b)
        }

        fn record(&mut self, id: u32, body: &[u8]) {
            self.0.extend(id.to_le_bytes());
            self.0
                .extend(((RECORD_HEADER + body.len()) as u32).to_le_bytes());
            self.0.extend(0u64.to_le_bytes());
            self.0.extend(body);
        }

        fn load(&mut self, address: u64, size: u64, name: &str) {
            let mut body = Vec::new();
            body.extend(7u32.to_le_bytes());
            body.extend(7u32.to_le_bytes());
            body.extend(address.to_le_bytes());
            body.extend(address.to_le_bytes());
            body.extend(size.to_le_bytes());
            body.extend(1u64.to_le_bytes());
            body.extend(name.as_bytes());
            body.push(0);
            body.extend(std::iter::repeat_n(0xCC, size as usize));
            self.record(CODE_LOAD, &body);
        }

        fn moved(&mut self, old: u64, new: u64, size: u64) {
            let mut body = Vec::new();
            body.extend(7u32.to_le_bytes());
            body.extend(7u32.to_le_bytes());
            for v in [new, old, new, size, 1] {
                body.extend(v.to_le_bytes());
            }
            self.record(CODE_MOVE, &body);
        }
    }

    #[test]
    fn code_loads_and_moves_name_their_addresses_and_other_records_are_skipped() {
        let mut w = Writer::new(7);
        w.load(0x1000, 0x40, "LazyCompile:*fib /app/x.js:3");
        w.record(2, &[0u8; 40]);
        w.load(0x2000, 0x10, "Builtin:ArgumentsAdaptorTrampoline");
        w.moved(0x2000, 0x3000, 0x10);
        w.load(0x4000, 0x10, "evil\n4000 10 forged");
        let dump = parse(&w.0).unwrap();
        assert_eq!((dump.pid, dump.loads, dump.truncated), (7, 3, false));
        // A name cannot forge a line of the map kept beside the capture.
        let again = PerfMap::parse(&dump.map.to_text());
        assert_eq!(again, dump.map);
        assert_eq!(again.name_at(0x4000), Some("evil?4000 10 forged"));
        assert_eq!(
            dump.map.name_at(0x103f),
            Some("LazyCompile:*fib /app/x.js:3")
        );
        assert_eq!(dump.map.name_at(0x1040), None);
        assert_eq!(
            dump.map.name_at(0x3008),
            Some("Builtin:ArgumentsAdaptorTrampoline")
        );
    }

    #[test]
    fn a_dump_cut_inside_a_record_keeps_what_came_before() {
        let mut w = Writer::new(7);
        w.load(0x1000, 0x40, "first");
        w.load(0x2000, 0x40, "second");
        let cut = &w.0[..w.0.len() - 5];
        let dump = parse(cut).unwrap();
        assert!(dump.truncated);
        assert_eq!(dump.loads, 1);
        assert_eq!(dump.map.name_at(0x1000), Some("first"));
        assert_eq!(dump.map.name_at(0x2000), None);
    }

    #[test]
    fn foreign_and_malformed_files_are_refused_or_cut_never_a_panic() {
        assert_eq!(parse(b"JiT"), Err(JitdumpError::TooShort));
        assert_eq!(
            parse(b"root:$6$salt$hash:19000:0:99999:7:::\nmore lines here"),
            Err(JitdumpError::NotJitdump)
        );
        let mut w = Writer::new(7);
        w.load(0x1000, 0x40, "f");
        // A record whose size is smaller than its own header, then one past the end.
        let mut bad = w.0.clone();
        bad.extend(0u32.to_le_bytes());
        bad.extend(3u32.to_le_bytes());
        bad.extend([0u8; 8]);
        let dump = parse(&bad).unwrap();
        assert!(dump.truncated && dump.loads == 1);
        let mut huge = w.0.clone();
        huge.extend(0u32.to_le_bytes());
        huge.extend(u32::MAX.to_le_bytes());
        assert!(parse(&huge).unwrap().truncated);
        // Moves cannot copy names past the file's own size: each 64-byte move of a long name
        // would otherwise add its length again.
        let mut w = Writer::new(7);
        let long = "n".repeat(4000);
        w.load(0x1000, 0x10, &long);
        for i in 0..200u64 {
            w.moved(0x1000 + i * 0x10, 0x1000 + (i + 1) * 0x10, 0x10);
        }
        let dump = parse(&w.0).unwrap();
        let kept: usize = dump.map.to_text().len();
        assert!(kept <= w.0.len() + 200 * 16, "{kept} of {}", w.0.len());
        assert!(dump.map.len() < 10, "{}", dump.map.len());
        // Every prefix of a real-shaped dump parses or is refused.
        let mut w = Writer::new(7);
        w.load(0x1000, 0x40, "f");
        for end in 0..w.0.len() {
            let _ = parse(&w.0[..end]);
        }
    }

    #[test]
    fn only_an_absolute_jit_pid_dump_path_is_taken() {
        assert!(is_jitdump_of("/app/jit-7.dump", 7));
        assert!(is_jitdump_of("/tmp/jit-7.dump", 7));
        assert!(!is_jitdump_of("/tmp/jit-8.dump", 7));
        assert!(!is_jitdump_of("jit-7.dump", 7));
        assert!(!is_jitdump_of("/tmp/../etc/jit-7.dump", 7));
        assert!(!is_jitdump_of("/tmp/jit-7.dump.old", 7));
    }
}
