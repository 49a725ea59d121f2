//! demo-hostile: the hostile service of the devprof test bed. It runs as a non-root user
//! and does on purpose what a process in a profiled container can do to the tool that
//! profiles it as root (issue 28): command lines that forge the probe's fact lines, an
//! environment with entries that are not `NAME=VALUE`, planted programs where devprof
//! might look for its tools, JIT perf maps and dump files that are links to /dev/zero or
//! FIFOs, argv[0] naming a device, and thread names that are not UTF-8.
//!
//! Every planted program leaves a marker in /markers/<current test>/ when it is run where
//! it must not be (`planted/mark.sh`); this process leaves one when root signals it
//! (`signals`). The tests (tests/hostile_container.rs) assert that there is none.
//!
//! Roles, chosen by `HOSTILE_ROLE` (the command lines stay free for forgeries):
//! - unset: plant the files, then become `main` with a hand-made environment (`execve`),
//! - `main`: the service's main process (the default target): burning threads with
//!   hostile names, jemalloc-style dumps on SIGUSR2, and the children below, kept alive,
//! - `idle`: a child that only exists for its forged command line,
//! - `java`: a JVM lookalike whose /tmp/perf-PID.map is a link to /dev/zero or a FIFO
//!   (`HOSTILE_MAP`), with ASYNC_PROFILER_HOME and JAVA_HOME in the user's directories,
//! - `escapes`: another mode altogether, for a container of its own (`escapes`): terminal
//!   control sequences in every text devprof shows a person; its processes take the roles
//!   `esc-go`, `esc-dumps`, `idle` and `java` (with `HOSTILE_MAP=none`: no map).

mod escapes;
mod plant;
mod signals;
mod work;

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

/// Where the planted programs and the FIFO live (the user's own, world-writable /tmp).
pub const PLANT_DIR: &str = "/tmp/p";
/// The JVM lookalike's installation (a copy of this binary named java, and its jcmd).
pub const JDK_HOME: &str = "/home/hostile/jdk";
/// The async-profiler "release" the lookalike's ASYNC_PROFILER_HOME names.
pub const ASPROF_HOME: &str = "/home/hostile/asprof";
/// The main process's jemalloc dump directory (MALLOC_CONF prof_prefix).
pub const DUMP_DIR: &str = "/tmp/dumps";

fn main() {
    signals::install();
    match std::env::var("HOSTILE_ROLE").as_deref() {
        Err(_) => boot(),
        Ok("main") => run_main(),
        Ok("idle") => work::idle(),
        Ok("java") => work::java(),
        Ok("escapes") => escapes::supervise(),
        Ok("esc-go") => escapes::go(),
        Ok("esc-dumps") => escapes::dumps(),
        Ok(other) => {
            eprintln!("hostile: unknown HOSTILE_ROLE {other}");
            std::process::exit(2);
        }
    }
}

/// `major.minor` of the running kernel: the planted perf is named `perf_<major.minor>`
/// so that devprof prefers it to any other perf.
fn kernel_major_minor() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty());
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => "6.1".to_string(),
    }
}

