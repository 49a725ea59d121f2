//! Broken stacks: samples whose call chain stops before the thread's entry point. A
//! frame-pointer unwinder stops (or wanders into unmapped memory, which perf prints as
//! `[unknown]`) at the first function built without frame pointers — libnode, libuv,
//! libpython and most distribution libraries — so the flamegraph splits one code path into
//! many roots. Measured on the folded stacks, so it holds for every engine and runtime.

use super::folded::Folded;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The frame perf prints for an address in no mapping.
pub const UNKNOWN: &str = "[unknown]";

/// Where a thread's stack begins: program and thread entry points (libc, Go's runtime,
/// the kernel's for kernel threads). Reaching one of these means the unwinder walked the
/// whole chain.
const ENTRY_FRAMES: &[&str] = &[
    "_start",
    "main",
    "__libc_start_main",
    "__libc_start_main_impl",
    "__libc_start_call_main",
    "start_thread",
    "clone",
    "clone3",
    "__clone",
    "__clone3",
    "__clone_internal",
    "thread_start",
    "_dl_start_user",
    "runtime.goexit",
    "runtime.goexit.abi0",
    "runtime.rt0_go",
    "runtime.rt0_go.abi0",
    "runtime.mstart",
    "runtime.mstart.abi0",
    "_rt0_amd64_linux",
    "ret_from_fork",
    "ret_from_fork_asm",
    "kthread",
];

/// How whole the stacks of a profile are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackHealth {
    pub samples: u64,
    /// Samples whose outermost frame is not a thread's entry point.
    pub broken_samples: u64,
    /// `broken_samples / samples`, 0..=1, rounded to 3 places.
    pub broken_share: f64,
    /// Samples whose run of leading `[unknown]` frames was collapsed into one.
    pub collapsed_samples: u64,
    /// `[unknown]` frames removed by collapsing.
    pub collapsed_frames: u64,
    /// Why the stacks broke, when many did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// What gives whole stacks, when many broke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Whether a stack's outermost function frame shows the chain was walked to its start.
/// An address in no mapping (`[unknown]`, a raw address) or a named function that is no
/// entry point says it was not. An unnamed frame in a mapped module (`[libc.so.6]`,
/// `[demo-go]`) is given the benefit of the doubt: stripped libraries and programs hold
/// their entry points there without a name.
pub fn reaches_root(stack: &str) -> bool {
    let Some(outermost) = super::function_frames(stack).next() else {
        return false;
    };
    let f = outermost.trim();
    if f == UNKNOWN || f.starts_with("0x") {
        return false;
    }
    if f.starts_with('[') && f.ends_with(']') {
        return true;
    }
    // py-spy walks the interpreter's own frame chain, which is never cut: its outermost
    // Python frame is where the thread began.
    if super::pyspy::is_python_frame(f) {
        return true;
    }
    // py-spy's native frames carry their library: `clone (libc.so.6)`.
    let name = match f.strip_suffix(')').and_then(|g| g.rsplit_once(" (")) {
        Some((name, _)) => name,
        None => f,
    };
    ENTRY_FRAMES.contains(&name)
}

/// The stack with its run of leading `[unknown]` frames (after the process root) made
/// one, and how many frames that removed.
pub fn collapse_leading_unknown(stack: &str) -> (String, u64) {
    let Some((root, rest)) = stack.split_once(';') else {
        return (stack.to_string(), 0);
    };
    let mut frames = rest.split(';').peekable();
    let mut run = 0u64;
    while frames.peek() == Some(&UNKNOWN) {
        frames.next();
        run += 1;
    }
    if run <= 1 {
        return (stack.to_string(), 0);
    }
    let mut out = format!("{root};{UNKNOWN}");
    for f in frames {
        out.push(';');
        out.push_str(f);
    }
    (out, run - 1)
}

/// Measures how whole the stacks are, and returns the profile with leading `[unknown]`
/// runs collapsed (stacks that become identical are merged).
pub fn repair(folded: &Folded) -> (Folded, StackHealth) {
    let mut health = StackHealth::default();
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (stack, count) in &folded.stacks {
        health.samples += count;
        if !reaches_root(stack) {
            health.broken_samples += count;
        }
        let (collapsed, removed) = collapse_leading_unknown(stack);
        if removed > 0 {
            health.collapsed_samples += count;
            health.collapsed_frames += removed * count;
        }
        *merged.entry(collapsed).or_default() += count;
    }
    if health.samples > 0 {
        health.broken_share =
            ((health.broken_samples as f64 / health.samples as f64) * 1000.0).round() / 1000.0;
    }
    (Folded::from_pairs(merged.into_iter()), health)
}

