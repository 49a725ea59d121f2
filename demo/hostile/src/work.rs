//! What the processes do: threads with hostile names that burn a little CPU in a named
//! function and sleep (so cpu and offcpu captures have samples and switches), fresh dumps
//! on request, and the children's roles.

use crate::signals;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Thread names as raw bytes (the kernel keeps 15): invalid UTF-8, non-ASCII spaces, a
/// multi-byte character the kernel cuts in half, a tab and a newline, and a name shaped
/// like the columns of a `perf script` line.
const THREAD_NAMES: &[&[u8]] = &[
    b"bad\xff\xfeutf8",
    "nb\u{a0}sp\u{2003}x".as_bytes(),
    "\u{3000}ideo\u{3000}".as_bytes(),
    "cut-multibyte\u{2003}".as_bytes(),
    b"tab\tnl\nx",
    b"x 9/9 [0] 1.0:",
];

/// CPU each burning thread uses: this long in every period.
const BURN: Duration = Duration::from_micros(500);
const PERIOD: Duration = Duration::from_millis(25);

/// Names the calling thread with raw bytes (no UTF-8 check on this path).
fn set_thread_name(name: &[u8]) {
    let mut buf = [0u8; 16];
    let n = name.len().min(15);
    buf[..n].copy_from_slice(&name[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, buf.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// The hot function every capture should find.
#[inline(never)]
pub fn hostile_burn(until: Instant) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while Instant::now() < until {
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    std::hint::black_box(x)
}

fn burn_forever() -> ! {
    loop {
        hostile_burn(Instant::now() + BURN);
        std::thread::sleep(PERIOD - BURN);
    }
}

pub fn spawn_burners() {
    for name in THREAD_NAMES {
        std::thread::spawn(move || {
            set_thread_name(name);
            burn_forever()
        });
    }
}

/// An allocation site named in the fresh dumps' stacks.
#[inline(never)]
pub fn hostile_alloc_site() -> usize {
    std::hint::black_box(hostile_alloc_site as *const () as usize)
}

/// A jemalloc heap_v2 dump of a made-up 2 MiB allocation at `hostile_alloc_site`, with
/// this process's maps, written whole under its final name.
fn write_fresh_dump(dir: &Path, pid: u32, seq: u64) -> std::io::Result<()> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let site = hostile_alloc_site() + 16;
    let caller = burn_forever as *const () as usize + 16;
    let text = format!(
        "heap_v2/131072\n  t*: 2: 2097152 [2: 2097152]\n  t0: 2: 2097152 [2: 2097152]\n\
         @ 0x{site:x} 0x{caller:x}\n  t*: 2: 2097152 [2: 2097152]\n  t0: 2: 2097152 [2: 2097152]\n\n\
         MAPPED_LIBRARIES:\n{maps}"
    );
    let tmp = dir.join(format!(".fresh.{seq}.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, dir.join(format!("jeprof.{pid}.{seq}.m{seq}.heap")))
}

/// Writes a fresh dump for each SIGUSR2.
pub fn spawn_dumper() {
    std::thread::spawn(|| {
        let pid = std::process::id();
        let mut seq = 100;
        loop {
            std::thread::sleep(Duration::from_millis(50));
            if signals::DUMP_REQUESTED.swap(false, Ordering::SeqCst) {
                let _ = write_fresh_dump(Path::new(crate::DUMP_DIR), pid, seq);
                seq += 1;
            }
        }
    });
}

/// A child that only exists for its command line.
pub fn idle() -> ! {
    signals::spawn_reporter();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Code in an anonymous executable mapping, as a JIT makes it: perf names such frames
/// from /tmp/perf-PID.map, so a capture of the lookalike makes perf read its map. x86-64:
/// `mov ecx, edi; dec ecx; jnz .-2; ret` (spins `edi` times, `edi` > 0).
#[cfg(target_arch = "x86_64")]
fn jit_code() -> Option<extern "C" fn(u32)> {
    const SPIN: [u8; 7] = [0x89, 0xf9, 0xff, 0xc9, 0x75, 0xfc, 0xc3];
    // SAFETY: a fresh private anonymous mapping, written before it is ever called; the
    // bytes are a complete function of the C ABI taking one u32.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if page == libc::MAP_FAILED {
            return None;
        }
        std::ptr::copy_nonoverlapping(SPIN.as_ptr(), page as *mut u8, SPIN.len());
        Some(std::mem::transmute::<*mut libc::c_void, extern "C" fn(u32)>(page))
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn jit_code() -> Option<extern "C" fn(u32)> {
    None
}

/// The JVM lookalike: its perf map is a link to /dev/zero or a FIFO (or none, with
/// `HOSTILE_MAP=none`), made as soon as it
/// knows its pid; it burns a little, in a named function and in "JIT" code, so that a
/// capture of it has samples and perf looks its JIT frames up in the map.
pub fn java() -> ! {
    signals::spawn_reporter();
    let map = format!("/tmp/perf-{}.map", std::process::id());
    let _ = std::fs::remove_file(&map);
    let made = match std::env::var("HOSTILE_MAP").as_deref() {
        Ok("fifo") => crate::plant::mkfifo(Path::new(&map)),
        // The escapes mode's lookalike: no map at all.
        Ok("none") => Ok(()),
        _ => std::os::unix::fs::symlink("/dev/zero", &map),
    };
    if let Err(e) = made {
        eprintln!("hostile java: {map}: {e}");
    }
    std::thread::spawn(|| {
        let jit = jit_code();
        loop {
            hostile_burn(Instant::now() + BURN / 2);
            if let Some(spin) = jit {
                spin(500_000);
            }
            std::thread::sleep(PERIOD - BURN);
        }
    });
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
