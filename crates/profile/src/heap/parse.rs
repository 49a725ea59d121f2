//! jemalloc `heap_v2` dumps (what `prof.dump`, interval dumps and `jeprof` use): the header
//! with the sampling period, the `t*:` totals and per-thread lines, one `@` stack per
//! allocation context with its counts, and the `MAPPED_LIBRARIES:` section (the process's
//! /proc/self/maps when the dump was written). Pure: text in, data out.
//!
//! Counts are printed as `objects: bytes [accumulated objects: accumulated bytes]`. They
//! are sampled, and jeprof turns them into estimates of the real figures with one formula
//! (`AdjustSamples`): scale = 1 / (1 - exp(-(bytes / objects) / period)). jemalloc 5.3
//! already unbiases internally (it tracks the unbiased figures per size class) and prints
//! the values that this one formula maps back to its own unbiased figures, so applying it
//! exactly once (per stack and to the header) gives jemalloc's numbers; applying any
//! further correction would unbias twice. Older jemalloc prints raw sampled counts, for
//! which the same formula is jeprof's estimate.

use std::fmt;

/// `objects: bytes` as printed in the dump (not yet unbiased).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub objects: u64,
    pub bytes: u64,
}

/// The in-use counts and the accumulated ones (`[a: b]`, non-zero with `prof_accum:true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountPair {
    pub in_use: Counts,
    pub accumulated: Counts,
}

impl CountPair {
    pub fn get(&self, measure: Measure) -> Counts {
        match measure {
            Measure::InUse => self.in_use,
            Measure::Allocated => self.accumulated,
        }
    }
}

/// Which counts a profile shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Memory allocated and not yet freed when the dump was written (the default).
    InUse,
    /// Everything allocated since profiling started (`prof_accum:true`), freed or not.
    Allocated,
}

impl Measure {
    pub fn label(self) -> &'static str {
        match self {
            Measure::InUse => "in-use",
            Measure::Allocated => "allocated",
        }
    }
}

/// One per-thread line: `t<uid>: counts [name]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCounts {
    pub uid: u64,
    pub counts: CountPair,
    pub name: Option<String>,
}

/// One allocation context: the backtrace (innermost first, return addresses as the
/// unwinder saw them) and its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub addresses: Vec<u64>,
    pub counts: CountPair,
}

/// One line of MAPPED_LIBRARIES (a /proc/<pid>/maps line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    /// Offset of `start` in the mapped file.
    pub offset: u64,
    pub inode: u64,
    /// The file (absolute path), or a pseudo name like `[heap]`, or None for anonymous.
    pub path: Option<String>,
}

impl Mapping {
    pub fn contains(&self, address: u64) -> bool {
        self.start <= address && address < self.end
    }

    /// A regular file that can be fetched and read for symbols.
    pub fn file(&self) -> Option<&str> {
        self.path
            .as_deref()
            .filter(|p| p.starts_with('/') && !p.ends_with(" (deleted)"))
    }

    pub fn is_executable(&self) -> bool {
        self.perms.as_bytes().get(2) == Some(&b'x')
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HeapDump {
    /// Mean bytes between samples: 2^lg_prof_sample (`heap_v2/<period>`).
    pub sample_period: u64,
    /// The header's `t*:` line: the whole process.
    pub total: CountPair,
    pub threads: Vec<ThreadCounts>,
    pub stacks: Vec<Stack>,
    pub mappings: Vec<Mapping>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub detail: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.detail)
    }
}

fn err(line: usize, detail: impl Into<String>) -> ParseError {
    ParseError {
        line,
        detail: detail.into(),
    }
}

