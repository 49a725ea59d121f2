//! ELF files (a container's binaries and libraries, copied out) through the symbol reader:
//! its segments, symbol tables, Go pclntab and DWARF, asked for names at addresses the
//! input chooses.
#![no_main]
use devprof::symbols::module::ModuleSymbols;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = devprof::symbols::elf::read_bytes(data);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.so");
    std::fs::write(&path, data).unwrap();
    let Ok(module) = ModuleSymbols::from_elf(&path) else {
        return;
    };
    // Addresses and offsets from the input's own words, and the ends of the address space.
    let words = data
        .chunks_exact(8)
        .take(16)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()));
    for at in words.chain([0, 1, u64::MAX - 1, u64::MAX]) {
        let _ = module.function_at(at);
        let _ = module.inline_chain(at);
        let _ = module.address_of_offset(at);
    }
});
