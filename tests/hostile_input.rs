//! Parsers fed random and mutated input must return errors, never panic or allocate
//! what the input claims: perf script text, perf.data, jemalloc heap dumps, manifests, tar
//! streams and the probes' output from containers (where no command line can forge a
//! fact). Mutations start from real captures in tests/data. The
//! case count is fixed so that the run takes the same time everywhere.

use devprof::docker::probe::ContainerFacts;
use devprof::docker::wire::{decode, encode, records};
use devprof::profile::heap::dumps::{listed, parse_dump_name, DumpFile, DumpKind};
use devprof::profile::heap::parse::parse_dump;
use devprof::profile::offcpu::script::{
    for_each_record as offcpu_records, header_columns, Record as OffcpuRecord,
};
use devprof::profile::perfdata::for_each_record;
use devprof::profile::perfscript::fold_perf_script;
use devprof::runtime::ProcessFacts;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn data(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `base` with bytes overwritten, a range cut out, and the tail cut off.
fn mutate(base: &[u8], edits: &[(usize, u8)], cut: (usize, usize), keep: usize) -> Vec<u8> {
    let mut out = base.to_vec();
    for (at, byte) in edits {
        if !out.is_empty() {
            let i = at % out.len();
            out[i] = *byte;
        }
    }
    if !out.is_empty() {
        let from = cut.0 % out.len();
        let to = (from + cut.1 % 64).min(out.len());
        out.drain(from..to);
    }
    let keep = if out.is_empty() {
        0
    } else {
        keep % (out.len() + 1)
    };
    out.truncate(keep.max(out.len() / 2));
    out
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>()), 0..24)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn scratch(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("input");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn perf_script_text_never_panics(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let base = data("perf-script-demo-seq.txt");
        let _ = fold_perf_script(&mutate(&base, &edits, cut, keep)[..]);
        let _ = fold_perf_script(&noise[..]);
    }

    #[test]
    fn perf_data_never_panics(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        for name in ["offcpu-contextswitches.data", "offcpu-iobandwidth.data"] {
            let (_dir, path) = scratch(&mutate(&data(name), &edits, cut, keep));
            let _ = for_each_record(&path, |_| {});
        }
    }

    #[test]
    fn perf_data_headers_with_any_sizes_are_refused_or_read(
        fields in prop::collection::vec(any::<u64>(), 12),
        tail in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut bytes = b"PERFILE2".to_vec();
        for f in &fields {
            bytes.extend_from_slice(&f.to_le_bytes());
        }
        bytes.extend_from_slice(&tail);
        let (_dir, path) = scratch(&bytes);
        let _ = for_each_record(&path, |_| {});
    }

    #[test]
    fn heap_dumps_never_panic(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        let base = data("heap/demo-seq.heap");
        let text = String::from_utf8_lossy(&mutate(&base, &edits, cut, keep)).into_owned();
        let _ = parse_dump(&text);
    }

    #[test]
    fn manifests_never_panic_the_catalog(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
    ) {
        let manifest = devprof::store::Manifest {
            kind: "cpu".into(),
            created: "2026-11-22T10:15:00+00:00".into(),
            files: vec![],
            ..Default::default()
        };
        let base = serde_json::to_vec_pretty(&manifest).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let container = dir.path().join("demo-seq");
        std::fs::create_dir(&container).unwrap();
        std::fs::write(
            container.join("perf-20261122-101500.json"),
            mutate(&base, &edits, cut, keep),
        )
        .unwrap();
        let _ = devprof::store::catalog::list(dir.path(), None);
    }

    #[test]
    fn tar_streams_never_panic_or_escape(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(600);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, "perf.data", &[7u8; 600][..]).unwrap();
        let base = builder.into_inner().unwrap();
        for input in [mutate(&base, &edits, cut, keep), noise.clone()] {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("out");
            std::fs::create_dir(&dest).unwrap();
            let _ = devprof::docker::archive::extract(&input[..], &dest, |p| Some(p.to_path_buf()), devprof::docker::archive::CopyLimit::HEAP_DUMP);
            // Whatever happened, nothing landed outside the destination.
            let outside: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name() != "out")
                .collect();
            prop_assert!(outside.is_empty());
        }
    }

    #[test]
    fn probe_output_never_panics(
        edits in edits(), cut in (any::<usize>(), any::<usize>()), keep in any::<usize>(),
        noise in prop::collection::vec(any::<u8>(), 0..1024),
    ) {
        let base = data("doctor/probe-demo-seq.txt");
        for input in [mutate(&base, &edits, cut, keep), noise.clone()] {
            let text = String::from_utf8_lossy(&input);
            let _ = ContainerFacts::parse(&text);
            let _ = ProcessFacts::parse(&text);
        }
    }

    #[test]
    fn probe_command_lines_cannot_forge_a_fact_or_a_perf_candidate(
        argv in prop::collection::vec(
            prop::collection::vec(prop_oneof![
                Just(b'\n'), Just(b'\t'), Just(0u8), Just(b' '), Just(b'/'),
                any::<u8>(), 0x61u8..0x7a,
            ], 0..40),
            1..6,
        ),
        forged_line in "(perf|paranoid|kernel|cap_eff|sysctl_writable|proc)\t[ -~]{0,30}",
    ) {
        let header = "kernel\t6.18.44-fc\nparanoid\t2\nkptr_restrict\t0\ncap_eff\t0000000000000000\nseccomp\t2\nsysctl_writable\t0\n";
        let mut cmdline: Vec<u8> = Vec::new();
        for (i, arg) in argv.iter().enumerate() {
            // The first argument is what the process calls itself: a forged record in it.
            if i == 0 {
                cmdline.extend_from_slice(format!("x\n{forged_line}\n").as_bytes());
            }
            cmdline.extend_from_slice(arg);
            cmdline.push(0);
        }
        let text = format!("{header}proc\t9\t1\t{}\n", encode(&cmdline));
        let facts = ContainerFacts::parse(&text).unwrap();
        prop_assert!(facts.perf_candidates.is_empty());
        prop_assert_eq!(facts.paranoid, Some(2));
        prop_assert_eq!(facts.kernel.as_str(), "6.18.44-fc");
        prop_assert!(!facts.sysctl_writable);
        // One process, its first argument exact, shown on one line.
        prop_assert_eq!(facts.processes.len(), 1);
        let p = &facts.processes[0];
        prop_assert_eq!(p.pid, 9);
        let forged_start = format!("x\n{forged_line}\n");
        prop_assert!(p.argv[0].starts_with(&forged_start));
        prop_assert!(!p.cmdline.contains('\n') && !p.cmdline.contains('\t'));
    }

    #[test]
    fn dump_names_never_panic(
        base in "[a-z.]{0,8}",
        name in prop::collection::vec(prop_oneof![
            Just('.'), Just('m'), Just('f'), Just('i'), Just('u'), Just('/'),
            Just('\u{e9}'), Just('\u{3000}'), proptest::char::range('0', '9'), any::<char>(),
        ], 0..24),
    ) {
        let name: String = name.into_iter().collect();
        let _ = parse_dump_name(&base, &name);
        let _ = DumpFile::at_path(&format!("/d/{name}"), 1, 1);
        let _ = listed(&base, [(name.clone(), 1, 1)]);
        let heap = format!("{base}.{name}.heap");
        let _ = parse_dump_name(&base, &heap);
        let _ = DumpFile::at_path(&heap, 1, 1);
    }

    #[test]
    fn a_dump_name_jemalloc_writes_gives_back_its_numbers(
        base in "[a-z_][a-z0-9_-]{0,12}", pid in any::<u32>(), seq in any::<u64>(),
        n in any::<u64>(),
    ) {
        let name = format!("{base}.{pid}.{seq}.m{n}.heap");
        prop_assert_eq!(parse_dump_name(&base, &name), Some((pid, seq, DumpKind::Manual(n))));
    }

    #[test]
    fn offcpu_script_lines_with_hostile_names_never_panic(
        name in hostile_thread_name(),
        noise in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let text = offcpu_lines(&name);
        let _ = offcpu_records(&text[..], |_| {});
        let _ = offcpu_records(&noise[..], |_| {});
        let _ = header_columns(&noise);
    }

    #[test]
    fn an_offcpu_line_gives_back_its_thread_names_bytes(name in hostile_thread_name()) {
        let text = offcpu_lines(&name);
        let columns = header_columns(&text[..text.iter().position(|&b| b == b'\n').unwrap()]);
        let columns = columns.expect("a well-formed line");
        prop_assert_eq!(columns.comm, &name[..]);
        prop_assert_eq!((columns.pid, columns.tid), (7, 31));
        let mut comms = Vec::new();
        let n = offcpu_records(&text[..], |r| {
            if let OffcpuRecord::Sample(s) = r {
                comms.push((s.comm.to_string(), s.prev_state(), s.frames.len()));
            }
        }).unwrap();
        prop_assert_eq!(n, 2);
        let shown = String::from_utf8_lossy(&name).into_owned();
        prop_assert_eq!(comms, vec![(shown, Some("S".to_string()), 2)]);
    }

    #[test]
    fn probe_fields_give_back_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let line = format!("proc\t9\t{}\t{}", encode(&bytes), encode(b"\n\tperf\t/x"));
        let record = records(&line).next().unwrap();
        prop_assert_eq!(record.key, "proc");
        prop_assert_eq!(record.number::<u32>(0), Some(9));
        prop_assert_eq!(record.bytes(1), Some(bytes.clone()));
        prop_assert_eq!(decode(&encode(&bytes)), Some(bytes));
        prop_assert_eq!(records(&line).count(), 1);
    }
}

