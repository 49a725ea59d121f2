fn main() {
    for p in std::env::args().skip(1) {
        match devprof::elf::read_file(std::path::Path::new(&p)) {
            Ok(r) => println!("{p}: syms={} dyn={} dbg={} line={} link={:?} eh={} fp={:?} {}/{} share={:.2} jem={:?}", r.symtab_functions, r.dynsym_functions, r.debug_info_bytes, r.has_debug_line, r.debuglink, r.has_eh_frame, r.frame_pointers.verdict, r.frame_pointers.with_fp, r.frame_pointers.examined, r.frame_pointers.share(), r.jemalloc),
            Err(e) => println!("{p}: {e}"),
        }
    }
}
