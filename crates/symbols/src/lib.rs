//! Names for frames: demangling (`demangle`), the symbolizer that turns addresses of a file
//! into function names through DWARF or the symbol table (`module`), what a binary's ELF
//! sections say about how well it can be profiled (`elf`), and binaries taken out of
//! containers (`binary`).

pub mod binary;
pub mod debugfile;
pub mod demangle;
pub mod elf;
mod elf_symbols;
pub mod gomoduledata;
pub mod gopclntab;
mod goread;
pub mod gosource;
pub mod jitdump;
pub mod kallsyms;
pub mod kernel_cache;
pub mod malloc_conf;
pub mod module;
pub mod module_loader;
pub mod perfmap;
