//! The native CPU fold (perf.data read and symbolized by devprof, no `perf script`) against
//! perf itself, on real captures committed under tests/data/native: NAME.data is the
//! perf.data, NAME.script is `perf script` of that same file (the reference), NAME.modules
//! the symbol tables of the files its stacks point into and NAME.kallsyms the kernel
//! symbols they need (made by scripts/native-golden-data.sh). The native path must count
//! the same samples and give at least 98% of them the very stack perf's output folds to.
//! host-dwarf-loop is a DWARF capture (scripts/native-dwarf-golden-data.sh): the native path
//! unwinds its user stacks with the recorded binary (kept under NAME.root, where the
//! capture found it) and must agree with perf script the same way; without the binaries
//! it refuses the file rather than read it in part.

use devprof::profile::folded::Folded;
use devprof::profile::perfdata::stacks::{self, Symbols};
use devprof::profile::perfscript::fold_perf_script;
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
    let mut told = Vec::new();
    let raw = stacks::read(&data(&format!("{name}.data")), false, &mut |path| {
        told.push(path.to_string())
    })
    .unwrap();
    told_each_file_used_once(told, &raw);
    agrees(name, &raw);
}

/// The read told its caller of every file its stacks point into, each once: the names of
/// a native fold are read from what it was told.
fn told_each_file_used_once(mut told: Vec<String>, raw: &stacks::RawProfile) {
    told.sort();
    let mut used = raw.files_used();
    used.sort();
    assert!(!used.is_empty());
    assert_eq!(told, used);
}

fn agrees(name: &str, raw: &stacks::RawProfile) {
    let native = stacks::fold(raw, &symbols(name), false, None);
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

/// A DWARF capture of a program without frame pointers (its user stacks exist only as
/// stack copies): unwound natively with the binary's .eh_frame, user-only and kernel
/// samples (the kernel frames from the callchain, the user frames unwound beneath them).
#[test]
fn native_fold_of_a_dwarf_capture_matches_perf_script() {
    let root = data("host-dwarf-loop.root");
    let open = |path: &str| stacks::Image::map(&root.join(path.trim_start_matches('/'))).ok();
    let mut told = Vec::new();
    let raw = stacks::read_unwound(&data("host-dwarf-loop.data"), false, &open, &mut |path| {
        told.push(path.to_string())
    })
    .unwrap();
    told_each_file_used_once(told, &raw);
    assert!(raw.unwind.unwound > 100, "{:?}", raw.unwind);
    assert!(
        raw.stacks
            .iter()
            .any(|((_, frames), _)| matches!(frames.first(), Some(stacks::Frame::Kernel(_)))),
        "kernel samples keep their kernel frames"
    );
    agrees("host-dwarf-loop", &raw);
    // Every stack reaches the program's entry: none stops where unwinding failed.
    assert_eq!(raw.unwind.incomplete, 0, "{:?}", raw.unwind);
}

/// The binaries a DWARF capture is unwound with come from a pass over its mmap records
/// alone (no sample decoded): the same files the unwinding pass asks for, and every file
/// perf script names a frame in.
#[test]
fn mapped_files_of_a_dwarf_capture_name_every_binary_its_stacks_use() {
    let path = data("host-dwarf-loop.data");
    let files = stacks::mapped_files(&path).unwrap();
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let open = |file: &str| -> Option<stacks::Image> {
        asked.borrow_mut().insert(file.to_string());
        None
    };
    let _ = stacks::read_unwound(&path, false, &open, &mut |_| {});
    let asked: Vec<String> = asked
        .into_inner()
        .into_iter()
        .filter(|f| f != "[vdso]")
        .collect();
    assert!(!asked.is_empty());
    assert_eq!(files, asked);
    let script = std::fs::read_to_string(data("host-dwarf-loop.script")).unwrap();
    let named: std::collections::BTreeSet<&str> = script
        .lines()
        .filter_map(|l| {
            l.trim_end()
                .strip_suffix(')')?
                .rsplit_once(" (")
                .map(|(_, f)| f)
        })
        .filter(|f| f.starts_with('/'))
        .collect();
    assert!(!named.is_empty());
    for file in named {
        assert!(files.iter().any(|f| f == file), "{file} not in {files:?}");
    }
}

/// Regression: a DWARF capture's callchains hold the kernel frames only (the user frames
/// are unwound from the saved stack); the native reader kept its kernel-only samples (68
/// of 294) as if they were the profile. Without the binaries to unwind with, it refuses.
#[test]
fn native_read_of_a_dwarf_capture_is_refused_not_partial() {
    use devprof::profile::perfdata::{recorded_call_graph, CallGraph};
    let path = data("host-dwarf-loop.data");
    assert_eq!(recorded_call_graph(&path).unwrap(), CallGraph::Dwarf);
    let err = stacks::read(&path, false, &mut |_| {}).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("--call-graph dwarf"), "{err}");
    for fp in ["host-demo-node.data", "host-xz.data"] {
        assert_eq!(
            recorded_call_graph(&data(fp)).unwrap(),
            CallGraph::FramePointer
        );
    }
}
