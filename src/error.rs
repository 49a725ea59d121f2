//! The errors users see. Each variant says what failed, where, and what to do next;
//! `exit_code` maps it to the codes documented in README.md.

use std::fmt;

/// Process exit codes (documented in README.md).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const DAEMON: i32 = 3;
    pub const TARGET: i32 = 4;
    pub const PROFILER: i32 = 5;
    pub const NO_DATA: i32 = 6;
    pub const INTERRUPTED: i32 = 130;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot reach the Docker daemon at {address}: {reason}\n  \
         check that the daemon is running (`systemctl status docker`), that DOCKER_HOST \
         points at it, and that you may use its socket (root or the `docker` group)"
    )]
    DaemonUnreachable { address: String, reason: String },

    #[error("Docker API call failed ({action}): {reason}")]
    Docker { action: String, reason: String },

    #[error("no container matches '{target}'\n  {}", running_hint(.running))]
    TargetNotFound {
        target: String,
        running: Vec<String>,
    },

    #[error(
        "container '{container}' (matched by '{target}') is not running (state: {state})\n  \
         start it first (`docker start {container}`), or pick a running one. {}",
        running_hint(.running)
    )]
    TargetNotRunning {
        target: String,
        container: String,
        state: String,
        running: Vec<String>,
    },

    #[error(
        "'{target}' is a service of several compose projects; name the container instead:\n{}",
        bullet_list(.containers)
    )]
    AmbiguousTarget {
        target: String,
        containers: Vec<String>,
    },

    #[error("no target given: pass a container name, or set DEVPROF_TARGET in .env")]
    NoTarget,

    #[error("{what} in container '{container}'\n  {hint}")]
    ProcessNotFound {
        container: String,
        what: String,
        hint: String,
    },

    #[error(
        "perf is not installed in container '{container}' (looked for perf and perf_X.Y on PATH and in /usr/bin)\n  \
         fix: build a profiling image that adds it (Debian/Ubuntu: `apt-get install linux-perf` / \
         `linux-tools-generic`), or use an image made by `devprof build`"
    )]
    PerfMissing { container: String },

    #[error("perf may not record in container '{container}': {detail}\n  missing: {}\n  fix: {}", .missing.join(", "), .fixes.join("\n       "))]
    PerfDenied {
        container: String,
        detail: String,
        missing: Vec<String>,
        fixes: Vec<String>,
    },

    #[error("perf failed in container '{container}' ({step}): {detail}")]
    PerfFailed {
        container: String,
        step: String,
        detail: String,
    },

    #[error("the capture of '{container}' recorded no samples{}\n  {hint}", .reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
    NoSamples {
        container: String,
        reason: Option<String>,
        hint: String,
    },

    #[error("archive from container '{container}' rejected: entry '{entry}' {why}")]
    UnsafeArchive {
        container: String,
        entry: String,
        why: String,
    },

    #[error("{0}")]
    Usage(String),

    #[error("interrupted")]
    Interrupted,

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::DaemonUnreachable { .. } => exit::DAEMON,
            Error::TargetNotFound { .. }
            | Error::TargetNotRunning { .. }
            | Error::AmbiguousTarget { .. }
            | Error::NoTarget
            | Error::ProcessNotFound { .. } => exit::TARGET,
            Error::PerfMissing { .. } | Error::PerfDenied { .. } | Error::PerfFailed { .. } => {
                exit::PROFILER
            }
            Error::NoSamples { .. } => exit::NO_DATA,
            Error::Usage(_) => exit::USAGE,
            Error::Interrupted => exit::INTERRUPTED,
            Error::Docker { .. } | Error::UnsafeArchive { .. } | Error::Io { .. } => exit::FAILURE,
        }
    }

    pub fn io(context: impl fmt::Display, source: std::io::Error) -> Self {
        Error::Io {
            context: context.to_string(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn running_hint(running: &[String]) -> String {
    if running.is_empty() {
        "no container is running".to_string()
    } else {
        format!("running containers:\n{}", bullet_list(running))
    }
}

fn bullet_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("    - {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}
