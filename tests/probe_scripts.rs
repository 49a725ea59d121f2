//! The probe scripts, run for real by this host's sh against processes that lie: a
//! command line forged with newlines and tabs, an argv[0] naming /dev/zero or a FIFO. What
//! the scripts print, parsed by devprof, must hold no fact or perf binary the process
//! chose, and no script may read a file the process names. No Docker needed: the scripts
//! read /proc the same way here as in a container.

mod common;

use devprof::docker::probe::{probe_script, ContainerFacts, PERF_DIRS};
use devprof::docker::target::ProcInfo;
use devprof::runtime::facts::{process_script, script_argv0, ProcessFacts};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process started with `argv0` as its name, killed when dropped.
struct Liar(Child);

impl Liar {
    fn start(argv0: &str) -> Self {
        let child = Command::new("sleep")
            .arg0(argv0)
            .arg("1000")
            .spawn()
            .expect("sleep on this host");
        // Until exec is done, /proc shows the test's own command line.
        std::thread::sleep(Duration::from_millis(200));
        Liar(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd`, giving up after `limit`: None when it had not ended by then.
fn run_within(mut cmd: Command, limit: Duration) -> Option<String> {
    // A group of its own: what it started (a grep stuck on a FIFO) ends with it.
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("sh on this host");
    // Read as it comes: a full pipe would stop the script.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut text);
        text
    });
    let started = Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            let text = reader.join().unwrap();
            return Some(String::from_utf8_lossy(&text).into_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signals the process group this function made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    None
}

fn kernel_major_minor() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.trim().split('.');
    format!("{}.{}", parts.next().unwrap(), parts.next().unwrap())
}

#[test]
fn probe_newline_in_argv_cannot_add_a_perf_candidate() {
    // A perf the process planted, named for this kernel so that it would be preferred,
    // which leaves a marker when run.
    let plant = tempfile::tempdir().unwrap();
    let marker = plant.path().join("marker");
    let fake = plant.path().join(format!("perf_{}", kernel_major_minor()));
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ntouch '{}'\necho 'perf version 9.9'\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let forged = format!(
        "x\nperf\t{}\nparanoid\t-1\nsysctl_writable\t1\nkernel\tforged\nz",
        fake.display()
    );
    let liar = Liar::start(&forged);

    let mut sh = Command::new("sh");
    sh.args(["-c", &probe_script()]);
    let out = run_within(sh, Duration::from_secs(120)).expect("the probe ends");
    let facts = ContainerFacts::parse(&out).expect("the probe's output parses");

    let fake = fake.to_string_lossy().into_owned();
    assert!(
        !facts.perf_candidates.contains(&fake),
        "{:?}",
        facts.perf_candidates
    );
    for candidate in &facts.perf_candidates {
        assert!(
            PERF_DIRS
                .iter()
                .any(|d| candidate.starts_with(&format!("{d}/")))
                || candidate.starts_with("/usr/lib/linux-tools"),
            "{candidate}"
        );
    }
    let real_paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(facts.paranoid, Some(real_paranoid));
    assert_ne!(facts.kernel, "forged");
    // The liar is there, its name exact and shown on one line.
    let seen = facts
        .processes
        .iter()
        .find(|p| p.pid == liar.pid())
        .expect("the forged process is listed");
    assert_eq!(seen.argv, [forged.as_str(), "1000"]);
    assert!(!seen.cmdline.contains('\n') && !seen.cmdline.contains('\t'));
    assert!(!marker.exists(), "the planted perf ran");
}

/// The process script as a user who may not read the process's /proc/<pid>/exe (nobody,
/// for a process of root's), as root in a container without CAP_SYS_PTRACE is for a
/// process of another user.
fn process_script_without_ptrace_rights(liar: &Liar) -> Option<String> {
    let process = ProcInfo::new(
        liar.pid(),
        1,
        std::fs::read(format!("/proc/{}/cmdline", liar.pid()))
            .unwrap()
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    );
    let mut sh = Command::new("setpriv");
    sh.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "sh",
        "-c",
        &process_script(),
        "sh",
        &liar.pid().to_string(),
        script_argv0(&process),
    ]);
    run_within(sh, Duration::from_secs(20))
}

fn as_root(test: &str) -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root {
        common::not_run(
            test,
            "needs root (to run the script as a user without ptrace rights)",
        );
    }
    root
}

#[test]
#[ignore = "needs root"]
fn runtime_probe_never_reads_dev_zero_that_argv0_names() {
    if !as_root("runtime_probe_never_reads_dev_zero_that_argv0_names") {
        return;
    }
    let liar = Liar::start("/dev/zero");
    let out = process_script_without_ptrace_rights(&liar)
        .expect("the process script ends at once (the old one read /dev/zero for ever)");
    let facts = ProcessFacts::parse(&out);
    assert_eq!(facts.exe, "", "exe is unreadable here: {out}");
    assert_eq!(facts.program_path.as_deref(), Some("/dev/zero"));
    assert!(facts.go_unchecked && !facts.go_buildinfo, "{out}");
}

#[test]
#[ignore = "needs root"]
fn runtime_probe_never_opens_a_fifo_that_argv0_names() {
    if !as_root("runtime_probe_never_opens_a_fifo_that_argv0_names") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let liar = Liar::start(&fifo.to_string_lossy());
    let out = process_script_without_ptrace_rights(&liar)
        .expect("the process script ends at once (the old one waited on the FIFO for ever)");
    let facts = ProcessFacts::parse(&out);
    assert_eq!(
        facts.program_path.as_deref(),
        Some(&*fifo.to_string_lossy())
    );
}

/// The probe asked for perf ahead, as this host's sh runs it: each perf found answers its
/// version there, the workdir is made by mktemp (private, root's way), and a process whose
/// argv forges those records adds none of them.
#[test]
fn probe_asked_for_perf_ahead_answers_versions_and_a_workdir_no_argv_can_forge() {
    let forged =
        "x\nworkdir\t/tmp/devprof.forged\nperf_version\t/usr/bin/perf\tperf version 9.9\nz";
    let liar = Liar::start(forged);
    let mut sh = Command::new("sh");
    sh.args(["-c", &probe_script(), "sh", "perf"]);
    let out = run_within(sh, Duration::from_secs(120)).expect("the probe ends");
    let facts = ContainerFacts::parse(&out).expect("the probe's output parses");
    assert!(facts.processes.iter().any(|p| p.pid == liar.pid()));
    if facts.perf_candidates.is_empty() {
        // Where no perf was found nothing is made (and CI's host has one: setup installs it).
        assert!(std::env::var_os("CI").is_none(), "no perf found: {out}");
        assert_eq!(facts.perf_ahead, Default::default(), "{out}");
        return;
    }
    let workdir = facts
        .perf_ahead
        .workdir
        .clone()
        .expect("a workdir was made");
    let made = std::fs::metadata(&workdir);
    let _ = std::fs::remove_dir(&workdir);
    assert!(workdir.starts_with("/tmp/devprof.") && workdir != "/tmp/devprof.forged");
    assert!(made.expect("it exists").is_dir());
    assert!(!facts.perf_ahead.versions.is_empty(), "{out}");
    for (perf, answer) in &facts.perf_ahead.versions {
        assert!(facts.perf_candidates.contains(perf), "{perf}");
        assert!(answer.starts_with("perf version "), "{answer}");
        assert!(!answer.contains("9.9"), "{answer}");
    }
}
