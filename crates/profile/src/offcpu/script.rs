//! A streaming parser for `perf script` output with tracepoint payloads and switch events
//! (`-F comm,pid,tid,time,event,trace[,ip,sym,dso] --show-switch-events`). Records are
//! handed to a callback one at a time; nothing is kept between them but the names a
//! `FrameResolver` gave (frames perf left `[unknown]` in a stripped Go executable).

use crate::perfscript::FrameResolver;
use std::collections::HashMap;
use std::io::{self, BufRead, Read};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub symbol: String,
    pub dso: String,
}

impl Frame {
    /// Kernel frames carry `[kernel.kallsyms]` or a `[module]` as their dso.
    pub fn is_kernel(&self) -> bool {
        self.dso.starts_with('[')
            && !matches!(
                self.dso.as_str(),
                "[unknown]" | "[vdso]" | "[vsyscall]" | "[heap]" | "[stack]"
            )
            && !self.dso.starts_with("[anon")
    }

    /// A printable name: the symbol, or `[module]` when perf could not name it.
    pub fn name(&self) -> String {
        if self.symbol == "[unknown]" || self.symbol.is_empty() {
            let module = self
                .dso
                .rsplit('/')
                .next()
                .unwrap_or(&self.dso)
                .trim_matches(|c| c == '[' || c == ']');
            format!("[{module}]")
        } else {
            devprof_symbols::demangle::demangle_frame(&self.symbol)
        }
    }
}

/// Tracepoint fields already decoded (by the perf.data reader); the text parser leaves
/// them in `trace` instead.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    /// `ret` of sys_exit_* events.
    pub ret: Option<i64>,
    /// sched_switch's `prev_state` as perf prints it.
    pub prev_state: Option<String>,
    /// block_rq_* `bytes`.
    pub bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub comm: &'a str,
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub event: &'a str,
    pub trace: &'a str,
    /// Leaf first, as perf prints them.
    pub frames: &'a [Frame],
    pub fields: Option<Fields>,
}

