//! Tests of the pclntab reader against binaries built by real Go toolchains.

use super::*;
use crate::gosource::GoFuncData;
use std::collections::HashMap;

fn data(name: &str) -> Vec<u8> {
    let path = format!("{}/../../tests/data/go/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn tiny() -> (Vec<u8>, HashMap<String, u64>) {
    let nm = String::from_utf8(data("tiny-full.nm")).unwrap();
    let expected = nm
        .lines()
        .filter_map(|l| {
            let (addr, name) = l.split_once(' ')?;
            // nm marks assembly functions (ABI0) with a suffix the runtime's names lack.
            let name = name.strip_suffix(".abi0").unwrap_or(name);
            Some((runtime_name(name), u64::from_str_radix(addr, 16).ok()?))
        })
        .collect();
    (data("tiny-stripped"), expected)
}

/// The name the runtime's table gives a symbol: array lengths in type names are `[...]`.
fn runtime_name(nm_name: &str) -> String {
    let mut out = String::new();
    let mut rest = nm_name;
    while let Some(i) = rest.find('[') {
        let (head, tail) = rest.split_at(i + 1);
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with(']') {
            out.push_str("...");
        }
        rest = &tail[digits..];
    }
    out + rest
}

/// The pclntab of tiny-stripped.
fn tiny_table() -> PcLnTab {
    table_of(&tiny().0)
}

fn table_of(bytes: &[u8]) -> PcLnTab {
    let file = object::File::parse(bytes).unwrap();
    PcLnTab::from_elf(&file).expect("a Go binary").unwrap()
}

#[test]
fn stripped_binary_names_match_go_tool_nm_of_the_unstripped_build() {
    let (bytes, nm) = tiny();
    let file = object::File::parse(&*bytes).unwrap();
    assert_eq!(file.symbols().count(), 0, "the golden binary is stripped");
    let table = table_of(&bytes);
    assert_eq!(table.layout, Layout::Go118);
    let funcs = table.functions();
    assert!(funcs.len() > 1000, "{} functions", funcs.len());
    // ABI wrappers share their function's name: a name may have more than one entry.
    let mut entries: HashMap<&str, Vec<u64>> = HashMap::new();
    for f in funcs {
        entries.entry(&*f.name).or_default().push(f.entry);
    }
    let mut unmatched = Vec::new();
    for (name, addr) in &nm {
        match entries.get(name.as_str()) {
            Some(found) => assert!(found.contains(addr), "{name}: {addr:#x} not in {found:x?}"),
            None => unmatched.push(name.as_str()),
        }
    }
    // nm also lists the linker's markers and the build id, which are no functions.
    unmatched.sort();
    assert_eq!(unmatched, ["runtime.etext", "runtime.text"]);
    for name in ["main.spin", "main.fold", "main.main", "runtime.main"] {
        let addr = nm[name];
        for pc in [addr, addr + 1, addr + 0x10] {
            assert_eq!(table.lookup(pc).map(|f| &*f.name), Some(name));
        }
    }
    // Past the last function, and before the first: nothing.
    assert_eq!(table.lookup(0x1000), None);
    assert_eq!(table.lookup(funcs.last().unwrap().end), None);
}

#[test]
fn buildinfo_gives_the_go_version() {
    let (bytes, _) = tiny();
    let file = object::File::parse(&*bytes).unwrap();
    let version = go_version(&file).expect("a version");
    assert!(version.starts_with("go1."), "{version}");
    assert_eq!(buildinfo_version(b"\xff Go buildinf:\x08\x02"), None);
    assert_eq!(
        buildinfo_version(b"not a buildinfo section at all, no no"),
        None
    );
}

#[test]
fn found_by_magic_search_without_the_section() {
    let (bytes, _) = tiny();
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".gopclntab").unwrap();
    let (start, size) = section.file_range().unwrap();
    let table = &bytes[start as usize..(start + size) as usize];
    // As if in .data.rel.ro behind other data, at a pointer-aligned offset.
    let mut blob = vec![0xaau8; 4096];
    blob.extend_from_slice(table);
    let (at, found) = search(&blob, |_| None).expect("found");
    assert_eq!(at, 4096);
    assert_eq!(found, PcLnTab::parse(table).unwrap());
}

