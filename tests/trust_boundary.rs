//! What a process in a profiled container says is data, never structure, and nothing it
//! names is run as root: end to end with the real `devprof` and throw-away containers from
//! the demo images, each with a process that lies on purpose (a command line forged with
//! newlines and tabs, an environment with entries that are no assignments, an
//! ASYNC_PROFILER_HOME of its own, a perf map that links to /dev/zero). The programs it
//! plants leave a marker when run; every test asserts there is none.

mod common;

use common::*;
use predicates::prelude::*;
use std::time::{Duration, Instant};

fn jvm_image() -> String {
    std::env::var("DEVPROF_DEMO_JVM_IMAGE").unwrap_or_else(|_| "devprof-demo-jvm:latest".into())
}

fn py_image() -> String {
    std::env::var("DEVPROF_DEMO_PY_IMAGE").unwrap_or_else(|_| "devprof-demo-py:latest".into())
}

/// This kernel's `major.minor`, the suffix a planted perf takes to be preferred.
fn kernel_major_minor() -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release.trim().split('.');
    format!("{}.{}", parts.next().unwrap(), parts.next().unwrap())
}

/// The markers planted programs left in `dir` of `container` (`ran-by-<uid>` files).
fn markers(container: &str, dir: &str) -> String {
    docker_ok(&[
        "exec",
        container,
        "sh",
        "-c",
        &format!("ls {dir} 2>/dev/null | grep ran-by || true"),
    ])
}

#[test]
#[ignore = "needs the demo devnet"]
fn probe_newline_in_argv_adds_no_perf_that_doctor_or_cpu_runs() {
    let test = "probe_newline_in_argv_adds_no_perf_that_doctor_or_cpu_runs";
    if !devnet_ready(test) {
        return;
    }
    // An unprivileged process whose name forges perf records: the plain path and the one a
    // sidecar would see through /proc/1/root. The planted perf is named for this kernel.
    let perf = format!("/tmp/p/perf_{}", kernel_major_minor());
    let setup = format!(
        r#"mkdir -p /tmp/p
printf '#!/bin/sh\ntouch /tmp/p/ran-by-$(id -u)\necho "perf version 9.9.9"\n' > {perf}
chmod 755 {perf}; chown -R 65534:65534 /tmp/p
setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'exec -a "$(printf "x\nperf\t{perf}\nperf\t/proc/1/root{perf}\nparanoid\t-1\nz")" sleep 1000' &
exec "$DEVPROF_BINARY""#
    );
    let name = unique("devprof-test-forged-argv");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["-e", "DEMO_WORKLOADS=hash_chain"]);
    let c = run_container(&name, &args, &demo_image(), &["sh", "-c", &setup]);
    wait_for_cpu(&name, "demo-node", 0.5);
    let cwd = workdir();

    let doctor = devprof(cwd.path())
        .args(["doctor", &c.0])
        .assert()
        .get_output()
        .clone();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("/usr/bin/perf"), "{report}");
    assert!(!report.contains("/tmp/p"), "{report}");
    for mode in ["exec", "sidecar"] {
        devprof(cwd.path())
            .args(["cpu", &c.0, "2", "--mode", mode, "--pid", "1"])
            .assert()
            .success()
            .stderr(predicate::str::contains("/tmp/p").not());
    }
    assert_eq!(markers(&c.0, "/tmp/p"), "", "the planted perf ran");
}

