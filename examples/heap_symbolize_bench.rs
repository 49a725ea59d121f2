//! Symbolization rate of `devprof heap` on a real dump and the real binaries it maps
//! (run by scripts/bench-heap.sh, which makes both):
//!
//!     cargo run --release --example heap_symbolize_bench -- DUMP PATH=LOCAL [PATH=LOCAL...]
//!
//! PATH is a file as the dump's MAPPED_LIBRARIES names it, LOCAL a copy of it. Prints the
//! rate on the dump's own addresses (opening the files included), then on a batch of
//! 100,000 return addresses spread over the main binary's executable mapping (steady state).

use devprof::profile::heap::parse::{parse_dump, CountPair, Counts, HeapDump, Stack};
use devprof::profile::heap::symbolize::symbolize_dumps;
use devprof::symbols::module::ModuleSymbols;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

fn load(files: &[(String, String)]) -> HashMap<String, Option<ModuleSymbols>> {
    files
        .iter()
        .map(|(path, local)| (path.clone(), ModuleSymbols::from_elf(Path::new(local)).ok()))
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dump_path, rest)) = args.split_first() else {
        eprintln!("usage: heap_symbolize_bench DUMP PATH=LOCAL [PATH=LOCAL...]");
        std::process::exit(2);
    };
    let files: Vec<(String, String)> = rest
        .iter()
        .filter_map(|a| {
            a.split_once('=')
                .map(|(p, l)| (p.to_string(), l.to_string()))
        })
        .collect();
    let text = std::fs::read_to_string(dump_path).expect("read dump");
    let dump = parse_dump(&text).expect("parse dump");

    // 1. The dump's own addresses, files opened and read as devprof heap does.
    let t = Instant::now();
    let modules = load(&files);
    let (_, stats) = symbolize_dumps(&[&dump], &modules);
    let cold = t.elapsed().as_secs_f64();
    println!(
        "dump             {} bytes, {} stacks (with freed ones), {} distinct addresses ({} named)",
        text.len(),
        dump.stacks.len(),
        stats.addresses,
        stats.symbolized
    );
    println!(
        "dump addresses   {:.3} s with opening the files: {:.0} addresses/s",
        cold,
        stats.addresses as f64 / cold
    );

    // 2. A large batch over the main binary's code, files already open.
    let main_path = &files[0].0;
    let text_map = dump
        .mappings
        .iter()
        .find(|m| m.file() == Some(main_path.as_str()) && m.is_executable())
        .expect("executable mapping of the main binary");
    let n = 100_000u64;
    let step = ((text_map.end - text_map.start) / n).max(1);
    let batch = HeapDump {
        stacks: (0..n)
            .map(|i| Stack {
                addresses: vec![text_map.start + 1 + i * step],
                counts: CountPair {
                    in_use: Counts {
                        objects: 1,
                        bytes: 1,
                    },
                    accumulated: Counts::default(),
                },
            })
            .collect(),
        ..dump.clone()
    };
    let t = Instant::now();
    let (_, stats) = symbolize_dumps(&[&batch], &modules);
    let warm = t.elapsed().as_secs_f64();
    println!(
        "batch addresses  {} over {} in {:.3} s: {:.0} addresses/s ({} named)",
        stats.addresses,
        main_path,
        warm,
        stats.addresses as f64 / warm,
        stats.symbolized
    );
}
