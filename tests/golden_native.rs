//! The native CPU fold (perf.data read and symbolized by devprof, no `perf script`) against
//! perf itself, on real captures committed under tests/data/native: NAME.data is the
//! perf.data, NAME.script is `perf script` of that same file (the reference), NAME.modules
//! the symbol tables of the files its stacks point into and NAME.kallsyms the kernel
//! symbols they need (made by scripts/native-golden-data.sh). The native path must count
//! the same samples and give at least 98% of them the very stack perf's output folds to.

use devprof::profile::folded::{fold_perf_script, Folded};
use devprof::profile::perfdata::stacks::{self, Symbols};
use devprof::symbols::kallsyms::Kallsyms;
use devprof::symbols::module::ModuleSymbols;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/native")
        .join(name)
}

/// The committed symbol tables: `module PATH` starts each file's table.
fn symbols(name: &str) -> Symbols {
    let text = std::fs::read_to_string(data(&format!("{name}.modules"))).unwrap();
    let mut symbols = Symbols::default();
    let mut current: Option<(String, String)> = None;
    let finish = |entry: Option<(String, String)>, symbols: &mut Symbols| {
        if let Some((path, table)) = entry {
            let module = ModuleSymbols::from_table(&table).unwrap();
            symbols.modules.insert(path, module);
        }
    };
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("module ") {
            finish(current.take(), &mut symbols);
            current = Some((path.to_string(), String::new()));
        } else if let Some((_, table)) = current.as_mut() {
            table.push_str(line);
            table.push('\n');
        }
    }
    finish(current, &mut symbols);
    let kallsyms = std::fs::read_to_string(data(&format!("{name}.kallsyms"))).unwrap();
    symbols.kernel = Kallsyms::parse(&kallsyms);
    symbols
}

fn counts(folded: &Folded) -> BTreeMap<String, u64> {
    folded
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// Folds NAME both ways and checks totals and the share of identical stacks, listing the
/// stacks that differ when it fails.
fn agrees_with_perf_script(name: &str) {
    let raw = stacks::read(&data(&format!("{name}.data")), false).unwrap();
    let native = stacks::fold(&raw, &symbols(name), false, None);
    let script = std::fs::File::open(data(&format!("{name}.script"))).unwrap();
    let reference = fold_perf_script(std::io::BufReader::new(script)).unwrap();

    let (ours, theirs) = (counts(&native.folded), counts(&reference));
    let total: u64 = theirs.values().sum();
    let same: u64 = theirs
        .iter()
        .map(|(stack, n)| (*n).min(*ours.get(stack).unwrap_or(&0)))
        .sum();
    let differing = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| -> Vec<String> {
        a.iter()
            .filter(|(s, n)| b.get(*s) != Some(n))
            .map(|(s, n)| format!("  {n} {s} (other side: {})", b.get(s).unwrap_or(&0)))
            .take(40)
            .collect()
    };
    let report = format!(
        "native only / different counts:\n{}\nperf script only / different counts:\n{}",
        differing(&ours, &theirs).join("\n"),
        differing(&theirs, &ours).join("\n")
    );
    assert!(total > 100, "{name}: a real capture has samples ({total})");
    assert_eq!(
        native.folded.total(),
        total,
        "{name}: sample totals differ\n{report}"
    );
    assert_eq!(native.samples, total);
    assert!(
        same as f64 >= 0.98 * total as f64,
        "{name}: only {same} of {total} samples have perf script's stack\n{report}"
    );
    assert_eq!(native.unresolved_samples, 0, "{:?}", native.missing_modules);
}

#[test]
fn native_fold_of_a_host_capture_with_kernel_frames_matches_perf_script() {
    agrees_with_perf_script("host-xz");
}

#[test]
fn native_fold_of_the_demo_node_matches_perf_script() {
    // The demo node's six workloads (Rust, frame pointers, jemalloc, file I/O), recorded
    // the way devprof records (-z, -g, 999 Hz, one process).
    agrees_with_perf_script("host-demo-node");
}