/// A thread name as the kernel keeps it (1 to 15 bytes, no NUL), of any bytes but the
/// ones `perf script` cannot print unambiguously: a newline, an ASCII space at either end
/// (perf pads with them) or a leading tab (a stack line's mark).
fn hostile_thread_name() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        any::<u8>(),
        Just(b' '),
        Just(b'/'),
        Just(b':'),
        Just(b'\t'),
        b'0'..=b'9',
    ];
    let piece = prop_oneof![
        prop::collection::vec(byte, 1..4),
        Just("\u{a0}".as_bytes().to_vec()),
        Just("\u{2003}".as_bytes().to_vec()),
        Just("\u{3000}".as_bytes().to_vec()),
        Just(b" 9/9 1.0: x:".to_vec()),
        Just(b" prev_state=R".to_vec()),
    ];
    prop::collection::vec(piece, 1..6).prop_map(|pieces| {
        let mut name: Vec<u8> = pieces.concat();
        name.retain(|&b| b != 0 && b != b'\n' && b != b'\r');
        name.truncate(15);
        while name.last() == Some(&b' ') {
            name.pop();
        }
        while matches!(name.first(), Some(b' ' | b'\t')) {
            name.remove(0);
        }
        if name.is_empty() {
            name.push(b'x');
        }
        name
    })
}

/// A sched_switch sample and a switch record of a thread named `name`, laid out as a real
/// capture's (`%s %7d/%-7d time:`).
fn offcpu_lines(name: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    text.extend_from_slice(name);
    text.extend_from_slice(
        b"      7/31      1802.204635:            sched:sched_switch: prev_comm=",
    );
    text.extend_from_slice(name);
    text.extend_from_slice(
        b" prev_pid=31 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
        \tffffffff821f8298 __schedule ([kernel.kallsyms])\n\
        \t           cf545 clock_nanosleep (/usr/lib/x86_64-linux-gnu/libc.so.6)\n\n",
    );
    text.extend_from_slice(name);
    text.extend_from_slice(b"      7/31      1802.204700: PERF_RECORD_SWITCH OUT        \n");
    text
}
