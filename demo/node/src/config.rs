//! Configuration of the demo node: which workloads run and how hard.
//!
//! `DEMO_WORKLOADS` is a comma-separated list of `name` or `name:percent` entries. The
//! percent (1..=100, default 100) is the duty cycle of that workload's thread(s) within
//! each 100 ms period: busy for that share of the period, asleep for the rest.

use std::fmt;

/// Workloads used when `DEMO_WORKLOADS` is unset.
pub const DEFAULT_WORKLOADS: &str = "hash_chain,state_lookup";

/// One kind of work; each is a separate function of the same name in `workloads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    HashChain,
    StateLookup,
    ContendLock,
    SyncWrites,
    MmapReads,
    AllocBlocks,
}

impl Workload {
    pub const ALL: [Workload; 6] = [
        Workload::HashChain,
        Workload::StateLookup,
        Workload::ContendLock,
        Workload::SyncWrites,
        Workload::MmapReads,
        Workload::AllocBlocks,
    ];

    /// The function name, which is also the thread name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::HashChain => "hash_chain",
            Workload::StateLookup => "state_lookup",
            Workload::ContendLock => "contend_lock",
            Workload::SyncWrites => "sync_writes",
            Workload::MmapReads => "mmap_reads",
            Workload::AllocBlocks => "alloc_blocks",
        }
    }

    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A workload and its duty cycle in percent (1..=100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub workload: Workload,
    pub percent: u8,
}

/// Parses a `DEMO_WORKLOADS` value. Blank entries (e.g. a trailing comma) are ignored;
/// an empty list, an unknown name, a bad percent or a repeated name is an error.
pub fn parse_workloads(spec: &str) -> Result<Vec<WorkloadSpec>, String> {
    let mut out: Vec<WorkloadSpec> = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, percent) = match entry.split_once(':') {
            Some((name, pct)) => (name.trim(), parse_percent(entry, pct.trim())?),
            None => (entry, 100),
        };
        let workload = Workload::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload '{name}' (known: {})", known.join(", "))
        })?;
        if out.iter().any(|s| s.workload == workload) {
            return Err(format!("workload '{name}' is listed more than once"));
        }
        out.push(WorkloadSpec { workload, percent });
    }
    if out.is_empty() {
        return Err("no workloads given".to_string());
    }
    Ok(out)
}

fn parse_percent(entry: &str, pct: &str) -> Result<u8, String> {
    match pct.parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(p),
        _ => Err(format!(
            "bad percent in '{entry}': expected an integer from 1 to 100"
        )),
    }
}

/// Parses a positive integer setting such as `DEMO_LOCK_THREADS`; `None` means unset.
pub fn parse_positive(var: &str, value: Option<&str>, default: u64) -> Result<u64, String> {
    match value {
        None => Ok(default),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{var}='{v}': expected a positive integer")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workload: Workload, percent: u8) -> WorkloadSpec {
        WorkloadSpec { workload, percent }
    }

    #[test]
    fn default_spec_parses() {
        assert_eq!(
            parse_workloads(DEFAULT_WORKLOADS).unwrap(),
            vec![
                spec(Workload::HashChain, 100),
                spec(Workload::StateLookup, 100)
            ]
        );
    }

    #[test]
    fn percents_and_spaces() {
        assert_eq!(
            parse_workloads(" hash_chain:60 , state_lookup:30,contend_lock : 5 ").unwrap(),
            vec![
                spec(Workload::HashChain, 60),
                spec(Workload::StateLookup, 30),
                spec(Workload::ContendLock, 5)
            ]
        );
    }

    #[test]
    fn all_names_round_trip() {
        let all = "hash_chain,state_lookup,contend_lock,sync_writes,mmap_reads,alloc_blocks:1";
        let parsed = parse_workloads(all).unwrap();
        assert_eq!(parsed.len(), 6);
        for (s, w) in parsed.iter().zip(Workload::ALL) {
            assert_eq!(s.workload, w);
            assert_eq!(Workload::from_name(w.name()), Some(w));
        }
        assert_eq!(parsed[5].percent, 1);
    }

    #[test]
    fn blank_entries_are_ignored() {
        assert_eq!(
            parse_workloads("hash_chain,,").unwrap(),
            vec![spec(Workload::HashChain, 100)]
        );
    }

    #[test]
    fn empty_is_an_error() {
        assert!(parse_workloads("").is_err());
        assert!(parse_workloads(" , ").is_err());
    }

    #[test]
    fn unknown_name_is_an_error() {
        let err = parse_workloads("hash_chain,bogus:10").unwrap_err();
        assert!(err.contains("unknown workload 'bogus'"), "{err}");
        assert!(err.contains("alloc_blocks"), "{err}");
        assert!(parse_workloads("Hash_Chain").is_err());
    }

    #[test]
    fn bad_percents_are_errors() {
        for bad in [
            "hash_chain:0",
            "hash_chain:101",
            "hash_chain:-5",
            "hash_chain:",
            "hash_chain:50%",
            "hash_chain:1.5",
            "hash_chain:1:2",
        ] {
            assert!(parse_workloads(bad).is_err(), "{bad} should be rejected");
        }
        assert_eq!(
            parse_workloads("hash_chain:100").unwrap(),
            vec![spec(Workload::HashChain, 100)]
        );
    }

    #[test]
    fn duplicates_are_errors() {
        let err = parse_workloads("hash_chain:10,hash_chain:20").unwrap_err();
        assert!(err.contains("more than once"), "{err}");
    }

    #[test]
    fn positive_settings() {
        assert_eq!(parse_positive("X", None, 4), Ok(4));
        assert_eq!(parse_positive("X", Some(" 8 "), 4), Ok(8));
        assert!(parse_positive("X", Some("0"), 4).is_err());
        assert!(parse_positive("X", Some("many"), 4).is_err());
    }
}
