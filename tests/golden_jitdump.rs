//! A real jitdump (node's V8 with --perf-prof, cut to whole records by
//! scripts/jitdump-golden-data.sh) read for its names, against the perf map V8 wrote for
//! the same code in the same run (--perf-basic-prof): every code load must name the
//! address the map names, with the same name and extent.

use devprof::symbols::jitdump;
use devprof::symbols::perfmap::PerfMap;
use std::path::Path;

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/jit")
        .join(name)
}

#[test]
fn a_real_v8_jitdump_names_its_code_as_v8s_own_perf_map_does() {
    let bytes = std::fs::read(data("node-fib.jitdump")).unwrap();
    let map_text = std::fs::read_to_string(data("node-fib.perf-map")).unwrap();
    let reference = PerfMap::parse(&map_text);
    let dump = jitdump::parse(&bytes).unwrap();
    assert!(!dump.truncated);
    assert_eq!(dump.loads, reference.len(), "one load per map line");
    let mut checked = 0;
    for line in map_text.lines() {
        let mut fields = line.splitn(3, ' ');
        let start = u64::from_str_radix(fields.next().unwrap(), 16).unwrap();
        let size = u64::from_str_radix(fields.next().unwrap(), 16).unwrap();
        let name = fields.next().unwrap();
        for address in [start, start + size / 2, start + size - 1] {
            assert_eq!(dump.map.name_at(address), Some(name), "{address:#x}");
        }
        assert_eq!(
            dump.map.name_at(start + size),
            reference.name_at(start + size)
        );
        checked += 1;
    }
    assert!(checked >= 40, "{checked}");
    // The hot JavaScript function is among them, optimized.
    assert!(map_text.contains("LazyCompile:*fib"), "{map_text}");
}

#[test]
fn every_prefix_of_a_real_jitdump_reads_as_far_as_it_goes() {
    let bytes = std::fs::read(data("node-fib.jitdump")).unwrap();
    let whole = jitdump::parse(&bytes).unwrap().loads;
    let mut last = 0;
    for end in (0..=bytes.len()).step_by(97) {
        if let Ok(dump) = jitdump::parse(&bytes[..end]) {
            assert!(dump.loads >= last && dump.loads <= whole);
            last = dump.loads;
        }
    }
}
