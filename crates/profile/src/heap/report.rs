//! From symbolized dumps to a memory profile: folded stacks weighted by (unbiased) bytes,
//! with the allocator's own frames dropped, and the jeprof-like text report. Pure.

use crate::folded::Folded;
use crate::heap::parse::{unbias, HeapDump, Measure};
use crate::heap::symbolize::{Resolved, SymbolizeStats};
use devprof_base::units::human_bytes as human;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// A stack made only of allocator frames (or of nothing) is shown as this.
pub const ALLOCATOR_ONLY: &str = "[allocator]";

/// The profile of one or more dumps.
#[derive(Debug, Clone, PartialEq)]
pub struct HeapProfile {
    pub measure: Measure,
    /// Root-first stacks (`program;frame;...;leaf`) with bytes.
    pub folded: Folded,
    /// Sum of the stacks' unbiased bytes and objects.
    pub total_bytes: u64,
    pub total_objects: u64,
    /// Sum of the dumps' header `t*:` totals, unbiased the same way.
    pub header_bytes: u64,
    pub header_objects: u64,
    /// Bytes whose allocation site (the leaf, after the allocator's frames) has no name.
    pub bytes_at_unnamed_sites: u64,
    /// Stacks in the dumps (with a non-zero count of the measure).
    pub stacks: usize,
}

impl HeapProfile {
    /// How far the stacks' total is from the header's, in percent of the header.
    pub fn header_gap_percent(&self) -> f64 {
        if self.header_bytes == 0 {
            return if self.total_bytes == 0 { 0.0 } else { 100.0 };
        }
        100.0 * (self.total_bytes as f64 - self.header_bytes as f64).abs()
            / self.header_bytes as f64
    }
}

/// Whether a (demangled) frame belongs to the allocator: malloc and friends, jemalloc's
/// entry points (prefixed or not), and Rust's global-allocator glue. Everything from the
/// leaf up to the outermost such frame is the allocator's own business (jeprof drops it
/// the same way); the frame above it is the allocation site.
pub fn is_allocator_frame(frame: &str) -> bool {
    const EXACT: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "reallocarray",
        "free",
        "cfree",
        "memalign",
        "posix_memalign",
        "aligned_alloc",
        "valloc",
        "pvalloc",
        "mallocx",
        "rallocx",
        "xallocx",
        "sallocx",
        "dallocx",
        "sdallocx",
        "nallocx",
        "operator new(unsigned long)",
        "operator new[](unsigned long)",
        "operator new(unsigned long, std::align_val_t)",
        "operator new(unsigned long, std::nothrow_t const&)",
        // jemalloc's own static functions (no prefix), which a tail call can leave
        // above the public entry point.
        "do_rallocx",
        "do_realloc_nonnull_zero",
        "imalloc",
        "imalloc_body",
        "imalloc_no_sample",
        "imalloc_sample",
        "ialloc",
        "iralloc",
        "irallocx_prof",
        "irallocx_prof_sample",
        "irealloc_prof",
        "irealloc_prof_sample",
        "ixallocx_prof",
        "ixalloc",
        "prof_alloc_prep",
        "prof_backtrace",
        "prof_backtrace_impl",
        "malloc_default",
        "free_default",
        "sdallocx_default",
        "imalloc_fastpath",
    ];
    const PREFIXES: &[&str] = &[
        "_rjem_",
        "je_",
        "__rust_alloc",
        "__rust_realloc",
        "__rust_alloc_zeroed",
        "__rustc::__rust_alloc",
        "__rustc::__rust_realloc",
        "__rdl_",
        "__rg_",
        "__rustc::__rdl_",
        "__rustc::__rg_",
        "alloc::alloc::",
        "<alloc::alloc::Global as core::alloc::Allocator>::",
        "tikv_jemallocator::",
        "<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::",
        "jemallocator::",
        "<jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::",
        "tikv_jemalloc_sys::",
    ];
    EXACT.contains(&frame) || PREFIXES.iter().any(|p| frame.starts_with(p))
}

