//! The dumps a process wrote, and which of them a command means. jemalloc names them
//! `<prof_prefix>.<pid>.<seq>.<kind>.heap`: `m<n>` for `prof.dump` (what devprof's signal
//! asks for), `i<n>` for interval dumps (`lg_prof_interval`), `u<n>` for growth dumps
//! (`prof_gdump`), `f` for the final dump at exit; `seq` counts every dump of the process.
//! Also the jemalloc options (`MALLOC_CONF` text) and signal names. Pure.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpKind {
    /// `m<n>`: prof.dump (on request).
    Manual(u64),
    /// `i<n>`: every 2^lg_prof_interval allocated bytes.
    Interval(u64),
    /// `u<n>`: when the heap reached a new high (prof_gdump).
    Growth(u64),
    /// `f`: at exit (prof_final).
    Final,
    /// A file the user named by its path, whose name is not one jemalloc writes.
    Named,
}

impl DumpKind {
    pub fn describe(&self) -> &'static str {
        match self {
            DumpKind::Manual(_) => "on request (prof.dump)",
            DumpKind::Interval(_) => "interval",
            DumpKind::Growth(_) => "heap high-water mark",
            DumpKind::Final => "at exit",
            DumpKind::Named => "named by path",
        }
    }
}

/// One dump file in the container's dump directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpFile {
    /// The file name (no directory).
    pub name: String,
    pub pid: u32,
    pub seq: u64,
    pub kind: DumpKind,
    pub size: u64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Its full path in the container, when it was named by path (`--files /dir/x.heap`);
    /// None for a file of the process's dump directory.
    pub path: Option<String>,
}

impl DumpFile {
    /// A dump as it was listed: its name, what the name says, its size and time.
    fn named(name: String, (pid, seq, kind): (u32, u64, DumpKind), size: u64, mtime: i64) -> Self {
        DumpFile {
            name,
            pid,
            seq,
            kind,
            size,
            mtime,
            path: None,
        }
    }

    /// A file named by its full path; pid and sequence come from a name jemalloc would
    /// write (`<anything>.<pid>.<seq>.<kind>.heap`), else 0.
    pub fn at_path(path: &str, size: u64, mtime: i64) -> DumpFile {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        let parsed = name
            .strip_suffix(".heap")
            .and_then(|stem| {
                let parts: Vec<&str> = stem.rsplitn(4, '.').collect();
                (parts.len() == 4).then(|| parts[3].to_string())
            })
            .and_then(|base| parse_dump_name(&base, &name));
        let parsed = parsed.unwrap_or((0, 0, DumpKind::Named));
        DumpFile {
            path: Some(path.to_string()),
            ..DumpFile::named(name, parsed, size, mtime)
        }
    }
}

/// `<base>.<pid>.<seq>.<kind>.heap` -> (pid, seq, kind), where `base` is the file-name part
/// of prof_prefix.
pub fn parse_dump_name(base: &str, name: &str) -> Option<(u32, u64, DumpKind)> {
    let rest = name
        .strip_prefix(base)?
        .strip_prefix('.')?
        .strip_suffix(".heap")?;
    let mut parts = rest.split('.');
    let pid = parts.next()?.parse().ok()?;
    let seq = parts.next()?.parse().ok()?;
    let kind_text = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    let number = |t: &str| t.parse::<u64>().ok();
    // The name is any container user's choice: the kind may be empty or start with a
    // multi-byte character, so it is split by character, never at a byte offset.
    let mut kind_chars = kind_text.chars();
    let tag = kind_chars.next()?;
    let kind = match (tag, kind_chars.as_str()) {
        ('m', n) => DumpKind::Manual(number(n)?),
        ('i', n) => DumpKind::Interval(number(n)?),
        ('u', n) => DumpKind::Growth(number(n)?),
        ('f', "") => DumpKind::Final,
        _ => return None,
    };
    Some((pid, seq, kind))
}

/// The dumps of `base` among listed files (name, size, modification time): a name that
/// is no plain file name, or no dump name, is ignored. Sorted oldest first.
pub fn listed(base: &str, entries: impl IntoIterator<Item = (String, u64, i64)>) -> Vec<DumpFile> {
    let mut dumps: Vec<DumpFile> = entries
        .into_iter()
        .filter(|(name, _, _)| !name.contains('/') && !name.chars().any(char::is_control))
        .filter_map(|(name, size, mtime)| {
            let parsed = parse_dump_name(base, &name)?;
            Some(DumpFile::named(name, parsed, size, mtime))
        })
        .collect();
    sort_dumps(&mut dumps);
    dumps
}

/// Oldest first: by time, and within one process by its dump sequence number.
pub fn sort_dumps(dumps: &mut [DumpFile]) {
    dumps.sort_by_key(|d| (d.mtime, d.pid, d.seq));
}

