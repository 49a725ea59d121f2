//! What every capture's manifest and flamegraph titles share: the container, the process,
//! the engine's tool, the window.

use super::target::Target;
use crate::docker::target::{ContainerInfo, ProcInfo};
use crate::engines::Tool;
use crate::runtime::{ProcessFacts, Runtime};
use crate::settings::CallGraph;
use crate::store::{ContainerRecord, Manifest, PerfRecord, ProcessRecord};
use crate::text::truncate;
use chrono::Local;
use std::time::Duration;

/// How often a capture took a sample: a rate, or every event (off-CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    Frequency(u32),
    EveryEvent,
}

/// The flamegraph's second line: process, sampling, call graphs, time.
pub fn subtitle<R>(target: &Target<R>, sampling: Sampling, call_graph: CallGraph) -> String {
    let rate = match sampling {
        Sampling::Frequency(hz) => format!("{hz} Hz"),
        Sampling::EveryEvent => "every event".to_string(),
    };
    format!(
        "pid {} {} · {rate} · {} call graphs · {}",
        target.process.pid,
        truncate(&target.process.cmdline, 80),
        call_graph.perf_arg(),
        Local::now().format("%Y-%m-%d %H:%M:%S")
    )
}

/// The fields every capture's manifest shares.
pub struct ManifestBase<'a> {
    pub kind: &'a str,
    /// The target as the user typed it.
    pub typed_target: &'a str,
    pub engine: &'a str,
    pub tool: Tool,
    pub window: Duration,
    pub requested: Duration,
    pub interrupted: bool,
}

/// What every manifest says first: the kind, when, and which container and process.
pub fn identity(
    kind: &str,
    typed_target: &str,
    container: &ContainerInfo,
    process: &ProcInfo,
    facts: &ProcessFacts,
    runtime: Runtime,
) -> Manifest {
    Manifest {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: kind.into(),
        created: Local::now().to_rfc3339(),
        target: typed_target.to_string(),
        container: ContainerRecord {
            name: container.name.clone(),
            id: container.id.clone(),
            image: container.image.clone(),
            project: container.project.clone(),
            service: container.service.clone(),
        },
        process: ProcessRecord {
            pid: process.pid,
            command_line: process.cmdline.clone(),
            comm: facts.comm.clone(),
            exe: facts.exe.clone(),
            user: facts.user_text(),
        },
        runtime: runtime.name().to_string(),
        runtime_version: match runtime {
            Runtime::Jvm => {
                crate::runtime::jvm::version_from_path(&facts.exe).map(|v| format!("Java {v}"))
            }
            _ => None,
        },
        ..Default::default()
    }
}

/// The manifest of a capture an engine recorded, before its results are filled in.
pub fn manifest_for<R>(target: &Target<R>, base: ManifestBase<'_>) -> Manifest {
    let mut identity = identity(
        base.kind,
        base.typed_target,
        &target.container,
        &target.process,
        &target.process_facts,
        target.runtime,
    );
    if let Some(go) = &target.go {
        identity.runtime_version = go.version.clone();
    }
    Manifest {
        engine: base.engine.to_string(),
        perf: PerfRecord {
            path: base.tool.path,
            version: base.tool.version,
            record_command: Vec::new(),
        },
        capture_mode: Some(target.mode_description()),
        duration_requested_s: base.requested.as_secs_f64(),
        duration_recorded_s: (base.window.as_secs_f64() * 1000.0).round() / 1000.0,
        interrupted: base.interrupted,
        ..identity
    }
}