/// Builds the profile of `dumps` (with `resolved[i]` the frames of dump i's addresses).
/// `root` is the first frame of every stack (the program's name).
pub fn build_profile(
    root: &str,
    dumps: &[&HeapDump],
    resolved: &[HashMap<u64, Resolved>],
    measure: Measure,
) -> HeapProfile {
    let mut merged: HashMap<String, u64> = HashMap::new();
    let (mut total_bytes, mut total_objects) = (0u64, 0u64);
    let (mut header_bytes, mut header_objects) = (0f64, 0f64);
    let mut unnamed_bytes = 0u64;
    let mut stacks = 0usize;
    for (dump, names) in dumps.iter().zip(resolved) {
        let (ho, hb) = unbias(dump.total.get(measure), dump.sample_period);
        header_objects += ho;
        header_bytes += hb;
        for stack in &dump.stacks {
            let (objects, bytes) = unbias(stack.counts.get(measure), dump.sample_period);
            let bytes = bytes.round() as u64;
            if bytes == 0 {
                continue;
            }
            stacks += 1;
            total_bytes += bytes;
            total_objects += objects.round() as u64;
            // Leaf first: each address's frames, innermost first.
            let mut frames: Vec<(&str, bool)> = Vec::new();
            for a in &stack.addresses {
                match names.get(a) {
                    Some(r) => frames.extend(r.frames.iter().map(|f| (f.as_str(), r.symbolized))),
                    None => frames.push(("[unknown]", false)),
                }
            }
            if let Some(last_alloc) = frames
                .iter()
                .rposition(|(f, named)| *named && is_allocator_frame(f))
            {
                frames.drain(..=last_alloc);
            }
            if frames.first().is_some_and(|(_, named)| !named) {
                unnamed_bytes += bytes;
            }
            let mut line = String::from(root);
            if frames.is_empty() {
                line.push(';');
                line.push_str(ALLOCATOR_ONLY);
            }
            for (f, _) in frames.iter().rev() {
                line.push(';');
                line.push_str(f);
            }
            *merged.entry(line).or_default() += bytes;
        }
    }
    HeapProfile {
        measure,
        folded: Folded::from_pairs(merged.into_iter()),
        total_bytes,
        total_objects,
        header_bytes: header_bytes.round() as u64,
        header_objects: header_objects.round() as u64,
        bytes_at_unnamed_sites: unnamed_bytes,
        stacks,
    }
}

/// One row of the tables: a function with its self and inclusive bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Site {
    pub function: String,
    pub self_bytes: u64,
    pub inclusive_bytes: u64,
}

/// Every function with its self bytes (as the leaf) and inclusive bytes (anywhere on the
/// stack, once per stack); the root (program name) is not a function.
pub fn sites(folded: &Folded) -> Vec<Site> {
    let mut table: HashMap<&str, (u64, u64)> = HashMap::new();
    for (stack, bytes) in &folded.stacks {
        let frames: Vec<&str> = stack.split(';').skip(1).collect();
        if let Some(leaf) = frames.last() {
            table.entry(leaf).or_default().0 += bytes;
        }
        let mut seen = HashSet::new();
        for f in frames {
            if seen.insert(f) {
                table.entry(f).or_default().1 += bytes;
            }
        }
    }
    table
        .into_iter()
        .map(|(f, (s, i))| Site {
            function: f.to_string(),
            self_bytes: s,
            inclusive_bytes: i,
        })
        .collect()
}

/// Sites by self bytes, then by inclusive bytes (ties by name), the top `n` of each.
pub fn top_sites(folded: &Folded, n: usize) -> (Vec<Site>, Vec<Site>) {
    let all = sites(folded);
    let mut by_self: Vec<Site> = all.iter().filter(|s| s.self_bytes > 0).cloned().collect();
    by_self.sort_by(|a, b| {
        b.self_bytes
            .cmp(&a.self_bytes)
            .then(a.function.cmp(&b.function))
    });
    by_self.truncate(n);
    let mut by_incl = all;
    by_incl.sort_by(|a, b| {
        b.inclusive_bytes
            .cmp(&a.inclusive_bytes)
            .then(a.function.cmp(&b.function))
    });
    by_incl.truncate(n);
    (by_self, by_incl)
}

/// Frames of the Rust standard library (and hashbrown, which std's HashMap is), which
/// allocate on behalf of their callers.
pub fn is_library_frame(frame: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "std::",
        "core::",
        "alloc::",
        "hashbrown::",
        "<std::",
        "<core::",
        "<alloc::",
        "<hashbrown::",
        "<<",
    ];
    const TRAITS: &[&str] = &[" as std::", " as core::", " as alloc::"];
    PREFIXES.iter().any(|p| frame.starts_with(p))
        || (frame.starts_with('<') && TRAITS.iter().any(|t| frame.contains(t)))
}