/// Parses one `heap_v2` dump.
pub fn parse_dump(text: &str) -> Result<HeapDump, ParseError> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, first) = lines.next().ok_or_else(|| err(1, "empty file"))?;
    let period = first
        .trim()
        .strip_prefix("heap_v2/")
        .ok_or_else(|| {
            err(
                1,
                format!(
                    "not a jemalloc heap_v2 dump (first line '{}')",
                    devprof_base::text::truncate(first.trim(), 60)
                ),
            )
        })?
        .parse::<u64>()
        .map_err(|e| err(1, format!("bad sampling period: {e}")))?;

    let mut total = None;
    let mut threads = Vec::new();
    let mut stacks: Vec<Stack> = Vec::new();
    let mut mappings = Vec::new();
    let mut in_maps = false;
    // The stack whose `t*:` line comes next.
    let mut pending: Option<Vec<u64>> = None;
    for (n, line) in lines {
        if in_maps {
            if !line.trim().is_empty() {
                mappings.push(parse_mapping(line).map_err(|d| err(n, d))?);
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "MAPPED_LIBRARIES:" {
            if pending.is_some() {
                return Err(err(n, "stack without counts before MAPPED_LIBRARIES"));
            }
            in_maps = true;
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('@') {
            if pending.is_some() {
                return Err(err(n, "stack without a t*: line"));
            }
            let addresses = rest
                .split_whitespace()
                .map(|a| parse_hex(a).ok_or_else(|| err(n, format!("bad address '{a}'"))))
                .collect::<Result<Vec<u64>, _>>()?;
            pending = Some(addresses);
            continue;
        }
        let (label, counts_text) = trimmed.split_once(':').ok_or_else(|| {
            err(
                n,
                format!(
                    "unexpected line '{}'",
                    devprof_base::text::truncate(trimmed, 60)
                ),
            )
        })?;
        let (counts, name) = parse_counts(counts_text).map_err(|d| err(n, d))?;
        match (label, pending.take(), total.is_some()) {
            ("t*", Some(addresses), _) => stacks.push(Stack { addresses, counts }),
            ("t*", None, false) if stacks.is_empty() => total = Some(counts),
            ("t*", None, _) => {
                return Err(err(n, "t*: line outside the header and not after a stack"))
            }
            (t, None, true) if t.starts_with('t') && stacks.is_empty() => {
                let uid = t[1..]
                    .parse()
                    .map_err(|_| err(n, format!("bad thread label '{t}'")))?;
                threads.push(ThreadCounts { uid, counts, name });
            }
            (t, None, _) if t.starts_with('t') => {} // per-thread share of the previous stack
            (t, Some(_), _) => {
                return Err(err(n, format!("expected t*: after a stack, found '{t}:'")))
            }
            (t, None, _) => return Err(err(n, format!("unexpected line '{t}:'"))),
        }
    }
    if pending.is_some() {
        return Err(err(
            text.lines().count(),
            "the dump ends inside a stack (truncated?)",
        ));
    }
    if !in_maps {
        return Err(err(
            text.lines().count(),
            "no MAPPED_LIBRARIES section (the dump is truncated or still being written)",
        ));
    }
    Ok(HeapDump {
        sample_period: period,
        total: total.ok_or_else(|| err(2, "no t*: total in the header"))?,
        threads,
        stacks,
        mappings,
    })
}

/// The header of a dump alone: the sampling period and the `t*:` totals of the whole
/// process, from the first lines (for the heap over time, without reading every stack).
pub fn parse_header(mut input: impl std::io::BufRead) -> Result<(u64, CountPair), ParseError> {
    // The header is two short lines; a longer one is not a dump's.
    const LINE_LIMIT: u64 = 4096;
    let mut line = String::new();
    let mut read_line = |line: &mut String| {
        line.clear();
        std::io::BufRead::read_line(&mut std::io::Read::take(&mut input, LINE_LIMIT), line)
            .map_err(|e| err(1, format!("read: {e}")))
    };
    read_line(&mut line)?;
    let period = line
        .trim()
        .strip_prefix("heap_v2/")
        .and_then(|p| p.parse::<u64>().ok())
        .ok_or_else(|| err(1, "not a jemalloc heap_v2 dump"))?;
    for n in 2..8 {
        if read_line(&mut line)? == 0 {
            break;
        }
        match line.trim().split_once(':') {
            Some(("t*", counts)) => {
                let (counts, _) = parse_counts(counts).map_err(|d| err(n, d))?;
                return Ok((period, counts));
            }
            _ if line.trim().is_empty() => continue,
            _ => break,
        }
    }
    Err(err(2, "no t*: total in the header"))
}

fn parse_hex(text: &str) -> Option<u64> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    u64::from_str_radix(digits, 16).ok()
}

/// ` 882: 616636 [0: 0] optional-thread-name`
fn parse_counts(text: &str) -> Result<(CountPair, Option<String>), String> {
    let text = text.trim();
    let (cur, rest) = text
        .split_once('[')
        .ok_or_else(|| format!("counts without '[': '{text}'"))?;
    let (acc, name) = rest
        .split_once(']')
        .ok_or_else(|| format!("counts without ']': '{text}'"))?;
    let pair = |t: &str| -> Result<Counts, String> {
        let (o, b) = t
            .split_once(':')
            .ok_or_else(|| format!("expected 'objects: bytes', found '{}'", t.trim()))?;
        let num = |s: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|e| format!("bad count '{}': {e}", s.trim()))
        };
        Ok(Counts {
            objects: num(o)?,
            bytes: num(b)?,
        })
    };
    let name = name.trim();
    Ok((
        CountPair {
            in_use: pair(cur)?,
            accumulated: pair(acc)?,
        },
        (!name.is_empty()).then(|| name.to_string()),
    ))
}

