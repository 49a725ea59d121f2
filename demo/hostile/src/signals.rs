//! Signals: SIGINT from root is a marker (devprof never starts these processes, so root
//! has no reason to interrupt them: a recorder pidfile holding `-1` turns devprof's
//! `kill -INT "$(cat perf.pid)"` into a signal to every process), SIGUSR2 asks the main
//! process for a fresh dump, as jemalloc programs do.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// `sender pid + 1` of the last SIGINT sent by uid 0 (0: none since the last report).
static ROOT_SIGINT: AtomicU64 = AtomicU64::new(0);
/// A SIGUSR2 arrived: the main process writes a fresh dump.
pub static DUMP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let (pid, uid) = unsafe { ((*info).si_pid(), (*info).si_uid()) };
    match signal {
        libc::SIGUSR2 => DUMP_REQUESTED.store(true, Ordering::SeqCst),
        libc::SIGINT if uid == 0 => ROOT_SIGINT.store(pid as u64 + 1, Ordering::SeqCst),
        _ => {}
    }
}

/// SIGINT and SIGUSR2 caught (so they neither end the process nor go unnoticed).
pub fn install() {
    for signal in [libc::SIGINT, libc::SIGUSR2] {
        // SAFETY: a zeroed sigaction with a valid handler and SA_SIGINFO is well-formed.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The directory markers go to now: /markers/<name in /markers/current>.
pub fn marker_dir() -> PathBuf {
    let current = std::fs::read_to_string("/markers/current").unwrap_or_default();
    let name = current.trim();
    let dir = PathBuf::from("/markers").join(if name.is_empty() || name.contains('/') {
        "unattributed"
    } else {
        name
    });
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn command_line(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|_| "(gone)".into())
}

/// A thread that turns a root SIGINT into a marker file.
pub fn spawn_reporter() {
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_millis(100));
        let sender = ROOT_SIGINT.swap(0, Ordering::SeqCst);
        if sender == 0 {
            continue;
        }
        let sender = (sender - 1) as u32;
        let me = std::process::id();
        let text = format!(
            "process {me} ({}) received SIGINT from uid 0, sender pid {sender} ({}): root signalled a \
             process devprof did not start (a recorder pidfile holding -1 makes `kill -INT -1` signal every process)\n",
            command_line(me).escape_debug(),
            command_line(sender).escape_debug(),
        );
        let path = marker_dir().join(format!("signal-from-root.{me}.{sender}"));
        if let Ok(mut f) = std::fs::File::create(path) {
            let _ = f.write_all(text.as_bytes());
        }
    });
}