/// Which dumps to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// The newest dump of the process.
    Latest,
    /// Every dump of the process.
    All,
    /// The newest N dumps of the process.
    Last(usize),
    /// Exactly these files of the dump directory (any process).
    Files(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectError {
    /// The process wrote no dump yet.
    NoDumps,
    /// Fewer dumps than asked for.
    TooFew { wanted: usize, have: usize },
    /// Names that are not dumps in the directory.
    Missing(Vec<String>),
}

/// The dumps `selection` means among `all` (sorted oldest first), for process `pid`;
/// the result is oldest first and holds exactly what was asked for, or an error.
pub fn select(
    all: &[DumpFile],
    pid: u32,
    selection: &Selection,
) -> Result<Vec<DumpFile>, SelectError> {
    let own: Vec<&DumpFile> = all.iter().filter(|d| d.pid == pid).collect();
    let newest = |n: usize| -> Result<Vec<DumpFile>, SelectError> {
        if own.is_empty() {
            return Err(SelectError::NoDumps);
        }
        if own.len() < n {
            return Err(SelectError::TooFew {
                wanted: n,
                have: own.len(),
            });
        }
        Ok(own[own.len() - n..].iter().map(|d| (*d).clone()).collect())
    };
    match selection {
        Selection::Latest => newest(1),
        Selection::All => newest(own.len().max(1)),
        Selection::Last(n) => newest(*n),
        Selection::Files(names) => {
            let named = |d: &DumpFile, n: &String| match &d.path {
                Some(p) => p == n,
                None => &d.name == n,
            };
            let missing: Vec<String> = names
                .iter()
                .filter(|n| !all.iter().any(|d| named(d, n)))
                .cloned()
                .collect();
            if !missing.is_empty() {
                return Err(SelectError::Missing(missing));
            }
            let mut chosen: Vec<DumpFile> = all
                .iter()
                .filter(|d| names.iter().any(|n| named(d, n)))
                .cloned()
                .collect();
            sort_dumps(&mut chosen);
            Ok(chosen)
        }
    }
}

/// jemalloc options as written in `MALLOC_CONF` (`key:value,key:value`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JemallocConf {
    pub options: BTreeMap<String, String>,
}

impl JemallocConf {
    pub fn parse(text: &str) -> Self {
        let options = text
            .split(',')
            .filter_map(|kv| kv.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        JemallocConf { options }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.options.get(key).map(String::as_str)
    }

    /// `prof:true`: profiling was set up when the process started.
    pub fn profiling(&self) -> bool {
        self.get("prof") == Some("true")
    }

    /// `prof_active` (true unless set false): whether samples are being taken now.
    pub fn active(&self) -> bool {
        self.get("prof_active") != Some("false")
    }

    /// `lg_prof_interval` when interval dumps are on (>= 0).
    pub fn lg_interval(&self) -> Option<u32> {
        self.get("lg_prof_interval")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| (0..64).contains(v))
            .map(|v| v as u32)
    }

    /// `lg_prof_sample` (jemalloc's default is 19).
    pub fn lg_sample(&self) -> u32 {
        self.get("lg_prof_sample")
            .and_then(|v| v.parse().ok())
            .unwrap_or(19)
    }

    /// `prof_prefix` (jemalloc's default `jeprof`, relative to the process's directory).
    pub fn prefix(&self) -> &str {
        self.get("prof_prefix")
            .filter(|p| !p.is_empty())
            .unwrap_or("jeprof")
    }

    /// `prof_accum`: accumulated counts in the dumps.
    pub fn accumulates(&self) -> bool {
        self.get("prof_accum") == Some("true")
    }
}

/// The directory and file-name base of a prof_prefix, relative ones resolved against the
/// process's working directory.
pub fn split_prefix(prefix: &str, cwd: &str) -> (String, String) {
    let full = if prefix.starts_with('/') {
        prefix.to_string()
    } else {
        format!("{}/{prefix}", cwd.trim_end_matches('/'))
    };
    match full.rsplit_once('/') {
        Some(("", base)) => ("/".to_string(), base.to_string()),
        Some((dir, base)) => (dir.to_string(), base.to_string()),
        None => (".".to_string(), full),
    }
}

/// The signal that asks a program for a heap dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// Without the `SIG` prefix: `USR2`.
    pub name: String,
    pub number: u32,
}

impl Signal {
    /// A signal by name (`USR2`, `SIGUSR2`) or number. Signals that stop or kill whatever
    /// the program does are refused.
    pub fn parse(text: &str) -> Result<Self, String> {
        parse_signal(text).map(|(name, number)| Signal { name, number })
    }
}