/// Bytes by the program's own allocation site: for each stack, the innermost named frame
/// outside the standard library (the code that asked std to allocate), heaviest first.
pub fn own_sites(folded: &Folded, n: usize) -> Vec<(String, u64)> {
    let mut table: HashMap<&str, u64> = HashMap::new();
    for (stack, bytes) in &folded.stacks {
        let frames: Vec<&str> = stack.split(';').skip(1).collect();
        let site = frames
            .iter()
            .rev()
            .find(|f| !is_library_frame(f) && !looks_unnamed(f))
            .or(frames.last())
            .copied()
            .unwrap_or(ALLOCATOR_ONLY);
        *table.entry(site).or_default() += bytes;
    }
    let mut ranked: Vec<(String, u64)> =
        table.into_iter().map(|(f, b)| (f.to_string(), b)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(n);
    ranked
}

/// `module+0x1f2e`, a bare `0x...` address, or `[unknown]`.
pub fn looks_unnamed(frame: &str) -> bool {
    frame.starts_with("0x")
        || frame.starts_with('[')
        || frame.rsplit_once("+0x").is_some_and(|(m, off)| {
            !m.contains(' ') && !off.is_empty() && off.chars().all(|c| c.is_ascii_hexdigit())
        })
}

/// What the text report says about where the profile came from.
#[derive(Debug, Clone, Default)]
pub struct ReportHeader {
    /// e.g. `demo-seq (pid 6: demo-node)`
    pub subject: String,
    /// The dumps merged, oldest first, with a short description each.
    pub dumps: Vec<String>,
    pub sample_period: u64,
    pub symbols: SymbolizeStats,
}

/// The jeprof `--text`-like report.
pub fn render_text(profile: &HeapProfile, header: &ReportHeader, rows: usize) -> String {
    let mut out = String::new();
    let total = profile.total_bytes;
    let _ = writeln!(
        out,
        "heap profile of {}: {} bytes",
        header.subject,
        profile.measure.label()
    );
    let _ = writeln!(out, "dumps merged ({}):", header.dumps.len());
    for d in &header.dumps {
        let _ = writeln!(out, "  {d}");
    }
    let _ = writeln!(
        out,
        "total: {} bytes ({}) in {} objects, {} stacks",
        group(total),
        human(total),
        group(profile.total_objects),
        profile.stacks
    );
    let _ = writeln!(
        out,
        "dump header t*: {} bytes; the stacks add up to {:.2}% of it",
        group(profile.header_bytes),
        if profile.header_bytes == 0 {
            0.0
        } else {
            100.0 * total as f64 / profile.header_bytes as f64
        }
    );
    let _ = writeln!(
        out,
        "sampling: one sample per {} bytes on average; counts unbiased once with jeprof's formula",
        group(header.sample_period)
    );
    let s = &header.symbols;
    let _ = writeln!(
        out,
        "symbols: {} distinct addresses, {} named ({:.1}%; the rest stay as module+offset); {:.1}% of the bytes are at unnamed allocation sites",
        s.addresses,
        s.symbolized,
        percent(s.symbolized as u64, s.addresses as u64),
        percent(profile.bytes_at_unnamed_sites, total)
    );
    let _ = writeln!(out, "\ntop allocation sites in the program's own code (innermost frame outside the Rust standard library):");
    let _ = writeln!(out, "{:>12} {:>7}  function", "bytes", "share");
    for (site, bytes) in own_sites(&profile.folded, rows) {
        let _ = writeln!(
            out,
            "{:>12} {:>6.2}%  {site}",
            human(bytes),
            percent(bytes, total)
        );
    }
    let (by_self, by_incl) = top_sites(&profile.folded, rows);
    let _ = writeln!(
        out,
        "\ntop allocation sites by self bytes (the frame that called the allocator):"
    );
    let _ = writeln!(
        out,
        "{:>12} {:>7} {:>7} {:>12} {:>7}  function",
        "self", "self%", "sum%", "inclusive", "incl%"
    );
    let mut running = 0u64;
    for site in &by_self {
        running += site.self_bytes;
        let _ = writeln!(
            out,
            "{:>12} {:>6.2}% {:>6.2}% {:>12} {:>6.2}%  {}",
            human(site.self_bytes),
            percent(site.self_bytes, total),
            percent(running, total),
            human(site.inclusive_bytes),
            percent(site.inclusive_bytes, total),
            site.function
        );
    }
    let _ = writeln!(
        out,
        "\ntop functions by inclusive bytes (allocated in them or in what they call):"
    );
    let _ = writeln!(
        out,
        "{:>12} {:>7} {:>12} {:>7}  function",
        "inclusive", "incl%", "self", "self%"
    );
    for site in &by_incl {
        let _ = writeln!(
            out,
            "{:>12} {:>6.2}% {:>12} {:>6.2}%  {}",
            human(site.inclusive_bytes),
            percent(site.inclusive_bytes, total),
            human(site.self_bytes),
            percent(site.self_bytes, total),
            site.function
        );
    }
    out
}

pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// `1234567` -> `1,234,567`.
pub fn group(n: u64) -> String {
    devprof_base::units::thousands(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::parse::parse_dump;
    use std::sync::Arc;

    fn named(frames: &[&str]) -> Resolved {
        Resolved {
            frames: frames
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .into(),
            symbolized: true,
        }
    }

    #[test]
    fn allocator_frames_are_recognized_and_user_frames_are_not() {
        for f in [
            "_rjem_malloc",
            "_rjem_je_prof_backtrace",
            "__rust_realloc",
            "__rustc::__rust_alloc",
            "alloc::alloc::realloc",
            "<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::alloc",
            "malloc",
            "do_rallocx",
        ] {
            assert!(is_allocator_frame(f), "{f}");
        }
        for f in [
            "alloc::raw_vec::finish_grow",
            "demo_node::workloads::alloc_blocks",
            "mallocate_things",
            "main",
        ] {
            assert!(!is_allocator_frame(f), "{f}");
        }
    }

    #[test]
    fn drops_allocator_frames_keeps_unnamed_bytes_and_merges_equal_stacks() {
        let dump = parse_dump(
            "heap_v2/524288\n  t*: 3: 3000000 [0: 0]\n\
             @ 0x10 0x20 0x30\n  t*: 1: 1000000 [0: 0]\n\
             @ 0x11 0x20 0x30\n  t*: 1: 1000000 [0: 0]\n\
             @ 0x10 0x40\n  t*: 1: 1000000 [0: 0]\n\
             MAPPED_LIBRARIES:\n",
        )
        .unwrap();
        let mut names = HashMap::new();
        names.insert(0x10, named(&["je_prof_backtrace", "_rjem_malloc"]));
        names.insert(0x11, named(&["_rjem_rallocx"]));
        names.insert(0x20, named(&["alloc::raw_vec::finish_grow", "app::grow"]));
        names.insert(0x30, named(&["main"]));
        names.insert(
            0x40,
            Resolved {
                frames: Arc::from(vec!["app+0x40".to_string()]),
                symbolized: false,
            },
        );
        let p = build_profile("app", &[&dump], &[names], Measure::InUse);
        // 1 MB objects at a 512 KiB period: scale 1/(1-e^-1.907...) each.
        let per = unbias(dump.stacks[0].counts.in_use, 524288).1.round() as u64;
        assert_eq!(p.total_bytes, 3 * per);
        assert_eq!(
            p.header_bytes,
            unbias(dump.total.in_use, 524288).1.round() as u64
        );
        assert_eq!(p.stacks, 3);
        assert_eq!(
            p.folded.stacks,
            vec![
                ("app;app+0x40".to_string(), per),
                (
                    "app;main;app::grow;alloc::raw_vec::finish_grow".to_string(),
                    2 * per
                ),
            ]
        );
        assert_eq!(p.bytes_at_unnamed_sites, per);
        let (by_self, by_incl) = top_sites(&p.folded, 10);
        assert_eq!(by_self[0].function, "alloc::raw_vec::finish_grow");
        assert_eq!(by_incl[0].inclusive_bytes, 2 * per);
        assert!(p.header_gap_percent() < 0.001);
    }

    #[test]
    fn own_sites_skip_std_frames_and_unnamed_ones() {
        let folded = Folded::from_pairs(
            vec![
                (
                    "p;main;app::grow;alloc::vec::Vec<T,A>::resize;alloc::raw_vec::finish_grow"
                        .to_string(),
                    70,
                ),
                (
                    "p;main;app::load;<std::collections::BTreeMap<K,V>>::insert;app+0x10"
                        .to_string(),
                    20,
                ),
                (
                    "p;std::rt::init;alloc::boxed::Box<T,A>::new".to_string(),
                    10,
                ),
            ]
            .into_iter(),
        );
        assert_eq!(
            own_sites(&folded, 5),
            vec![
                ("app::grow".to_string(), 70),
                ("app::load".to_string(), 20),
                ("alloc::boxed::Box<T,A>::new".to_string(), 10)
            ]
        );
        assert!(is_library_frame(
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"
        ));
        assert!(!is_library_frame("<app::Cache as app::Store>::put"));
        assert!(
            looks_unnamed("libc.so.6+0x2724a") && looks_unnamed("0x7f00") && !looks_unnamed("main")
        );
    }

    #[test]
    fn allocated_measure_uses_the_accumulated_counts() {
        let dump = parse_dump(
            "heap_v2/1\n  t*: 0: 0 [4: 400]\n@ 0x10\n  t*: 0: 0 [4: 400]\nMAPPED_LIBRARIES:\n",
        )
        .unwrap();
        let mut names = HashMap::new();
        names.insert(0x10, named(&["f"]));
        let in_use = build_profile("p", &[&dump], std::slice::from_ref(&names), Measure::InUse);
        assert_eq!((in_use.total_bytes, in_use.stacks), (0, 0));
        let alloc = build_profile("p", &[&dump], &[names], Measure::Allocated);
        assert_eq!(alloc.total_bytes, 400, "period 1: scale 1/(1-e^-100) = 1");
        assert_eq!(alloc.folded.stacks, vec![("p;f".to_string(), 400)]);
    }
}
