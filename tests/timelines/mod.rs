//! What the timeline, export and heatmap tests share: the golden captures, folding them
//! with their timeline, per-thread totals, and reading `go tool pprof -top`.
#![allow(dead_code)]

use devprof::profile::folded::Folded;
use devprof::profile::perfscript::fold_perf_script_with;
use devprof::profile::timeline::{Timeline, TimelineWriter};
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;
use std::process::Command;

/// Real `perf script` captures: demo-seq at 199 Hz, and the JVM, Node, Python and Go
/// demo services.
pub const CPU_CAPTURES: [(&str, &str); 5] = [
    ("demo-seq", include_str!("../data/perf-script-demo-seq.txt")),
    (
        "jvm",
        include_str!("../data/runtimes/perf-script-demo-jvm.txt"),
    ),
    (
        "js",
        include_str!("../data/runtimes/perf-script-demo-js.txt"),
    ),
    (
        "py",
        include_str!("../data/runtimes/perf-script-demo-py.txt"),
    ),
    (
        "go",
        include_str!("../data/runtimes/perf-script-demo-go.txt"),
    ),
];

/// Folds `text` with a timeline; also returns the timeline's size in bytes.
pub fn fold_with_timeline(text: &str) -> (Folded, Timeline, usize) {
    let mut writer = TimelineWriter::new(Vec::new()).unwrap();
    let folded = fold_perf_script_with(BufReader::new(text.as_bytes()), &mut writer).unwrap();
    let bytes = writer.finish().unwrap();
    let size = bytes.len();
    (folded, Timeline::read(&bytes[..]).unwrap(), size)
}

/// Weight per tid.
pub fn per_tid(timeline: &Timeline) -> BTreeMap<u64, u64> {
    let mut totals = BTreeMap::new();
    for s in &timeline.samples {
        *totals
            .entry(u64::from(timeline.threads[s.thread as usize].tid))
            .or_default() += s.weight;
    }
    totals
}

/// A timeline file's weight per tid.
pub fn per_tid_of_file(path: &Path) -> BTreeMap<u64, u64> {
    let file = std::fs::File::open(path).unwrap();
    per_tid(&Timeline::read(std::io::BufReader::new(file)).unwrap())
}

/// `go tool pprof -top ARGS FILE`'s output, with every name as the file holds it: by
/// default pprof drops `<...>` and `(...)` from names that look like demangled C++, which
/// a Rust impl's name does (`search::<impl NodeRef<..>>::search_tree` shown as
/// `search::::search_tree`), and the files hold their symbols already.
pub fn go_pprof_top(path: &Path, args: &[&str]) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-symbolize=none"])
        .args(args)
        .arg(path)
        .output()
        .expect("go tool pprof (Debian's golang-go; scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The total of `go tool pprof -top` output, as printed (`142`, `1234B`).
pub fn pprof_total(text: &str) -> String {
    text.lines()
        .find(|l| l.contains(" total"))
        .and_then(|l| l.split(" total").next())
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no total in:\n{text}"))
        .to_string()
}

/// The rows of `go tool pprof -top` output: (flat, function).
pub fn pprof_rows(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            Some((cols.first()?.parse().ok()?, cols.get(5..)?.join(" ")))
        })
        .collect()
}

/// devprof's top 5 (count, function) and pprof's rows agree: the counts row by row, and
/// the names wherever a count is not tied.
pub fn check_top5(name: &str, ours: &[(u64, String)], theirs: &[(u64, String)]) {
    // devprof lists functions with self samples only; pprof goes on with flat-0 rows.
    assert!(
        !ours.is_empty() && theirs.len() >= ours.len().min(5),
        "{name}"
    );
    for i in 0..5.min(ours.len()) {
        assert_eq!(
            ours[i].0, theirs[i].0,
            "{name}: row {i}: {ours:?} vs {theirs:?}"
        );
        let tied = ours.iter().filter(|r| r.0 == ours[i].0).count() > 1;
        if !tied {
            assert_eq!(ours[i].1, theirs[i].1, "{name}: row {i}");
        }
    }
}

/// A speedscope profile's tid, from its name `comm (tid) first-last s`.
pub fn speedscope_tid(name: &str) -> u64 {
    name.rsplit_once(" (")
        .and_then(|(_, rest)| rest.split(')').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no tid in {name}"))
}

/// A speedscope file's weight per thread (tid).
pub fn speedscope_totals(json: &serde_json::Value) -> BTreeMap<u64, u64> {
    let mut totals = BTreeMap::new();
    for profile in json["profiles"].as_array().unwrap() {
        let weights = profile["weights"].as_array().unwrap();
        let total: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
        *totals
            .entry(speedscope_tid(profile["name"].as_str().unwrap()))
            .or_default() += total;
    }
    totals
}

/// A Firefox Profiler file's weight per thread (tid).
pub fn firefox_totals(json: &serde_json::Value) -> BTreeMap<u64, u64> {
    let mut totals = BTreeMap::new();
    for thread in json["threads"].as_array().unwrap() {
        let weights = thread["samples"]["weight"].as_array().unwrap();
        let total: f64 = weights.iter().map(|w| w.as_f64().unwrap()).sum();
        // fxprof-processed-profile writes tids as strings.
        let tid = &thread["tid"];
        let tid = tid
            .as_u64()
            .or_else(|| tid.as_str().and_then(|t| t.parse().ok()))
            .unwrap();
        *totals.entry(tid).or_default() += total as u64;
    }
    totals
}

/// Checks the invariants of one thread of a Firefox Profiler processed profile (as
/// fxprof-processed-profile writes it): every table index in range, stacks prefix-first,
/// per-sample arrays as long as the table, times not going back. Returns the sample times
/// (ms after the profile's reference).
pub fn check_firefox_thread(thread: &serde_json::Value) -> Vec<f64> {
    let index_ok = |values: &serde_json::Value, below: u64| {
        values
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v.as_u64().unwrap() < below)
    };
    let samples = &thread["samples"];
    let n = samples["length"].as_u64().unwrap() as usize;
    for key in ["stack", "timeDeltas", "weight"] {
        assert_eq!(samples[key].as_array().unwrap().len(), n, "{key}");
    }
    let len = |table: &str| thread[table]["length"].as_u64().unwrap();
    let strings = thread["stringArray"].as_array().unwrap().len() as u64;
    assert!(index_ok(&samples["stack"], len("stackTable")));
    assert!(index_ok(&thread["stackTable"]["frame"], len("frameTable")));
    assert!(index_ok(&thread["frameTable"]["func"], len("funcTable")));
    assert!(index_ok(&thread["funcTable"]["name"], strings));
    for (i, p) in thread["stackTable"]["prefix"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        assert!(
            p.is_null() || (p.as_u64().unwrap() as usize) < i,
            "stack {i}'s prefix"
        );
    }
    let markers = &thread["markers"];
    let m = markers["length"].as_u64().unwrap() as usize;
    for key in ["name", "startTime", "endTime", "phase", "data"] {
        assert_eq!(markers[key].as_array().unwrap().len(), m, "markers.{key}");
    }
    let times: Vec<f64> = samples["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .scan(0.0, |t, d| {
            *t += d.as_f64().unwrap();
            Some(*t)
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "times out of order");
    times
}

/// The file names a manifest lists.
pub fn listed_files(manifest: &serde_json::Value) -> Vec<String> {
    manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}
