//! The runtime: whether JIT or interpreted frames will get names.

use super::{check, skipped, Check, Status};
use crate::docker::target::ProcInfo;
use crate::runtime::Runtime;
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
        Runtime::Node if extras.process.perf_map || cmdline.contains("--perf-basic-prof") => {
            check("runtime", "runtime", Status::Pass, "Node.js, with --perf-basic-prof (JIT frames named)", None)
        }
        Runtime::Node => check(
            "runtime",
            "runtime",
            Status::Warn,
            "Node.js without a perf map: JavaScript frames will be [unknown]",
            Some("start node with --perf-basic-prof (and --interpreted-frames-native-stack); render with --preset node".into()),
        ),
        Runtime::Python if extras.process.perf_map || cmdline.contains("-X perf") || extras.process.env("PYTHONPERFSUPPORT") == Some("1") => {
            check("runtime", "runtime", Status::Pass, "Python with perf support (-X perf / PYTHONPERFSUPPORT=1)", None)
        }
        Runtime::Python => check(
            "runtime",
            "runtime",
            Status::Warn,
            "Python without perf support: Python functions will show as _PyEval_EvalFrameDefault",
            Some("Python 3.12+: start it with -X perf or PYTHONPERFSUPPORT=1".into()),
        ),
    }
}
