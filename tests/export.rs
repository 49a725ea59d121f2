//! `devprof export` end to end: real captures of the demo devnet (`devprof cpu demo-seq 3`,
//! `devprof heap demo-seq 3`) exported, and the exports read by the tools users open
//! them in (`go tool pprof`) or parsed and checked against the capture's own timeline.

mod common;

use common::*;
mod timelines;

use timelines::*;

#[test]
#[ignore = "needs the demo devnet"]
fn a_real_cpu_capture_exports_to_pprof_speedscope_firefox_and_collapsed() {
    if !devnet_ready("a_real_cpu_capture_exports_to_pprof_speedscope_firefox_and_collapsed") {
        return;
    }
    let cwd = workdir();
    let stem = cpu_capture(cwd.path(), DEMO_SEQ, "3");
    let manifest = read_manifest(&stem);
    let listed = listed_files(&manifest);
    assert!(
        listed.iter().any(|n| n.ends_with(".timeline")),
        "{listed:?}"
    );
    let per_tid = per_tid_of_file(&with_ext(&stem, "timeline"));
    let samples = manifest["sample_count"].as_u64().unwrap();
    assert_eq!(per_tid.values().sum::<u64>(), samples);

    // pprof: go tool pprof ranks what devprof top ranks.
    devprof(cwd.path())
        .args(["export", DEMO_SEQ, "--format", "pprof", "-o", "cpu.pb.gz"])
        .assert()
        .success();
    let text = go_pprof_top(&cwd.path().join("cpu.pb.gz"), &[]);
    let top = devprof(cwd.path())
        .args(["top", DEMO_SEQ, "-n", "5", "--json"])
        .assert()
        .success();
    let top: serde_json::Value = serde_json::from_slice(&top.get_output().stdout).unwrap();
    assert_eq!(pprof_total(&text), top["total"].to_string());
    assert_eq!(pprof_total(&text), samples.to_string());
    let ours: Vec<(u64, String)> = top["self"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["samples"].as_u64().unwrap(),
                r["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(ours.iter().any(|r| r.1.contains("hash_chain")), "{ours:?}");
    check_top5("demo-seq", &ours, &pprof_rows(&text));

    // speedscope: one sampled profile per thread, totals as in the timeline.
    devprof(cwd.path())
        .args([
            "export",
            DEMO_SEQ,
            "-f",
            "speedscope",
            "-o",
            "cpu.speedscope.json",
        ])
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cwd.path().join("cpu.speedscope.json")).unwrap())
            .unwrap();
    assert_eq!(speedscope_totals(&json), per_tid);

    // Firefox Profiler: threads with their tids and sample weights.
    let capture_file = with_ext(&stem, "folded");
    devprof(cwd.path())
        .args(["export", capture_file.to_str().unwrap(), "-f", "firefox"])
        .assert()
        .success();
    // Without -o, beside the capture in the store.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(with_ext(&stem, "firefox.json")).unwrap()).unwrap();
    assert_eq!(firefox_totals(&json), per_tid);

    // collapsed: the folded file itself.
    let out = devprof(cwd.path())
        .args(["export", DEMO_SEQ, "-f", "collapsed", "-o", "-"])
        .assert()
        .success();
    assert_eq!(
        String::from_utf8_lossy(&out.get_output().stdout),
        std::fs::read_to_string(with_ext(&stem, "folded")).unwrap()
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn a_heap_capture_exports_with_bytes_as_the_unit() {
    if !devnet_ready("a_heap_capture_exports_with_bytes_as_the_unit") {
        return;
    }
    let cwd = workdir();
    devprof(cwd.path())
        .args(["heap", DEMO_SEQ, "3"])
        .assert()
        .success();
    let stem = only_capture(cwd.path(), DEMO_SEQ, "heap-");
    let folded = std::fs::read_to_string(with_ext(&stem, "folded")).unwrap();
    let bytes: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    devprof(cwd.path())
        .args(["export", DEMO_SEQ, "-f", "pprof", "-o", "heap.pb.gz"])
        .assert()
        .success();
    let text = go_pprof_top(&cwd.path().join("heap.pb.gz"), &["-unit", "byte"]);
    assert!(text.contains("Type: inuse_space"), "{text}");
    assert_eq!(pprof_total(&text), format!("{bytes}B"), "{text}");
    let out = devprof(cwd.path())
        .args(["export", DEMO_SEQ, "-f", "collapsed", "-o", "-"])
        .assert()
        .success();
    assert_eq!(String::from_utf8_lossy(&out.get_output().stdout), folded);
}

#[test]
fn exporting_what_is_not_there_fails_clearly_and_writes_nothing() {
    let cwd = workdir();
    devprof(cwd.path())
        .args(["export", "nosuch", "-f", "pprof"])
        .assert()
        .code(4);
    devprof(cwd.path())
        .args(["export", "missing.folded", "-f", "speedscope"])
        .assert()
        .code(1);
    devprof(cwd.path())
        .args(["export", "x.folded", "-f", "svg"])
        .assert()
        .code(2);
    std::fs::write(cwd.path().join("empty.folded"), "not a profile\n").unwrap();
    devprof(cwd.path())
        .args(["export", "empty.folded", "-f", "pprof"])
        .assert()
        .code(6);
    assert_eq!(
        std::fs::read_dir(cwd.path()).unwrap().count(),
        1,
        "only the input file is there"
    );
}
