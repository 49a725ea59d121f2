//! Exports of real captures (tests/data: demo-seq at 199 Hz and the JVM, Node, Python and
//! Go demo services), folded with their timeline: speedscope and Firefox Profiler files
//! parse and keep every thread's total; the pprof profile, read by `go tool pprof`, ranks
//! the same functions as `devprof top`.

mod timelines;

use devprof::export::{firefox_json, pprof_gz, speedscope_json, Source, Unit};
use devprof::profile::folded::Folded;
use devprof::profile::timeline::Timeline;
use timelines::*;

fn source<'a>(folded: &'a Folded, timeline: Option<&'a Timeline>) -> Source<'a> {
    Source {
        folded,
        timeline,
        unit: Unit::SAMPLES,
        name: "golden".into(),
        start_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 1_000_000_000,
        period_ns: Some(1_000_000_000 / 199),
        program: "/usr/local/bin/demo-node".into(),
    }
}

#[test]
fn speedscope_keeps_every_threads_total_and_sample_order() {
    for (name, text) in CPU_CAPTURES {
        let (folded, timeline, _) = fold_with_timeline(text);
        let json = serde_json::to_string(&speedscope_json(&source(&folded, Some(&timeline)), None))
            .unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        let frames = parsed["shared"]["frames"].as_array().unwrap().len();
        for profile in parsed["profiles"].as_array().unwrap() {
            assert_eq!(profile["type"], "sampled");
            let samples = profile["samples"].as_array().unwrap();
            let weights = profile["weights"].as_array().unwrap();
            assert_eq!(samples.len(), weights.len(), "{name}");
            for stack in samples {
                assert!(stack
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|f| (f.as_u64().unwrap() as usize) < frames));
            }
            let total: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
            assert_eq!(profile["endValue"].as_u64(), Some(total));
        }
        let totals = speedscope_totals(&parsed);
        assert_eq!(totals, per_tid(&timeline), "{name}");
        assert_eq!(totals.values().sum::<u64>(), folded.total(), "{name}");
    }
}

#[test]
fn firefox_profiles_keep_threads_times_and_totals() {
    for (name, text) in CPU_CAPTURES {
        let (folded, timeline, _) = fold_with_timeline(text);
        let json =
            serde_json::to_string(&firefox_json(&source(&folded, Some(&timeline)), None)).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert!(parsed["meta"]["preprocessedProfileVersion"]
            .as_u64()
            .is_some());
        let (first, last) = timeline.span_ns().unwrap();
        for thread in parsed["threads"].as_array().unwrap() {
            let times = check_firefox_thread(thread);
            assert!(times
                .iter()
                .all(|t| *t >= 0.0 && *t <= (last - first) as f64 / 1e6 + 1e-6));
        }
        assert_eq!(firefox_totals(&parsed), per_tid(&timeline), "{name}");
    }
}

#[test]
#[ignore = "needs the go tool (scripts/setup.sh installs it)"]
fn go_tool_pprof_reads_the_same_top_functions_as_devprof_top() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in CPU_CAPTURES {
        let (folded, _, _) = fold_with_timeline(text);
        let path = dir.path().join(format!("{name}.pb.gz"));
        std::fs::write(&path, pprof_gz(&source(&folded, None)).unwrap()).unwrap();
        let text = go_pprof_top(&path, &[]);
        assert_eq!(pprof_total(&text), folded.total().to_string(), "{name}");
        let rows = pprof_rows(&text);
        let ours = devprof::profile::top::by_self(&folded, 5);
        check_top5(
            name,
            &ours
                .iter()
                .map(|r| (r.samples, r.name.clone()))
                .collect::<Vec<_>>(),
            &rows,
        );
    }
}
