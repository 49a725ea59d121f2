//! The binary: `commands::main` does the rest (its async work is compiled once, in the
//! library, rather than again here).

fn main() {
    std::process::exit(devprof::commands::main());
}