fn parse_signal(text: &str) -> Result<(String, u32), String> {
    const NAMES: &[(&str, u32)] = &[
        ("HUP", 1),
        ("INT", 2),
        ("QUIT", 3),
        ("USR1", 10),
        ("USR2", 12),
        ("ALRM", 14),
        ("TERM", 15),
        ("CHLD", 17),
        ("CONT", 18),
        ("TSTP", 20),
        ("URG", 23),
        ("XCPU", 24),
        ("XFSZ", 25),
        ("VTALRM", 26),
        ("PROF", 27),
        ("WINCH", 28),
        ("IO", 29),
        ("PWR", 30),
        ("SYS", 31),
    ];
    let t = text.trim().to_ascii_uppercase();
    let t = t.strip_prefix("SIG").unwrap_or(&t);
    if let Ok(n) = t.parse::<u32>() {
        if matches!(n, 9 | 19) {
            return Err(format!(
                "signal {n} cannot be caught; pick one the program handles (USR2)"
            ));
        }
        if !(1..=64).contains(&n) {
            return Err(format!("signal {n} is out of range (1..=64)"));
        }
        let name = NAMES
            .iter()
            .find(|(_, v)| *v == n)
            .map(|(s, _)| s.to_string())
            .unwrap_or_else(|| n.to_string());
        return Ok((name, n));
    }
    if matches!(t, "KILL" | "STOP") {
        return Err(format!(
            "SIG{t} cannot be caught; pick a signal the program handles (USR2)"
        ));
    }
    NAMES
        .iter()
        .find(|(s, _)| *s == t)
        .map(|(s, n)| (s.to_string(), *n))
        .ok_or_else(|| {
            format!("unknown signal '{text}' (use a name such as USR2 or USR1, or a number)")
        })
}