/// Plants the files, then replaces itself with the main role, whose environment is made
/// by hand: entries without `=` and entries that are `env` options come first, where
/// `env -i <environment> CMD` reads them as its command or its options.
fn boot() {
    let mm = kernel_major_minor();
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/usr/local/bin/hostile"));
    if let Err(e) = plant::everything(&mm, &exe) {
        eprintln!("hostile: planting failed: {e}");
        std::process::exit(1);
    }
    let environment = [
        format!("-S{PLANT_DIR}/env-dash"),
        format!("{PLANT_DIR}/env-noeq"),
        "--chdir=/".to_string(),
        format!("PATH={PLANT_DIR}:/usr/local/bin:/usr/bin:/bin"),
        "HOME=/home/hostile".to_string(),
        format!(
            "MALLOC_CONF=prof:true,prof_active:true,prof_accum:true,lg_prof_sample:17,lg_prof_interval:-1,prof_prefix:{DUMP_DIR}/jeprof"
        ),
        "HOSTILE_ROLE=main".to_string(),
        format!("HOSTILE_KERNEL_MM={mm}"),
    ];
    let path = CString::new(exe.as_os_str().as_bytes()).expect("no NUL in a path");
    let argv = [path.clone()];
    let envp: Vec<CString> = environment
        .iter()
        .map(|e| CString::new(e.as_str()).expect("no NUL"))
        .collect();
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    // SAFETY: both arrays are NUL-terminated arrays of valid C strings that outlive the call.
    unsafe { libc::execve(path.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    eprintln!(
        "hostile: execve failed: {}",
        std::io::Error::last_os_error()
    );
    std::process::exit(1);
}

/// One child kept alive by the main process.
struct Spec {
    program: PathBuf,
    /// The whole command line, argv[0] included (forged where that is the point).
    argv: Vec<OsString>,
    env: Vec<(&'static str, String)>,
}

impl Spec {
    fn idle(argv: &[&str]) -> Spec {
        Spec {
            program: std::env::current_exe().unwrap_or_else(|_| "/usr/local/bin/hostile".into()),
            argv: argv.iter().map(OsString::from).collect(),
            env: vec![("HOSTILE_ROLE", "idle".into())],
        }
    }

    fn java(map: &str) -> Spec {
        let java = format!("{JDK_HOME}/bin/java");
        Spec {
            program: PathBuf::from(&java),
            argv: [
                java.as_str(),
                "-XX:+PreserveFramePointer",
                &format!("-Dhostile.map={map}"),
                "-cp",
                "/home/hostile",
                "Hostile",
            ]
            .iter()
            .map(OsString::from)
            .collect(),
            env: vec![
                ("HOSTILE_ROLE", "java".into()),
                ("HOSTILE_MAP", map.into()),
                ("JAVA_HOME", JDK_HOME.into()),
                ("ASYNC_PROFILER_HOME", ASPROF_HOME.into()),
                ("PATH", "/usr/bin:/bin".into()),
            ],
        }
    }

    fn spawn(&self) -> std::io::Result<Child> {
        let mut cmd = Command::new(&self.program);
        cmd.arg0(&self.argv[0]).args(&self.argv[1..]).env_clear();
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.spawn()
    }
}

/// The children: forged command lines for the probe, argv[0] naming a device and a FIFO,
/// and the two JVM lookalikes.
fn children(mm: &str) -> Vec<Spec> {
    vec![
        // A line of its own in the probe's output: `perf<TAB>/tmp/p/perf_X.Y`.
        Spec::idle(&[&format!("x\nperf\t{PLANT_DIR}/perf_{mm}\nz")]),
        // The same through the target's root, as a sidecar sharing its pids sees it.
        Spec::idle(&[&format!("x\nperf\t/proc/1/root{PLANT_DIR}/perf_{mm}\nz")]),
        // Every other fact key the probe reports, each with a value that opens a door.
        Spec::idle(&[&format!(
            "y\nparanoid\t-1\nkptr_restrict\t0\ncap_eff\t000001ffffffffff\nseccomp\t0\nsysctl_writable\t1\nkernel\t{mm}.99-forged\nz"
        )]),
        Spec::idle(&["/dev/zero", "hostile-argv0-zero"]),
        Spec::idle(&[&format!("{PLANT_DIR}/fifo"), "hostile-argv0-fifo"]),
        Spec::java("dev-zero"),
        Spec::java("fifo"),
    ]
}

fn run_main() {
    let mm = std::env::var("HOSTILE_KERNEL_MM").unwrap_or_else(|_| kernel_major_minor());
    if let Err(e) = plant::dumps(Path::new(DUMP_DIR), std::process::id()) {
        eprintln!("hostile: dump files: {e}");
    }
    signals::spawn_reporter();
    work::spawn_burners();
    work::spawn_dumper();
    let specs = children(&mm);
    let mut running: Vec<Option<Child>> = specs.iter().map(|s| s.spawn().ok()).collect();
    println!("hostile: running, pid {}", std::process::id());
    // A child that ends (the fake asprof ends its JVM) is started again.
    keep_running(&specs, &mut running, |s| s.spawn())
}

/// Starts again, every half second, each child of `specs` that ended; never returns.
fn keep_running<S>(
    specs: &[S],
    running: &mut [Option<Child>],
    spawn: impl Fn(&S) -> std::io::Result<Child>,
) -> ! {
    loop {
        std::thread::sleep(Duration::from_millis(500));
        for (spec, slot) in specs.iter().zip(running.iter_mut()) {
            let ended = match slot {
                Some(child) => !matches!(child.try_wait(), Ok(None)),
                None => true,
            };
            if ended {
                *slot = spawn(spec).ok();
            }
        }
    }
}