/// `start-end perms offset dev inode [path]`
fn parse_mapping(line: &str) -> Result<Mapping, String> {
    let mut rest = line.trim_start();
    let mut field = || -> Option<&str> {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r.trim_start();
        (!f.is_empty()).then_some(f)
    };
    let bad = || {
        format!(
            "bad MAPPED_LIBRARIES line '{}'",
            devprof_base::text::truncate(line.trim(), 80)
        )
    };
    let range = field().ok_or_else(bad)?;
    let perms = field().ok_or_else(bad)?.to_string();
    let offset = field().and_then(parse_hex).ok_or_else(bad)?;
    let _dev = field().ok_or_else(bad)?;
    let inode = field().and_then(|i| i.parse().ok()).ok_or_else(bad)?;
    let path = rest.trim_end();
    let (start, end) = range.split_once('-').ok_or_else(bad)?;
    Ok(Mapping {
        start: parse_hex(start).ok_or_else(bad)?,
        end: parse_hex(end).ok_or_else(bad)?,
        perms,
        offset,
        inode,
        path: (!path.is_empty()).then(|| path.to_string()),
    })
}

/// jeprof's `AdjustSamples` (sampling algorithm 2): the estimated real objects and bytes
/// behind sampled counts, with `period` mean bytes between samples. Applied once.
pub fn unbias(counts: Counts, period: u64) -> (f64, f64) {
    if counts.objects == 0 || counts.bytes == 0 {
        return (0.0, 0.0);
    }
    let period = period.max(1) as f64;
    let ratio = (counts.bytes as f64 / counts.objects as f64) / period;
    let scale = 1.0 / (1.0 - (-ratio).exp());
    (counts.objects as f64 * scale, counts.bytes as f64 * scale)
}

impl HeapDump {
    /// The header's `t*:` total for `measure`, unbiased: (objects, bytes).
    pub fn header_total(&self, measure: Measure) -> (f64, f64) {
        unbias(self.total.get(measure), self.sample_period)
    }

    /// Whether the dump has accumulated counts (written with `prof_accum:true`).
    pub fn has_accumulated(&self) -> bool {
        self.total.accumulated.objects > 0
            || self.stacks.iter().any(|s| s.counts.accumulated.objects > 0)
    }