/// Whether the `SigCgt:` mask of /proc/<pid>/status (hex) says the process catches `signal`.
pub fn catches(sigcgt_hex: &str, signal: u32) -> bool {
    u64::from_str_radix(sigcgt_hex.trim(), 16)
        .map(|mask| (1..=64).contains(&signal) && mask & (1u64 << (signal - 1)) != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(name: &str, pid: u32, seq: u64, mtime: i64) -> DumpFile {
        DumpFile {
            name: name.into(),
            pid,
            seq,
            kind: DumpKind::Manual(seq),
            size: 100,
            mtime,
            path: None,
        }
    }

    #[test]
    fn parses_every_kind_of_dump_name_and_ignores_others() {
        let b = "jeprof.demo-seq";
        assert_eq!(
            parse_dump_name(b, "jeprof.demo-seq.6.0.m0.heap"),
            Some((6, 0, DumpKind::Manual(0)))
        );
        assert_eq!(
            parse_dump_name(b, "jeprof.demo-seq.6.12.i3.heap"),
            Some((6, 12, DumpKind::Interval(3)))
        );
        assert_eq!(
            parse_dump_name(b, "jeprof.demo-seq.6.2.u1.heap"),
            Some((6, 2, DumpKind::Growth(1)))
        );
        assert_eq!(
            parse_dump_name(b, "jeprof.demo-seq.6.9.f.heap"),
            Some((6, 9, DumpKind::Final))
        );
        assert_eq!(
            parse_dump_name(b, "jeprof.demo-rpc.6.0.m0.heap"),
            None,
            "another prefix"
        );
        assert_eq!(
            parse_dump_name("jeprof", "jeprof.demo-seq.6.0.m0.heap"),
            None
        );
        assert_eq!(parse_dump_name(b, "jeprof.demo-seq.6.0.x0.heap"), None);
        assert_eq!(parse_dump_name(b, "jeprof.demo-seq.6.0.m0.heap.tmp"), None);
    }

    #[test]
    fn listing_is_sorted_by_time_then_sequence() {
        let entries = [
            ("jeprof.7.2.m2.heap", 200),
            ("jeprof.7.10.i4.heap", 300),
            ("jeprof.7.1.m1.heap", 200),
            ("jeprof.3.0.f.heap", 100),
            ("notes.txt", 1),
            ("sub/jeprof.3.1.f.heap", 50),
            ("jeprof.3.2.f.heap\n", 50),
        ]
        .map(|(name, mtime)| (name.to_string(), 10, mtime));
        let names: Vec<String> = listed("jeprof", entries)
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(
            names,
            [
                "jeprof.3.0.f.heap",
                "jeprof.7.1.m1.heap",
                "jeprof.7.2.m2.heap",
                "jeprof.7.10.i4.heap"
            ]
        );
    }

    #[test]
    fn selections_hold_exactly_what_they_say() {
        let all = vec![
            dump("old.3.0.m0.heap", 3, 0, 50),
            dump("a.7.0.m0.heap", 7, 0, 100),
            dump("a.7.1.m1.heap", 7, 1, 101),
            dump("a.7.2.m2.heap", 7, 2, 102),
        ];
        let names = |r: Result<Vec<DumpFile>, SelectError>| {
            r.unwrap().into_iter().map(|d| d.name).collect::<Vec<_>>()
        };
        assert_eq!(
            names(select(&all, 7, &Selection::Latest)),
            ["a.7.2.m2.heap"]
        );
        assert_eq!(
            names(select(&all, 7, &Selection::Last(2))),
            ["a.7.1.m1.heap", "a.7.2.m2.heap"]
        );
        assert_eq!(
            names(select(&all, 7, &Selection::All)).len(),
            3,
            "only the process's own dumps"
        );
        assert_eq!(
            select(&all, 7, &Selection::Last(4)),
            Err(SelectError::TooFew { wanted: 4, have: 3 })
        );
        assert_eq!(
            select(&all, 9, &Selection::Latest),
            Err(SelectError::NoDumps)
        );
        assert_eq!(select(&all, 9, &Selection::All), Err(SelectError::NoDumps));
        let files = Selection::Files(vec!["a.7.2.m2.heap".into(), "old.3.0.m0.heap".into()]);
        assert_eq!(
            names(select(&all, 7, &files)),
            ["old.3.0.m0.heap", "a.7.2.m2.heap"],
            "oldest first"
        );
        let missing = Selection::Files(vec!["a.7.2.m2.heap".into(), "nope.heap".into()]);
        assert_eq!(
            select(&all, 7, &missing),
            Err(SelectError::Missing(vec!["nope.heap".into()]))
        );
    }

    #[test]
    fn reads_jemalloc_options() {
        let c = JemallocConf::parse("prof:true,prof_active:false,lg_prof_sample:17,lg_prof_interval:-1,prof_prefix:/profiling/jeprof.x");
        assert!(c.profiling() && !c.active());
        assert_eq!(
            (c.lg_sample(), c.lg_interval(), c.prefix()),
            (17, None, "/profiling/jeprof.x")
        );
        let d = JemallocConf::parse("prof:false,lg_prof_interval:30");
        assert!(!d.profiling());
        assert_eq!(
            (d.lg_sample(), d.lg_interval(), d.prefix()),
            (19, Some(30), "jeprof")
        );
        assert!(!JemallocConf::parse("").profiling());
        assert_eq!(
            split_prefix("/profiling/jeprof.x", "/"),
            ("/profiling".into(), "jeprof.x".into())
        );
        assert_eq!(
            split_prefix("jeprof", "/srv/node/"),
            ("/srv/node".into(), "jeprof".into())
        );
        assert_eq!(split_prefix("jeprof", "/"), ("/".into(), "jeprof".into()));
    }

    #[test]
    fn signals_by_name_or_number_and_the_caught_mask() {
        assert_eq!(parse_signal("USR2").unwrap(), ("USR2".into(), 12));
        assert_eq!(parse_signal("sigusr1").unwrap(), ("USR1".into(), 10));
        assert_eq!(parse_signal("12").unwrap(), ("USR2".into(), 12));
        assert!(
            parse_signal("KILL").is_err()
                && parse_signal("9").is_err()
                && parse_signal("FOO").is_err()
        );
        // demo-node: INT, BUS, SEGV, USR2, TERM caught.
        assert!(catches("0000000100004c42", 12));
        assert!(catches("0000000100004c42", 2));
        assert!(!catches("0000000100004c42", 10));
        assert!(!catches("zz", 12));
    }

    #[test]
    fn dump_name_with_an_empty_kind_is_no_dump_and_no_panic() {
        assert_eq!(parse_dump_name("jeprof", "jeprof.1.2..heap"), None);
        assert_eq!(parse_dump_name("jeprof", "jeprof.1.2.\u{e9}3.heap"), None);
        assert_eq!(parse_dump_name("jeprof", "jeprof.1.2.\u{3000}.heap"), None);
        assert_eq!(parse_dump_name("jeprof", "jeprof.1.2.m.heap"), None);
        assert_eq!(
            parse_dump_name("jeprof", "jeprof.1.2.m3.heap"),
            Some((1, 2, DumpKind::Manual(3)))
        );
        let file = DumpFile::at_path("/tmp/dumps/jeprof.1.2..heap", 10, 0);
        assert_eq!((file.pid, file.seq, file.kind), (0, 0, DumpKind::Named));
        let listed = listed(
            "jeprof",
            [
                ("jeprof.1.2..heap".to_string(), 10, 0),
                ("jeprof.1.3.f.heap".to_string(), 10, 1),
            ],
        );
        assert_eq!(listed.len(), 1, "the odd name skipped, the real dump kept");
        assert_eq!(listed[0].kind, DumpKind::Final);
    }
}
