//! Markers: the moments a container's own log lines name (a block imported, a slot
//! begun), kept beside a capture as `<stem>.markers` so that profiles can be cut and read
//! per unit of work. `rules` says which lines are markers and what their fields mean,
//! `builtin` holds the rule sets written from the clients' real log formats, `slice` cuts a
//! timeline into one interval per marker. Pure: the lines arrive from `capture`, which
//! follows the log stream through `docker::logs`.
//!
//! ## The `.markers` file (version 1)
//!
//! JSON lines. The first line is the header, every other line one marker, in time order:
//!
//! ```text
//! {"format":"devprof-markers","version":1,"clock":"unix_ns","container":"op-reth-seq",
//!  "since_ns":1718000000000000000,"until_ns":1718000020000000000,"sets":["reth"],
//!  "rules":[{"set":"reth","name":"block","regex":"..."}],"lines_read":812,"lines_cut":0,
//!  "dropped":0,"notes":[]}
//! {"time_ns":1718000001234567890,"name":"block","set":"reth","number":15207178,
//!  "elapsed_ns":2877896,"hash":"0x2ccd…","line":"... Block added to canonical chain ..."}
//! ```
//!
//! `time_ns` is the instant the Docker engine stamped on the line (nanoseconds since the Unix
//! epoch, the engine host's CLOCK_REALTIME): the capture's clock. A timeline says how its own
//! sample times map to it (`profile::timeline::Clock`). Every marker of the window
//! `[since_ns, until_ns]` is in the file (both ends included, as `docker logs --since
//! --until` counts them); `dropped` counts the matches over the file's bound.

pub mod builtin;
pub mod rules;
pub mod slice;

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, Read, Write};

/// The first field of a markers file's header.
pub const FORMAT: &str = "devprof-markers";
pub const VERSION: u32 = 1;
/// The clock of every time in the file.
pub const CLOCK: &str = "unix_ns";
/// Markers one file holds at most (a chatty rule over a long window stops there).
pub const MAX_MARKERS: usize = 200_000;
/// Bytes of text (lines, names, sets, hashes) the markers of one file hold at most, beside
/// their count: each line is cut to `rules::MAX_STORED_LINE`, and this keeps 200,000
/// markers of long lines (a marker holds up to ~1 KiB) from holding ~200 MB.
pub const MAX_MARKER_BYTES: usize = 64 << 20;
/// Longest line of a markers file read back.
const MAX_FILE_LINE: usize = 64 << 10;

/// Which built-in rule sets apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetChoice {
    /// Chosen from the target's image, container and service names.
    Auto,
    /// These, by name.
    Named(Vec<String>),
    /// None (the user's rules only).
    Off,
}

/// The marker rules of a run, from `--mark`.
#[derive(Debug, Clone)]
pub struct MarkPlan {
    pub user: Vec<rules::Rule>,
    pub sets: SetChoice,
}

impl MarkPlan {
    /// The rules for a target known by `names` (image, container, service): the user's
    /// first, then the chosen sets'.
    pub fn rules_for(&self, names: &[&str]) -> Vec<rules::Rule> {
        let sets = match &self.sets {
            SetChoice::Auto => builtin::select(names),
            SetChoice::Named(list) => list.iter().filter_map(|n| builtin::find(n)).collect(),
            SetChoice::Off => Vec::new(),
        };
        let mut out = self.user.clone();
        for set in sets {
            out.extend(builtin::compile(set));
        }
        out
    }
}

/// One marker: a log line a rule matched, and the fields its named groups gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    /// When the engine stamped the line, ns since the Unix epoch.
    pub time_ns: i64,
    /// The rule's name (`block`, `slot`, or the user's NAME).
    pub name: String,
    /// The rule set it came from (`reth`, `geth`, ..., `user`).
    pub set: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// The work the line reports as done, ending at `time_ns` (`elapsed`/`duration` group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u64>,
    /// The line as logged (ANSI colours removed, bounded in length).
    pub line: String,
}

impl Marker {
    /// The bytes of text it holds, as `MAX_MARKER_BYTES` counts them.
    pub fn text_bytes(&self) -> usize {
        self.name.len()
            + self.set.len()
            + self.line.len()
            + self.hash.as_ref().map_or(0, String::len)
    }

    /// A short label: `block 15207178 (2.88 ms)`.
    pub fn label(&self) -> String {
        let mut out = self.name.clone();
        if let Some(n) = self.number.or(self.slot) {
            out.push_str(&format!(" {n}"));
        }
        if let Some(ns) = self.elapsed_ns {
            out.push_str(&format!(" ({})", rules::human_ns(ns)));
        }
        out
    }
}

/// The bounds of one file's markers, in count (`MAX_MARKERS`) and bytes
/// (`MAX_MARKER_BYTES`), as markers are kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    count: usize,
    bytes: usize,
}

