//! The checklist on facts read from real containers (tests/data/doctor).
use super::runtime_check::runtime_check;
use super::*;
use crate::docker::{ContainerConfig, EndpointVersion, Flavour};
use crate::engines::diagnosis::PerfTool;
use crate::runtime::facts::ProcessFacts;
use crate::symbols::elf::{Arch, ElfReport, FpVerdict, FramePointers, Jemalloc};

const PROBE_DEMO: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/doctor/probe-demo-seq.txt"
));
const EXTRAS_DEMO: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/doctor/extras-demo-seq.txt"
));
const PROBE_PLAIN: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/doctor/probe-plain.txt"
));
const EXTRAS_PLAIN: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/doctor/extras-plain.txt"
));
const PERFMON_REJECTED: &str = "invalid CapAdd: unknown capability: \"CAP_PERFMON\"";

fn endpoint() -> EndpointVersion {
    EndpointVersion {
        version: "20.10.24+dfsg1".into(),
        api_version: "1.41".into(),
        kernel: "6.18.44-fc-v595".into(),
        flavour: Flavour::Docker,
    }
}

fn container(name: &str) -> ContainerInfo {
    ContainerInfo {
        id: "1ed92c4ee5231234".into(),
        name: name.into(),
        image: "devprof-demo-node:latest".into(),
        state: "running".into(),
        service: None,
        project: None,
        labels: Default::default(),
    }
}

/// /usr/local/bin/demo-node as `devprof build source` makes it (numbers read from it).
fn demo_node_elf() -> ElfReport {
    ElfReport {
        arch: Arch::X86_64,
        symtab_functions: 2021,
        dynsym_functions: 0,
        debug_info_bytes: 4_089_803,
        has_debug_line: true,
        debuglink: None,
        build_id: None,
        has_eh_frame: true,
        has_debug_frame: false,
        frame_pointers: FramePointers {
            verdict: FpVerdict::Yes,
            examined: 42,
            with_fp: 42,
            basis: "the prologues (push %rbp; mov %rsp,%rbp) of the program's own Rust functions in .symtab".into(),
        },
        jemalloc: Jemalloc::Prefixed,
        go_tables: false,
    }
}

/// The same binary after `strip`.
fn stripped_elf() -> ElfReport {
    ElfReport {
        symtab_functions: 0,
        debug_info_bytes: 0,
        has_debug_line: false,
        frame_pointers: FramePointers {
            verdict: FpVerdict::Yes,
            examined: 1527,
            with_fp: 999,
            basis: "the prologues (push %rbp; mov %rsp,%rbp) of the .eh_frame entries".into(),
        },
        ..demo_node_elf()
    }
}

fn demo_seq() -> DoctorFacts {
    let probe = ContainerFacts::parse(PROBE_DEMO).unwrap();
    let process = probe
        .processes
        .iter()
        .find(|p| p.pid == 6)
        .cloned()
        .unwrap();
    DoctorFacts {
        mode: None,
        sidecar_image: None,
        target: "demo-seq".into(),
        daemon: Some(Ok("unix:///var/run/docker.sock".into())),
        endpoint: Some(endpoint()),
        rootless: false,
        container: Some(Ok(container("demo-seq"))),
        config: Some(ContainerConfig {
            cap_add: vec![
                "SYS_ADMIN".into(),
                "SYS_PTRACE".into(),
                "SYSLOG".into(),
                "IPC_LOCK".into(),
            ],
            security_opt: vec!["seccomp=unconfined".into()],
            ..Default::default()
        }),
        perfmon_known: Some(Err(PERFMON_REJECTED.into())),
        probe: Some(probe),
        process: Some(Ok(process)),
        perf: Some(Ok(PerfTool {
            path: "/usr/bin/perf".into(),
            version: "6.1.176".into(),
            supports_zstd: true,
        })),
        trial: Some(Trial::Allowed(75.8)),
        extras: Some(ProcessExtras::parse(EXTRAS_DEMO)),
        asprof: None,
        binary: Some(("/usr/local/bin/demo-node".into(), Ok(demo_node_elf()))),
    }
}

