//! A capture's manifest (`<stem>.json`): what was recorded, how, and which files devprof
//! wrote. The store knows devprof's files by these, and deletes nothing else.

use super::Stem;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileRecord {
    pub name: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContainerRecord {
    pub name: String,
    pub id: String,
    pub image: String,
    /// The compose project and service (labels `com.docker.compose.project` and
    /// `.service`), when compose made the container; absent in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProcessRecord {
    pub pid: u32,
    pub command_line: String,
    /// The kernel's name for it (/proc/<pid>/comm).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub comm: String,
    /// Its executable as the container sees it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exe: String,
    /// The user it runs as.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
}

/// One flamegraph of a capture, what it shows and what its counts are.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct GraphRecord {
    /// The SVG's file name.
    pub svg: String,
    /// The folded stacks it was drawn from.
    pub folded: String,
    /// `unfiltered`, or the filter (`preset node`).
    pub view: String,
    /// What one count of `folded` is: one of `units` (empty in older manifests).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
}

/// What the counts of folded stacks are, as manifests, graphs and summaries name them.
pub mod units {
    pub const SAMPLES: &str = "samples";
    pub const EVENTS: &str = "events";
    /// Off-CPU time: microseconds blocked, per stack.
    pub const OFF_CPU_US: &str = "us off-CPU";
    pub const BYTES: &str = "bytes";
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PerfRecord {
    pub path: String,
    pub version: String,
    pub record_command: Vec<String>,
}

/// A command devprof ran in the target container and recorded from start to end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CommandRecord {
    pub argv: Vec<String>,
    /// None when it never reported one (the run was cut short).
    pub exit_status: Option<i32>,
    /// Wall time in the container around perf, which ran it.
    pub wall_s: f64,
    /// `uid:gid` it ran as (the target process's).
    pub user: String,
    /// Its working directory (the target process's).
    pub cwd: String,
}

/// What a capture was and which files it wrote; the store knows devprof's files by these.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Manifest {
    pub devprof_version: String,
    pub kind: String,
    pub created: String,
    pub target: String,
    pub container: ContainerRecord,
    pub process: ProcessRecord,
    /// What runs in the process: native, jvm, node, python.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub runtime: String,
    /// The runtime's version where the process shows it (a JVM's install path: `17`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_version: Option<String>,
    /// The engine that recorded (`perf`; empty in captures that used none, like heap).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub engine: String,
    /// The recording tool (perf, or another engine's binary) and its command line.
    pub perf: PerfRecord,
    /// How perf was run: exec in the container, or a sidecar and its privileges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<String>,
    pub events: Vec<String>,
    pub frequency_hz: u32,
    pub call_graph: String,
    pub duration_requested_s: f64,
    pub duration_recorded_s: f64,
    /// When the recorder started and stopped (RFC 3339, ms), as seen by devprof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_stopped_at: Option<String>,
    /// The multi-target session the capture belongs to (its manifest's file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub interrupted: bool,
    pub sample_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub perf_reported_samples: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost_chunks: Option<u64>,
    pub unsymbolized_share: f64,
    /// How whole the stacks are (samples that do not reach a thread's entry point).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<crate::profile::stacks::StackHealth>,
    /// The flamegraphs written, each with the view it shows (unfiltered, a preset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<GraphRecord>,
    /// Whether the runtime writes a perf map for its JIT code (Node: V8's perf map).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_map: Option<String>,
    pub top_functions: Vec<(String, u64)>,
    pub timings_ms: BTreeMap<String, u64>,
    /// How perf's samples were folded: `native` (perf.data read by devprof) or
    /// `perf-script`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold_path: Option<String>,
    pub files: Vec<FileRecord>,
    /// How many markers from the target's log its `.markers` file keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markers_kept: Option<usize>,
    pub notes: Vec<String>,
    /// The event config an off-CPU capture used (its path, or `built-in`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The off-CPU summary (counts by group, off-CPU time, bandwidth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offcpu: Option<crate::profile::offcpu::summary::Summary>,
    /// A heap capture: the dumps merged, totals, symbols and top allocation sites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<crate::profile::heap::HeapRecord>,
    /// A stat capture: counters, derived readings, and each run of a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stat: Option<crate::profile::stat::StatRecord>,
    /// A capture of a command run (`cpu -- CMD`): the command and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandRecord>,
    /// A capture set (`--repeat K`): the window cut into K back-to-back parts, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartRecord>,
}