impl Budget {
    /// Whether `marker` fits in what is left; it is counted when it does.
    pub fn admit(&mut self, marker: &Marker) -> bool {
        let bytes = self.bytes.saturating_add(marker.text_bytes());
        if self.count >= MAX_MARKERS || bytes > MAX_MARKER_BYTES {
            return false;
        }
        self.count += 1;
        self.bytes = bytes;
        true
    }
}

/// One rule as the header records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleRecord {
    pub set: String,
    pub name: String,
    pub regex: String,
}

/// What a markers file says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub clock: String,
    pub container: String,
    /// The window the markers cover, both ends included.
    pub since_ns: i64,
    pub until_ns: i64,
    pub sets: Vec<String>,
    pub rules: Vec<RuleRecord>,
    /// Log lines read in the window.
    pub lines_read: u64,
    /// Lines longer than the bound, cut before matching.
    pub lines_cut: u64,
    /// Matches past `MAX_MARKERS` or `MAX_MARKER_BYTES`, not kept.
    pub dropped: u64,
    /// Why there are fewer markers than one may expect (no logs, a log driver the API
    /// cannot read).
    pub notes: Vec<String>,
}

/// A whole markers file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Markers {
    pub header: Header,
    pub markers: Vec<Marker>,
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl Markers {
    /// A new file's content: `markers` sorted by time (stable: lines of one instant keep
    /// their log order).
    pub fn new(mut header: Header, mut markers: Vec<Marker>) -> Markers {
        header.format = FORMAT.into();
        header.version = VERSION;
        header.clock = CLOCK.into();
        markers.sort_by_key(|m| m.time_ns);
        Markers { header, markers }
    }

    pub fn write_to<W: Write>(&self, mut out: W) -> io::Result<()> {
        serde_json::to_writer(&mut out, &self.header)?;
        out.write_all(b"\n")?;
        for marker in &self.markers {
            serde_json::to_writer(&mut out, marker)?;
            out.write_all(b"\n")?;
        }
        out.flush()
    }

    /// Reads a markers file: the header, then markers, bounded in line length, count and
    /// bytes; each marker's line is cut as a new one's is (a file of an older devprof kept
    /// lines of up to 4 KiB).
    pub fn read<R: BufRead>(reader: R) -> io::Result<Markers> {
        let mut lines = bounded_lines(reader);
        let first = lines.next().ok_or_else(|| bad("empty markers file"))??;
        let header: Header =
            serde_json::from_str(&first).map_err(|e| bad(format!("markers header: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(bad(format!(
                "not a devprof markers file of version {VERSION} (format {:?}, version {})",
                header.format, header.version
            )));
        }
        let mut markers = Vec::new();
        let mut budget = Budget::default();
        for (n, line) in lines.enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let mut marker: Marker = serde_json::from_str(&line)
                .map_err(|e| bad(format!("marker on line {}: {e}", n + 2)))?;
            if marker.line.len() > rules::MAX_STORED_LINE {
                marker.line = rules::stored_line(&marker.line);
            }
            if !budget.admit(&marker) {
                return Err(bad(format!(
                    "more than {MAX_MARKERS} markers or {} MiB of marker text",
                    MAX_MARKER_BYTES >> 20
                )));
            }
            markers.push(marker);
        }
        markers.sort_by_key(|m| m.time_ns);
        Ok(Markers { header, markers })
    }

    /// Reads `path` when it exists; `Ok(None)` when there is no such file.
    pub fn read_path(path: &std::path::Path) -> io::Result<Option<Markers>> {
        match std::fs::File::open(path) {
            Ok(f) => Markers::read(io::BufReader::new(f)).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The distinct marker names, in order of first appearance.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in &self.markers {
            if !out.contains(&m.name) {
                out.push(m.name.clone());
            }
        }
        out
    }
}

/// Lines of `reader`, each at most `MAX_FILE_LINE` bytes (a longer one is an error).
fn bounded_lines<R: BufRead>(mut reader: R) -> impl Iterator<Item = io::Result<String>> {
    std::iter::from_fn(move || {
        let mut buf = Vec::new();
        match (&mut reader)
            .take(MAX_FILE_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) => None,
            Ok(_) if buf.len() > MAX_FILE_LINE => Some(Err(bad("markers line too long"))),
            Ok(_) => Some(
                String::from_utf8(buf)
                    .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                    .map_err(|_| bad("markers file is not UTF-8")),
            ),
            Err(e) => Some(Err(e)),
        }
    })
}

/// The stretch of time a marker stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Index of the marker in the (time-sorted) list.
    pub marker: usize,
    /// `[start_ns, end_ns)`, on the capture's clock.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Whether the start comes from the line's own elapsed time (else: the previous marker
    /// of the same name, or the window's start for the first).
    pub from_elapsed: bool,
}

impl Interval {
    pub fn duration_ns(&self) -> i64 {
        self.end_ns - self.start_ns
    }

    pub fn contains(&self, t: i64) -> bool {
        self.start_ns <= t && t < self.end_ns
    }
}

