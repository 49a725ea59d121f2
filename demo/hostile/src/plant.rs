//! The files the hostile user plants: programs where devprof might run them, a FIFO for
//! argv[0], a JVM lookalike's installation, and dump files with hostile names and types.

use crate::{ASPROF_HOME, JDK_HOME, PLANT_DIR};
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

const MARK: &str = include_str!("../planted/mark.sh");
const PERF: &str = include_str!("../planted/perf.sh");
const ENV_ENTRY: &str = include_str!("../planted/env-entry.sh");
const SHIM: &str = include_str!("../planted/shim.sh");
const ASPROF: &str = include_str!("../planted/asprof.sh");
const JCMD: &str = include_str!("../planted/jcmd.sh");

/// Programs looked up on the main process's PATH (/tmp/p first) by a root that takes the
/// target's environment for its own.
const SHIMS: &[&str] = &["sh", "env", "setpriv", "xargs", "cat", "date", "tail"];

/// A planted shell script: the marker function, then its body.
fn script(path: &Path, body: &str) -> io::Result<()> {
    let _ = fs::remove_file(path);
    fs::write(path, format!("{MARK}\n{body}"))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
}

fn fresh_dir(dir: &Path) -> io::Result<()> {
    if fs::symlink_metadata(dir).is_ok() {
        fs::remove_dir_all(dir)?;
    }
    fs::create_dir_all(dir)
}

pub fn mkfifo(path: &Path) -> io::Result<()> {
    let _ = fs::remove_file(path);
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a valid C string.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o666) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Everything but the dumps (those name the main process's pid).
pub fn everything(kernel_mm: &str, exe: &Path) -> io::Result<()> {
    let plant = Path::new(PLANT_DIR);
    fresh_dir(plant)?;
    fs::set_permissions(plant, fs::Permissions::from_mode(0o755))?;
    script(&plant.join(format!("perf_{kernel_mm}")), PERF)?;
    script(&plant.join("env-dash"), ENV_ENTRY)?;
    script(&plant.join("env-noeq"), ENV_ENTRY)?;
    for name in SHIMS {
        script(&plant.join(name), SHIM)?;
    }
    mkfifo(&plant.join("fifo"))?;

    let asprof = Path::new(ASPROF_HOME);
    fresh_dir(&asprof.join("bin"))?;
    fresh_dir(&asprof.join("lib"))?;
    script(&asprof.join("bin/asprof"), ASPROF)?;
    fs::write(
        asprof.join("lib/libasyncProfiler.so"),
        b"not a library: planted by demo-hostile\n",
    )?;

    let jdk_bin = Path::new(JDK_HOME).join("bin");
    fresh_dir(&jdk_bin)?;
    fs::copy(exe, jdk_bin.join("java"))?;
    fs::set_permissions(jdk_bin.join("java"), fs::Permissions::from_mode(0o755))?;
    script(&jdk_bin.join("jcmd"), JCMD)?;
    Ok(())
}

/// jemalloc-style dumps of process `pid` (prof_prefix `<dir>/jeprof`), each hostile in
/// one way; the fresh ones written on SIGUSR2 are `work::write_fresh_dump`'s.
pub fn dumps(dir: &Path, pid: u32) -> io::Result<()> {
    fresh_dir(dir)?;
    let small = b"heap_v2/524288\n  t*: 0: 0 [0: 0]\n\nMAPPED_LIBRARIES:\n";
    // An empty kind field: `<pid>.<seq>.<kind>` with nothing after the last dot.
    fs::write(dir.join("jeprof.1.2..heap"), small)?;
    // A link to a device, named like a dump of this process.
    symlink("/dev/zero", dir.join(format!("jeprof.{pid}.6.m6.heap")))?;
    // A FIFO named like a dump; nothing ever writes to it.
    mkfifo(&dir.join(format!("jeprof.{pid}.4.m4.heap")))?;
    // A name with newlines that forges a listing line naming the FIFO above.
    fs::write(
        dir.join(format!(
            "jeprof.x\ndump\tjeprof.{pid}.4.m4.heap\t64\t4102444800\nx.heap"
        )),
        small,
    )?;
    // A name with tabs that forges the fields of its own listing line: a dump of this
    // process, newest of all, that is the link to /dev/zero.
    symlink("/dev/zero", dir.join(format!("jeprof.{pid}.12.m12.heap")))?;
    fs::write(
        dir.join(format!("jeprof.{pid}.12.m12.heap\t1\t4102531200\tx.heap")),
        small,
    )?;
    // A sparse 8 GiB file named like a dump of this process, dated 2099 so that it stays
    // the newest regular one.
    let huge = fs::File::create(dir.join(format!("jeprof.{pid}.7.m7.heap")))?;
    huge.set_len(8 << 30)?;
    huge.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(4_070_908_800))?;
    Ok(())
}