impl Sample<'_> {
    pub fn syscall_return(&self) -> Option<i64> {
        self.fields
            .as_ref()
            .and_then(|f| f.ret)
            .or_else(|| syscall_return(self.trace))
    }

    pub fn prev_state(&self) -> Option<String> {
        self.fields
            .as_ref()
            .and_then(|f| f.prev_state.clone())
            .or_else(|| sched_switch_prev_state(self.trace).map(str::to_string))
    }

    /// `254,0 WS 4096 () 4202624 + 8 [comm]`: the third field of block_rq_* is bytes.
    pub fn block_bytes(&self) -> Option<u64> {
        self.fields.as_ref().and_then(|f| f.bytes).or_else(|| {
            self.trace
                .split_whitespace()
                .nth(2)
                .and_then(|b| b.parse().ok())
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    /// A PERF_RECORD_SWITCH side-band record: the thread went off (`out`) or on the CPU.
    Switch {
        tid: u32,
        time_ns: u64,
        out: bool,
    },
}

/// Reads `perf script` text and calls `on_record` for every sample and switch record.
/// Returns the number of records.
pub fn for_each_record<R, F>(reader: R, on_record: F) -> io::Result<u64>
where
    R: BufRead,
    F: FnMut(Record<'_>),
{
    for_each_record_resolved(reader, None, on_record)
}

/// The longest line kept whole; the rest of a longer one (a symbol name a binary in the
/// container made huge) is skipped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Reads one line into `line` (newline dropped), at most `MAX_LINE_BYTES` of it. Returns
/// false at the end of the input.
fn read_bounded_line<R: BufRead>(reader: &mut R, line: &mut Vec<u8>) -> io::Result<bool> {
    line.clear();
    let n = (&mut *reader)
        .take(MAX_LINE_BYTES as u64)
        .read_until(b'\n', line)?;
    if n == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if n == MAX_LINE_BYTES {
        // Cut: skip to the end of this line without keeping it.
        let mut skipped = Vec::new();
        loop {
            skipped.clear();
            let m = (&mut *reader)
                .take(MAX_LINE_BYTES as u64)
                .read_until(b'\n', &mut skipped)?;
            if m == 0 || skipped.last() == Some(&b'\n') {
                break;
            }
        }
    }
    while line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(true)
}

/// `for_each_record`, with the frames perf left `[unknown]` in a known module named by
/// `resolver` where it can (one frame line may become several: inlined functions).
///
/// The text is read as bytes: thread names (and the symbols of binaries in the container)
/// are whatever bytes a process chose, invalid UTF-8 and non-ASCII spaces included. They
/// are shown lossily and never taken for columns; only ASCII spaces separate columns.
pub fn for_each_record_resolved<R, F>(
    mut reader: R,
    resolver: Option<&dyn FrameResolver>,
    mut on_record: F,
) -> io::Result<u64>
where
    R: BufRead,
    F: FnMut(Record<'_>),
{
    let mut names = ResolvedNames {
        resolver,
        cache: HashMap::new(),
    };
    let mut line = Vec::new();
    let mut header = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut in_sample = false;
    let mut count = 0u64;

    let mut flush = |header: &[u8], frames: &[Frame], count: &mut u64| {
        let Some(columns) = header_columns(header) else {
            return;
        };
        let comm = String::from_utf8_lossy(columns.comm);
        let rest = String::from_utf8_lossy(columns.rest);
        if let Some(record) = record_from(&columns, &comm, &rest, frames) {
            *count += 1;
            on_record(record);
        }
    };

    while read_bounded_line(&mut reader, &mut line)? {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            if in_sample {
                flush(&header, &frames, &mut count);
                in_sample = false;
                frames.clear();
            }
            continue;
        }
        // Call chain lines start with a tab; headers may start with spaces (perf pads
        // the comm when no call chains are printed).
        if line.starts_with(b"\t") && in_sample {
            if let Some((pc, frame)) = parse_frame(&String::from_utf8_lossy(&line)) {
                names.push(pc, frame, &mut frames);
            }
            continue;
        }
        // A new header: the previous record had no blank line after it (switch records
        // and stack-less samples are single lines).
        if in_sample {
            flush(&header, &frames, &mut count);
            frames.clear();
        }
        header.clear();
        header.extend_from_slice(&line);
        in_sample = true;
    }
    if in_sample {
        flush(&header, &frames, &mut count);
    }
    Ok(count)
}

/// The fixed columns of a header line, found in its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderColumns<'a> {
    /// The thread's name, exactly the bytes perf printed (less perf's padding spaces).
    pub comm: &'a [u8],
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    /// What follows `time:`: the event and its payload, or the switch record.
    pub rest: &'a [u8],
}

/// The kernel keeps 15 bytes of a thread name; perf pads it to 16 columns and right-aligns
/// the pid in at most 7: the real `pid/tid` column starts within this many bytes of the
/// line. A name shaped like the columns (`x 9/9 1.0:`) starts earlier, a payload's text
/// later, so the last candidate within this reach is the real one.
const IDS_REACH: usize = 32;

/// `comm pid/tid time: ...`: the `pid/tid` column is a word of digits, a slash and digits,
/// followed by a time and a colon. The comm before it is data, whatever its bytes.
pub fn header_columns(line: &[u8]) -> Option<HeaderColumns<'_>> {
    let mut chosen: Option<(usize, u32, u32, u64, usize)> = None;
    let mut at = 0;
    while at < line.len() {
        if line[at] == b' ' || (at > 0 && line[at - 1] != b' ') {
            at += 1;
            continue;
        }
        let word_end = line[at..]
            .iter()
            .position(|&b| b == b' ')
            .map_or(line.len(), |i| at + i);
        if let Some(ids) = ids_then_time(line, at, word_end) {
            if chosen.is_none() || at <= IDS_REACH {
                chosen = Some((at, ids.0, ids.1, ids.2, ids.3));
            }
            if at > IDS_REACH {
                break;
            }
        }
        at = word_end;
    }
    let (start, pid, tid, time_ns, rest_at) = chosen?;
    let comm = trim_spaces(&line[..start]);
    Some(HeaderColumns {
        comm,
        pid,
        tid,
        time_ns,
        rest: &line[rest_at..],
    })
}

/// `pid/tid` in `line[start..end]`, then spaces and `time:`: (pid, tid, time, index after
/// the colon).
fn ids_then_time(line: &[u8], start: usize, end: usize) -> Option<(u32, u32, u64, usize)> {
    let word = &line[start..end];
    let slash = word.iter().position(|&b| b == b'/')?;
    let (pid, tid) = (&word[..slash], &word[slash + 1..]);
    let pid = ascii_number(pid)?;
    let tid = ascii_number(tid)?;
    let mut at = end;
    while line.get(at) == Some(&b' ') {
        at += 1;
    }
    let colon = at + line[at..].iter().position(|&b| b == b':')?;
    let time = std::str::from_utf8(&line[at..colon]).ok()?;
    if time.is_empty() || !time.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    Some((pid, tid, parse_time_ns(time)?, colon + 1))
}

fn ascii_number(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Without perf's padding: ASCII spaces only (a non-ASCII space is part of a name).
fn trim_spaces(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ').unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&b| b != b' ')
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

const SPACES: [char; 2] = [' ', '\t'];

/// The record a header's columns make: `rest` is `PERF_RECORD_SWITCH IN|OUT ...` or
/// `[period] event: trace`.
fn record_from<'a>(
    columns: &HeaderColumns<'_>,
    comm: &'a str,
    rest: &'a str,
    frames: &'a [Frame],
) -> Option<Record<'a>> {
    let (tid, time_ns) = (columns.tid, columns.time_ns);
    let rest = rest.trim_start_matches(SPACES);
    if let Some(switch) = rest.strip_prefix("PERF_RECORD_SWITCH") {
        let switch = switch
            .trim_start_matches("_CPU_WIDE")
            .trim_start_matches(SPACES);
        return Some(Record::Switch {
            tid,
            time_ns,
            out: switch.starts_with("OUT"),
        });
    }
    if rest.starts_with("PERF_RECORD_") {
        return None;
    }
    // Optional period before the event name.
    let mut rest = rest;
    if let Some((first, tail)) = rest.split_once(SPACES) {
        if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
            rest = tail.trim_start_matches(SPACES);
        }
    }
    let (event, trace) = match rest.find(": ") {
        Some(i) => (&rest[..i], rest[i + 2..].trim_matches(SPACES)),
        None => (rest.trim_end_matches(':').trim_matches(SPACES), ""),
    };
    Some(Record::Sample(Sample {
        comm,
        pid: columns.pid,
        tid,
        time_ns,
        event: event.trim_end_matches(':'),
        trace,
        frames,
        fields: None,
    }))
}

