//! `DEMO_CLEAR_ENVIRON=1`: the node behaves like servers that rewrite their command line
//! and environment to show their status in `ps` (setproctitle). The environment strings
//! are overwritten in place, so /proc/PID/environ (which reads the original memory, not
//! libc's table) reads blank; the command line becomes a status title within the bytes
//! the original arguments took. jemalloc has read its settings long before (its first
//! allocation), so heap profiling stays on.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

static ARGC: AtomicUsize = AtomicUsize::new(0);
static ARGV: AtomicPtr<*mut c_char> = AtomicPtr::new(std::ptr::null_mut());

/// glibc calls `.init_array` functions with (argc, argv, envp): the only way to reach the
/// original argument bytes (std copies them).
extern "C" fn keep_argv(argc: c_int, argv: *mut *mut c_char, _envp: *mut *mut c_char) {
    ARGC.store(argc.max(0) as usize, Ordering::Relaxed);
    ARGV.store(argv, Ordering::Relaxed);
}

#[used]
#[link_section = ".init_array"]
static KEEP_ARGV: extern "C" fn(c_int, *mut *mut c_char, *mut *mut c_char) = keep_argv;

extern "C" {
    static mut environ: *mut *mut c_char;
}

/// Overwrites every environment string with NULs and the command line with `title`
/// (cut to the space the arguments had). Returns the number of variables blanked.
///
/// Call once, before any other thread reads the environment.
pub fn clear_environ_and_retitle(title: &str) -> usize {
    let mut cleared = 0;
    // SAFETY: `environ` is libc's table of NUL-terminated strings, written by the kernel
    // at exec; each string is overwritten within its own length, before other threads run.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let s = *entry;
            let len = CStr::from_ptr(s).to_bytes().len();
            std::ptr::write_bytes(s, 0, len);
            cleared += 1;
            entry = entry.add(1);
        }
    }
    let argc = ARGC.load(Ordering::Relaxed);
    let argv = ARGV.load(Ordering::Relaxed);
    if argc == 0 || argv.is_null() {
        return cleared;
    }
    // SAFETY: argv[0..argc] are the kernel-written, contiguous argument strings; the
    // title is written into the bytes they span (the last NUL kept).
    unsafe {
        let first = *argv;
        let last = *argv.add(argc - 1);
        if first.is_null() || last.is_null() {
            return cleared;
        }
        let end = last.add(CStr::from_ptr(last).to_bytes().len());
        let room = end.offset_from(first).max(0) as usize;
        let bytes = title.as_bytes();
        let n = bytes.len().min(room);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), first as *mut u8, n);
        std::ptr::write_bytes(first.add(n), 0, room - n);
    }
    cleared
}
