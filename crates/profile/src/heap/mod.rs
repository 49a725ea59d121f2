//! Heap profiles from jemalloc dumps. Pure analysis: `parse` (heap_v2 dumps), `dumps`
//! (dump names, which dumps a command means, jemalloc options, signals), `symbolize`
//! (addresses placed through MAPPED_LIBRARIES and named by `symbols::module`) and `report`
//! (folded stacks by bytes, top allocation sites, the text report). The recipe that talks
//! to the container and writes the artifacts is `capture::heap`.

pub mod dumps;
pub mod parse;
pub mod report;
pub mod symbolize;

use serde::{Deserialize, Serialize};

/// What a heap capture's manifest records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HeapRecord {
    /// `in-use` or `allocated`.
    pub measure: String,
    /// How the dumps were obtained (signal, interval dumps, or chosen among existing ones).
    pub how: String,
    /// The environment variable jemalloc reads in this program, and its value.
    pub conf_variable: String,
    pub conf: String,
    /// The dump directory in the container.
    pub dump_dir: String,
    /// The dumps merged, oldest first.
    pub dumps: Vec<DumpRecord>,
    pub total_bytes: u64,
    pub total_objects: u64,
    /// The dumps' header `t*:` totals, unbiased the same way, summed.
    pub header_total_bytes: u64,
    pub header_gap_percent: f64,
    pub sample_period: u64,
    pub stacks: usize,
    pub addresses: usize,
    pub addresses_symbolized: usize,
    pub bytes_at_unnamed_sites: u64,
    /// Bytes by the program's own allocation site (innermost frame outside std).
    pub own_sites: Vec<(String, u64)>,
    pub modules: Vec<ModuleRecord>,
    pub top_self: Vec<(String, u64)>,
    pub top_inclusive: Vec<(String, u64)>,
    /// Growth over a fresh window: the end dump's total less the start dump's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_growth_bytes: Option<i64>,
    /// The heap over time: every dump brought home (merged or not), oldest first, with
    /// its header's `t*:` total (unbiased) of the measure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dump_totals: Vec<DumpTotal>,
}

/// One dump's total, for the heap over time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DumpTotal {
    pub name: String,
    /// Modification time in the container, seconds since the epoch.
    pub mtime: i64,
    pub bytes: u64,
    pub objects: u64,
}

/// The header totals of dumps on disk (`(name, mtime, local path)`, in order); a dump
/// whose header cannot be read is left out.
pub fn dump_totals<'a>(
    dumps: impl IntoIterator<Item = (&'a str, i64, std::path::PathBuf)>,
    measure: parse::Measure,
) -> Vec<DumpTotal> {
    dumps
        .into_iter()
        .filter_map(|(name, mtime, path)| {
            let file = std::fs::File::open(path).ok()?;
            let (period, counts) = parse::parse_header(std::io::BufReader::new(file)).ok()?;
            let (objects, bytes) = parse::unbias(counts.get(measure), period);
            Some(DumpTotal {
                name: name.to_string(),
                mtime,
                bytes: bytes.round() as u64,
                objects: objects.round() as u64,
            })
        })
        .collect()
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DumpRecord {
    /// The name jemalloc gave it (and the local copy's name, next to the manifest).
    pub name: String,
    pub local_name: String,
    pub pid: u32,
    pub seq: u64,
    pub kind: String,
    pub bytes: u64,
    /// Modification time in the container, seconds since the epoch.
    pub mtime: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ModuleRecord {
    /// The file as mapped in the process.
    pub path: String,
    /// `dwarf`, `symtab`, or why there are no names.
    pub symbols: String,
    /// The local copy, relative to the container's directory in the store.
    pub cached: Option<String>,
}