/// Names from a `FrameResolver`, cached by module and address (a capture repeats the same
/// few thousand frames millions of times).
struct ResolvedNames<'r> {
    resolver: Option<&'r dyn FrameResolver>,
    cache: HashMap<(String, u64), Option<Vec<String>>>,
}

impl ResolvedNames<'_> {
    /// Appends `frame` (leaf-first order), or the frames the resolver names in its place.
    fn push(&mut self, pc: &str, frame: Frame, frames: &mut Vec<Frame>) {
        let unnamed = frame.symbol == "[unknown]" && frame.dso != "[unknown]";
        let address = u64::from_str_radix(pc.trim_start_matches("0x"), 16).ok();
        let (Some(resolver), true, Some(address)) = (self.resolver, unnamed, address) else {
            frames.push(frame);
            return;
        };
        let resolved = self
            .cache
            .entry((frame.dso.clone(), address))
            .or_insert_with(|| {
                resolver
                    .resolve(&frame.dso, address)
                    .filter(|n| !n.is_empty())
            });
        match resolved {
            // Outermost first from the resolver; the record's frames are leaf first.
            Some(names) => frames.extend(names.iter().rev().map(|symbol| Frame {
                symbol: symbol.clone(),
                dso: frame.dso.clone(),
            })),
            None => frames.push(frame),
        }
    }
}

/// `\t ffffffff821f8298 __schedule ([kernel.kallsyms])`: the program counter as printed,
/// and the frame.
fn parse_frame(line: &str) -> Option<(&str, Frame)> {
    let text = line.trim_matches(SPACES);
    let (pc, rest) = text.split_once(SPACES)?;
    let rest = rest.trim_matches(SPACES);
    let (symbol, dso) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
        _ => (rest, "[unknown]"),
    };
    Some((
        pc,
        Frame {
            symbol: symbol.trim_matches(SPACES).to_string(),
            dso: dso.to_string(),
        },
    ))
}

