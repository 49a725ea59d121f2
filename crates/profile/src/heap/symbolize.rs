//! Naming the addresses of heap dumps. Each address of a dump is placed in its mapping
//! (MAPPED_LIBRARIES) and turned into an offset in the mapped file; the symbolizer
//! (`symbols::module`) names it. Addresses are return addresses, so the byte before each is
//! looked up (the call instruction).
//!
//! Work is done in batches: the distinct addresses of all stacks are gathered, grouped by
//! file, sorted, and each file is searched once. What cannot be named becomes
//! `module+0xoffset` (or the bare address outside any file) and keeps its bytes.

use super::parse::HeapDump;
use devprof_symbols::module::{basename, ModuleSymbols};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Where an address of a dump lies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place {
    /// In a mapped file: its path and the offset in the file.
    File { path: String, offset: u64 },
    /// Outside any mapped file.
    Nowhere(u64),
}

/// Places an address (already adjusted to the call instruction) in the dump's mappings;
/// a mapping whose file offsets would pass 2^64 (the dump's numbers) holds no place.
pub fn place(dump: &HeapDump, address: u64) -> Place {
    let in_file = dump.mapping_of(address).and_then(|m| {
        let offset = (address - m.start).checked_add(m.offset)?;
        Some((m.file()?, offset))
    });
    match in_file {
        Some((path, offset)) => Place::File {
            path: path.to_string(),
            offset,
        },
        None => Place::Nowhere(address),
    }
}

/// The frames of one address, innermost first, and whether they are real names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub frames: Arc<[String]>,
    pub symbolized: bool,
}

/// What symbolization did, for the report and the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolizeStats {
    /// Distinct addresses looked up.
    pub addresses: usize,
    /// Of those, named.
    pub symbolized: usize,
}

/// Symbolizes every distinct address of `dumps` in batches (one pass per file, sorted
/// offsets). `modules` gives each file path's symbols, None when the file could not be
/// read. Returns, per dump, a map from raw address to its frames.
pub fn symbolize_dumps(
    dumps: &[&HeapDump],
    modules: &HashMap<String, Option<ModuleSymbols>>,
) -> (Vec<HashMap<u64, Resolved>>, SymbolizeStats) {
    // Gather: each dump's distinct addresses, placed.
    let mut by_place: BTreeMap<Place, Option<Resolved>> = BTreeMap::new();
    let mut placed: Vec<Vec<(u64, Place)>> = Vec::with_capacity(dumps.len());
    for dump in dumps {
        let mut seen: HashMap<u64, ()> = HashMap::new();
        let mut list = Vec::new();
        for stack in &dump.stacks {
            for &address in &stack.addresses {
                if seen.insert(address, ()).is_none() {
                    let p = place(dump, address.saturating_sub(1));
                    by_place.entry(p.clone()).or_insert(None);
                    list.push((address, p));
                }
            }
        }
        placed.push(list);
    }
    // Resolve: the BTreeMap groups places by file, offsets ascending.
    let mut stats = SymbolizeStats::default();
    for (p, slot) in by_place.iter_mut() {
        stats.addresses += 1;
        let resolved = match p {
            Place::File { path, offset } => {
                let module = modules.get(path).and_then(Option::as_ref);
                let frames = module
                    .and_then(|m| m.address_of_offset(*offset))
                    .map(|a| module.map(|m| m.frames_at(a)).unwrap_or_default())
                    .unwrap_or_default();
                if frames.is_empty() {
                    // The return address itself, as the dump shows it, as an offset.
                    unnamed(format!(
                        "{}+{:#x}",
                        basename(path),
                        offset.saturating_add(1)
                    ))
                } else {
                    Resolved {
                        frames: frames.into(),
                        symbolized: true,
                    }
                }
            }
            Place::Nowhere(a) => unnamed(format!("{:#x}", a.saturating_add(1))),
        };
        if resolved.symbolized {
            stats.symbolized += 1;
        }
        *slot = Some(resolved);
    }
    let maps = placed
        .into_iter()
        .map(|list| {
            list.into_iter()
                .map(|(address, p)| (address, by_place[&p].clone().expect("resolved above")))
                .collect()
        })
        .collect();
    (maps, stats)
}

fn unnamed(frame: String) -> Resolved {
    Resolved {
        frames: vec![frame].into(),
        symbolized: false,
    }
}

/// The files (paths as mapped) that hold addresses of the dumps' stacks.
pub fn files_needed(dumps: &[&HeapDump]) -> Vec<String> {
    let mut files = std::collections::BTreeSet::new();
    for dump in dumps {
        let mut seen = std::collections::HashSet::new();
        for stack in &dump.stacks {
            for &a in &stack.addresses {
                if seen.insert(a) {
                    if let Place::File { path, .. } = place(dump, a.saturating_sub(1)) {
                        files.insert(path);
                    }
                }
            }
        }
    }
    files.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::parse::Mapping;

    #[test]
    fn a_heap_mapping_whose_file_offset_passes_2_pow_64_places_nowhere_not_an_overflow() {
        let mapping = |offset| Mapping {
            start: 0x1000,
            end: 0x2000,
            perms: "r-xp".into(),
            offset,
            inode: 1,
            path: Some("/lib/a.so".into()),
        };
        let mut dump = HeapDump {
            sample_period: 1,
            total: Default::default(),
            threads: Vec::new(),
            stacks: Vec::new(),
            mappings: vec![mapping(u64::MAX - 0x10)],
        };
        assert_eq!(place(&dump, 0x1800), Place::Nowhere(0x1800));
        dump.mappings = vec![mapping(0x100)];
        let file = Place::File {
            path: "/lib/a.so".into(),
            offset: 0x900,
        };
        assert_eq!(place(&dump, 0x1800), file);
    }
}
