use super::*;
use std::collections::HashMap;

fn data(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/go/{name}", env!("CARGO_MANIFEST_DIR"));
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
        entries.entry(f.name.as_str()).or_default().push(f.entry);
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
            assert_eq!(table.lookup(pc).map(|f| f.name.as_str()), Some(name));
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
    let found = search(&blob).expect("found");
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
    assert_eq!(p.lookup(0x1010).unwrap().name, "main.a");
    assert_eq!(p.lookup(0x107f).unwrap().name, "main.b");
    assert_eq!(p.lookup(0x1080), None);
    // Same bytes, rows out of order: rejected.
    let mut bad = t.clone();
    bad[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
    assert!(PcLnTab::parse(&bad).is_err());
}

#[test]
fn a_stripped_go_binary_reads_as_go_with_its_version_and_pclntab_names() {
    let path = format!("{}/tests/data/go/tiny-stripped", env!("CARGO_MANIFEST_DIR"));
    let go = crate::symbols::binary::GoBinary::read("/app/tiny", std::path::Path::new(&path))
        .unwrap()
        .expect("a Go binary");
    assert_eq!(go.path, "/app/tiny");
    assert!(go.stripped);
    assert!(
        go.version.as_deref().is_some_and(|v| v.starts_with("go1.")),
        "{:?}",
        go.version
    );
    assert!(go.symbols.is_some());
    // A binary that is not Go reads as None.
    let not_go = format!("{}/tests/data/go/tiny-full.nm", env!("CARGO_MANIFEST_DIR"));
    assert!(crate::symbols::binary::GoBinary::read("/x", std::path::Path::new(&not_go)).is_err());
}
