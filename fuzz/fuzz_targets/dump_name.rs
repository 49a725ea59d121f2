//! Heap dump file names, as any container user can create them.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let name = String::from_utf8_lossy(data);
    let _ = devprof::profile::heap::dumps::parse_dump_name("jeprof", &name);
    let _ = devprof::profile::heap::dumps::DumpFile::at_path(&name, 0, 0);
});
