//! perf.data files (copied out of a container) through the record reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("perf.data");
    std::fs::write(&path, data).unwrap();
    let _ = devprof::profile::perfdata::for_each_record(&path, |_| {});
});
