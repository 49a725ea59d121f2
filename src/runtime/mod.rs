//! What runs in the target process — native code, a JVM, Node.js or Python — decides how
//! frames get names (ELF symbols, a perf map, an engine that walks the runtime's own
//! stacks). `facts` reads what /proc shows about the process; detection here is pure.

pub mod facts;
pub mod jvm;

pub use facts::ProcessFacts;

use crate::docker::target::ProcInfo;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Native,
    Jvm,
    Node,
    Python,
}

impl Runtime {
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Native => "native",
            Runtime::Jvm => "jvm",
            Runtime::Node => "node",
            Runtime::Python => "python",
        }
    }
}

/// The runtime of a process from what /proc shows about it.
pub fn of_process(process: &ProcInfo, facts: &ProcessFacts) -> Runtime {
    detect(process.program(), &facts.exe, &facts.libraries)
}

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
