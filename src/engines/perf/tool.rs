//! Finding a perf that runs in the container: versioned `perf_X.Y` binaries matched to the
//! kernel, the version it reports, and whether it was built with zstd (`-z`).

use crate::docker::probe::{is_perf_path, ContainerFacts};
use crate::docker::ContainerShell;
use crate::error::{Error, Result};

/// The kernel version a perf binary is built for, from its name (`perf_6.1`) or from
/// Ubuntu's linux-tools directory it lies in (`/usr/lib/linux-tools-6.8.0-31/perf`,
/// `/usr/lib/linux-tools/6.8.0-31-generic/perf`).
fn version_of(path: &str) -> Option<(u32, u32)> {
    let (dir, name) = path.rsplit_once('/')?;
    if let Some(version) = name.strip_prefix("perf_") {
        return major_minor(version);
    }
    let dir_version = dir
        .strip_prefix("/usr/lib/linux-tools-")
        .or_else(|| dir.strip_prefix("/usr/lib/linux-tools/"))?;
    major_minor(dir_version)
}

/// Orders perf binaries by preference: the versioned one matching the kernel
/// (`perf_6.1` on 6.1.x), other versioned ones newest first, then plain `perf`.
pub fn order_perf_candidates(candidates: &[String], kernel: &str) -> Vec<String> {
    let kernel_mm: Option<(u32, u32)> = major_minor(kernel);
    let mut ordered: Vec<(u8, (u32, u32), String)> = candidates
        .iter()
        .map(|c| match version_of(c) {
            Some(v) if Some(v) == kernel_mm => (0, v, c.clone()),
            Some(v) => (1, v, c.clone()),
            None => (2, (0, 0), c.clone()),
        })
        .collect();
    ordered.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    ordered.dedup_by(|a, b| a.2 == b.2);
    ordered.into_iter().map(|(_, _, c)| c).collect()
}

