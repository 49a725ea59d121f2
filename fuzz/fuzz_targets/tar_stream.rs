//! Tar streams from the Docker archive API through the safe extractor: never a panic, and
//! never a file outside the destination.
#![no_main]
use devprof::docker::archive::{extract, CopyLimit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let outer = tempfile::tempdir().unwrap();
    let dest = outer.path().join("store");
    std::fs::create_dir(&dest).unwrap();
    let limit = CopyLimit {
        bytes: 1 << 20,
        what: "a fuzz input",
    };
    let _ = extract(data, &dest, |p| Some(p.to_path_buf()), limit);
    for entry in std::fs::read_dir(outer.path()).unwrap().flatten() {
        assert_eq!(entry.file_name(), "store", "a file escaped the destination");
    }
});
