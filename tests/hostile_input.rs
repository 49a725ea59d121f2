//! Parsers fed random and mutated input must return errors, never panic or allocate
//! what the input claims: perf script text, perf.data, jemalloc heap dumps, manifests and
//! tar streams from containers. Mutations start from real captures in tests/data. The
//! case count is fixed so that the run takes the same time everywhere.

use devprof::profile::folded::fold_perf_script;
use devprof::profile::heap::parse::parse_dump;
use devprof::profile::perfdata::for_each_record;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn data(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `base` with bytes overwritten, a range cut out, and the tail cut off.
fn mutate(base: &[u8], edits: &[(usize, u8)], cut: (usize, usize), keep: usize) -> Vec<u8> {
    let mut out = base.to_vec();
    for (at, byte) in edits {
        if !out.is_empty() {
            let i = at % out.len();
            out[i] = *byte;
        }
    }
    if !out.is_empty() {
        let from = cut.0 % out.len();
        let to = (from + cut.1 % 64).min(out.len());
        out.drain(from..to);
    }
    let keep = if out.is_empty() {
        0
    } else {
        keep % (out.len() + 1)
    };
    out.truncate(keep.max(out.len() / 2));
    out
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>()), 0..24)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn scratch(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn perf_script_text_never_panics(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let base = data("perf-script-demo-seq.txt");
        let _ = fold_perf_script(&mutate(&base, &edits, cut, keep)[..]);
        let _ = fold_perf_script(&noise[..]);
    }

    #[test]
    fn perf_data_never_panics(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        for name in ["offcpu-contextswitches.data", "offcpu-iobandwidth.data"] {
            let (_dir, path) = scratch(&mutate(&data(name), &edits, cut, keep));
            let _ = for_each_record(&path, |_| {});
        }
    }

    #[test]
    fn perf_data_headers_with_any_sizes_are_refused_or_read(
        fields in prop::collection::vec(any::<u64>(), 12),
        tail in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = b"PERFILE2".to_vec();
        for f in &fields {
            bytes.extend_from_slice(&f.to_le_bytes());
        }
        bytes.extend_from_slice(&tail);
        let (_dir, path) = scratch(&bytes);
        let _ = for_each_record(&path, |_| {});
    }

    #[test]
    fn heap_dumps_never_panic(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        let base = data("heap/demo-seq.heap");
        let text = String::from_utf8_lossy(&mutate(&base, &edits, cut, keep)).into_owned();
        let _ = parse_dump(&text);
    }

    #[test]
    fn manifests_never_panic_the_catalog(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        let manifest = devprof::store::Manifest {
            kind: "cpu".into(),
            created: "2026-11-22T10:15:00+00:00".into(),
            files: vec![],
            ..Default::default()
        };
        let base = serde_json::to_vec_pretty(&manifest).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let container = dir.path().join("demo-seq");
        std::fs::create_dir(&container).unwrap();
        std::fs::write(
            container.join("perf-20261122-101500.json"),
            mutate(&base, &edits, cut, keep),
        )
        .unwrap();
        let _ = devprof::store::catalog::list(dir.path(), None);
    }

    #[test]
    fn tar_streams_never_panic_or_escape(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(600);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, "perf.data", &[7u8; 600][..]).unwrap();
        let base = builder.into_inner().unwrap();
        for input in [mutate(&base, &edits, cut, keep), noise.clone()] {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("out");
            std::fs::create_dir(&dest).unwrap();
            let _ = devprof::docker::archive::extract(&input[..], &dest, |p| Some(p.to_path_buf()), devprof::docker::archive::CopyLimit::HEAP_DUMP);
            // Whatever happened, nothing landed outside the destination.
            let outside: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name() != "out")
                .collect();
            prop_assert!(outside.is_empty());
        }
    }
}