/// `1399.623484` -> nanoseconds, without going through floating point.
pub fn parse_time_ns(text: &str) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: u64 = secs.parse().ok()?;
    let mut nanos: u64 = 0;
    let mut digits = 0;
    for b in frac.bytes().take(9) {
        if !b.is_ascii_digit() {
            return None;
        }
        nanos = nanos * 10 + u64::from(b - b'0');
        digits += 1;
    }
    for _ in digits..9 {
        nanos *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// The return value in a `sys_exit_*` payload (`0xe000`, or `0xfffffffffffffff5` for
/// -EAGAIN); None when it is not a number.
pub fn syscall_return(trace: &str) -> Option<i64> {
    let text = trace.trim();
    let value = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok()? as i64,
        None => text.parse::<i64>().ok()?,
    };
    Some(value)
}

/// `prev_state` of a sched_switch payload (`prev_comm=%s prev_pid=%d prev_prio=%d
/// prev_state=%s ==> next_comm=%s ...`): the one right after `prev_prio=N`, so that a thread
/// named `x prev_state=R` cannot choose it (15 bytes cannot hold both fields).
pub fn sched_switch_prev_state(trace: &str) -> Option<&str> {
    const PRIO: &str = " prev_prio=";
    let mut from = 0;
    while let Some(i) = trace[from..].find(PRIO) {
        let digits_at = from + i + PRIO.len();
        let after = &trace[digits_at..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            if let Some(value) = after[digits..].strip_prefix(" prev_state=") {
                return Some(value.split(SPACES).next().unwrap_or(""));
            }
        }
        from = digits_at;
    }
    // A payload without the priority (other kernels' formats): the first field by name.
    trace_field(trace, "prev_state")
}

