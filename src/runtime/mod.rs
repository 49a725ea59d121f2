//! What runs in the target process — native code, a JVM, Node.js or Python — decides how
//! frames get names (ELF symbols, a perf map, an engine that walks the runtime's own
//! stacks). `facts` reads what /proc shows about the process; detection here is pure.

pub mod facts;
pub mod go;
pub mod jvm;
pub mod perf_map;

pub use facts::ProcessFacts;

use crate::docker::target::ProcInfo;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Native,
    /// A Go program: names from its symbol table, or `.gopclntab` when stripped; Go's
    /// own profiles from net/http/pprof.
    Go,
    Jvm,
    Node,
    Python,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Go => "go",
            Runtime::Jvm => "jvm",
            Runtime::Node => "node",
            Runtime::Python => "python",
        }
    }
}

/// The runtime of a process from what /proc shows about it.
pub fn of_process(process: &ProcInfo, facts: &ProcessFacts) -> Runtime {
    of_program(process.program(), facts)
}

/// The runtime of `program` (argv[0]'s base name) from what /proc shows about it.
pub fn of_program(program: &str, facts: &ProcessFacts) -> Runtime {
    match detect(program, &facts.exe, &facts.libraries) {
        Runtime::Native if facts.go_buildinfo => Runtime::Go,
        runtime => runtime,
    }
}

/// Whether `runtime`, as /proc told it, may still be Go: native code whose executable the
/// container could not search for Go's build info (no grep). Its executable, read from
/// outside, then decides.
pub fn maybe_go(runtime: Runtime, facts: &ProcessFacts) -> bool {
    runtime == Runtime::Native && facts.go_unchecked
}

/// What a Go target's summary says about names, once: stripped is fine for Go.
pub fn go_names_note(stripped: bool) -> &'static str {
    if stripped {
        "Go binary without a symbol table (stripped): its frames are named from .gopclntab, \
         the table the Go runtime names its own functions with; nothing to rebuild"
    } else {
        "Go binary with its symbol table: perf names its frames"
    }
}

/// The flags that make the usual Go services serve net/http/pprof.
pub const GO_PPROF_FIX: &str = "start the service with its pprof endpoint on: op-node and the op-stack \
     services `--pprof.enabled` (address `--pprof.addr`, port `--pprof.port`), geth/op-geth `--pprof` \
     (`--pprof.addr`, `--pprof.port`), your own program `import _ \"net/http/pprof\"` and \
     `http.ListenAndServe(\"127.0.0.1:6060\", nil)`; or name the endpoint with --pprof-url";

/// The runtime of a process from its program name (argv[0]'s base name), its executable's
/// path (/proc/<pid>/exe) and the files it maps.
pub fn detect(program: &str, exe: &str, libraries: &[String]) -> Runtime {
    let exe = exe.rsplit('/').next().unwrap_or("");
    let is = |names: &[&str]| names.iter().any(|n| program == *n || exe == *n);
    let maps = |needle: &str| libraries.iter().any(|l| l.contains(needle));
    if maps("libjvm") || is(&["java"]) {
        Runtime::Jvm
    } else if maps("libnode") || is(&["node", "nodejs"]) {
        Runtime::Node
    } else if maps("libpython") || program.starts_with("python") || exe.starts_with("python") {
        Runtime::Python
    } else {
        Runtime::Native
    }
}

/// Node's options that make V8 write /tmp/perf-<pid>.map (underscores are accepted too).
pub const NODE_PERF_MAP_FLAGS: &[&str] = &["--perf-basic-prof", "--perf-basic-prof-only-functions"];
/// The V8 flag that writes a jitdump (`jit-<pid>.dump` in the working directory).
pub const NODE_JITDUMP_FLAG: &str = "--perf-prof";

/// What to add so that Node writes a perf map, for summaries and doctor.
pub const NODE_PERF_MAP_FIX: &str = "add `NODE_OPTIONS: \"--perf-basic-prof-only-functions\"` to the service's \
     `environment:` in the compose file (or `--perf-basic-prof-only-functions` to node's command line) \
     and restart the container (`devprof compose --node` writes that override); V8 then writes \
     /tmp/perf-<pid>.map, which perf reads for JavaScript names";