/// One interval per marker named `name` (every marker when None): `[time - elapsed, time)`
/// when the line says how long its work took, else from the previous marker of the same
/// name (the window's start for the first one). `markers` must be sorted by time.
pub fn intervals(markers: &[Marker], name: Option<&str>, window_start_ns: i64) -> Vec<Interval> {
    let mut previous: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, m) in markers.iter().enumerate() {
        if name.is_some_and(|n| n != m.name) {
            continue;
        }
        let (start, from_elapsed) = match m.elapsed_ns.and_then(|e| i64::try_from(e).ok()) {
            Some(e) => (m.time_ns.saturating_sub(e), true),
            None => (
                previous
                    .get(m.name.as_str())
                    .copied()
                    .unwrap_or(window_start_ns)
                    .min(m.time_ns),
                false,
            ),
        };
        previous.insert(m.name.as_str(), m.time_ns);
        out.push(Interval {
            marker: i,
            start_ns: start,
            end_ns: m.time_ns,
            from_elapsed,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(t: i64, name: &str, elapsed: Option<u64>) -> Marker {
        Marker {
            time_ns: t,
            name: name.into(),
            set: "user".into(),
            number: Some(t as u64),
            elapsed_ns: elapsed,
            hash: None,
            slot: None,
            line: format!("line at {t}"),
        }
    }

    #[test]
    fn a_file_round_trips_in_time_order() {
        let m = Markers::new(
            Header {
                container: "c".into(),
                since_ns: 1,
                until_ns: 100,
                ..Default::default()
            },
            vec![marker(50, "block", Some(5)), marker(20, "block", None)],
        );
        let mut bytes = Vec::new();
        m.write_to(&mut bytes).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(
            text.starts_with("{\"format\":\"devprof-markers\""),
            "{text}"
        );
        let back = Markers::read(&bytes[..]).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.markers[0].time_ns, 20);
    }

    #[test]
    fn damaged_markers_files_are_errors_not_panics() {
        assert!(Markers::read(&b""[..]).is_err());
        assert!(Markers::read(&b"{\"format\":\"other\"}\n"[..]).is_err());
        let header = "{\"format\":\"devprof-markers\",\"version\":1,\"clock\":\"unix_ns\",\"container\":\"c\",\"since_ns\":0,\"until_ns\":1,\"sets\":[],\"rules\":[],\"lines_read\":0,\"lines_cut\":0,\"dropped\":0,\"notes\":[]}\n";
        assert!(Markers::read(format!("{header}{{\"time_ns\":\"x\"}}\n").as_bytes()).is_err());
        let long = format!("{header}{}\n", "x".repeat(MAX_FILE_LINE + 10));
        assert!(Markers::read(long.as_bytes()).is_err());
        assert!(Markers::read(header.as_bytes()).unwrap().markers.is_empty());
    }

    #[test]
    fn intervals_use_elapsed_else_the_previous_marker_of_the_same_name() {
        let markers = vec![
            marker(100, "block", None),
            marker(150, "slot", None),
            marker(200, "block", Some(30)),
            marker(260, "block", None),
            marker(300, "slot", None),
        ];
        let got = intervals(&markers, Some("block"), 10);
        let spans: Vec<(i64, i64, bool)> = got
            .iter()
            .map(|i| (i.start_ns, i.end_ns, i.from_elapsed))
            .collect();
        assert_eq!(
            spans,
            vec![(10, 100, false), (170, 200, true), (200, 260, false)]
        );
        let slots = intervals(&markers, Some("slot"), 0);
        assert_eq!((slots[1].start_ns, slots[1].end_ns), (150, 300));
        assert_eq!(intervals(&markers, None, 0).len(), 5);
        assert!(got[1].contains(170) && !got[1].contains(200));
    }

    #[test]
    fn markers_are_bounded_in_bytes_as_well_as_in_count() {
        let mut long = marker(1, "block", None);
        long.line = "x".repeat(rules::MAX_STORED_LINE);
        let mut budget = Budget::default();
        let fits = MAX_MARKER_BYTES / long.text_bytes();
        assert!(fits < MAX_MARKERS);
        assert!((0..fits).all(|_| budget.admit(&long)));
        assert!(!budget.admit(&long), "past the byte budget");
        let short = marker(1, "b", None);
        let mut budget = Budget::default();
        assert!((0..MAX_MARKERS).all(|_| budget.admit(&short)));
        assert!(!budget.admit(&short), "past the count");
    }

    #[test]
    fn a_markers_file_of_long_lines_reads_back_cut() {
        let mut long = marker(5, "block", None);
        long.line = "é".repeat(2000);
        let mut bytes = Vec::new();
        Markers::new(Header::default(), vec![long])
            .write_to(&mut bytes)
            .unwrap();
        let back = Markers::read(&bytes[..]).unwrap();
        let line = &back.markers[0].line;
        assert!(line.len() <= rules::MAX_STORED_LINE, "{}", line.len());
        assert!(line.ends_with("… [cut: 4000 bytes]"), "{line}");
    }
}