#[test]
fn corrupt_tables_give_errors_never_panics() {
    let (bytes, _) = tiny();
    let file = object::File::parse(&*bytes).unwrap();
    let (start, size) = file
        .section_by_name(".gopclntab")
        .unwrap()
        .file_range()
        .unwrap();
    let table = bytes[start as usize..(start + size) as usize].to_vec();
    // Every truncation of the header and the function table, and a sweep of corrupted words.
    for len in (0..4096).chain((4096..table.len()).step_by(9973)) {
        let _ = PcLnTab::parse(&table[..len]);
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..2000 {
        let mut t = table.clone();
        for _ in 0..4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed % 4096) as usize;
            t[at] = (seed >> 32) as u8;
        }
        let _ = PcLnTab::parse(&t);
    }
    // Huge counts and offsets: errors, not allocations or overflows.
    let mut t = table.clone();
    t[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(PcLnTab::parse(&t).is_err());
    let mut t = table.clone();
    t[64..72].copy_from_slice(&(u64::MAX - 3).to_le_bytes());
    assert!(PcLnTab::parse(&t).is_err());
    assert!(PcLnTab::parse(&[0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8]).is_err());
    assert!(PcLnTab::parse(b"\x7fELF not a pclntab at all").is_err());
}

#[test]
fn older_layouts_with_word_tables() {
    // A Go 1.2-style table built by hand (no Go 1.2-1.17 toolchain here): two functions,
    // 8-byte pointers, little-endian.
    let mut t = vec![0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8];
    t.extend_from_slice(&2u64.to_le_bytes()); // nfunc
    let table = 16u64;
    // functab: (entry, funcoff) x2, then the end pc.
    let f0 = table + 5 * 8;
    let f1 = f0 + 12;
    let names = f1 + 12;
    for (entry, off) in [(0x1000u64, f0 - table), (0x1040, f1 - table)] {
        t.extend_from_slice(&entry.to_le_bytes());
        t.extend_from_slice(&off.to_le_bytes());
    }
    t.extend_from_slice(&0x1080u64.to_le_bytes());
    t.extend_from_slice(&0x1000u64.to_le_bytes());
    t.extend_from_slice(&(names as u32).to_le_bytes());
    t.extend_from_slice(&0x1040u64.to_le_bytes());
    t.extend_from_slice(&(names as u32 + 7).to_le_bytes());
    t.extend_from_slice(b"main.a\0main.b\0");
    let p = PcLnTab::parse(&t).unwrap();
    assert_eq!(p.layout, Layout::Go12);
    assert_eq!(&*p.lookup(0x1010).unwrap().name, "main.a");
    assert_eq!(&*p.lookup(0x107f).unwrap().name, "main.b");
    assert_eq!(p.lookup(0x1080), None);
    // Same bytes, rows out of order: rejected.
    let mut bad = t.clone();
    bad[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
    assert!(PcLnTab::parse(&bad).is_err());
}

/// A Go 1.2-style table of `rows` functions whose records all name one `name_len`-byte name.
fn rows_sharing_one_name(rows: u64, name_len: usize) -> Vec<u8> {
    let mut t = vec![0xfb, 0xff, 0xff, 0xff, 0, 0, 1, 8];
    t.extend_from_slice(&rows.to_le_bytes());
    let table = 16u64;
    let records = table + (2 * rows + 1) * 8;
    let names = records + rows * 12;
    for i in 0..rows {
        t.extend_from_slice(&(0x1000 + i * 16).to_le_bytes());
        t.extend_from_slice(&(records + i * 12 - table).to_le_bytes());
    }
    t.extend_from_slice(&(0x1000 + rows * 16).to_le_bytes());
    for i in 0..rows {
        t.extend_from_slice(&(0x1000 + i * 16).to_le_bytes());
        t.extend_from_slice(&(names as u32).to_le_bytes());
    }
    t.extend(std::iter::repeat_n(b'n', name_len));
    t.push(0);
    t
}

#[test]
fn go_function_table_sharing_one_long_name_over_many_rows_is_bounded() {
    // Within the budget: the rows share one copy of the name.
    let p = PcLnTab::parse(&rows_sharing_one_name(1000, 4000)).unwrap();
    let first = &p.functions()[0].name;
    assert!(p
        .functions()
        .iter()
        .all(|f| std::sync::Arc::ptr_eq(&f.name, first)));
    // Past it (4000 bytes x 17000 rows > 64 MiB): refused, not copied.
    let rows = MAX_NAME_BYTES / 4000 + 200;
    let e = PcLnTab::parse(&rows_sharing_one_name(rows, 4000)).unwrap_err();
    assert!(e.0.contains("function names exceed 64 MiB"), "{e}");
}

/// tiny-stripped read as devprof reads a container's Go program, as `/app/tiny`.
fn tiny_go_binary() -> crate::binary::GoBinary {
    let path = format!(
        "{}/../../tests/data/go/tiny-stripped",
        env!("CARGO_MANIFEST_DIR")
    );
    crate::binary::GoBinary::read("/app/tiny", std::path::Path::new(&path))
        .unwrap()
        .expect("a Go binary")
}

#[test]
fn a_stripped_go_binary_reads_as_go_with_its_version_and_pclntab_names() {
    let go = tiny_go_binary();
    assert_eq!(go.path, "/app/tiny");
    assert!(go.stripped);
    assert!(
        go.version.as_deref().is_some_and(|v| v.starts_with("go1.")),
        "{:?}",
        go.version
    );
    assert!(go.symbols.is_some());
    // A binary that is not Go reads as None.
    let not_go = format!(
        "{}/../../tests/data/go/tiny-full.nm",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(crate::binary::GoBinary::read("/x", std::path::Path::new(&not_go)).is_err());
}

/// One address of an llvm-addr2line expectations file: its frames (function, file, line),
/// innermost first.
pub(crate) type Expected = (u64, Vec<Place>);
/// A frame as addr2line gives it: function, file, line.
pub(crate) type Place = (String, String, u32);

/// `llvm-addr2line -a -i -f` output: an address line, then a function line and a
/// `file:line` line per frame. Addresses DWARF does not cover (`??`) are left out.
pub(crate) fn addr2line_expectations(name: &str) -> Vec<Expected> {
    let text = String::from_utf8(data(name)).unwrap();
    // Each address with whether all its frames are known.
    let mut out: Vec<(Expected, bool)> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(hex) = line.strip_prefix("0x") {
            out.push(((u64::from_str_radix(hex, 16).unwrap(), Vec::new()), true));
            continue;
        }
        let place = lines.next().expect("a file:line after a function");
        let (file, number) = place.rsplit_once(':').unwrap();
        let last = out.last_mut().expect("an address first");
        if line == "??" || file == "??" || number == "0" {
            last.1 = false;
            continue;
        }
        // DWARF spells trimmed paths `./runtime/proc.go`, the pclntab `runtime/proc.go`.
        let file = file.strip_prefix("./").unwrap_or(file).to_string();
        // DWARF marks assembly functions (ABI0) as nm does; the runtime's names do not.
        let function = runtime_name(line.strip_suffix(".abi0").unwrap_or(line));
        last.0 .1.push((function, file, number.parse().unwrap()));
    }
    out.into_iter()
        .filter(|((_, frames), known)| *known && !frames.is_empty())
        .map(|(expected, _)| expected)
        .collect()
}

/// Compares the pclntab's frames of a stripped binary with llvm-addr2line's of its
/// unstripped twin; returns how many addresses had inlined frames.
fn frames_match_addr2line(binary: &str, expectations: &str) -> usize {
    let bytes = data(binary);
    let file = object::File::parse(&*bytes).unwrap();
    assert_eq!(file.symbols().count(), 0, "{binary} is stripped");
    let table = table_of(&bytes);
    assert!(table.has_inline_trees(), "{binary}: inline trees found");
    let expected = addr2line_expectations(expectations);
    assert!(expected.len() > 1000, "{} addresses", expected.len());
    let mut mismatches = Vec::new();
    for (address, want) in &expected {
        let got: Vec<Place> = table
            .frames(*address, true)
            .unwrap_or_else(|| panic!("{binary}: no function at {address:#x}"))
            .unwrap()
            .into_iter()
            .map(|f| {
                let (file, line) = f.place.expect("a place");
                (f.function, file, line)
            })
            .collect();
        if &got != want {
            mismatches.push(format!("{address:#x}: {got:?} != {want:?}"));
        }
        // Without inline expansion: the function alone, at the pc's own place.
        let one = table.frames(*address, false).unwrap().unwrap();
        let (file, line) = one[0].place.clone().unwrap();
        let top = want.last().unwrap();
        if one.len() != 1 || one[0].function != top.0 || (&file, line) != (&want[0].1, want[0].2) {
            mismatches.push(format!("{address:#x} without inlining: {one:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{binary}: {} of {} differ:\n{}",
        mismatches.len(),
        expected.len(),
        mismatches.join("\n")
    );
    expected.iter().filter(|(_, f)| f.len() > 1).count()
}

#[test]
fn stripped_frames_match_llvm_addr2line_of_the_unstripped_build() {
    let inlined = frames_match_addr2line("tiny-stripped", "tiny.addr2line");
    assert!(inlined > 100, "{inlined} addresses with inlined frames");
    // The program's own inlined call: main.mix inside main.spin.
    let expected = addr2line_expectations("tiny.addr2line");
    assert!(expected.iter().any(|(_, f)| f.len() == 2
        && f[0].0 == "main.mix"
        && f[1].0 == "main.spin"
        && f[0].1 == "tiny/main.go"));
}

#[test]
fn position_independent_build_frames_match_llvm_addr2line() {
    let bytes = data("tiny-pie-stripped");
    let file = object::File::parse(&*bytes).unwrap();
    assert_eq!(file.kind(), object::ObjectKind::Dynamic);
    assert!(
        file.section_by_name(".gopclntab").is_none(),
        "named apart in PIE builds"
    );
    let inlined = frames_match_addr2line("tiny-pie-stripped", "tiny-pie.addr2line");
    assert!(inlined > 20, "{inlined} addresses with inlined frames");
}

#[test]
fn a_text_start_left_to_a_relocation_is_taken_from_it() {
    let bytes = data("tiny-pie-stripped");
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".data.rel.ro.gopclntab").unwrap();
    let table = section.data().unwrap();
    let whole = PcLnTab::parse(table).unwrap();
    // As a linker that leaves the field for the loader writes it: zero.
    let mut zeroed = table.to_vec();
    zeroed[24..32].fill(0);
    let unrelocated = PcLnTab::parse(&zeroed).unwrap();
    assert_ne!(unrelocated.functions(), whole.functions());
    let text = whole.functions()[0].entry;
    let relocated = PcLnTab::parse_relocated(&zeroed, Some(text)).unwrap();
    assert_eq!(relocated.functions(), whole.functions());
    // A value in the file wins over the relocation's.
    let kept = PcLnTab::parse_relocated(table, Some(0x1234)).unwrap();
    assert_eq!(kept.functions(), whole.functions());
}

#[test]
fn without_inline_trees_frames_keep_file_and_line() {
    let (bytes, nm) = tiny();
    let mut table = table_of(&bytes);
    table.source.as_mut().unwrap().gofunc = None;
    assert!(!table.has_inline_trees());
    let expected = addr2line_expectations("tiny.addr2line");
    let (address, want) = expected
        .iter()
        .find(|(_, f)| f.len() == 2 && f[0].0 == "main.mix")
        .unwrap();
    let frames = table.frames(*address, true).unwrap().unwrap();
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].function, "main.spin");
    assert_eq!(frames[0].place, Some((want[0].1.clone(), want[0].2)));
    assert!(table.frames(nm["main.spin"], true).is_some());
    assert!(table.frames(0x1000, true).is_none());
}

#[test]
fn corrupt_source_tables_give_errors_never_panics() {
    let clean = tiny_table();
    let source = clean.source.clone().unwrap();
    let gofunc = source.gofunc.clone().unwrap();
    let pcs: Vec<u64> = addr2line_expectations("tiny.addr2line")
        .iter()
        .map(|(a, _)| *a)
        .step_by(7)
        .collect();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut errors = 0;
    for round in 0..300 {
        let mut table = clean.clone();
        let s = table.source.as_mut().unwrap();
        // Corrupt the pc tables, the function records, the names and the inline trees.
        for _ in 0..64 {
            let r = next();
            let at = (r % s.data.len() as u64) as usize;
            s.data[at] = (r >> 40) as u8;
        }
        let g = s.gofunc.as_mut().unwrap();
        for _ in 0..16 {
            let r = next();
            let at = (r % g.bytes.len() as u64) as usize;
            g.bytes[at] = (r >> 40) as u8;
        }
        // And truncate: every table and the gofunc data shorter.
        if round % 3 == 0 {
            let keep = (next() % s.data.len() as u64) as usize;
            s.data.truncate(keep);
            let keep = (next() % g.bytes.len() as u64) as usize;
            g.bytes.truncate(keep);
        }
        for &pc in &pcs {
            if let Some(Err(_)) = table.frames(pc, true) {
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "corruption is noticed");
    // An empty gofunc: errors for functions with inlined code, no panics.
    let mut table = clean.clone();
    table.source.as_mut().unwrap().gofunc = Some(GoFuncData {
        address: gofunc.address,
        bytes: Vec::new(),
    });
    assert!(pcs
        .iter()
        .any(|&pc| matches!(table.frames(pc, true), Some(Err(_)))));
    assert_eq!(
        source,
        clean.source.unwrap(),
        "the clean table is untouched"
    );
}

#[test]
fn pointers_left_zero_for_the_loader_are_read_from_relocations() {
    let bytes = data("tiny-pie-stripped");
    let whole = table_of(&bytes);
    assert!(whole.has_inline_trees());
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".data.rel.ro.gopclntab").unwrap();
    let (pclntab, (offset, _)) = (section.address(), section.file_range().unwrap());
    // As a linker that leaves pointers to the loader writes them: the text start and
    // moduledata's pointer to the pclntab zero in the file, known by RELATIVE relocations
    // (this one has the latter) or the .text section.
    let mut zeroed = bytes.clone();
    zeroed[offset as usize + 24..offset as usize + 32].fill(0);
    let data = file.section_by_name(".noptrdata").unwrap();
    let (start, size) = data.file_range().unwrap();
    let mut cleared = 0;
    for at in (start..start + size).step_by(8) {
        let word = &mut zeroed[at as usize..at as usize + 8];
        if *word == pclntab.to_le_bytes() {
            word.fill(0);
            cleared += 1;
        }
    }
    assert_eq!(cleared, 1, "moduledata's first word");
    let relocated = table_of(&zeroed);
    assert!(relocated.functions() == whole.functions(), "same functions");
    assert!(
        relocated.has_inline_trees(),
        "gofunc found through the relocation"
    );
    for (address, frames) in addr2line_expectations("tiny-pie.addr2line") {
        if frames.len() > 1 {
            assert_eq!(relocated.frames(address, true), whole.frames(address, true));
        }
    }
}

/// Go 1.20 changed two records (runtime2.go, symtabinl.go): `_func` gained `startLine
/// int32` after `cuOffset`, and inline-tree entries became `{funcID uint8; _ [3]byte;
/// nameOff, parentPc, startLine int32}` (from `{parent int16; funcID uint8; _ byte; file,
/// line, func_, parentPc int32}`). No Go 1.20 toolchain here: the 1.19 table, rewritten in
/// that layout, must give the same frames.
#[test]
fn the_go120_layout_of_the_same_table_gives_the_same_frames() {
    let old = tiny_table();
    let src = old.source.as_ref().unwrap();
    let gofunc = src.gofunc.as_ref().unwrap();
    let t = &src.data;
    let u32_at = |d: &[u8], at: usize| u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
    let nfunc = old.functions().len();
    let pcln = u64::from_le_bytes(t[64..72].try_into().unwrap()) as usize;
    let mut new = t[..pcln + (nfunc + 1) * 8].to_vec();
    new[..4].copy_from_slice(&MAGIC_120.to_le_bytes());
    let mut trees = gofunc.bytes.clone();
    let mut converted = 0;
    for (i, f) in old.functions().iter().enumerate() {
        let row = pcln + i * 8 + 4;
        let func = pcln + u32_at(t, row) as usize;
        let (npcdata, nfuncdata) = (u32_at(t, func + 28) as usize, t[func + 39] as usize);
        let moved = (new.len() - pcln) as u32;
        new[row..row + 4].copy_from_slice(&moved.to_le_bytes());
        new.extend_from_slice(&t[func..func + 36]);
        new.extend_from_slice(&[0; 4]);
        new.extend_from_slice(&t[func + 36..func + 40 + 4 * (npcdata + nfuncdata)]);
        let tree = (nfuncdata > 3)
            .then(|| u32_at(t, func + 40 + 4 * npcdata + 12))
            .filter(|&o| o != u32::MAX);
        let Some(tree) = tree.map(|o| o as usize) else {
            continue;
        };
        let entries = src.max_inline_index(i, f.entry, f.end).map_or(0, |m| m + 1);
        for j in 0..entries as usize {
            let (was, at) = (tree + 20 * j, tree + 16 * j);
            let mut entry = [0u8; 16];
            entry[0] = gofunc.bytes[was + 2];
            entry[4..12].copy_from_slice(&gofunc.bytes[was + 12..was + 20]);
            trees[at..at + 16].copy_from_slice(&entry);
            converted += 1;
        }
    }
    assert!(converted > 100, "{converted} inline-tree entries");
    let mut table = PcLnTab::parse(&new).unwrap();
    assert_eq!(table.layout, Layout::Go120);
    assert!(table.functions() == old.functions());
    table.source.as_mut().unwrap().set_gofunc(GoFuncData {
        address: gofunc.address,
        bytes: trees,
    });
    for (address, frames) in addr2line_expectations("tiny.addr2line") {
        let got = table.frames(address, true).unwrap().unwrap();
        assert_eq!(got, old.frames(address, true).unwrap().unwrap());
        assert_eq!(got.len(), frames.len(), "{address:#x}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..Default::default()
    })]

    /// Any bytes of the table overwritten, anywhere, and the tables behind the function
    /// list maybe cut short: parsing and the frames at functions' entries and middles give
    /// results or errors, never panics.
    #[test]
    fn rewritten_tables_never_panic(
        edits in proptest::collection::vec((0.0f64..1.0, proptest::prelude::any::<u8>()), 1..64),
        keep in proptest::option::of(0.0f64..1.0),
    ) {
        let clean = tiny_table();
        let source = clean.source.as_ref().unwrap();
        let mut bytes = source.data.clone();
        let len = bytes.len();
        for (at, value) in edits {
            bytes[((at * len as f64) as usize).min(len - 1)] = value;
        }
        if let Ok(mut table) = PcLnTab::parse(&bytes) {
            if let Some(s) = table.source.as_mut() {
                if let Some(keep) = keep {
                    s.data.truncate((keep * len as f64) as usize);
                }
                if let Some(g) = source.gofunc.clone() {
                    s.set_gofunc(g);
                }
            }
            for f in table.functions().iter().step_by(11) {
                let _ = table.frames(f.entry, true);
                let _ = table.frames(f.entry + (f.end - f.entry) / 2, true);
            }
        }
    }
}

/// Header words near the top of the address space made the offsets wrap (a panic under
/// overflow checks, wrong names without): every word of the header, so set, errors.
#[test]
fn header_offsets_near_the_top_of_the_address_space_give_errors() {
    let bytes = data("tiny-stripped");
    let file = object::File::parse(&*bytes).unwrap();
    let section = file.section_by_name(".gopclntab").unwrap();
    let clean = section.data().unwrap().to_vec();
    assert!(PcLnTab::parse_relocated(&clean, None).is_ok());
    // Go 1.18's header words: 0 nfunc, 2 text start, 3..=7 the table offsets (1, nfiles,
    // is not read).
    for word in [0usize, 2, 3, 4, 5, 6, 7] {
        for k in [0u64, 3, 8, 0xffff] {
            let mut table = clean.clone();
            let at = 8 + word * 8;
            table[at..at + 8].copy_from_slice(&(u64::MAX - k).to_le_bytes());
            assert!(
                PcLnTab::parse_relocated(&table, None).is_err(),
                "header word {word} = u64::MAX - {k} was taken"
            );
        }
    }
}
