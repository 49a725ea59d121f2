//! Off-CPU `perf script` text (thread names of any bytes) through the off-CPU reader.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = devprof::profile::offcpu::script::for_each_record(data, |_| {});
    let _ = devprof::profile::offcpu::script::header_columns(data);
});
