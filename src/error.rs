//! The errors users see. Each variant says what failed, where, and what to do next;
//! `exit_code` maps it to the codes documented in README.md and docs/exit-codes.md.

use std::fmt;

/// Process exit codes (documented in README.md and docs/exit-codes.md).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const DAEMON: i32 = 3;
    pub const TARGET: i32 = 4;
    pub const PROFILER: i32 = 5;
    pub const NO_DATA: i32 = 6;
    /// `devprof build`: the build failed, or the image it made is not ready for profiling.
    pub const BUILD: i32 = 7;
    /// `devprof doctor`: a check that blocks profiling failed.
    pub const DOCTOR: i32 = 8;
    /// `devprof profile`: some captures of the session failed; the others were written.
    pub const PARTIAL: i32 = 9;
    /// `devprof diff --fail-if`: a condition held (a regression the gate was told to stop).
    pub const GATE: i32 = 10;
    pub const INTERRUPTED: i32 = 130;
}

/// Where the probe looks for perf (`docker::probe::PERF_DIRS`), as messages say it.
pub const PERF_SEARCH: &str =
    "perf or perf_X.Y that only root may change (owned by root, writable by root alone) \
     in /usr/bin, /usr/sbin, /usr/local/bin, /bin, /sbin or /usr/lib/linux-tools*";

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

    #[error("{failed} of {total} captures of the session failed (their rows say why); the others were written")]
    SessionIncomplete { failed: usize, total: usize },

    #[error("--fail-if held: {}", .conditions.join("; "))]
    GateTripped { conditions: Vec<String> },

    #[error("no running container {what}\n  {}", running_hint(.running))]
    NoSessionTargets { what: String, running: Vec<String> },

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
        "container '{container}' (matched by '{target}') is paused: every process in it is frozen, so nothing \
         in it can be recorded or run\n  unpause it (`docker unpause {container}`) and capture again"
    )]
    TargetPaused { target: String, container: String },

    #[error(
        "{container} was paused (`docker pause`) at T+{at_secs} s, during the {step}: every process in it is \
         frozen, and nothing runs in it until it is unpaused\n  \
         unpause it (`docker unpause {container}`) and capture again"
    )]
    PausedDuringCapture {
        container: String,
        at_secs: u64,
        step: String,
    },

    #[error("{source}\n  the recording is kept: {data} (listed in {manifest}); re-analyse it with `{command}`{hint}")]
    RecordingKept {
        source: Box<Error>,
        data: String,
        manifest: String,
        command: String,
        /// What the command's placeholders stand for.
        hint: String,
    },

    #[error(
        "--allow-sysctl refused for '{container}': nothing was changed. Should {container} stop before the capture \
         ends, the host's sysctls would be restored by a short-lived helper container from the profiler image {image} \
         (CAP_SYS_ADMIN, unconfined /proc), and that helper cannot write them here: {reason}\n  \
         fix: build the profiler image (scripts/testbed-up.sh, or `devprof build tools`), or name one with sh in \
         --profiler-image / DEVPROF_PROFILER_IMAGE; or run without --allow-sysctl (a sidecar may record without lowering them)"
    )]
    SysctlHelperUnavailable {
        container: String,
        image: String,
        reason: String,
    },

    #[error(
        "'{target}' is a service of several compose projects; name the container instead:\n{}",
        bullet_list(.containers)
    )]
    AmbiguousTarget {
        target: String,
        containers: Vec<String>,
    },

    #[error(
        "{container} stopped during the {step} ({}, at T+{} s)\n  \
         {}check why it stopped (`docker logs {container}`), start it again and capture again",
        .exit_code.map(|c| format!("exit code {c}")).unwrap_or_else(|| "removed".into()),
        .at_secs,
        if *.lost { "perf stopped with it, so nothing recorded could be kept; " } else { "" }
    )]
    TargetStopped {
        container: String,
        exit_code: Option<i64>,
        /// Seconds from the start of the window.
        at_secs: u64,
        /// `capture` (the window), `fold`, `summary`.
        step: String,
        /// Nothing recorded reached the host.
        lost: bool,
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
        "perf is not installed in container '{container}' (looked for {})\n  \
         fix: build a profiling image that adds it (Debian/Ubuntu: `apt-get install linux-perf` / \
         `linux-tools-generic`), or use an image made by `devprof build`",
        PERF_SEARCH
    )]
    PerfMissing { container: String },

    #[error("{tool} is not installed in container '{container}'\n  fix: {fix}")]
    ToolMissing {
        container: String,
        tool: String,
        fix: String,
    },

    #[error("perf may not record in container '{container}': {detail}\n  missing: {}\n  fix: {}", .missing.join(", "), .fixes.join("\n       "))]
    PerfDenied {
        container: String,
        detail: String,
        missing: Vec<String>,
        fixes: Vec<String>,
    },

    #[error(
        "the JVM (pid {pid}) in container '{container}' was started with -XX:+DisableAttachMechanism (from {flag_source}): \
         async-profiler cannot attach to it\n  \
         fix: remove -XX:+DisableAttachMechanism from its options and recreate the container, or record with \
         --engine perf (Java frames then stay unnamed: the JVM cannot be asked for a perf map either)"
    )]
    JvmAttachDisabled {
        container: String,
        pid: u32,
        flag_source: String,
    },

    #[error(
        "async-profiler is not in container '{container}' where only root may change it (looked for asprof on \
         PATH and in /opt/*async-profiler*/)\n  \
         fix: download a release for the container's architecture (github.com/async-profiler/async-profiler, \
         releases), unpack it on this host and pass --asprof DIR (or DEVPROF_ASPROF); or record with --engine perf"
    )]
    AsprofMissing { container: String },

    /// The sidecar's image lacks the engine's tool: the engine is not available there, which
    /// an engine chain (py-spy, then perf) reads as "try the next", never as a failed recording.
    #[error("perf failed in container '{container}' (profiler sidecar): the profiler image {image} has no {tool}; {fix}")]
    ProfilerImageLacks {
        container: String,
        image: String,
        tool: String,
        fix: String,
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

    #[error(
        "refused to copy '{entry}' out of container '{container}': {} is more than devprof's limit of {} for {what}\n  \
         the container names what is copied, so every copy is bounded; if the file is really meant, take it out \
         with `docker cp` and look at it there",
        crate::units::human_bytes(*size), crate::units::human_bytes(*limit)
    )]
    CopyTooLarge {
        container: String,
        entry: String,
        size: u64,
        limit: u64,
        what: &'static str,
    },

    #[error("archive from container '{container}' rejected: entry '{entry}' {why}")]
    UnsafeArchive {
        container: String,
        entry: String,
        why: String,
    },

    #[error(
        "no captures of '{container}' in {output_dir}\n  {}",
        captures_hint(.available)
    )]
    NoCaptures {
        container: String,
        output_dir: String,
        available: Vec<String>,
    },

    #[error("{path} holds no samples{}\n  {hint}", .reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
    EmptyProfile {
        path: String,
        reason: Option<String>,
        hint: String,
    },

    #[error(
        "cannot read {path}: perf is not installed on this host (it is not on PATH)\n  \
         render the folded stacks next to it instead (`devprof render {folded}`): devprof cpu \
         already resolved the symbols of the container's binaries, which a host perf often cannot"
    )]
    HostPerfMissing { path: String, folded: String },

    #[error(
        "{path} was recorded with {recorded}, which devprof does not unwind itself, and perf is \
         not installed on this host (it is not on PATH) to do it\n  fold it where perf is: \
         `{command} | devprof fold -`"
    )]
    NeedsPerfScript {
        path: String,
        recorded: String,
        command: String,
    },

    #[error("perf script failed on {path}: {detail}\n  render the .folded file next to it instead; devprof cpu resolves the symbols of container binaries best")]
    HostPerfFailed { path: String, detail: String },

    #[error("unknown event '{event}' in {config}{}\n  list the events this kernel offers with `perf list` in the container", .suggestion.as_deref().map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default())]
    UnknownEvent {
        event: String,
        suggestion: Option<String>,
        config: String,
    },

    #[error("no event of {config} can be recorded in container '{container}':\n{}", .skipped.iter().map(|(e, why)| format!("    - {e}: {why}")).collect::<Vec<_>>().join("\n"))]
    NoEvents {
        container: String,
        config: String,
        skipped: Vec<(String, String)>,
    },

    #[error(
        "tracepoints are not available in container '{container}': tracefs is not mounted at /sys/kernel/tracing and the container may not mount it\n  \
         fix: mount it on the host (`sudo mount -t tracefs nodev /sys/kernel/tracing`) and into the container \
         (compose `volumes: [/sys/kernel/tracing:/sys/kernel/tracing:ro]`, or `docker run -v /sys/kernel/tracing:/sys/kernel/tracing:ro`), \
         or grant CAP_SYS_ADMIN so devprof can mount it there"
    )]
    TracefsUnavailable { container: String },

    #[error(
        "jemalloc heap profiling is not on in process {pid} ({program}) of container '{container}': {found}\n  \
         {variable} must contain prof:true when the process starts: jemalloc reads it once, at start-up, \
         so setting it in a running container changes nothing. Then recreate the container:\n  \
         - the demo devnet: JEMALLOC_PROFILING=true in .env, then `scripts/testbed-up.sh`\n  \
         - a compose file: `{variable}: \"prof:true,prof_active:true,prof_prefix:/tmp/jeprof\"` in the service's \
         environment (the compose override of `devprof compose`), then `docker-compose up -d`\n  \
         - docker run: `-e {variable}=prof:true,prof_active:true,prof_prefix:/tmp/jeprof`"
    )]
    HeapProfilingOff {
        container: String,
        pid: u32,
        program: String,
        variable: String,
        found: String,
    },

    #[error("cannot get a fresh heap dump from process {pid} of container '{container}': {detail}\n  {hint}")]
    HeapDumpUnavailable {
        container: String,
        pid: u32,
        detail: String,
        hint: String,
    },

    #[error("{what} in container '{container}' ({dir})\n  {hint}")]
    HeapNoDumps {
        container: String,
        what: String,
        dir: String,
        hint: String,
    },

    #[error("heap dump {path} cannot be read: {detail}")]
    HeapDumpInvalid { path: String, detail: String },

    #[error(
        "container '{container}' has no perf that may record, and the profiler image {image} for a sidecar is missing on this endpoint\n  \
         fix: {fix}; or install perf in the container"
    )]
    ProfilerImageMissing {
        container: String,
        image: String,
        /// How the image reaches this endpoint (Docker builds it; Podman loads it).
        fix: String,
    },

    #[error(
        "container '{container}' would be profiled from a sidecar, but the profiler image {image} (image {id}) is not one devprof \
         trusts on {endpoint}: a sidecar runs its sh and perf as root with perf's rights beside your container, and an image's \
         name can be moved to another image by anyone who can build on the engine\n  fix: {fix}"
    )]
    ProfilerImageUntrusted {
        container: String,
        image: String,
        id: String,
        endpoint: String,
        fix: String,
    },

    #[error(
        "building {image} failed{}\n  {message}{}",
        .step.as_deref().map(|s| format!(" at {s}")).unwrap_or_default(),
        tail_block(.tail)
    )]
    BuildFailed {
        image: String,
        step: Option<String>,
        message: String,
        tail: Vec<String>,
    },

    #[error("{image} was built but is not ready for profiling:\n{}", bullet_list(.problems))]
    ImageNotReady {
        image: String,
        problems: Vec<String>,
    },

    #[error("{path}: {detail}")]
    ComposeFile { path: String, detail: String },

    #[error("profiling '{target}' is blocked: {} (see the ✗ lines above for the fixes)", .failed.join(", "))]
    DoctorFailed {
        target: String,
        failed: Vec<String>,
        /// 3 when the daemon, 4 when the container or process is missing, else 8.
        exit: i32,
    },

    #[error("{0}")]
    Usage(String),

    #[error(
        "no net/http/pprof endpoint for pid {pid} in '{container}': {detail}\n  \
         to profile it through Go's own profiles, {fix}"
    )]
    PprofMissing {
        container: String,
        pid: u32,
        detail: String,
        fix: String,
    },

    #[error("the pprof profile from {url} in '{container}' could not be read: {detail}")]
    PprofInvalid {
        container: String,
        url: String,
        detail: String,
    },

    /// Ctrl-C before a recording reached the host (or a second Ctrl-C that aborts it):
    /// what was made for the capture is gone (a recording that is home ends otherwise,
    /// as `RecordingKept`).
    #[error("interrupted: nothing was recorded, and nothing was written to the store")]
    Interrupted,

    /// A failure a test asked for at one step of the lifecycle (debug builds only,
    /// `DEVPROF_TEST_FAULT`).
    #[error("a failure injected at the {step} step (DEVPROF_TEST_FAULT)")]
    Injected { step: &'static str },

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Whether the engine is not there to record (its tool, or the sidecar image with it,
    /// missing), as opposed to a recording that failed: an engine chain tries the next.
    pub fn engine_unavailable(&self) -> bool {
        matches!(
            self,
            Error::ToolMissing { .. }
                | Error::ProfilerImageMissing { .. }
                | Error::ProfilerImageLacks { .. }
        )
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::DaemonUnreachable { .. } => exit::DAEMON,
            Error::SessionIncomplete { .. } => exit::PARTIAL,
            Error::GateTripped { .. } => exit::GATE,
            Error::NoSessionTargets { .. } => exit::TARGET,
            Error::TargetNotFound { .. }
            | Error::TargetNotRunning { .. }
            | Error::TargetStopped { .. }
            | Error::TargetPaused { .. }
            | Error::PausedDuringCapture { .. }
            | Error::AmbiguousTarget { .. }
            | Error::NoTarget
            | Error::ProcessNotFound { .. } => exit::TARGET,
            Error::PerfMissing { .. }
            | Error::ToolMissing { .. }
            | Error::PerfDenied { .. }
            | Error::PerfFailed { .. }
            | Error::ProfilerImageLacks { .. }
            | Error::JvmAttachDisabled { .. }
            | Error::AsprofMissing { .. }
            | Error::PprofMissing { .. } => exit::PROFILER,
            Error::PprofInvalid { .. } => exit::FAILURE,
            Error::NoSamples { .. } => exit::NO_DATA,
            Error::RecordingKept { source, .. } => source.exit_code(),
            Error::SysctlHelperUnavailable { .. } => exit::PROFILER,
            Error::UnknownEvent { .. } | Error::NeedsPerfScript { .. } => exit::USAGE,
            Error::NoEvents { .. }
            | Error::TracefsUnavailable { .. }
            | Error::ProfilerImageMissing { .. }
            | Error::ProfilerImageUntrusted { .. } => exit::PROFILER,
            Error::NoCaptures { .. } => exit::TARGET,
            Error::EmptyProfile { .. } => exit::NO_DATA,
            Error::HostPerfMissing { .. } | Error::HostPerfFailed { .. } => exit::PROFILER,
            Error::HeapProfilingOff { .. } | Error::HeapDumpUnavailable { .. } => exit::PROFILER,
            Error::HeapNoDumps { .. } => exit::NO_DATA,
            Error::HeapDumpInvalid { .. } => exit::FAILURE,
            Error::Usage(_) => exit::USAGE,
            Error::BuildFailed { .. } | Error::ImageNotReady { .. } => exit::BUILD,
            Error::ComposeFile { .. } => exit::USAGE,
            Error::DoctorFailed { exit, .. } => *exit,
            Error::Interrupted => exit::INTERRUPTED,
            Error::Docker { .. }
            | Error::UnsafeArchive { .. }
            | Error::CopyTooLarge { .. }
            | Error::Injected { .. }
            | Error::Io { .. } => exit::FAILURE,
        }
    }

    /// What went wrong, past the note that the recording was kept.
    pub fn cause(&self) -> &Error {
        match self {
            Error::RecordingKept { source, .. } => source.cause(),
            other => other,
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

/// The profiler image sidecars start from unless told otherwise.
pub const DEFAULT_PROFILER_IMAGE: &str = "devprof-profiler:latest";

/// How to get a missing profiler image: what `doctor` and the capture commands both say.
pub fn profiler_image_fix(image: &str) -> String {
    format!(
        "build the profiler image: `devprof build tools debian:bookworm-slim -t {image}` (perf, procps and \
         binutils over Debian), or name another that has perf with --profiler-image or DEVPROF_PROFILER_IMAGE"
    )
}

fn running_hint(running: &[String]) -> String {
    if running.is_empty() {
        "no container is running".to_string()
    } else {
        format!("running containers:\n{}", bullet_list(running))
    }
}

fn captures_hint(available: &[String]) -> String {
    if available.is_empty() {
        "the store is empty: record one first (`devprof cpu TARGET`), or point --output-dir at the store".to_string()
    } else {
        format!("containers with captures:\n{}", bullet_list(available))
    }
}

fn bullet_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("    - {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tail_block(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!(
            "\n  last output of that step:\n{}",
            lines
                .iter()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    }
}
