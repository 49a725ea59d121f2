//! jemalloc heap dumps (written by the profiled process) through the heap_v2 parser.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = devprof::profile::heap::parse::parse_dump(&text);
});