fn plain() -> DoctorFacts {
    let probe = ContainerFacts::parse(PROBE_PLAIN).unwrap();
    let process = probe.processes[0].clone();
    DoctorFacts {
        mode: None,
        sidecar_image: None,
        target: "plain".into(),
        daemon: Some(Ok("unix:///var/run/docker.sock".into())),
        endpoint: Some(endpoint()),
        rootless: false,
        container: Some(Ok(container("plain"))),
        config: Some(ContainerConfig::default()),
        perfmon_known: Some(Err(PERFMON_REJECTED.into())),
        probe: Some(probe),
        process: Some(Ok(process)),
        perf: Some(Err("not installed in the container".into())),
        trial: None,
        extras: Some(ProcessExtras::parse(EXTRAS_PLAIN)),
        asprof: None,
        binary: Some(("/usr/local/bin/demo-node".into(), Ok(stripped_elf()))),
    }
}

fn by_id<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

#[test]
fn demo_seq_passes_every_check() {
    let checks = evaluate(&demo_seq());
    assert_eq!(checks.len(), 16);
    for c in &checks {
        assert_eq!(c.status, Status::Pass, "{c:?}");
    }
    assert!(by_id(&checks, "capabilities")
        .detail
        .contains("SYS_ADMIN stands in for PERFMON"));
    assert!(by_id(&checks, "perf")
        .detail
        .contains("older than the kernel 6.18.44-fc-v595"));
    assert!(by_id(&checks, "jemalloc")
        .detail
        .starts_with("active: _RJEM_MALLOC_CONF=prof:true"));
    assert!(failures(&checks).is_empty());
    assert!(render("demo-seq", &checks).ends_with("nothing blocks profiling demo-seq\n"));
}

#[test]
fn plain_container_fails_each_blocking_check_with_its_fix() {
    let checks = evaluate(&plain());
    let failed: Vec<&str> = failures(&checks).iter().map(|c| c.id).collect();
    assert_eq!(
        failed,
        vec![
            "perf",
            "perf_event_open",
            "perf_event_paranoid",
            "capabilities",
            "seccomp",
            "symbols"
        ]
    );
    for c in failures(&checks) {
        assert!(
            c.fix.as_deref().is_some_and(|f| !f.is_empty()),
            "{c:?} has no fix"
        );
    }
    assert!(
        by_id(&checks, "capabilities")
            .fix
            .as_deref()
            .unwrap()
            .contains("cap_add: [SYS_ADMIN, SYS_PTRACE]"),
        "this engine rejects PERFMON"
    );
    assert!(by_id(&checks, "perf")
        .fix
        .as_deref()
        .unwrap()
        .contains("devprof build tools devprof-demo-node:latest"));
    assert!(by_id(&checks, "symbols").detail.contains("stripped"));
    assert!(by_id(&checks, "perf_event_open")
        .detail
        .starts_with("not tried (no perf)"));
    for warned in ["kptr_restrict", "tracefs", "debuginfo", "jemalloc"] {
        assert_eq!(by_id(&checks, warned).status, Status::Warn, "{warned}");
    }
    // Frame pointers are still judged without symbols, from .eh_frame.
    assert_eq!(by_id(&checks, "frame_pointers").status, Status::Pass);
    let text = render("plain", &checks);
    assert!(
        text.contains("✗ perf ") && text.contains("fix: use an image with perf"),
        "{text}"
    );
    assert!(text.ends_with("6 check(s) block profiling: perf, perf_event_open, kernel.perf_event_paranoid, capabilities, seccomp, symbols\n"));
}

/// Regression: in CI /proc gave no build info for demo-go (runtime "native code"), and its
/// stripped binary blocked the doctor although the binary's own Go tables name it.
#[test]
fn a_stripped_go_binary_known_by_its_tables_alone_is_not_blocked() {
    let mut facts = demo_seq();
    let mut elf = stripped_elf();
    elf.go_tables = true;
    facts.binary = Some(("/usr/local/bin/demo-go".into(), Ok(elf)));
    let checks = evaluate(&facts);
    assert!(failures(&checks).is_empty(), "{checks:?}");
    assert_eq!(by_id(&checks, "symbols").status, Status::Pass);
}