pub fn major_minor(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A perf binary that runs in the container.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfTool {
    pub path: String,
    /// As perf reports it, e.g. `6.1.187`.
    pub version: String,
    pub supports_zstd: bool,
}

impl PerfTool {
    /// `perf --buildid-dir WORKDIR/buildid SUBCOMMAND`: whatever perf reads or writes of a
    /// build-id cache stays in the capture's own workdir, which is removed afterwards,
    /// never in the container user's `~/.debug`.
    pub fn in_workdir(&self, workdir: &str, subcommand: &str) -> Vec<String> {
        vec![
            self.path.clone(),
            "--buildid-dir".into(),
            format!("{workdir}/buildid"),
            subcommand.into(),
        ]
    }

    /// `perf ... record -N`: no build-id cache at all. perf hard-links every binary it saw
    /// into the cache, and on overlayfs a link copies the binary up into the container's
    /// writable layer, where the copy stays after the link is removed.
    /// And `--no-bpf-event` where perf has it (5.1 on): perf's side-band thread for BPF
    /// program events held every stop for 0.3-0.5 s (measured: SIGINT to exit 300-560 ms
    /// with it, 20-160 ms without). The price: kernel frames inside BPF programs (loaded
    /// before or during the window) go unnamed, which a profile of a container's process
    /// rarely has.
    /// And `-B`: no build-id table in perf.data either. To write one perf reads the whole
    /// recording back at its stop, to list the files its samples hit (measured, a 3 s
    /// capture at 999 Hz: SIGINT to exit 140-250 ms with it, 8-15 ms without). Nothing
    /// reads it: devprof knows a file by its path, size and mtime, and perf script in the
    /// container finds the files at their paths.
    pub fn record_in(&self, workdir: &str) -> Vec<String> {
        let mut argv = self.in_workdir(workdir, "record");
        argv.extend(["-N".into(), "-B".into()]);
        if major_minor(&self.version).is_some_and(|v| v >= (5, 1)) {
            argv.push("--no-bpf-event".into());
        }
        argv
    }
}

/// Software events: the only ones the kernel lets perf stamp with CLOCK_REALTIME (their
/// PMU may not fire in NMI context). Hardware events fire in NMI context and tracepoints'
/// PMU does not promise otherwise, so perf_event_open refuses CLOCK_REALTIME for them
/// (perf: "wrong clockid (0)"); they take CLOCK_MONOTONIC, which is NMI-safe.
const SOFTWARE_EVENTS: &[&str] = &[
    "cpu-clock",
    "task-clock",
    "page-faults",
    "faults",
    "minor-faults",
    "major-faults",
    "context-switches",
    "cs",
    "cpu-migrations",
    "migrations",
    "alignment-faults",
    "emulation-faults",
    "dummy",
    "bpf-output",
];
/// Whether `event` is a software event (with or without modifiers: `cpu-clock:u`).
pub fn is_software_event(event: &str) -> bool {
    SOFTWARE_EVENTS.contains(&event.split(':').next().unwrap_or(event))
}

impl PerfTool {
    /// `-k CLOCK`: stamp samples on a clock that maps to the Docker engine's log
    /// timestamps. CLOCK_REALTIME when every event is a software event (the samples are then
    /// on the log timestamps' own clock); CLOCK_MONOTONIC otherwise (tracepoints, hardware), mapped to the wall
    /// clock by the offset perf measures when it starts (perf.data's CLOCK_DATA). perf
    /// older than 4.1 has no `-k`: its samples keep perf's clock and cannot be placed
    /// against log lines.
    pub fn clock_args<S: AsRef<str>>(&self, events: &[S]) -> Vec<String> {
        if major_minor(&self.version).is_none_or(|v| v < (4, 1)) {
            return Vec::new();
        }
        let clock = if events.iter().all(|e| is_software_event(e.as_ref())) {
            "CLOCK_REALTIME"
        } else {
            "CLOCK_MONOTONIC"
        };
        vec!["-k".into(), clock.into()]
    }
}

/// The perf binaries the probe found, in the order they are tried.
pub fn perf_candidates(facts: &ContainerFacts) -> Vec<String> {
    let candidates: Vec<String> = facts
        .perf_candidates
        .iter()
        .filter(|p| is_perf_path(p))
        .cloned()
        .collect();
    order_perf_candidates(&candidates, &facts.kernel)
}

/// Finds a working perf: the first candidate, in preference order, whose `--version` runs.
/// Debian's old `perf` wrapper, for one, fails when no perf matches the kernel. Only paths
/// in root's own directories are ever run (the probe found them there, owned by root).
pub async fn find_perf<S: ContainerShell>(shell: &S, facts: &ContainerFacts) -> Result<PerfTool> {
    for path in perf_candidates(facts) {
        // One exec says both (its first line is `perf version X`); a perf too old for
        // --build-options is asked its version alone, and records without -z.
        let out = shell.run(&[&path, "version", "--build-options"]).await?;
        if let Some(perf) =
            PerfTool::from_build_options(&path, &out.stdout).filter(|_| out.success())
        {
            return Ok(perf);
        }
        let out = shell.run(&[&path, "--version"]).await?;
        if let Some(version) = reported_version(&out.stdout).filter(|_| out.success()) {
            return Ok(PerfTool {
                path,
                version,
                supports_zstd: false,
            });
        }
    }
    Err(Error::PerfMissing {
        container: shell.container().to_string(),
    })
}

/// The version in perf's answer, `perf version X` on its first line.
fn reported_version(stdout: &str) -> Option<String> {
    let first = stdout.lines().next()?.trim();
    first
        .strip_prefix("perf version ")
        .map(|v| v.trim().to_string())
}

impl PerfTool {
    /// The perf at `path` by its answer to `perf version --build-options`.
    pub fn from_build_options(path: &str, answer: &str) -> Option<PerfTool> {
        Some(PerfTool {
            path: path.to_string(),
            version: reported_version(answer)?,
            supports_zstd: build_option_on(answer, "zstd"),
        })
    }
}

/// Reads `perf version --build-options` lines like `zstd: [ on  ]  # HAVE_ZSTD_SUPPORT`.
pub fn build_option_on(text: &str, option: &str) -> bool {
    text.lines().any(|line| {
        let mut parts = line.trim().splitn(2, ':');
        parts.next().map(str::trim) == Some(option)
            && parts.next().is_some_and(|rest| rest.contains("[ on"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf's BPF side-band thread held each recorder's stop for 0.3-0.5 s; a perf older
    /// than 5.1 has no `--no-bpf-event` and would refuse it.
    #[test]
    fn record_skips_bpf_events_where_perf_knows_the_option() {
        let perf = |version: &str| PerfTool {
            path: "/usr/bin/perf".into(),
            version: version.into(),
            supports_zstd: true,
        };
        let has = |version: &str| {
            perf(version)
                .record_in("/tmp/devprof.x")
                .contains(&"--no-bpf-event".to_string())
        };
        assert!(has("6.1.187") && has("5.1.0"));
        assert!(!has("5.0.21") && !has("4.19.0") && !has("unknown"));
        assert_eq!(
            perf("6.1.187").record_in("/tmp/devprof.x")[3..6],
            ["record", "-N", "-B"]
        );
    }

    #[test]
    fn realtime_stamps_only_events_the_kernel_allows_it_for() {
        let perf = PerfTool {
            path: "perf".into(),
            version: "6.1.187".into(),
            supports_zstd: true,
        };
        assert_eq!(perf.clock_args(&["cpu-clock"]), ["-k", "CLOCK_REALTIME"]);
        assert_eq!(
            perf.clock_args(&["context-switches", "page-faults:u"]),
            ["-k", "CLOCK_REALTIME"]
        );
        // The kernel refuses CLOCK_REALTIME for tracepoints ("wrong clockid (0)").
        assert_eq!(
            perf.clock_args(&["sched:sched_switch", "cs"]),
            ["-k", "CLOCK_MONOTONIC"]
        );
        assert_eq!(perf.clock_args(&["cycles"]), ["-k", "CLOCK_MONOTONIC"]);
        assert_eq!(perf.clock_args(&["cycles:u"]), ["-k", "CLOCK_MONOTONIC"]);
        assert_eq!(
            perf.clock_args(&["cpu/event=0x3c/"]),
            ["-k", "CLOCK_MONOTONIC"]
        );
        let old = PerfTool {
            version: "3.16.7".into(),
            ..perf
        };
        assert!(old.clock_args(&["cpu-clock"]).is_empty());
    }

    #[test]
    fn prefers_the_perf_matching_the_kernel() {
        let c: Vec<String> = [
            "/usr/bin/perf",
            "/usr/bin/perf_5.10",
            "/usr/bin/perf_6.1",
            "/usr/bin/perf_5.19",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            order_perf_candidates(&c, "6.1.0-18-amd64"),
            vec![
                "/usr/bin/perf_6.1",
                "/usr/bin/perf_5.19",
                "/usr/bin/perf_5.10",
                "/usr/bin/perf"
            ]
        );
        assert_eq!(
            order_perf_candidates(&c[..1], "6.18.44"),
            vec!["/usr/bin/perf"]
        );
        // Ubuntu's perf, named by its linux-tools directory.
        let ubuntu: Vec<String> = [
            "/usr/bin/perf",
            "/usr/lib/linux-tools/6.5.0-9-generic/perf",
            "/usr/lib/linux-tools-6.8.0-31/perf",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            order_perf_candidates(&ubuntu, "6.8.0-31-generic")[0],
            "/usr/lib/linux-tools-6.8.0-31/perf"
        );
    }

    /// A shell whose every command "succeeds" as perf would, recording what ran.
    struct Recording(std::sync::Mutex<Vec<String>>);

    impl ContainerShell for Recording {
        fn container(&self) -> &str {
            "c"
        }
        async fn run(&self, argv: &[&str]) -> Result<crate::docker::ExecOutput> {
            self.0.lock().unwrap().push(argv.join(" "));
            Ok(crate::docker::ExecOutput {
                stdout: "perf version 6.18.0\n".into(),
                stderr: String::new(),
                exit_code: Some(0),
            })
        }
    }

    #[tokio::test]
    async fn find_perf_never_runs_a_path_outside_roots_directories() {
        let shell = Recording(Default::default());
        let facts = ContainerFacts {
            kernel: "6.18.44".into(),
            perf_candidates: vec![
                "/tmp/p/perf_6.18".into(),
                "/proc/1/root/tmp/p/perf_6.18".into(),
                "/usr/bin/perf".into(),
            ],
            ..Default::default()
        };
        let tool = find_perf(&shell, &facts).await.unwrap();
        assert_eq!(tool.path, "/usr/bin/perf");
        let ran = shell.0.lock().unwrap();
        assert!(
            ran.iter().all(|r| r.starts_with("/usr/bin/perf ")),
            "{ran:?}"
        );
    }
}