/// Whether a JIT runtime's perf map is there for perf to name its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfMap {
    /// /tmp/perf-<pid>.map exists in the process's root.
    Written,
    /// The flag is set but no map is there (yet): the process may have started before it,
    /// or writes its map elsewhere.
    Flagged,
    /// No map, but V8 writes a jitdump (`--perf-prof`), which devprof's native fold reads
    /// (perf script would need `perf inject --jit`).
    Jitdump,
    /// Neither: JIT frames will be unnamed.
    Missing,
}

impl PerfMap {
    pub fn describe(self) -> &'static str {
        match self {
            PerfMap::Written => "written (/tmp/perf-<pid>.map)",
            PerfMap::Flagged => "flag set, but no /tmp/perf-<pid>.map found",
            PerfMap::Jitdump => "a jitdump instead (--perf-prof), read by the native fold",
            PerfMap::Missing => "missing (no --perf-basic-prof flag)",
        }
    }
}

/// Node's perf map: the map file itself, else the flag on the command line or in
/// NODE_OPTIONS.
pub fn node_perf_map(cmdline: &str, facts: &ProcessFacts) -> PerfMap {
    if facts.perf_map {
        return PerfMap::Written;
    }
    let options = facts.env("NODE_OPTIONS").unwrap_or("");
    let flags: Vec<String> = cmdline
        .split_whitespace()
        .chain(options.split_whitespace())
        .map(|arg| arg.split('=').next().unwrap_or(arg).replace('_', "-"))
        .collect();
    if flags
        .iter()
        .any(|f| NODE_PERF_MAP_FLAGS.contains(&f.as_str()))
    {
        PerfMap::Flagged
    } else if flags.iter().any(|f| f == NODE_JITDUMP_FLAG) {
        PerfMap::Jitdump
    } else {
        PerfMap::Missing
    }
}

