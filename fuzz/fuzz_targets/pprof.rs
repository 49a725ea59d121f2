//! pprof profiles (served by a Go program in a container) through the decoder and the
//! folder: an error or a profile within its budgets, never a panic or an OOM.
#![no_main]
use devprof::profile::pprof;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(profile) = pprof::decode(data) {
        for index in 0..profile.sample_types.len() {
            let _ = profile.total(index);
            let _ = profile.fold(index, "fuzz");
        }
    }
});
