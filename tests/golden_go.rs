//! The `perf script` path's names for a stripped Go binary, without Docker: `perf script`
//! text whose frames perf left unnamed in tests/data/go/tiny-stripped (as `/app/tiny`) is
//! folded with devprof's Go resolver, without and with `--inline`, and compared with what
//! llvm-addr2line says of the unstripped build (tests/data/go/tiny.addr2line, made by
//! scripts/go-test-data.sh).

use devprof::engines::select::GoResolver;
use devprof::profile::perfscript::{fold, FoldOptions, FrameResolver};
use devprof::symbols::binary::GoBinary;
use std::path::Path;
use std::sync::Arc;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/go");

/// The first address llvm-addr2line names with two frames, the inner one `inner`: the
/// address and its frames, innermost first, as (function, file, line).
fn inlined_address(inner: &str) -> (u64, Vec<(String, String, String)>) {
    let text = std::fs::read_to_string(format!("{DATA}/tiny.addr2line")).unwrap();
    let mut records: Vec<(u64, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        match line.strip_prefix("0x") {
            Some(hex) => records.push((u64::from_str_radix(hex, 16).unwrap(), Vec::new())),
            None => records.last_mut().unwrap().1.push(line),
        }
    }
    records
        .into_iter()
        .filter(|(_, lines)| lines.len() == 4 && lines[0] == inner)
        .map(|(address, lines)| {
            let frames = lines
                .chunks(2)
                .map(|pair| {
                    let (file, line) = pair[1].rsplit_once(':').unwrap();
                    let file = file.rsplit('/').next().unwrap();
                    (pair[0].to_string(), file.to_string(), line.to_string())
                })
                .collect();
            (address, frames)
        })
        .next()
        .unwrap_or_else(|| panic!("{inner} inlined somewhere"))
}

fn resolver(inline: bool) -> GoResolver {
    let binary = GoBinary::read("/app/tiny", Path::new(&format!("{DATA}/tiny-stripped")))
        .unwrap()
        .expect("a Go binary");
    assert!(binary.stripped);
    GoResolver {
        binary: Arc::new(binary),
        inline,
    }
}

/// One sample of `perf script` text: the leaf at `offset` in /app/tiny (perf prints an
/// unnamed frame's address as an offset in the mapped file), called from a libc frame.
fn script(offset: u64) -> String {
    format!(
        "tiny     7/7     100.000001: cpu-clock: \n\t  {offset:x} [unknown] (/app/tiny)\n\t   29d90 __libc_start_call_main+0x80 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\n"
    )
}

fn folded_with(resolver: &GoResolver, text: &str) -> Vec<String> {
    let options = FoldOptions {
        threads: 1,
        resolver: Some(resolver as &dyn FrameResolver),
        ..FoldOptions::default()
    };
    let folded = fold(text.as_bytes(), options).unwrap().folded;
    folded.stacks.into_iter().map(|(stack, _)| stack).collect()
}

#[test]
fn go_frames_are_named_alone_or_with_places_and_inlined_calls_by_the_inline_flag() {
    let (address, frames) = inlined_address("main.mix");
    // The text segment of a Go executable is at 0x400000, from the file's start.
    let text = script(address - 0x400000);
    let caller = "__libc_start_call_main";
    assert_eq!(
        folded_with(&resolver(false), &text),
        [format!("tiny;{caller};{}", frames[1].0)],
        "names alone without --inline, as before"
    );
    let place = |(f, file, line): &(String, String, String)| format!("{f} ({file}:{line})");
    assert_eq!(
        folded_with(&resolver(true), &text),
        [format!(
            "tiny;{caller};{};{}_[i]",
            place(&frames[1]),
            place(&frames[0])
        )],
        "with --inline: outermost first, the inlined call marked as perf marks inlined frames"
    );
    // Another module's unnamed frames are not the resolver's.
    let other = text.replace("/app/tiny", "/app/other");
    assert_eq!(
        folded_with(&resolver(true), &other),
        [format!("tiny;{caller};[other]")]
    );
}
