//! Manifests in the store (edited or damaged by hand) through the catalog.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let container = dir.path().join("demo-seq");
    std::fs::create_dir(&container).unwrap();
    std::fs::write(container.join("perf-20261122-101500.json"), data).unwrap();
    if let Ok(captures) = devprof::store::catalog::list(dir.path(), None) {
        for c in &captures {
            let _ = devprof::store::catalog::removal_plan(c);
        }
    }
});