/// One window of a capture set: its own folded stacks and timeline, and what it counted.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PartRecord {
    /// 1-based, in time order.
    pub index: u32,
    /// Its start, in seconds after the first sample of the capture.
    pub start_s: f64,
    pub duration_s: f64,
    pub samples: u64,
    /// CPU used by the process in the window, in cores (samples / (duration × frequency)).
    pub cpu_cores: f64,
    pub folded: String,
    pub timeline: String,
}

impl Manifest {
    /// Lists `dir/name` among the files devprof wrote, with its size on disk; returns the
    /// path and size for the closing summary.
    pub fn record_file(&mut self, dir: &Path, name: &str) -> (PathBuf, u64) {
        let path = dir.join(name);
        let bytes = file_size(&path);
        self.files.push(FileRecord {
            name: name.to_string(),
            bytes,
        });
        (path, bytes)
    }

    /// `record_file` for each of a stem's extensions.
    pub fn record_stem_files(&mut self, stem: &Stem, extensions: &[&str]) -> Vec<(PathBuf, u64)> {
        extensions
            .iter()
            .map(|ext| self.record_file(stem.dir(), &stem.file_name(ext)))
            .collect()
    }

    /// The flamegraphs among the files, the one to look at first leading: the graphs a
    /// CPU capture records with their views, else the off-CPU time graph, else any SVG that
    /// is not a plot.
    pub fn flamegraphs(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.graphs.iter().map(|g| g.svg.as_str()).collect();
        let plots = [super::HEAP_PLOT, super::THREADS_PLOT, super::BANDWIDTH_PLOT];
        let mut svgs: Vec<&str> = self
            .files
            .iter()
            .map(|f| f.name.as_str())
            .filter(|n| n.ends_with(".svg") && !plots.iter().any(|p| n.ends_with(&format!(".{p}"))))
            .collect();
        svgs.sort_by_key(|n| !n.ends_with(".offcpu.svg"));
        for svg in svgs {
            if !out.contains(&svg) {
                out.push(svg);
            }
        }
        out
    }

    /// Writes the manifest to the stem's .json, listing itself among the files.
    pub fn write(&mut self, stem: &Stem) -> Result<PathBuf> {
        let path = stem.path("json");
        let own_name = stem.file_name("json");
        self.files.retain(|f| f.name != own_name);
        // The manifest's own size is not known before writing; record it as 0 and let
        // readers stat it.
        self.files.push(FileRecord {
            name: own_name,
            bytes: 0,
        });
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::io("serialize manifest", std::io::Error::other(e)))?;
        let tmp = stem.dir().join(format!(".{}.json.tmp", stem.name()));
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("write {}", path.display()), e))?;
        // The store's index is derived from the manifests: a failure to refresh it loses
        // nothing (`ls` and `clean` rebuild it), so it never fails the capture.
        if let (Some(store), Some(dir)) = (stem.dir().parent(), stem.dir().file_name()) {
            let _ = super::index::refresh(store, &dir.to_string_lossy());
        }
        Ok(path)
    }
}

/// Size of a file on disk, 0 when it is gone.
pub fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Local;

    #[test]
    fn manifest_lists_itself_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let stem = Stem::reserve(dir.path(), "perf", Local::now()).unwrap();
        let mut m = Manifest {
            kind: "cpu".into(),
            sample_count: 42,
            ..Default::default()
        };
        let path = m.write(&stem).unwrap();
        let back: Manifest = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(back.sample_count, 42);
        assert_eq!(back.files.len(), 1);
    }

    #[test]
    fn flamegraphs_lead_with_the_recorded_views_and_leave_plots_out() {
        let file = |name: &str| FileRecord {
            name: name.into(),
            bytes: 1,
        };
        let offcpu = Manifest {
            files: [
                "o.data",
                "o.svg",
                "o.offcpu.svg",
                "o.threads.svg",
                "o.bandwidth.svg",
            ]
            .map(file)
            .to_vec(),
            ..Default::default()
        };
        assert_eq!(offcpu.flamegraphs(), vec!["o.offcpu.svg", "o.svg"]);
        let cpu = Manifest {
            graphs: vec![GraphRecord {
                svg: "p.node-preset.svg".into(),
                ..Default::default()
            }],
            files: ["p.svg", "p.node-preset.svg"].map(file).to_vec(),
            ..Default::default()
        };
        assert_eq!(cpu.flamegraphs(), vec!["p.node-preset.svg", "p.svg"]);
        let heap = Manifest {
            files: ["h.svg", "h.dumps.svg"].map(file).to_vec(),
            ..Default::default()
        };
        assert_eq!(heap.flamegraphs(), vec!["h.svg"]);
    }
}