/// Above this share of broken stacks the summary explains them.
pub const BROKEN_WARNING: f64 = 0.10;

/// Why stacks a stack unwinder walks (perf's, async-profiler's) break in a program of
/// `runtime`, and what to do, for the summary and manifest.
pub fn unwinder_advice(runtime: &str, call_graph_dwarf: bool) -> (String, String) {
    let why = "the frame-pointer unwinder stops at the first function compiled without frame \
               pointers (or walks into unmapped memory, shown as one [unknown] root); "
        .to_string();
    let (why, fix) = match runtime {
        "node" => (
            why + "Debian's libnode and libuv are built without them",
            "keep the JavaScript view (the .node-preset graph drops these frames); for whole \
             native stacks record with --call-graph dwarf, or use a node built with \
             -fno-omit-frame-pointer"
                .to_string(),
        ),
        "python" => (
            why + "the Python interpreter is built without them",
            "use the py-spy engine (--engine py-spy, the default for Python), which walks the \
             interpreter's own stacks; or record with --call-graph dwarf"
                .to_string(),
        ),
        "go" => (
            why + "Go code keeps them, so the break is in cgo, assembly or a C library it calls",
            "record with --call-graph dwarf, or use Go's own profile (--engine pprof), which \
             the Go runtime unwinds itself"
                .to_string(),
        ),
        "jvm" => (
            why + "the JVM omits them in JIT code unless told",
            "start the JVM with -XX:+PreserveFramePointer, or record with --call-graph dwarf"
                .to_string(),
        ),
        _ => (
            why + "the program or a library it calls was built without them",
            "build with frame pointers (Rust: -C force-frame-pointers=yes, C/C++: \
             -fno-omit-frame-pointer; `devprof build source` does it), or record with \
             --call-graph dwarf"
                .to_string(),
        ),
    };
    if call_graph_dwarf {
        (
            "even DWARF unwinding stopped early: the copied stack (8 KiB by default) is too \
             small for these stacks, or the code has no unwind tables"
                .to_string(),
            fix,
        )
    } else {
        (why, fix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outermost_frame_decides_whether_a_stack_is_whole() {
        assert!(reaches_root("app;[libc.so.6];main;work"));
        assert!(reaches_root("app;_start;__libc_start_main;main"));
        assert!(reaches_root("go;runtime.goexit.abi0;main.hash"));
        assert!(!reaches_root("node;[unknown];[libuv.so.1.0.0];uv_run"));
        assert!(!reaches_root("node;epoll_wait;entry_SYSCALL_64"));
        assert!(!reaches_root("python3;0x7f00deadbeef;f"));
        assert!(!reaches_root("python3"));
        assert!(reaches_root(
            "hash;Thread._bootstrap (threading.py:981);f (a.py:1)"
        ));
        assert!(reaches_root(
            "hash;clone (libc.so.6);0x7fa7 (libc.so.6);f (a.py:1)"
        ));
        assert!(!reaches_root("hash;0x7fa7 (libc.so.6);f (a.py:1)"));
    }

    #[test]
    fn collapses_only_a_leading_run_of_unknown_frames() {
        assert_eq!(
            collapse_leading_unknown("node;[unknown];[unknown];[unknown];f;[unknown]"),
            ("node;[unknown];f;[unknown]".to_string(), 2)
        );
        assert_eq!(
            collapse_leading_unknown("node;[unknown];f"),
            ("node;[unknown];f".to_string(), 0)
        );
        assert_eq!(
            collapse_leading_unknown("node;f;[unknown];[unknown]"),
            ("node;f;[unknown];[unknown]".to_string(), 0)
        );
        assert_eq!(collapse_leading_unknown("node"), ("node".to_string(), 0));
    }

    #[test]
    fn repair_merges_stacks_that_collapse_alike_and_counts_broken_samples() {
        let folded = Folded::from_folded_text(
            "n;[unknown];[unknown];f 3\nn;[unknown];f 2\nn;[libc.so.6];main;g 5\n",
        );
        let (repaired, health) = repair(&folded);
        assert_eq!(
            repaired.stacks,
            vec![
                ("n;[libc.so.6];main;g".to_string(), 5),
                ("n;[unknown];f".to_string(), 5)
            ]
        );
        assert_eq!(health.samples, 10);
        assert_eq!(health.broken_samples, 5);
        assert_eq!(health.broken_share, 0.5);
        assert_eq!((health.collapsed_samples, health.collapsed_frames), (3, 3));
    }
}