/// Whether CPython 3.12+ writes perf trampolines for its frames (`-X perf`, or
/// `PYTHONPERFSUPPORT` set to a non-zero value): perf then names Python functions itself.
pub fn python_perf_trampolines(cmdline: &str, facts: &ProcessFacts) -> bool {
    let env_on = facts
        .env("PYTHONPERFSUPPORT")
        .is_some_and(|v| !v.trim().is_empty() && v.trim() != "0");
    let mut args = cmdline.split_whitespace().peekable();
    let mut flag_on = false;
    while let Some(arg) = args.next() {
        if arg == "-Xperf" || (arg == "-X" && args.peek() == Some(&"perf")) {
            flag_on = true;
        }
    }
    env_on || flag_on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(map: bool, node_options: Option<&str>) -> ProcessFacts {
        ProcessFacts {
            perf_map: map,
            env: node_options
                .map(|v| vec![("NODE_OPTIONS".to_string(), v.to_string())])
                .unwrap_or_default(),
            ..Default::default()
        }
    }

    #[test]
    fn node_perf_map_from_the_file_or_the_flags() {
        assert_eq!(
            node_perf_map("node /app/busy.js", &facts(true, None)),
            PerfMap::Written
        );
        assert_eq!(
            node_perf_map(
                "node /app/busy.js",
                &facts(
                    false,
                    Some("--max-old-space-size=512 --perf-basic-prof-only-functions")
                )
            ),
            PerfMap::Flagged
        );
        assert_eq!(
            node_perf_map("node --perf-prof /app/a.js", &facts(false, None)),
            PerfMap::Jitdump
        );
        assert_eq!(
            node_perf_map("node /app/a.js", &facts(false, Some("--perf_prof"))),
            PerfMap::Jitdump
        );
        assert_eq!(
            node_perf_map("node --perf_basic_prof /app/a.js", &facts(false, None)),
            PerfMap::Flagged
        );
        assert_eq!(
            node_perf_map("node /app/busy.js", &facts(false, Some(""))),
            PerfMap::Missing
        );
        // --interpreted-frames-native-stack alone writes no map.
        assert_eq!(
            node_perf_map(
                "node --interpreted-frames-native-stack a.js",
                &facts(false, None)
            ),
            PerfMap::Missing
        );
    }

    #[test]
    fn python_perf_trampolines_from_the_flag_or_the_environment() {
        let env = |v: &str| ProcessFacts {
            env: vec![("PYTHONPERFSUPPORT".to_string(), v.to_string())],
            ..Default::default()
        };
        let none = ProcessFacts::default();
        assert!(python_perf_trampolines("python3.12 -X perf app.py", &none));
        assert!(python_perf_trampolines("python3.12 -Xperf app.py", &none));
        assert!(python_perf_trampolines("python3 app.py", &env("1")));
        assert!(!python_perf_trampolines("python3 app.py", &env("0")));
        assert!(!python_perf_trampolines(
            "python3 -X dev app.py perf",
            &none
        ));
        assert!(!python_perf_trampolines("python3 app.py", &none));
    }

    #[test]
    fn a_program_with_go_build_info_is_a_go_runtime() {
        let process = ProcInfo::new(7, 1, vec!["demo-go".into()]);
        let facts = ProcessFacts::parse(&facts::encoded(
            "exe\t/usr/local/bin/demo-go\ncomm\tdemo-go\ngobuildinfo\t1\n",
        ));
        assert!(facts.go_buildinfo);
        assert_eq!(of_process(&process, &facts), Runtime::Go);
        assert_eq!(Runtime::Go.name(), "go");
        // Without the build info it is native code.
        let facts = ProcessFacts::parse(&facts::encoded("exe\t/usr/local/bin/demo-go\n"));
        assert_eq!(of_process(&process, &facts), Runtime::Native);
        // A Go program that embeds Python stays Python (the interpreter names its frames).
        let facts = ProcessFacts::parse(&facts::encoded(
            "exe\t/usr/bin/x\nlib\t/usr/lib/libpython3.11.so\ngobuildinfo\t1\n",
        ));
        assert_eq!(of_process(&process, &facts), Runtime::Python);
        // /proc/<pid>/exe unreadable: argv[0] on PATH names the program.
        let facts = ProcessFacts::parse(&facts::encoded(
            "exe\t\nprogram\t/usr/local/bin/demo-go\ngobuildinfo\t1\n",
        ));
        assert_eq!(facts.executable(), Some("/usr/local/bin/demo-go"));
        assert_eq!(
            ProcessFacts::parse(&facts::encoded("exe\t\n")).executable(),
            None
        );
        // Stripped is fine for Go, and the note says so without Rust remedies.
        assert!(go_names_note(true).contains("stripped"));
        assert!(!go_names_note(true).contains("frame-pointers"));
        assert!(GO_PPROF_FIX.contains("--pprof.enabled") && GO_PPROF_FIX.contains("`--pprof`"));
    }

    #[test]
    fn a_go_target_whose_container_has_no_grep_is_not_taken_as_native() {
        let process = ProcInfo::new(7, 1, vec!["demo-go".into()]);
        // What the process script prints where grep is missing: no verdict on Go.
        let facts = ProcessFacts::parse(&facts::encoded(
            "exe\t/usr/local/bin/demo-go\ngounchecked\t1\n",
        ));
        assert!(facts.go_unchecked && !facts.go_buildinfo);
        let runtime = of_process(&process, &facts);
        assert!(maybe_go(runtime, &facts), "the executable must decide");
        // With grep, the script's verdict stands; other runtimes are not Go.
        let facts = ProcessFacts::parse(&facts::encoded("exe\t/usr/local/bin/demo-node\n"));
        assert!(!maybe_go(of_process(&process, &facts), &facts));
        let facts = ProcessFacts::parse(&facts::encoded("exe\t/usr/bin/node\ngounchecked\t1\n"));
        assert!(!maybe_go(detect("node", &facts.exe, &[]), &facts));
        // The script tells the two cases apart.
        let script = facts::process_script();
        assert!(script.contains("command -v grep") && script.contains("gounchecked"));
    }

    #[test]
    fn detects_runtimes_from_program_exe_and_libraries() {
        assert_eq!(detect("node", "/usr/bin/node", &[]), Runtime::Node);
        assert_eq!(
            detect("x", "/usr/bin/x", &["/usr/lib/libnode.so.108".into()]),
            Runtime::Node
        );
        assert_eq!(
            detect("python3", "/usr/bin/python3.11", &[]),
            Runtime::Python
        );
        assert_eq!(
            detect("demo-node", "/usr/local/bin/demo-node", &[]),
            Runtime::Native
        );
    }
}
