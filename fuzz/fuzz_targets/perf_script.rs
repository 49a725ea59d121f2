//! `perf script` text, as a container's perf prints it, through the folder.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = devprof::profile::folded::fold_perf_script(data);
});
