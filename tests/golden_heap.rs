//! Golden-file tests of the heap analysis on a real dump of demo-seq (tests/data/heap/):
//! `demo-seq.heap` (jemalloc 5.3 via tikv-jemallocator 0.6, lg_prof_sample:17,
//! prof_accum:true) and the symbol tables of the two files its stacks point into, made
//! from the real binaries with readelf and nm (`make-symbols.py`). The expected figures
//! come from `expected.py`, which reads the same files without devprof:
//!
//! ```text
//! in-use: stacks 6, total 166880877, header 166828792
//! in-use: alloc_blocks inclusive 125829120
//! in-use: state_lookup inclusive 39871752
//! allocated: stacks 7, total 12176033342, header 12176072129
//! allocated: alloc_blocks inclusive 12134981585
//! allocated: state_lookup inclusive 39871752
//! ```
//!
//! `expected.folded` and `expected.txt` are devprof's own output, reviewed and kept to
//! catch changes (DEVPROF_BLESS=1 rewrites them).

use devprof::profile::heap::parse::{parse_dump, HeapDump, Measure};
use devprof::profile::heap::report::{
    build_profile, render_text, sites, HeapProfile, ReportHeader,
};
use devprof::profile::heap::symbolize::{symbolize_dumps, SymbolizeStats};
use devprof::render::{write_svg, SvgSpec};
use devprof::symbols::module::ModuleSymbols;
use std::collections::HashMap;
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/heap")
        .join(name)
}

fn dump() -> HeapDump {
    parse_dump(&std::fs::read_to_string(data("demo-seq.heap")).unwrap()).unwrap()
}

fn modules() -> HashMap<String, Option<ModuleSymbols>> {
    let table = |f: &str| {
        Some(ModuleSymbols::from_table(&std::fs::read_to_string(data(f)).unwrap()).unwrap())
    };
    let mut m = HashMap::new();
    m.insert(
        "/usr/local/bin/demo-node".to_string(),
        table("demo-node.symbols"),
    );
    m.insert(
        "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string(),
        table("libc.so.6.symbols"),
    );
    m
}

fn profile(measure: Measure) -> (HeapProfile, SymbolizeStats) {
    let d = dump();
    let (resolved, stats) = symbolize_dumps(&[&d], &modules());
    (build_profile("demo-node", &[&d], &resolved, measure), stats)
}

fn inclusive(p: &HeapProfile, function: &str) -> u64 {
    sites(&p.folded)
        .into_iter()
        .find(|s| s.function == function)
        .map(|s| s.inclusive_bytes)
        .unwrap_or(0)
}

fn golden(name: &str, actual: &str) {
    let path = data(name);
    if std::env::var("DEVPROF_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        actual,
        expected,
        "{} differs (DEVPROF_BLESS=1 rewrites it after review)",
        path.display()
    );
}

#[test]
fn parses_the_real_dump_header_stacks_and_maps() {
    let d = dump();
    assert_eq!(d.sample_period, 131072);
    assert_eq!(d.stacks.len(), 7);
    assert_eq!(
        (d.total.in_use.objects, d.total.in_use.bytes),
        (1268, 1257407)
    );
    assert_eq!(d.threads.len(), 5);
    assert!(d.has_accumulated());
    assert!(d
        .mappings
        .iter()
        .any(|m| m.file() == Some("/usr/local/bin/demo-node") && m.is_executable()));
}

#[test]
fn in_use_profile_matches_the_independently_computed_figures() {
    let (p, stats) = profile(Measure::InUse);
    assert_eq!(p.stacks, 6);
    assert_eq!(p.total_bytes, 166_880_877);
    assert_eq!(p.header_bytes, 166_828_792);
    assert!(p.header_gap_percent() < 1.0, "{}", p.header_gap_percent());
    assert_eq!(
        p.folded.total(),
        p.total_bytes,
        "every byte is in the flamegraph"
    );
    assert_eq!(
        inclusive(&p, "demo_node::workloads::alloc_blocks"),
        125_829_120
    );
    assert_eq!(
        inclusive(&p, "demo_node::workloads::state_lookup"),
        39_871_752
    );
    // alloc_blocks carries the largest share among the program's functions.
    let biggest = sites(&p.folded)
        .into_iter()
        .filter(|s| s.function.starts_with("demo_node::workloads::"))
        .max_by_key(|s| s.inclusive_bytes)
        .unwrap();
    assert_eq!(biggest.function, "demo_node::workloads::alloc_blocks");
    assert!(
        stats.addresses > 20 && stats.symbolized < stats.addresses,
        "{stats:?}"
    );
}

#[test]
fn allocator_frames_are_dropped_and_unnamed_frames_keep_their_bytes() {
    let (p, _) = profile(Measure::InUse);
    for (stack, _) in &p.folded.stacks {
        assert!(stack.starts_with("demo-node;"), "{stack}");
        for f in stack.split(';') {
            assert!(
                !f.starts_with("_rjem_")
                    && !f.starts_with("__rust")
                    && !f.starts_with("alloc::alloc::"),
                "{f} in {stack}"
            );
            assert!(!f.starts_with("_ZN"), "mangled: {f}");
        }
    }
    // Thread stacks pass through libc's start_thread, which libc does not export: the
    // frame stays as module+offset (the return address's offset in the file).
    let unnamed: u64 = p
        .folded
        .stacks
        .iter()
        .filter(|(s, _)| s.contains(";libc.so.6+0x"))
        .map(|(_, b)| b)
        .sum();
    assert!(unnamed >= 125_829_120, "{unnamed}");
}

#[test]
fn allocated_profile_uses_the_accumulated_counts() {
    let (p, _) = profile(Measure::Allocated);
    assert_eq!(p.stacks, 7);
    assert_eq!(p.total_bytes, 12_176_033_342);
    assert_eq!(p.header_bytes, 12_176_072_129);
    assert_eq!(
        inclusive(&p, "demo_node::workloads::alloc_blocks"),
        12_134_981_585
    );
    assert_eq!(
        inclusive(&p, "demo_node::workloads::state_lookup"),
        39_871_752
    );
}

#[test]
fn folded_stacks_and_text_report_match_the_golden_files() {
    let (p, stats) = profile(Measure::InUse);
    let mut folded = Vec::new();
    p.folded.write_to(&mut folded).unwrap();
    golden("expected.folded", &String::from_utf8(folded).unwrap());
    let header = ReportHeader {
        subject: "demo-seq (pid 6: demo-node)".into(),
        dumps: vec!["jeprof.demo-seq.6.1.m1.heap".into()],
        sample_period: 131072,
        symbols: stats,
    };
    golden("expected.txt", &render_text(&p, &header, 10));
}

#[test]
fn memory_flamegraph_counts_bytes_with_the_mem_palette() {
    let (p, _) = profile(Measure::InUse);
    let spec = SvgSpec {
        title: "Heap: demo-seq".into(),
        subtitle: None,
        count_name: "bytes".into(),
        palette: inferno::flamegraph::color::Palette::Basic(
            inferno::flamegraph::color::BasicPalette::Mem,
        ),
    };
    let mut svg = Vec::new();
    write_svg(&p.folded, &spec, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.contains("demo_node::workloads::alloc_blocks (125,829,120 bytes"),
        "alloc_blocks with its bytes"
    );
    assert!(svg.trim_end().ends_with("</svg>"));
}
