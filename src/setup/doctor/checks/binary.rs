//! The program's binary: symbols, debug info, frame pointers, and jemalloc heap profiling.

use super::{check, skipped, Check, Context, Status};
use crate::profile::heap::dumps::JemallocConf;
use crate::runtime::Runtime;
use crate::symbols::elf::{ElfReport, FpVerdict, Jemalloc};
use crate::units::human_bytes;

/// Symbols, debug info and frame pointers of the process's binary.
pub(super) fn binary(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    // The binary.
    match &facts.binary {
        // A JVM's executable is only its launcher: Java frames are named by the JVM (perf
        // map, async-profiler) and its native frames by libjvm.so, not by the launcher.
        Some((path, _)) if cx.runtime == Runtime::Jvm => {
            for (id, title) in [
                ("symbols", "symbols"),
                ("debuginfo", "debug info"),
                ("frame_pointers", "frame pointers"),
            ] {
                checks.push(check(
                    id,
                    title,
                    Status::Skip,
                    format!("not checked: {path} is the JVM's launcher; Java frames get their names from the JVM"),
                    None,
                ));
            }
        }
        None => {
            for (id, title) in [
                ("symbols", "symbols"),
                ("debuginfo", "debug info"),
                ("frame_pointers", "frame pointers"),
            ] {
                checks.push(skipped(id, title, "no process binary"));
            }
        }
        Some((path, Err(why))) => {
            checks.push(check(
                "symbols",
                "symbols",
                Status::Warn,
                format!("{path} could not be read: {why}"),
                None,
            ));
            checks.push(skipped("debuginfo", "debug info", "binary not read"));
            checks.push(skipped(
                "frame_pointers",
                "frame pointers",
                "binary not read",
            ));
        }
        Some((path, Ok(elf))) => binary_checks(checks, path, elf, cx.runtime),
    }
}

/// jemalloc heap profiling: does the program use it, and is it on?
pub(super) fn jemalloc(cx: &Context<'_>, checks: &mut Vec<Check>) {
    let facts = cx.facts;
    let extras = &cx.extras;
    // jemalloc.
    let elf_jemalloc = match &facts.binary {
        Some((_, Ok(elf))) => elf.jemalloc,
        _ => Jemalloc::None,
    };
    let variable = match elf_jemalloc.variable() {
        Some(v) => Some(v),
        None if extras.process.maps("libjemalloc") => Some("MALLOC_CONF"),
        None => None,
    };
    match variable {
        None if facts.extras.is_none() => {
            checks.push(skipped("jemalloc", "jemalloc profiling", "no process"))
        }
        None => checks.push(check(
            "jemalloc",
            "jemalloc profiling",
            Status::Skip,
            "the program does not use jemalloc (devprof heap needs it)",
            None,
        )),
        Some(var) => {
            let conf = extras.process.env(var).unwrap_or("");
            let parsed = JemallocConf::parse(conf);
            if parsed.profiling() && parsed.active() {
                checks.push(check(
                    "jemalloc",
                    "jemalloc profiling",
                    Status::Pass,
                    format!("active: {var}={conf}"),
                    None,
                ));
            } else {
                checks.push(check(
                    "jemalloc",
                    "jemalloc profiling",
                    Status::Warn,
                    if conf.is_empty() {
                        format!("off: the program reads {var}, which is not set (devprof heap needs prof:true)")
                    } else {
                        format!("off: {var}={conf} (devprof heap needs prof:true and prof_active)")
                    },
                    Some(format!(
                        "set {var}=prof:true,prof_active:true,prof_prefix:/profiling/jeprof when the container starts \
                         (`devprof compose --heap` writes it), then recreate the container"
                    )),
                ));
            }
        }
    }
}