/// A `key=value` field of a tracepoint payload (`prev_state=D`).
pub fn trace_field<'a>(trace: &'a str, key: &str) -> Option<&'a str> {
    let needle = format!("{key}=");
    let mut from = 0;
    while let Some(i) = trace[from..].find(&needle) {
        let at = from + i;
        if at == 0 || trace.as_bytes()[at - 1].is_ascii_whitespace() {
            let value = &trace[at + needle.len()..];
            return Some(value.split_whitespace().next().unwrap_or(""));
        }
        from = at + needle.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCERPT: &str = "\
sync_writes 20529/20536  1399.623484: PERF_RECORD_SWITCH IN         
sync_writes 20529/20536  1399.623566:  syscalls:sys_exit_write: 0xe000
\t           f838f __GI___libc_write (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           37826 demo_node::workloads::sync_writes (/usr/local/bin/demo-node)

lto cgu.14 20529/20537  1399.623973:       sched:sched_switch: prev_comm=mmap_reads prev_pid=20537 prev_prio=120 prev_state=D ==> next_comm=kworker/1:1H next_pid=79 next_prio=100
\tffffffff821f8298 __schedule ([kernel.kallsyms])
\t           fed0a fdatasync (/usr/lib/x86_64-linux-gnu/libc.so.6)

mmap_reads 20529/20537  1399.624105: PERF_RECORD_SWITCH OUT preempt  
mmap_reads 20529/20537  1399.700000:     major-faults: 
";

    #[test]
    fn parses_samples_switches_and_stacks() {
        let mut seen = Vec::new();
        let n = for_each_record(EXCERPT.as_bytes(), |r| seen.push(format!("{r:?}"))).unwrap();
        assert_eq!(n, 5);
        assert!(seen[0].contains("Switch { tid: 20536, time_ns: 1399623484000, out: false }"));
        assert!(seen[1].contains("event: \"syscalls:sys_exit_write\", trace: \"0xe000\""));
        assert!(seen[1].contains("demo_node::workloads::sync_writes"));
        assert!(seen[2].contains("comm: \"lto cgu.14\""), "{}", seen[2]);
        assert!(seen[2].contains("event: \"sched:sched_switch\""));
        assert!(seen[3].contains("out: true"));
        assert!(seen[4].contains("event: \"major-faults\"") && seen[4].contains("frames: []"));
    }

    /// Names two functions of a stripped executable, the outer one with a function inlined
    /// into it; knows nothing else.
    struct Stripped;

    impl FrameResolver for Stripped {
        fn resolve(&self, module: &str, address: u64) -> Option<Vec<String>> {
            match (module, address) {
                ("/usr/local/bin/demo-go", 0x6bc20) => {
                    Some(vec!["runtime.futexsleep".into(), "runtime.futex".into()])
                }
                ("/usr/local/bin/demo-go", 0x3e1a5) => Some(vec!["runtime.notesleep".into()]),
                _ => None,
            }
        }
    }

    #[test]
    fn a_resolver_names_the_frames_perf_left_unknown() {
        let text =
            "demo-go 7/9  10.000001:       sched:sched_switch: prev_comm=demo-go prev_state=S\n\
            \tffffffff821f8298 __schedule ([kernel.kallsyms])\n\
            \t           6bc20 [unknown] (/usr/local/bin/demo-go)\n\
            \t           3e1a5 [unknown] (/usr/local/bin/demo-go)\n\
            \t           3e1a5 [unknown] (/usr/local/bin/demo-go)\n\
            \t           99999 [unknown] (/usr/local/bin/demo-go)\n\
            \t           6bc20 [unknown] ([unknown])\n\n";
        let mut seen: Vec<Vec<String>> = Vec::new();
        let mut collect = |r: Record<'_>| {
            if let Record::Sample(s) = r {
                seen.push(s.frames.iter().map(Frame::name).collect());
            }
        };
        for_each_record_resolved(text.as_bytes(), Some(&Stripped), &mut collect).unwrap();
        for_each_record(text.as_bytes(), &mut collect).unwrap();
        assert_eq!(
            seen[0],
            [
                "__schedule",
                "runtime.futex",
                "runtime.futexsleep",
                "runtime.notesleep",
                "runtime.notesleep",
                "[demo-go]",
                "[unknown]"
            ],
            "inlined frames leaf first, the resolver's unknowns and other modules left alone"
        );
        assert_eq!(
            seen[1][1..=3],
            ["[demo-go]", "[demo-go]", "[demo-go]"],
            "no resolver, no names"
        );
    }

    #[test]
    fn reads_payload_fields_and_returns() {
        let trace = "prev_comm=mmap_reads prev_pid=20537 prev_prio=120 prev_state=D ==> next_comm=kworker/1:1H next_pid=79";
        assert_eq!(trace_field(trace, "prev_state"), Some("D"));
        assert_eq!(trace_field(trace, "pid"), None, "only whole keys match");
        assert_eq!(trace_field(trace, "next_pid"), Some("79"));
        assert_eq!(syscall_return("0xe000"), Some(0xe000));
        assert_eq!(syscall_return("0xfffffffffffffff5"), Some(-11));
        assert_eq!(parse_time_ns("1.5"), Some(1_500_000_000));
    }

    /// Lines as perf prints them for demo-hostile's threads (a real capture's layout:
    /// `%s %7d/%-7d time:`), the names' bytes as the kernel keeps them.
    fn hostile_lines(name: &[u8]) -> Vec<u8> {
        let mut text = Vec::new();
        text.extend_from_slice(name);
        text.extend_from_slice(
            b"     7/31     1802.204635:            sched:sched_switch: prev_comm=",
        );
        text.extend_from_slice(name);
        text.extend_from_slice(
            b" prev_pid=31599 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
            \tffffffff821f8298 __schedule ([kernel.kallsyms])\n\
            \t           cf545 clock_nanosleep (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\
            \t           38059 demo_hostile::work::hostile_burn (/usr/local/bin/demo-hostile)\n\n",
        );
        text.extend_from_slice(name);
        text.extend_from_slice(b"     7/31     1802.204700: PERF_RECORD_SWITCH OUT        \n");
        text
    }

    fn samples_of(text: &[u8]) -> Vec<(String, u32, u32, Option<String>, usize)> {
        let mut seen = Vec::new();
        let n = for_each_record(text, |r| {
            if let Record::Sample(s) = r {
                seen.push((
                    s.comm.to_string(),
                    s.pid,
                    s.tid,
                    s.prev_state(),
                    s.frames.len(),
                ));
            }
        })
        .expect("hostile names are data, not an error");
        assert_eq!(n, 2, "the sample and the switch record");
        seen
    }

    #[test]
    fn offcpu_thread_name_with_invalid_utf8_is_kept_lossily() {
        let seen = samples_of(&hostile_lines(b"bad\xff\xfeutf8"));
        assert_eq!(
            seen,
            [("bad\u{fffd}\u{fffd}utf8".into(), 7, 31, Some("S".into()), 3)]
        );
        let line = hostile_lines(b"bad\xff\xfeutf8");
        assert_eq!(header_columns(&line).unwrap().comm, b"bad\xff\xfeutf8");
    }

    #[test]
    fn offcpu_thread_name_with_multibyte_space_does_not_panic() {
        for name in [
            "nb\u{a0}sp\u{2003}x",
            "\u{3000}ideo\u{3000}",
            "cut-multibyte\u{2003}",
        ] {
            let seen = samples_of(&hostile_lines(name.as_bytes()));
            assert_eq!(seen, [(name.to_string(), 7, 31, Some("S".into()), 3)]);
        }
        // The kernel cuts a name at 15 bytes, through a multi-byte space.
        let cut = &"cut-multibyte\u{2003}".as_bytes()[..15];
        let seen = samples_of(&hostile_lines(cut));
        assert_eq!(seen[0].0, "cut-multibyte\u{fffd}");
    }

    #[test]
    fn offcpu_thread_name_shaped_like_the_columns_is_not_taken_for_them() {
        for name in [
            &b"x 9/9 [0] 1.0:"[..],
            b"x 9/9 1.0: y",
            b"1/2 3.4: ev: z",
            b"tab\tnl",
        ] {
            let line = hostile_lines(name);
            let columns = header_columns(&line).unwrap();
            assert_eq!(columns.comm, name);
            assert_eq!((columns.pid, columns.tid), (7, 31));
            assert_eq!(columns.time_ns, 1_802_204_635_000);
            let seen = samples_of(&line);
            assert_eq!(seen[0].1..=seen[0].2, 7..=31);
        }
    }

    #[test]
    fn offcpu_thread_name_cannot_forge_prev_state() {
        let seen = samples_of(&hostile_lines(b"x prev_state=R"));
        assert_eq!(seen[0].0, "x prev_state=R");
        assert_eq!(
            seen[0].3.as_deref(),
            Some("S"),
            "the kernel's field, not the name"
        );
    }

    #[test]
    fn offcpu_thread_name_with_a_newline_costs_its_own_record_only() {
        // perf prints the name raw: the line breaks in two (in the payload too). The first
        // half is no header, the second reads as a record of thread `x` whose stack follows
        // the broken payload and is dropped with it: one record's stack, nothing else.
        let mut text = hostile_lines(b"worker");
        text.extend(hostile_lines(b"tab\tnl\nx"));
        let mut comms = Vec::new();
        for_each_record(&text[..], |r| {
            if let Record::Sample(s) = r {
                comms.push((s.comm.to_string(), s.frames.len()));
            }
        })
        .unwrap();
        assert_eq!(comms, [("worker".into(), 3), ("x".into(), 0)]);
    }

    #[test]
    fn offcpu_overlong_line_is_cut_not_read_whole() {
        let mut text = hostile_lines(b"worker");
        let long_symbol = "f".repeat(3 * MAX_LINE_BYTES);
        let at = text.iter().position(|&b| b == b'\t').unwrap();
        let frame = format!("\t           1234 {long_symbol} (/bin/x)\n");
        text.splice(at..at, frame.bytes());
        let mut longest = 0;
        for_each_record(&text[..], |r| {
            if let Record::Sample(s) = r {
                longest = s.frames.iter().map(|f| f.symbol.len()).max().unwrap_or(0);
            }
        })
        .unwrap();
        assert!(longest < MAX_LINE_BYTES, "{longest}");
    }

    #[test]
    fn offcpu_huge_time_is_no_overflow() {
        assert_eq!(parse_time_ns("18446744073709551615.0"), None);
        let line = b"x 1/2 99999999999999999999.5: ev: t";
        assert_eq!(header_columns(line), None);
    }
}