    /// The mapping an address falls in.
    pub fn mapping_of(&self, address: u64) -> Option<&Mapping> {
        self.mappings.iter().find(|m| m.contains(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "heap_v2/131072
  t*: 882: 616636 [10: 20]
  t0: 1: 8 [0: 0]
  t1: 299: 78486 [0: 0] worker
@ 0x563aeeb101a3 0x563aeeb1069b
  t*: 1: 8388608 [2: 16777216]
  t1: 1: 8388608 [2: 16777216]
@ 0x563aeeb101a3 0x7fda14f6b8ec
  t*: 194: 37250 [0: 0]
  t0: 194: 37250 [0: 0]

MAPPED_LIBRARIES:
563aeea71000-563aeeaa4000 r--p 00000000 00:27 1196333                    /usr/local/bin/demo-node
563aeeaa4000-563aeeb63000 r-xp 00032000 00:27 1196333                    /usr/local/bin/demo-node
7fda14f00000-7fda15000000 r-xp 00026000 fe:00 42   /usr/lib/x86_64-linux-gnu/lib c.so.6
7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]
7ffe1000-7ffe2000 rw-p 00000000 00:00 0
";

    #[test]
    fn parses_header_threads_stacks_and_maps() {
        let d = parse_dump(SMALL).unwrap();
        assert_eq!(d.sample_period, 131072);
        assert_eq!(
            d.total.in_use,
            Counts {
                objects: 882,
                bytes: 616636
            }
        );
        assert_eq!(
            d.total.accumulated,
            Counts {
                objects: 10,
                bytes: 20
            }
        );
        assert_eq!(d.threads.len(), 2);
        assert_eq!(d.threads[1].name.as_deref(), Some("worker"));
        assert_eq!(d.stacks.len(), 2);
        assert_eq!(d.stacks[0].addresses, vec![0x563aeeb101a3, 0x563aeeb1069b]);
        assert_eq!(d.stacks[0].counts.accumulated.bytes, 16777216);
        assert_eq!(d.stacks[1].counts.in_use.objects, 194);
        assert_eq!(d.mappings.len(), 5);
        let text = d.mapping_of(0x563aeeb101a3).unwrap();
        assert_eq!(
            (text.offset, text.inode, text.is_executable()),
            (0x32000, 1196333, true)
        );
        assert_eq!(text.file(), Some("/usr/local/bin/demo-node"));
        assert_eq!(
            d.mappings[2].file(),
            Some("/usr/lib/x86_64-linux-gnu/lib c.so.6"),
            "paths keep spaces"
        );
        assert_eq!(d.mappings[3].file(), None);
        assert_eq!(d.mappings[4].path, None);
        assert!(d.has_accumulated());
    }

    #[test]
    fn the_header_alone_gives_the_totals_parse_dump_gives() {
        let real = include_str!("../../../../tests/data/heap/demo-seq.heap");
        for text in [SMALL, real] {
            let whole = parse_dump(text).unwrap();
            let (period, total) = parse_header(text.as_bytes()).unwrap();
            assert_eq!((period, total), (whole.sample_period, whole.total));
        }
        assert!(parse_header("heap_v2/1\n@ 0x1\n".as_bytes()).is_err());
        assert!(parse_header("MAPPED_LIBRARIES:\n".as_bytes()).is_err());
        assert!(parse_header(&b""[..]).is_err());
    }

    #[test]
    fn unbias_matches_jeprof_formula_once() {
        // One 8 MiB object at a 128 KiB period: scale 1/(1-e^-64) = 1.
        let (o, b) = unbias(
            Counts {
                objects: 1,
                bytes: 8388608,
            },
            131072,
        );
        assert_eq!((o.round(), b.round()), (1.0, 8388608.0));
        // Small objects are scaled up: 194 objects of ~192 bytes.
        let (_, b) = unbias(
            Counts {
                objects: 194,
                bytes: 37250,
            },
            131072,
        );
        let expected = 37250.0 / (1.0 - (-(37250.0 / 194.0) / 131072.0f64).exp());
        assert!((b - expected).abs() < 1e-6);
        assert!(b > 25_000_000.0 && b < 26_000_000.0, "{b}");
        assert_eq!(unbias(Counts::default(), 131072), (0.0, 0.0));
    }

    #[test]
    fn rejects_truncated_and_foreign_files_with_the_line() {
        let e = parse_dump("heap profile: 1: 2 [3: 4] @ heapprofile\n").unwrap_err();
        assert!(e.detail.contains("not a jemalloc heap_v2 dump"), "{e}");
        let cut = &SMALL[..SMALL.find("MAPPED").unwrap()];
        let e = parse_dump(cut).unwrap_err();
        assert!(e.detail.contains("MAPPED_LIBRARIES"), "{e}");
        let e = parse_dump("heap_v2/524288\n  t*: 1: 2 [0: 0]\n@ 0x1 0xzz\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse_dump("heap_v2/524288\n  t*: 1: 2 [0: 0]\n@ 0x1\nMAPPED_LIBRARIES:\n")
            .unwrap_err();
        assert!(e.detail.contains("without counts"), "{e}");
    }
}