fn binary_checks(checks: &mut Vec<Check>, path: &str, elf: &ElfReport, runtime: Runtime) {
    // Go names its functions in .gopclntab, which stripping (-s -w) keeps: neither the
    // symbol table nor DWARF is needed, and Rust's remedies do not apply.
    let go = runtime == Runtime::Go;
    if go && !elf.has_symbols() {
        checks.push(check(
            "symbols",
            "symbols",
            Status::Pass,
            format!("{path}: {}", crate::runtime::go_names_note(true)),
            None,
        ));
    } else if elf.has_symbols() {
        checks.push(check(
            "symbols",
            "symbols",
            Status::Pass,
            format!("{path}: {} functions in .symtab", elf.symtab_functions),
            None,
        ));
    } else {
        let fix = match &elf.debuglink {
            Some(link) => format!(
                "install its debug file ({link}, in the -dbgsym/-debuginfo package) into /usr/lib/debug in the container, \
                 or use a build that is not stripped"
            ),
            None => "build it without stripping (Cargo: `strip = \"none\"`; `devprof build source` does this), \
                     or keep the unstripped binary in the image"
                .to_string(),
        };
        // A JIT runtime's interpreter or engine names the program's own frames (V8's perf
        // map, py-spy reading the interpreter): a stripped launcher loses only the runtime's
        // native frames, which makes the capture poorer, not useless.
        let (status, consequence) = match runtime {
            Runtime::Node => (
                Status::Warn,
                "the runtime's native frames will show as hex addresses; JavaScript frames are named from V8's perf map",
            ),
            Runtime::Python => (
                Status::Warn,
                "the interpreter's native frames will show as hex addresses; py-spy names the Python frames itself",
            ),
            _ => (Status::Fail, "frames will show as hex addresses"),
        };
        checks.push(check(
            "symbols",
            "symbols",
            status,
            format!(
                "{path} is stripped (no .symtab; {} exported functions in .dynsym): {consequence}",
                elf.dynsym_functions
            ),
            Some(fix),
        ));
    }
    if go && !elf.has_debug_info() {
        checks.push(check(
            "debuginfo",
            "debug info",
            Status::Skip,
            format!("not needed: {path} is a Go binary, named from .gopclntab"),
            None,
        ));
    } else if elf.has_debug_info() {
        checks.push(check(
            "debuginfo",
            "debug info",
            Status::Pass,
            format!(
                "{path}: .debug_info {}{}",
                human_bytes(elf.debug_info_bytes),
                if elf.has_debug_line {
                    ", .debug_line"
                } else {
                    ""
                }
            ),
            None,
        ));
    } else {
        checks.push(check(
            "debuginfo",
            "debug info",
            Status::Warn,
            format!("{path} has no .debug_info: no inlined frames or source lines (--inline)"),
            Some("build with full debuginfo (Cargo: `debug = \"full\"` in [profile.release]; `devprof build source` does this)".into()),
        ));
    }
    let fp = &elf.frame_pointers;
    let how = if fp.examined > 0 {
        format!(
            "{} of {} functions set up a frame pointer; judged on {}",
            fp.with_fp, fp.examined, fp.basis
        )
    } else {
        fp.basis.clone()
    };
    let dwarf = if elf.has_eh_frame || elf.has_debug_frame {
        "`devprof cpu --call-graph dwarf` unwinds with its .eh_frame instead"
    } else {
        "it has no .eh_frame either, so --call-graph dwarf cannot unwind it"
    };
    match fp.verdict {
        FpVerdict::Yes => checks.push(check("frame_pointers", "frame pointers", Status::Pass, format!("kept: {how}"), None)),
        FpVerdict::Partly | FpVerdict::No => checks.push(check(
            "frame_pointers",
            "frame pointers",
            Status::Warn,
            format!(
                "{}: {how}; --call-graph fp stacks will be cut short",
                if fp.verdict == FpVerdict::No { "omitted" } else { "partly omitted" }
            ),
            Some(format!("{dwarf}; or rebuild with -C force-frame-pointers=yes (`devprof build source` does this)")),
        )),
        FpVerdict::Unknown => checks.push(check("frame_pointers", "frame pointers", Status::Warn, format!("not judged: {how}"), None)),
    }
}