#[test]
#[ignore = "needs the demo devnet"]
fn command_env_entry_without_equals_is_never_run_as_root() {
    let test = "command_env_entry_without_equals_is_never_run_as_root";
    if !devnet_ready(test) {
        return;
    }
    // pid 1 runs as nobody with an environment execve was handed raw: entries without
    // `=`, one that is an option of env, one that makes env split a string.
    let setup = r#"printf '#!/bin/sh\ntouch /tmp/ran-by-$(id -u)\n' > /tmp/evil; chmod 755 /tmp/evil
cat > /tmp/liar.py <<'PY'
import ctypes
libc = ctypes.CDLL(None)
def arr(xs):
    return (ctypes.c_char_p * (len(xs) + 1))(*xs, None)
env = [b"PATH=/usr/local/bin:/usr/bin:/bin", b"/tmp/evil", b"-S/tmp/evil", b"--split-string=/tmp/evil", b"HOME=/tmp"]
libc.execve(b"/bin/sleep", arr([b"sleep", b"1000"]), arr(env))
PY
exec setpriv --reuid=65534 --regid=65534 --clear-groups python3 /tmp/liar.py"#;
    let name = unique("devprof-test-env");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend(["-u", "0", "--workdir", "/tmp"]);
    let c = run_container(&name, &args, &py_image(), &["sh", "-c", setup]);
    // pid 1 is the sleep that python execs into.
    wait_for_cpu(&name, "sleep", 0.0);
    let cwd = workdir();
    let out = devprof(cwd.path())
        .args([
            "stat",
            &c.0,
            "--repeat",
            "1",
            "-e",
            "task-clock",
            "--json",
            "--",
            "sh",
            "-c",
            "echo \"$(id -u) $PATH\" > /tmp/command-ran",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["stat"]["runs"][0]["exit_status"], 0, "{}", j["stat"]);
    assert_eq!(markers(&c.0, "/tmp"), "", "an environment entry was run");
    // The command ran as the process's user, with the process's PATH.
    assert_eq!(
        docker_ok(&["exec", &c.0, "cat", "/tmp/command-ran"]),
        "65534 /usr/local/bin:/usr/bin:/bin"
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn asprof_home_in_the_jvms_environment_is_never_run_and_is_named_with_the_fix() {
    let test = "asprof_home_in_the_jvms_environment_is_never_run_and_is_named_with_the_fix";
    if !devnet_ready(test) {
        return;
    }
    // The JVM's user made its own "async-profiler" and named it in the JVM's environment
    // only (the container's environment does not have it).
    let setup = r#"mkdir -p /tmp/ap/bin /tmp/ap/lib
printf '#!/bin/sh\ntouch /tmp/ap/ran-by-$(id -u)\necho "Async-profiler 9.9"\n' > /tmp/ap/bin/asprof
chmod 755 /tmp/ap/bin/asprof; : > /tmp/ap/lib/libasyncProfiler.so; chown -R 1000:1000 /tmp/ap
cd /home/app
exec setpriv --reuid=1000 --regid=1000 --init-groups env ASYNC_PROFILER_HOME=/tmp/ap java -Xmx64m -XX:+UseSerialGC -cp /app DemoJvm"#;
    let name = unique("devprof-test-asprof-home");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend([
        "-u",
        "0",
        "--init",
        "-e",
        "JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer",
        "-e",
        "DEMO_JVM_HASH_DUTY=30",
    ]);
    let c = run_container(&name, &args, &jvm_image(), &["sh", "-c", setup]);
    wait_for_cpu(&name, "java", 2.0);
    let cwd = workdir();
    devprof(cwd.path())
        .args(["cpu", &c.0, "3"])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("ASYNC_PROFILER_HOME")
                .and(predicate::str::contains("/tmp/ap"))
                .and(predicate::str::contains("it uses /opt/async-profiler"))
                .and(predicate::str::contains("--asprof DIR")),
        );
    let stem = only_capture(cwd.path(), &c.0, "perf-");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(with_ext(&stem, "json")).unwrap()).unwrap();
    assert_eq!(manifest["engine"], "asprof", "{manifest}");
    let doctor = devprof(cwd.path())
        .args(["doctor", &c.0])
        .assert()
        .get_output()
        .clone();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("found at /opt/async-profiler") && report.contains("/tmp/ap"),
        "{report}"
    );
    assert_eq!(markers(&c.0, "/tmp/ap"), "", "the JVM's asprof ran");
}

/// A JVM whose user linked its perf map to /dev/zero, recorded by perf in `mode`: the
/// map is refused (perf and the sidecar copy would follow it) and the capture stands.
fn jit_link_capture(test: &str, mode: &str) {
    if !devnet_ready(test) {
        return;
    }
    let name = unique("devprof-test-jit-link");
    let mut args: Vec<&str> = PROFILING_RIGHTS.to_vec();
    args.extend([
        "--init",
        "-e",
        "JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer",
        "-e",
        "DEMO_JVM_HASH_DUTY=30",
    ]);
    let c = run_container(&name, &args, &jvm_image(), &[]);
    wait_for_cpu(&name, "java", 2.0);
    let pid = docker_ok(&["exec", &c.0, "pgrep", "-o", "java"]);
    // The JVM's own user may do this to its map at any time.
    docker_ok(&[
        "exec",
        "-u",
        "1000",
        &c.0,
        "ln",
        "-sf",
        "/dev/zero",
        &format!("/tmp/perf-{pid}.map"),
    ]);
    let cwd = workdir();
    let window = 3;
    let started = Instant::now();
    devprof(cwd.path())
        .args([
            "cpu",
            &c.0,
            &window.to_string(),
            "--engine",
            "perf",
            "--mode",
            mode,
        ])
        .assert()
        .success()
        .stderr(
            predicate::str::contains(format!("/tmp/perf-{pid}.map is a symbolic link"))
                .and(predicate::str::contains("JIT frames stay unnamed")),
        );
    // A map that was read hangs the capture until devprof's own limits (minutes); the
    // bound leaves room for a loaded machine.
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(window + 90),
        "took {took:?}: the map was read, not refused"
    );
    let stem = only_capture(cwd.path(), &c.0, "perf-");
    assert!(with_ext(&stem, "svg").is_file());
    // perf script never ran over it: devprof folded the recording itself.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(with_ext(&stem, "json")).unwrap()).unwrap();
    assert_eq!(manifest["fold_path"], "native", "{manifest}");
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_linked_to_dev_zero_is_refused_in_a_sidecar() {
    jit_link_capture(
        "jit_perf_map_linked_to_dev_zero_is_refused_in_a_sidecar",
        "sidecar",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_linked_to_dev_zero_is_refused_in_exec_mode() {
    jit_link_capture(
        "jit_perf_map_linked_to_dev_zero_is_refused_in_exec_mode",
        "exec",
    );
}