#[test]
fn a_stripped_go_binary_is_not_blocked_for_its_symbols() {
    let mut facts = demo_seq();
    facts.extras = Some(ProcessExtras::parse(&format!(
        "{EXTRAS_DEMO}gobuildinfo\t1\n"
    )));
    facts.binary = Some(("/usr/local/bin/demo-go".into(), Ok(stripped_elf())));
    let checks = evaluate(&facts);
    assert_eq!(
        by_id(&checks, "runtime").detail.split(':').next(),
        Some("Go")
    );
    assert!(failures(&checks).is_empty(), "{checks:?}");
    let symbols = by_id(&checks, "symbols");
    assert_eq!(symbols.status, Status::Pass);
    assert!(symbols.detail.contains(".gopclntab"), "{symbols:?}");
    assert_eq!(by_id(&checks, "debuginfo").status, Status::Skip);
    for c in &checks {
        let text = format!("{} {}", c.detail, c.fix.as_deref().unwrap_or(""));
        assert!(!text.contains("Cargo"), "Rust advice for Go: {c:?}");
    }
    // The same binary in a native program is still blocked.
    let mut native = demo_seq();
    native.binary = Some(("/usr/local/bin/demo-node".into(), Ok(stripped_elf())));
    assert_eq!(by_id(&evaluate(&native), "symbols").status, Status::Fail);
}

#[test]
fn a_stripped_launcher_of_a_jit_runtime_is_a_warning_not_a_block() {
    for (runtime, exe, cmdline) in [
        ("node", "/usr/bin/node", "node --perf-basic-prof server.js"),
        ("python", "/usr/bin/python3.11", "python3 app.py"),
    ] {
        let mut facts = demo_seq();
        let mut elf = stripped_elf();
        elf.debuglink = None;
        facts.binary = Some((exe.into(), Ok(elf)));
        let argv = cmdline.split(' ').map(str::to_string).collect();
        facts.process = Some(Ok(crate::docker::target::ProcInfo::new(7, 1, argv)));
        let checks = evaluate(&facts);
        assert!(
            by_id(&checks, "runtime")
                .detail
                .to_lowercase()
                .starts_with(runtime),
            "{runtime}: {:?}",
            by_id(&checks, "runtime")
        );
        let symbols = by_id(&checks, "symbols");
        assert_eq!(symbols.status, Status::Warn, "{runtime}: {symbols:?}");
        assert!(symbols.detail.contains("stripped"), "{symbols:?}");
        assert!(
            !failures(&checks).iter().any(|c| c.id == "symbols"),
            "{runtime}: {checks:?}"
        );
    }
}

#[test]
fn a_successful_trial_outweighs_the_prediction() {
    let mut facts = plain();
    facts.perf = demo_seq().perf;
    facts.trial = Some(Trial::Allowed(80.0));
    facts.binary = Some(("/usr/local/bin/demo-node".into(), Ok(demo_node_elf())));
    let checks = evaluate(&facts);
    assert!(failures(&checks).is_empty(), "{:?}", failures(&checks));
    let denied = DoctorFacts {
        trial: Some(Trial::Denied(
            "No permission to enable cpu-clock event.".into(),
        )),
        ..facts
    };
    let checks = evaluate(&denied);
    let open = by_id(&checks, "perf_event_open");
    assert_eq!(open.status, Status::Fail);
    assert!(open.detail.contains("No permission"));
    assert!(open.fix.as_deref().unwrap().contains("seccomp=unconfined"));
}

#[test]
fn unreachable_daemon_and_missing_container_stop_the_list() {
    let checks = evaluate(&DoctorFacts {
        daemon: Some(Err("cannot reach the Docker daemon at unix:///nope".into())),
        ..Default::default()
    });
    assert_eq!(checks.len(), 1);
    assert_eq!(checks[0].status, Status::Fail);
    let checks = evaluate(&DoctorFacts {
        daemon: Some(Ok("unix:///var/run/docker.sock".into())),
        container: Some(Err(
            "no container matches 'x'\n  running containers:\n    - demo-seq".into(),
        )),
        ..Default::default()
    });
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[1].detail, "no container matches 'x'");
    assert!(checks[1].fix.as_deref().unwrap().contains("demo-seq"));
}

