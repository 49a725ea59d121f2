//! A streaming parser for `perf script` output with tracepoint payloads and switch events
//! (`-F comm,pid,tid,time,event,trace[,ip,sym,dso] --show-switch-events`). Records are
//! handed to a callback one at a time; nothing is kept between them but the names a
//! `FrameResolver` gave (frames perf left `[unknown]` in a stripped Go executable).

use crate::profile::perfscript::FrameResolver;
use std::collections::HashMap;
use std::io::{self, BufRead};

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
            crate::symbols::demangle::demangle_frame(&self.symbol)
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
            .or_else(|| trace_field(self.trace, "prev_state").map(str::to_string))
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

/// `for_each_record`, with the frames perf left `[unknown]` in a known module named by
/// `resolver` where it can (one frame line may become several: inlined functions).
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
    let mut line = String::new();
    let mut header = String::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut in_sample = false;
    let mut count = 0u64;

    let mut flush = |header: &str, frames: &[Frame], count: &mut u64| {
        if let Some(record) = parse_header(header, frames) {
            *count += 1;
            on_record(record);
        }
    };

    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        if n == 0 {
            break;
        }
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            if in_sample {
                flush(&header, &frames, &mut count);
                in_sample = false;
                frames.clear();
            }
            continue;
        }
        // Call chain lines start with a tab; headers may start with spaces (perf pads
        // the comm when no call chains are printed).
        if text.starts_with('\t') && in_sample {
            if let Some((pc, frame)) = parse_frame(text) {
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
        header.push_str(text);
        in_sample = true;
    }
    if in_sample {
        flush(&header, &frames, &mut count);
    }
    Ok(count)
}

/// `comm pid/tid time: event: trace` or `comm pid/tid time: PERF_RECORD_SWITCH IN`.
fn parse_header<'a>(header: &'a str, frames: &'a [Frame]) -> Option<Record<'a>> {
    let text = header.trim_start();
    // The pid/tid token is the first whitespace-separated token of the form N/N followed
    // by a time token; everything before it is the (possibly spaced) comm.
    let mut search_from = 0;
    let (comm_end, pid, tid, after_ids) = loop {
        let rel = text[search_from..].find('/')?;
        let slash = search_from + rel;
        let start = text[..slash]
            .rfind(char::is_whitespace)
            .map(|i| i + 1)
            .unwrap_or(0);
        let end = text[slash..]
            .find(char::is_whitespace)
            .map(|i| slash + i)
            .unwrap_or(text.len());
        let (p, t) = (&text[start..slash], &text[slash + 1..end]);
        if !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && !t.is_empty()
            && t.bytes().all(|b| b.is_ascii_digit())
        {
            break (start, p.parse().ok()?, t.parse().ok()?, end);
        }
        search_from = slash + 1;
    };
    let comm = text[..comm_end].trim_end();
    let rest = text[after_ids..].trim_start();
    let (time_text, rest) = rest.split_once(':')?;
    let time_ns = parse_time_ns(time_text.trim())?;
    let rest = rest.trim_start();

    if let Some(switch) = rest.strip_prefix("PERF_RECORD_SWITCH") {
        let switch = switch.trim_start_matches("_CPU_WIDE").trim_start();
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
    if let Some((first, tail)) = rest.split_once(char::is_whitespace) {
        if first.bytes().all(|b| b.is_ascii_digit()) {
            rest = tail.trim_start();
        }
    }
    let (event, trace) = match rest.find(": ") {
        Some(i) => (&rest[..i], rest[i + 2..].trim()),
        None => (rest.trim_end_matches(':').trim(), ""),
    };
    Some(Record::Sample(Sample {
        comm,
        pid,
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
    let text = line.trim();
    let (pc, rest) = text.split_once(char::is_whitespace)?;
    let rest = rest.trim();
    let (symbol, dso) = match rest.rfind(" (") {
        Some(i) if rest.ends_with(')') => (&rest[..i], &rest[i + 2..rest.len() - 1]),
        _ => (rest, "[unknown]"),
    };
    Some((
        pc,
        Frame {
            symbol: symbol.trim().to_string(),
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
    Some(secs * 1_000_000_000 + nanos)
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
}
