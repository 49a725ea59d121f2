//! Folded stacks (async-profiler's collapsed output, streamed out of a container) through
//! the folded reader and the figures made of it.
#![no_main]
use devprof::profile::folded::Folded;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(folded) = Folded::from_folded_reader(data) {
        let _ = folded.total();
        let _ = folded.top_self(10);
        let _ = folded.unsymbolized_share();
    }
});