#[test]
fn runtimes() {
    let proc_of = |cmd: &str| ProcInfo::new(7, 1, cmd.split(' ').map(String::from).collect());
    let extras = |libs: &[&str]| ProcessExtras {
        process: ProcessFacts {
            libraries: libs.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        runtime_of(Some(&proc_of("/usr/bin/java -jar x.jar")), &extras(&[])),
        Runtime::Jvm
    );
    assert_eq!(
        runtime_of(
            Some(&proc_of("besu")),
            &extras(&["/opt/java/lib/server/libjvm.so"])
        ),
        Runtime::Jvm
    );
    assert_eq!(
        runtime_of(Some(&proc_of("node dist/main.js")), &extras(&[])),
        Runtime::Node
    );
    assert_eq!(
        runtime_of(Some(&proc_of("python3.12 -m app")), &extras(&[])),
        Runtime::Python
    );
    assert_eq!(
        runtime_of(Some(&proc_of("demo-node")), &extras(&[])),
        Runtime::Native
    );
    // Go's build info in the executable: the doctor says Go, as the captures do.
    let go = ProcessExtras {
        process: ProcessFacts::parse(&crate::runtime::facts::encoded(
            "exe\t/usr/local/bin/demo-go\ngobuildinfo\t1\n",
        )),
        ..Default::default()
    };
    assert_eq!(runtime_of(Some(&proc_of("demo-go")), &go), Runtime::Go);
    let node = runtime_check(
        Runtime::Node,
        Some(&proc_of("node --perf-basic-prof app.js")),
        &extras(&[]),
        true,
    );
    assert_eq!(node.status, Status::Pass);
    let jvm = runtime_check(Runtime::Jvm, Some(&proc_of("java")), &extras(&[]), true);
    assert_eq!(jvm.status, Status::Pass);
    assert!(jvm.detail.contains("the JVM checks follow"));
}

#[test]
fn extras_parse_real_output() {
    let e = ProcessExtras::parse(EXTRAS_DEMO);
    assert_eq!(e.process.exe, "/usr/local/bin/demo-node");
    assert_eq!(e.process.env.len(), 2);
    assert_eq!(e.tracefs.as_deref(), Some("/sys/kernel/tracing"));
    assert_eq!(e.kallsyms_address, "ffffffff81000000");
    let p = ProcessExtras::parse(EXTRAS_PLAIN);
    assert_eq!(
        (p.tracefs, p.kallsyms_address.as_str()),
        (None, "0000000000000000")
    );
}

#[test]
fn the_endpoint_line_says_when_the_endpoint_runs_rootless() {
    let rootful = evaluate(&demo_seq());
    assert!(!by_id(&rootful, "daemon").detail.contains("rootless"));
    let rootless = evaluate(&DoctorFacts {
        rootless: true,
        ..demo_seq()
    });
    let line = &by_id(&rootless, "daemon").detail;
    assert!(
        line.contains("20.10.24+dfsg1, rootless, API 1.41"),
        "{line}"
    );
}

/// Finding 4: an executable's name (the container's) holding ESC, CR and a line feed
/// cannot forge a "✓" line of the checklist: the detail stays on its check's line, with
/// every control character shown as an escape.
#[test]
fn a_container_cannot_forge_a_line_of_the_checklist() {
    let exe = "/tmp/e/x\u{1b}[1A\u{1b}[2K\r  ✓ perf_event_open  ok\n  ✓ forged";
    let checks = vec![
        check(
            "symbols",
            "symbols",
            Status::Warn,
            format!("{exe} could not be read"),
            Some("rebuild it\nwith symbols \u{1b}]0;title\u{7}".to_string()),
        ),
        check("perf", "perf", Status::Pass, "perf 6.1", None),
    ];
    let text = render("t", &checks);
    assert!(
        text.chars().all(|c| c == '\n' || !c.is_control()),
        "{text:?}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[1].starts_with("  ! symbols") && lines[1].contains("\\n  ✓ forged"));
    assert!(lines[3]
        .trim_start()
        .starts_with("with symbols \\u{1b}]0;title\\u{7}"));
    let marked = lines.iter().filter(|l| l.starts_with("  ✓")).count();
    assert_eq!(marked, 1, "only the perf check passes:\n{text}");
}
