//! Every command against the hostile service (`demo-hostile` in compose/demo.yml, the
//! program in demo/hostile; issue 28): a non-root user whose processes forge the probe's
//! fact lines in their command lines, whose environment has entries that are no
//! `NAME=VALUE`, who plants programs where devprof might look for its tools, whose perf
//! maps and dumps are links to /dev/zero or FIFOs, and whose threads have names that are
//! not UTF-8.
//!
//! Each test asserts what issue 28 asks of every command: no panic; the command ends
//! within its window + 30 s (hostile input is refused by its type or size, never waited
//! out); a clear message when it fails; and, above all, no marker: every planted program
//! writes one into the container's /markers/<test>/ when root or a sidecar runs it, and
//! every hostile process writes one when root sends it SIGINT. The tests take turns (they
//! share one target, and the marker directory is named in /markers/current).
//!
//! Run: `CI=true cargo test --test hostile_container -- --include-ignored`.

mod common;
mod hostile;

use common::*;
use hostile::*;
use std::time::{Duration, Instant};

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_exec_runs_no_planted_perf() {
    against_hostile(
        "cpu_exec_runs_no_planted_perf",
        PlantedPerf::Wrap,
        &["cpu", HOSTILE, "3", "--mode", "exec"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_sidecar_runs_no_planted_perf_through_proc_root() {
    against_hostile(
        "cpu_sidecar_runs_no_planted_perf_through_proc_root",
        PlantedPerf::Wrap,
        &["cpu", HOSTILE, "3", "--mode", "sidecar"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_sidecar_planted_perf_saying_denied_climbs_no_ladder() {
    against_hostile(
        "cpu_sidecar_planted_perf_saying_denied_climbs_no_ladder",
        PlantedPerf::Deny,
        &["cpu", HOSTILE, "3", "--mode", "sidecar"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_allow_sysctl_takes_no_forged_paranoid_value() {
    // A forged process line says paranoid -1: devprof must neither report it as the
    // host's value nor "restore" the host to it.
    let real = host_paranoid();
    against_hostile(
        "cpu_allow_sysctl_takes_no_forged_paranoid_value",
        PlantedPerf::Deny,
        &["cpu", HOSTILE, "3", "--mode", "exec", "--allow-sysctl"],
        &[],
        3,
        |run| {
            let mut expect = Expect {
                sysctls_kept: true,
                ..Expect::default()
            };
            if real != "-1" {
                for forged in ["perf_event_paranoid=-1", "perf_event_paranoid (-1"] {
                    if run.stderr.contains(forged) {
                        expect.failures.push(format!(
                            "took the forged paranoid value for the host's ({forged}; the host's is {real})"
                        ));
                    }
                }
            }
            expect
        },
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_jvm_lookalike_runs_no_asprof_from_its_environment() {
    // Engine auto: a JVM gets async-profiler, which ASYNC_PROFILER_HOME names in the
    // user's own directory; run as the recorder, it plants -1 in the recorder pidfile.
    against_hostile(
        "cpu_jvm_lookalike_runs_no_asprof_from_its_environment",
        PlantedPerf::Wrap,
        &["cpu", HOSTILE, "3", "--process", "hostile.map=dev-zero"],
        &[],
        3,
        nothing_more,
    );
}

/// perf on the JVM lookalike whose /tmp/perf-PID.map is `which` (a link to /dev/zero, or
/// a FIFO), from `mode`. Its "JIT" code makes perf look frames up in that map; from a
/// sidecar devprof also copies the map to where the sidecar's perf looks.
fn perf_map_capture(test: &str, mode: &str, which: &str) {
    let Some(bed) = Bed::open(test, PlantedPerf::Wrap) else {
        return;
    };
    let watch = CopyWatch::start(&bed.id);
    let oom_before = oom_kills(HOSTILE);
    let process = format!("hostile.map={which}");
    let run = bed.devprof(
        &[
            "cpu",
            HOSTILE,
            "3",
            "--mode",
            mode,
            "--engine",
            "perf",
            "--process",
            &process,
        ],
        &[],
        secs(3),
    );
    let mut failures = watch.finish();
    failures.extend(oom_failure(
        HOSTILE,
        oom_before,
        "something read the perf map to its end",
    ));
    bed.judge(
        &run,
        Expect {
            failures,
            ..Expect::default()
        },
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_linked_to_dev_zero_is_not_copied_from_the_sidecar() {
    perf_map_capture(
        "jit_perf_map_linked_to_dev_zero_is_not_copied_from_the_sidecar",
        "sidecar",
        "dev-zero",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_fifo_does_not_hang_the_sidecar_copy() {
    perf_map_capture(
        "jit_perf_map_fifo_does_not_hang_the_sidecar_copy",
        "sidecar",
        "fifo",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_linked_to_dev_zero_is_not_read_in_exec_mode() {
    perf_map_capture(
        "jit_perf_map_linked_to_dev_zero_is_not_read_in_exec_mode",
        "exec",
        "dev-zero",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn jit_perf_map_fifo_does_not_hang_perf_in_exec_mode() {
    perf_map_capture(
        "jit_perf_map_fifo_does_not_hang_perf_in_exec_mode",
        "exec",
        "fifo",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn offcpu_full_reads_hostile_thread_names() {
    against_hostile(
        "offcpu_full_reads_hostile_thread_names",
        PlantedPerf::Wrap,
        &["offcpu", HOSTILE, "3", "--config", "default", "--full"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn offcpu_fast_reads_hostile_thread_names() {
    against_hostile(
        "offcpu_fast_reads_hostile_thread_names",
        PlantedPerf::Wrap,
        &[
            "offcpu",
            HOSTILE,
            "3",
            "--config",
            "contextswitches",
            "--fast",
        ],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn heap_window_with_odd_dump_names() {
    against_hostile(
        "heap_window_with_odd_dump_names",
        PlantedPerf::Wrap,
        &["heap", HOSTILE, "3"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn heap_latest_refuses_a_newest_dump_that_is_a_link_or_oversized() {
    against_hostile(
        "heap_latest_refuses_a_newest_dump_that_is_a_link_or_oversized",
        PlantedPerf::Wrap,
        &["heap", HOSTILE, "--latest"],
        &[],
        0,
        must_refuse,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn heap_all_reads_no_oversized_dump() {
    against_hostile(
        "heap_all_reads_no_oversized_dump",
        PlantedPerf::Wrap,
        &["heap", HOSTILE, "--all-dumps"],
        &[],
        0,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_runs_no_planted_perf() {
    against_hostile(
        "stat_runs_no_planted_perf",
        PlantedPerf::Wrap,
        &["stat", HOSTILE, "3"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn stat_command_runs_no_environment_entry_as_root() {
    against_hostile(
        "stat_command_runs_no_environment_entry_as_root",
        PlantedPerf::Wrap,
        &["stat", HOSTILE, "--repeat", "1", "--", "sleep", "0.2"],
        &[],
        1,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn cpu_command_runs_no_environment_entry_as_root() {
    against_hostile(
        "cpu_command_runs_no_environment_entry_as_root",
        PlantedPerf::Wrap,
        &["cpu", HOSTILE, "--", "sleep", "1"],
        &[],
        1,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn doctor_runs_no_planted_perf_and_trusts_no_forged_fact() {
    // Forged process lines say kernel `<major.minor>.99-forged` and paranoid -1: as facts
    // they must never show.
    let real = host_paranoid();
    against_hostile(
        "doctor_runs_no_planted_perf_and_trusts_no_forged_fact",
        PlantedPerf::Wrap,
        &["doctor", HOSTILE],
        &[],
        0,
        |run| {
            let mut expect = Expect::default();
            for line in run.stdout.lines().chain(run.stderr.lines()) {
                let forged_kernel =
                    line.to_ascii_lowercase().contains("kernel") && line.contains(".99-forged");
                let forged_paranoid = real != "-1"
                    && line.contains("perf_event_paranoid")
                    && line
                        .split_whitespace()
                        .any(|w| w.trim_end_matches(':') == "-1");
                if forged_kernel || forged_paranoid {
                    expect
                        .failures
                        .push(format!("reports a forged fact: {}", line.trim()));
                }
            }
            expect
        },
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn profile_cpu_offcpu_heap_on_the_hostile_service() {
    against_hostile(
        "profile_cpu_offcpu_heap_on_the_hostile_service",
        PlantedPerf::Wrap,
        &["profile", HOSTILE, "3", "--kinds", "cpu,offcpu,heap"],
        &[],
        3,
        nothing_more,
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn profile_two_kinds_from_sidecars_on_the_hostile_service() {
    // Each kind gets a sidecar of its own: the second is not refused at every tier.
    against_hostile(
        "profile_two_kinds_from_sidecars_on_the_hostile_service",
        PlantedPerf::Wrap,
        &["profile", HOSTILE, "3", "--kinds", "cpu,offcpu"],
        &[("DEVPROF_MODE", "sidecar")],
        3,
        |run| {
            let mut expect = Expect::default();
            let output = format!("{}\n{}", run.stdout, run.stderr);
            if let Some(line) = output
                .lines()
                .find(|l| l.contains("could not record from a sidecar"))
            {
                expect.failures.push(format!(
                    "a kind found no sidecar to record from: {}",
                    line.trim()
                ));
            }
            expect
        },
    );
}

/// A hostile container without CAP_SYS_PTRACE, where root in the container cannot read
/// another user's /proc/PID/exe, so the runtime probe falls back to the path argv[0]
/// names. Memory-limited: a read of /dev/zero ends in the container's OOM killer, which
/// the test reads (memory.events) instead of the host running out.
fn argv0_without_ptrace(test: &str, needle: &str) {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !devnet_ready(test) {
        return;
    }
    let name = unique("devprof-hostile-noptrace");
    let _guard = run_container(
        &name,
        &["--init", "--memory", "128m", "--memory-swap", "128m"],
        &hostile_image(),
        &[],
    );
    let started = Instant::now();
    while pid_of(&name, needle).is_none() {
        assert!(
            started.elapsed() < secs(30),
            "{name}: no process '{needle}' after 30 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let bed = Bed::on(turn, &name, test, PlantedPerf::Wrap);
    let before = oom_kills(&name);
    let run = bed.devprof(
        &["cpu", &name, "3", "--mode", "exec", "--process", needle],
        &[],
        secs(3),
    );
    let expect = Expect {
        failures: oom_failure(&name, before, "something read the device argv[0] names")
            .into_iter()
            .collect(),
        ..Expect::default()
    };
    bed.judge(&run, expect);
}

#[test]
#[ignore = "needs the demo devnet"]
fn runtime_probe_reads_no_dev_zero_named_by_argv0() {
    argv0_without_ptrace(
        "runtime_probe_reads_no_dev_zero_named_by_argv0",
        "hostile-argv0-zero",
    );
}

#[test]
#[ignore = "needs the demo devnet"]
fn runtime_probe_opens_no_fifo_named_by_argv0() {
    argv0_without_ptrace(
        "runtime_probe_opens_no_fifo_named_by_argv0",
        "hostile-argv0-fifo",
    );
}
