//! What perf offers the recipes that record with it directly rather than through `Engine`
//! (off-CPU events, counters): the command lines they run and the reading of what perf
//! left, never its internals (which perf, how its access was tried, how it folds).

pub use super::PerfReady;
use super::DATA_NAME;
use crate::engines::{RecorderFacts, Tool};
use crate::settings::CallGraph;
use std::time::Duration;

pub use super::access::{failure, is_mlock_error};
pub use super::report::{parse_record_report as record_report, RecordReport};
pub use super::{bring_home, go_resolver, symfs_args, GoResolver, FOLDING_STARTED};

/// A recording of every event of a config, each with its call chain (`-c 1`).
pub struct EventsRecording<'a> {
    pub workdir: &'a str,
    pub events: &'a [String],
    pub call_graph: CallGraph,
    /// perf's ring buffer (`-m`), where a larger one may be mapped.
    pub buffer: Option<&'a str>,
    /// Switch-in records too: the end of each off-CPU interval.
    pub switches: bool,
    pub pid: u32,
    pub duration: Duration,
}

impl PerfReady {
    /// The engine's name in manifests.
    pub const ENGINE: &'static str = "perf";

    /// The perf that records, for manifests.
    pub fn tool(&self) -> Tool {
        Tool {
            path: self.perf.path.clone(),
            version: self.perf.version.clone(),
        }
    }

    /// What perf's access trial said, for the summary.
    pub fn notes(&self) -> &[String] {
        &self.access.notes
    }

    /// perf's path in the container (for a script that runs it).
    pub fn path(&self) -> &str {
        &self.perf.path
    }

    /// `perf stat` opening every event of `events` on `pid` for 100 ms: a denied one
    /// fails before the window, in perf's own words.
    pub fn events_trial(&self, events: &[String], pid: u32) -> Vec<String> {
        let mut argv = vec![self.perf.path.clone(), "stat".into(), "-x,".into()];
        for event in events {
            argv.extend(["-e".into(), event.clone()]);
        }
        argv.extend([
            "-p".into(),
            pid.to_string(),
            "--".into(),
            "sleep".into(),
            "0.1".into(),
        ]);
        argv
    }

    /// A 50 ms `perf record` of `pid` into `output` with a ring buffer of `size`: whether
    /// perf may map that much here.
    pub fn ring_trial(&self, workdir: &str, size: &str, pid: u32, output: &str) -> Vec<String> {
        let mut argv = self.perf.record_in(workdir);
        argv.extend(
            [
                "-q",
                "-m",
                size,
                "-e",
                "cpu-clock",
                "-p",
                &pid.to_string(),
                "-o",
                output,
                "--",
                "sleep",
                "0.05",
            ]
            .map(String::from),
        );
        argv
    }

    /// Where a recording in `workdir` is written.
    pub fn data_path(workdir: &str) -> String {
        format!("{workdir}/{DATA_NAME}")
    }

    /// How a `perf record` window behaves: it ends with its target and starts with its
    /// events disabled, enabled when released.
    pub fn record_facts(&self) -> RecorderFacts {
        RecorderFacts {
            ends_with_target: true,
            enables_on_release: true,
            stops_itself: false,
        }
    }

    /// The `perf record` of `recording`, into `data_path`.
    pub fn events_record(&self, recording: &EventsRecording<'_>) -> Vec<String> {
        let mut argv = self.perf.record_in(recording.workdir);
        for event in recording.events {
            argv.extend(["-e".into(), event.clone()]);
        }
        argv.extend([
            "-c".into(),
            "1".into(),
            "-g".into(),
            "--call-graph".into(),
            recording.call_graph.perf_arg().into(),
        ]);
        if let Some(size) = recording.buffer {
            argv.extend(["-m".into(), size.to_string()]);
        }
        if recording.switches {
            argv.push("--switch-events".into());
        }
        // Event times on a clock that maps to the engine's log timestamps (markers).
        argv.extend(self.perf.clock_args(recording.events));
        argv.extend(super::record_tail(
            &self.perf,
            recording.pid,
            &Self::data_path(recording.workdir),
            recording.duration,
        ));
        argv
    }

    /// `perf script -i DATA -F FIELDS` in `workdir`, with `extra` options, the target's
    /// files seen under `symfs`.
    pub fn script(
        &self,
        workdir: &str,
        data: &str,
        fields: &str,
        extra: &[&str],
        symfs: Option<&str>,
    ) -> Vec<String> {
        let mut argv = self.perf.in_workdir(workdir, "script");
        argv.extend(["-i".into(), data.to_string(), "-F".into(), fields.into()]);
        argv.extend(extra.iter().map(|e| e.to_string()));
        argv.extend(symfs_args(symfs));
        argv
    }

    /// `perf stat -x, [-o CSV] -e EVENTS`, the counters' command line; `csv`: where their
    /// CSV goes (None: its standard error).
    pub fn stat(&self, csv: Option<&str>, events: &str) -> Vec<String> {
        let mut argv = vec![self.perf.path.clone(), "stat".into(), "-x,".into()];
        if let Some(csv) = csv {
            argv.extend(["-o".into(), csv.to_string()]);
        }
        argv.extend(["-e".into(), events.to_string()]);
        argv
    }
}
