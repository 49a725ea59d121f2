//! The runtime: whether JIT or interpreted frames will get names.

use super::{check, skipped, Check, Status};
use crate::docker::target::ProcInfo;
use crate::runtime::{node_perf_map, python_perf_trampolines, PerfMap, Runtime, NODE_PERF_MAP_FIX};
use crate::setup::doctor::facts::ProcessExtras;

pub(super) fn runtime_check(
    runtime: Runtime,
    process: Option<&ProcInfo>,
    extras: &ProcessExtras,
    have_extras: bool,
) -> Check {
    if !have_extras {
        return skipped("runtime", "runtime", "no process");
    }
    let cmdline = process.map(|p| p.cmdline.as_str()).unwrap_or("");
    match runtime {
        Runtime::Native => check("runtime", "runtime", Status::Pass, "native code: perf names frames from the binary's symbols", None),
        Runtime::Go => check(
            "runtime",
            "runtime",
            Status::Pass,
            "Go: frames are named from the symbol table, or from .gopclntab when the binary is stripped (fine for Go); Go's own profiles through net/http/pprof with --engine pprof",
            None,
        ),
        Runtime::Jvm => check(
            "runtime",
            "runtime",
            Status::Pass,
            format!(
                "JVM{}: Java frames are named by async-profiler, or by perf through the perf map devprof asks the JVM for (the JVM checks follow)",
                crate::runtime::jvm::version_from_path(&extras.process.exe)
                    .map(|v| format!(" (Java {v})"))
                    .unwrap_or_default()
            ),
            None,
        ),
        Runtime::Node => match node_perf_map(cmdline, &extras.process) {
            // Without ptrace rights in the container /proc/<pid>/environ is unreadable.
            PerfMap::Missing if extras.process.exe.is_empty() => check(
                "runtime",
                "runtime",
                Status::Warn,
                "Node.js: its environment cannot be read from inside the container (no SYS_PTRACE), so whether NODE_OPTIONS asks for a perf map is unknown; devprof cpu reads it from the sidecar and says",
                Some(format!("if it lacks the flag: {NODE_PERF_MAP_FIX}")),
            ),
            PerfMap::Missing => check(
                "runtime",
                "runtime",
                Status::Warn,
                "Node.js without a perf map: JavaScript frames will be [unknown]",
                Some(format!("{NODE_PERF_MAP_FIX}; devprof cpu writes the graph filtered with --preset node beside the unfiltered one")),
            ),
            map => check(
                "runtime",
                "runtime",
                Status::Pass,
                format!("Node.js, V8 perf map {}: JavaScript frames get names", map.describe()),
                None,
            ),
        },
        Runtime::Python if python_perf_trampolines(cmdline, &extras.process) => {
            check("runtime", "runtime", Status::Pass, "Python with perf trampolines (-X perf / PYTHONPERFSUPPORT): py-spy or perf name its functions", None)
        }
        Runtime::Python => check(
            "runtime",
            "runtime",
            Status::Pass,
            "Python: devprof cpu records it with py-spy (in the container, or from the profiler sidecar), which names Python functions",
            None,
        ),
    }
}
