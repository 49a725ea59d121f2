//! Several containers and kinds in one window. Every (container, kind) capture runs the
//! same recipe as its single-target command, in its own task; each prepares (container,
//! process, engine, sidecar, work directory) and then waits at the session's start gate,
//! which opens when all are ready, so the recorders start together. Beside them, one meter
//! per container reads the process's CPU time from /proc at the gate and at the end of the
//! window. A capture that fails is one row's error, never the session's end.

use super::gate::{self, StartGate, Ticket};
use super::{clocks, cpu, heap, locate, offcpu};
use crate::docker::containers::SIDECAR_LABEL;
use crate::docker::target::{resolve_container, ContainerInfo, ProcessSelector};
use crate::docker::{with_context, ContainerShell, Docker};
use crate::error::{Error, Result};
use crate::profile::clock::ClockOffset;
use crate::profile::verdict::{judge, stat_ticks, thresholds_text, Measured, Waits};
use crate::settings::profile::{CaptureSettings, Kind, ProfileSettings, Targets};
use crate::signals::Interrupts;
use crate::store::session::{
    SessionCapture, SessionEndpoint, SessionRecord, SessionRow, SESSIONS_DIR,
};
use crate::store::Stem;
use crate::text::{first_line, truncate};
use crate::ui::progress;
use chrono::{DateTime, Local};
use futures_util::future::join_all;
use indicatif::ProgressBar;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// USER_HZ: clock ticks per second in /proc/<pid>/stat on every Linux Docker runs on.
const TICKS_PER_S: f64 = 100.0;

/// A finished capture of the session.
pub type Done = super::Captured;

/// One (container, kind) capture's end.
pub struct CaptureEnd {
    pub container: String,
    pub kind: &'static str,
    pub result: std::result::Result<Done, String>,
}

/// What the session produced.
pub struct SessionOutcome {
    pub record: SessionRecord,
    pub record_path: PathBuf,
    pub captures: Vec<CaptureEnd>,
}

impl SessionOutcome {
    pub fn failed(&self) -> usize {
        self.captures.iter().filter(|c| c.result.is_err()).count()
    }
}

/// The containers `targets` means, running ones only (devprof's sidecars never).
pub fn select(targets: &Targets, containers: &[ContainerInfo]) -> Result<Vec<ContainerInfo>> {
    let running: Vec<&ContainerInfo> = containers
        .iter()
        .filter(|c| c.is_running() && !c.labels.contains_key(SIDECAR_LABEL))
        .collect();
    let names = || {
        let mut n: Vec<String> = running.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    };
    let mut chosen: Vec<ContainerInfo> = match targets {
        Targets::Named(list) => {
            let mut out: Vec<ContainerInfo> = Vec::new();
            for name in list {
                let c = resolve_container(name, containers)?;
                if !out.iter().any(|o| o.id == c.id) {
                    out.push(c);
                }
            }
            return Ok(out);
        }
        Targets::Project(project) => running
            .iter()
            .filter(|c| c.project.as_deref() == Some(project.as_str()))
            .map(|c| (*c).clone())
            .collect(),
        Targets::All => running.iter().map(|c| (*c).clone()).collect(),
    };
    if chosen.is_empty() {
        return Err(Error::NoSessionTargets {
            what: match targets {
                Targets::Project(p) => format!("in compose project '{p}'"),
                _ => "to profile".into(),
            },
            running: names(),
        });
    }
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(chosen)
}

/// A target written `NAME@CONTEXT`: the container and the docker context of its endpoint
/// (None: the endpoint the environment names). Container names never contain `@`.
pub fn split_context(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once('@') {
        Some((name, context)) if !name.is_empty() && !context.is_empty() => (name, Some(context)),
        _ => (target, None),
    }
}

/// The targets of each endpoint, in the order first named (the environment's endpoint
/// first when the targets are not named).
pub fn by_endpoint(targets: &Targets) -> Vec<(Option<String>, Targets)> {
    let Targets::Named(list) = targets else {
        return vec![(None, targets.clone())];
    };
    let mut groups: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for item in list {
        let (name, context) = split_context(item);
        let context = context.map(str::to_string);
        match groups.iter_mut().find(|(c, _)| *c == context) {
            Some((_, names)) => names.push(name.to_string()),
            None => groups.push((context, vec![name.to_string()])),
        }
    }
    groups
        .into_iter()
        .map(|(c, names)| (c, Targets::Named(names)))
        .collect()
}

/// A container of the session and the endpoint it is on.
#[derive(Clone)]
struct Chosen {
    container: ContainerInfo,
    context: Option<String>,
    /// How rows and lines name it: the container's name, with `@CONTEXT` off the
    /// environment's endpoint.
    key: String,
}

/// An endpoint of the session: where it is, and its containers.
struct Reached {
    context: Option<String>,
    docker: Docker,
    containers: Vec<ContainerInfo>,
}

/// Connects to every endpoint the targets name and chooses their containers, the
/// endpoints side by side.
async fn reach(targets: &Targets) -> Result<Vec<Reached>> {
    let groups = by_endpoint(targets);
    let reached = join_all(groups.into_iter().map(|(context, targets)| async move {
        let docker = Docker::connect_to(context.as_deref()).await?;
        let containers = select(&targets, &docker.containers().await?)?;
        Ok::<_, Error>(Reached {
            context,
            docker,
            containers,
        })
    }))
    .await;
    reached.into_iter().collect()
}

/// Each endpoint's clock against this host's, measured in its first container, the
/// endpoints side by side. A clock that cannot be read is that endpoint's note, not the
/// session's end.
async fn clocks(reached: &[Reached]) -> Vec<std::result::Result<ClockOffset, String>> {
    join_all(reached.iter().map(|r| async move {
        let first = r.containers.first().ok_or("no container")?;
        clocks::measure(&r.docker.shell(first))
            .await
            .map_err(|e| reason(&e))
    }))
    .await
}

/// How far the clock of the endpoint named `context` runs ahead of this host's, in ns,
/// where the measurement before the window shows a shift (0 otherwise, or unmeasured).
fn clock_offset_ns(
    reached: &[Reached],
    clocks_before: &[std::result::Result<ClockOffset, String>],
    context: Option<&str>,
) -> i64 {
    reached
        .iter()
        .zip(clocks_before)
        .find(|(r, _)| r.context.as_deref() == context)
        .and_then(|(_, clock)| clock.as_ref().ok())
        .map_or(0, ClockOffset::known_shift_ns)
}

fn clock_text(clock: &std::result::Result<ClockOffset, String>) -> String {
    match clock {
        Ok(c) => format!("{:+.1} ms ± {:.1} ms", c.offset_ms, c.uncertainty_ms),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Every container once, keyed by name (and endpoint, when there are several).
fn choose(reached: &[Reached]) -> Vec<Chosen> {
    let mut chosen: Vec<Chosen> = Vec::new();
    for r in reached {
        for c in &r.containers {
            let key = match &r.context {
                Some(context) => format!("{}@{context}", c.name),
                None => c.name.clone(),
            };
            if chosen.iter().any(|o| o.key == key) {
                continue;
            }
            chosen.push(Chosen {
                container: c.clone(),
                context: r.context.clone(),
                key,
            });
        }
    }
    chosen
}

/// The endpoints and their clocks before and after the window (none for one endpoint).
fn endpoints(
    reached: &[Reached],
    several: bool,
    clocks_before: &[std::result::Result<ClockOffset, String>],
    clocks_after: &[std::result::Result<ClockOffset, String>],
) -> Vec<SessionEndpoint> {
    reached
        .iter()
        .enumerate()
        .filter(|_| several)
        .map(|(i, r)| {
            let before = clocks_before.get(i);
            let after = clocks_after.get(i);
            SessionEndpoint {
                context: r.context.clone().unwrap_or_else(|| "default".into()),
                address: r.docker.address().to_string(),
                containers: r.containers.iter().map(|c| c.name.clone()).collect(),
                clock_before: before.and_then(|c| c.as_ref().ok().copied()),
                clock_after: after.and_then(|c| c.as_ref().ok().copied()),
                clock_errors: before
                    .into_iter()
                    .chain(after)
                    .filter_map(|c| c.as_ref().err().cloned())
                    .collect(),
            }
        })
        .collect()
}

/// How the session's targets were named, for its record.
fn targets_text(targets: &Targets) -> String {
    match targets {
        Targets::Named(_) => "named".into(),
        Targets::Project(p) => format!("project {p}"),
        Targets::All => "all".into(),
    }
}

/// A kind as the session's record names it.
fn kind_text(kind: &Kind) -> String {
    match kind {
        Kind::Offcpu(config) => format!("offcpu:{config}"),
        k => k.name().to_string(),
    }
}

/// Runs the session: every capture of every container over one aligned window.
pub async fn run_session(
    settings: &ProfileSettings,
    interrupts: &mut Interrupts,
) -> Result<SessionOutcome> {
    let reached = reach(&settings.targets).await?;
    let several = reached.len() > 1 || reached.iter().any(|r| r.context.is_some());
    let chosen = choose(&reached);
    // Before the window: an endpoint's offset is needed to read what its containers stamp.
    let clocks_before = if several {
        clocks(&reached).await
    } else {
        Vec::new()
    };
    for (r, clock) in reached.iter().zip(&clocks_before) {
        eprintln!(
            "endpoint {} ({}): clock {} against this host's",
            r.context.as_deref().unwrap_or("default"),
            r.docker.address(),
            clock_text(clock)
        );
    }
    let mut plans: Vec<(Chosen, Kind, CaptureSettings)> = Vec::new();
    for c in &chosen {
        for kind in &settings.kinds {
            plans.push((
                c.clone(),
                kind.clone(),
                settings.capture(&c.container.name, kind)?,
            ));
        }
    }
    let stem = Stem::reserve(
        &settings.output_dir.join(SESSIONS_DIR),
        "session",
        Local::now(),
    )?;
    gate::set_session_name(&stem.file_name("json"));
    progress::start_session();
    let gate = StartGate::new(plans.len() + chosen.len());
    let lines: BTreeMap<String, Line> = chosen
        .iter()
        .map(|c| (c.key.clone(), Line::new(&c.key, &settings.kinds)))
        .collect();

    // One task runs every capture and meter (the recipes need not be Send); they wait on
    // their endpoints almost all the time, so they proceed side by side. Each runs with
    // its endpoint's context: its recipe connects by itself.
    let meters = chosen.iter().map(|c| {
        let ticket = gate.ticket();
        let mut ints = interrupts.subscribe();
        let window = settings.duration;
        async move {
            let reading = with_context(
                c.context.clone(),
                meter(&c.container.name, ticket, window, &mut ints),
            )
            .await;
            (c.key.clone(), reading.map_err(|e| reason(&e)))
        }
    });
    let runs = plans.into_iter().map(|(chosen, kind, capture)| {
        // Its container is told the instants to act at on its endpoint's clock.
        let offset_ns = clock_offset_ns(&reached, &clocks_before, chosen.context.as_deref());
        let ticket = gate.ticket().on_clock(offset_ns);
        let mut ints = interrupts.subscribe();
        let line = lines[&chosen.key].clone();
        let name = kind.name();
        async move {
            let result = with_context(
                chosen.context.clone(),
                gate::with_ticket(ticket, run_one(capture, &mut ints)),
            )
            .await;
            line.finished(name, &result);
            CaptureEnd {
                container: chosen.key,
                kind: name,
                result: result.map_err(|e| reason(&e)),
            }
        }
    });
    // Every party arrives or drops out, so the gate opens before the captures end.
    let announce = async {
        gate.opened().await;
        for line in lines.values() {
            line.recording();
        }
    };
    let (mut captures, readings, ()) = tokio::join!(join_all(runs), join_all(meters), announce);
    let readings: BTreeMap<String, std::result::Result<CpuReading, String>> =
        readings.into_iter().collect();
    for line in lines.values() {
        line.done();
    }
    // The windows start the release lead after the gate opened (capture/armed_stop.rs).
    let started_at = gate
        .opened_at()
        .map(|at| super::armed_stop::instant_on_wall_clock(at + super::armed_stop::RELEASE_LEAD))
        .unwrap_or_else(Local::now);

    // After the window: a clock that drifted, or was stepped, shows as a different offset.
    let clocks_after = if several {
        clocks(&reached).await
    } else {
        Vec::new()
    };
    let endpoints = endpoints(&reached, several, &clocks_before, &clocks_after);
    for (e, after) in endpoints.iter().zip(&clocks_after) {
        eprintln!(
            "endpoint {} after the window: clock {}",
            e.context,
            clock_text(after)
        );
    }
    if gate.opened_at().is_some() {
        cut_to_window(&mut captures, &endpoints, started_at, settings.duration);
    }
    let rows = chosen
        .iter()
        .map(|c| row(&c.key, &captures, readings.get(&c.key), settings.duration))
        .collect();
    let interrupted = interrupts.pending();
    let record = session_record(
        settings,
        started_at,
        interrupted,
        rows,
        &captures,
        endpoints,
    );
    let text = serde_json::to_string_pretty(&record).expect("session record serializes");
    std::fs::write(stem.path("json"), text + "\n")
        .map_err(|e| Error::io(format!("write {}", stem.path("json").display()), e))?;
    Ok(SessionOutcome {
        record,
        record_path: stem.path("json"),
        captures,
    })
}

/// Perf recorders that took samples past the window (stopping late on a loaded host) get
/// a copy cut to it; their whole recordings stay.
fn cut_to_window(
    captures: &mut [CaptureEnd],
    endpoints: &[SessionEndpoint],
    started_at: DateTime<Local>,
    duration: std::time::Duration,
) {
    let Some(start_ns) = started_at.timestamp_nanos_opt() else {
        return;
    };
    let end_ns = start_ns.saturating_add(duration.as_nanos() as i64);
    let done = captures.iter_mut().filter_map(|c| match &mut c.result {
        Ok(done) => Some((c.container.as_str(), done)),
        Err(_) => None,
    });
    for failure in super::alignment::cut_to_window(done, endpoints, start_ns, end_ns) {
        progress::note(None, &format!("warning: {failure}"));
    }
}

/// The session's own manifest.
fn session_record(
    settings: &ProfileSettings,
    started_at: DateTime<Local>,
    interrupted: bool,
    rows: Vec<SessionRow>,
    captures: &[CaptureEnd],
    endpoints: Vec<SessionEndpoint>,
) -> SessionRecord {
    SessionRecord {
        devprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kind: "session".into(),
        created: Local::now().to_rfc3339(),
        targets: targets_text(&settings.targets),
        kinds: settings.kinds.iter().map(kind_text).collect(),
        duration_requested_s: settings.duration.as_secs_f64(),
        started_at: super::session::instant_text(&started_at),
        interrupted,
        rows,
        captures: captures
            .iter()
            .map(|c| capture_record(c, &settings.output_dir))
            .collect(),
        thresholds: thresholds_text(),
        alignment: Some(super::alignment::measure(
            captures.iter().filter_map(|c| {
                c.result
                    .as_ref()
                    .ok()
                    .map(|done| (c.container.as_str(), c.kind, done))
            }),
            &endpoints,
        )),
        endpoints,
    }
}

/// An error as a row says it: its first two lines (what failed, and why or what next), on
/// one line.
fn reason(e: &Error) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn run_one(capture: CaptureSettings, ints: &mut Interrupts) -> Result<Done> {
    match capture {
        CaptureSettings::Cpu(s) => cpu::run_cpu(&s, ints).await,
        CaptureSettings::Heap(s) => heap::run_heap(&s, ints).await.map(Done::from),
        CaptureSettings::Offcpu(s) => offcpu::run_offcpu(&s, ints).await.map(Done::from),
    }
}

/// A container's CPU use over the window.
#[derive(Debug, Clone, Copy)]
struct CpuReading {
    pid: u32,
    cores: f64,
}

/// Reads the main process's CPU time when the gate opens and when the window ends (or
/// Ctrl-C ends it), through an exec in the container: nothing is read from this host.
async fn meter(
    container: &str,
    ticket: Ticket,
    window: Duration,
    interrupts: &mut Interrupts,
) -> Result<CpuReading> {
    let located = locate(container, &ProcessSelector::Main).await?;
    let pid = located.process.pid;
    ticket.arrive().await;
    let read = || async {
        let out = located
            .shell
            .run(&["cat", &format!("/proc/{pid}/stat")])
            .await?;
        let ticks = stat_ticks(&out.stdout).ok_or_else(|| Error::ProcessNotFound {
            container: container.to_string(),
            what: format!("pid {pid} is gone"),
            hint: format!(
                "/proc/{pid}/stat could not be read: the process exited or its container stopped"
            ),
        });
        Ok::<_, Error>((ticks?, Instant::now()))
    };
    let (before, t0) = read().await?;
    tokio::select! {
        _ = tokio::time::sleep(window) => {}
        _ = interrupts.next() => {}
    }
    let (after, t1) = read().await?;
    let secs = (t1 - t0).as_secs_f64().max(0.001);
    Ok(CpuReading {
        pid,
        cores: after.saturating_sub(before) as f64 / TICKS_PER_S / secs,
    })
}

fn row(
    container: &str,
    captures: &[CaptureEnd],
    reading: Option<&std::result::Result<CpuReading, String>>,
    window: Duration,
) -> SessionRow {
    let mine: Vec<&CaptureEnd> = captures
        .iter()
        .filter(|c| c.container == container)
        .collect();
    let done = |kind: &str| {
        mine.iter()
            .find(|c| c.kind == kind)
            .and_then(|c| c.result.as_ref().ok())
    };
    let mut errors: Vec<String> = mine
        .iter()
        .filter_map(|c| c.result.as_ref().err().map(|e| format!("{}: {e}", c.kind)))
        .collect();
    let cpu = match reading {
        Some(Ok(r)) => Some(*r),
        Some(Err(e)) => {
            // Said once when a capture already says why the container is gone.
            if errors.is_empty() {
                errors.push(format!("CPU reading: {e}"));
            }
            None
        }
        None => None,
    };
    let window_s = done("cpu")
        .map(|d| d.manifest.duration_recorded_s)
        .filter(|s| *s > 0.0)
        .unwrap_or(window.as_secs_f64());
    let samples = done("cpu").map(|d| d.manifest.sample_count);
    let heap_growth_bytes = done("heap")
        .and_then(|d| d.manifest.heap.as_ref())
        .and_then(|h| h.window_growth_bytes);
    let offcpu_s = done("offcpu")
        .and_then(|d| d.manifest.offcpu.as_ref())
        .and_then(|o| o.off_cpu.as_ref())
        .map(|o| o.total_us as f64 / 1e6);
    // Where the off-CPU time went, from the capture's off-CPU time stacks.
    let waits = done("offcpu")
        .and_then(|d| {
            let dir = d.manifest_path.parent()?;
            let file = d
                .manifest
                .files
                .iter()
                .find(|f| f.name.ends_with(".offcpu.folded"))?;
            crate::store::catalog::listed_path(dir, &file.name)
        })
        .and_then(|path| crate::store::loader::read(&path).ok())
        .map(|folded| Waits::of(&folded));
    // The verdict is judged on the figures the row shows, so its reason
    // quotes the table's own numbers (30.549% must not read 31% beside 30%).
    let thousandths = |x: f64| (x * 1000.0).round() / 1000.0;
    let cpu_cores = cpu.map(|c| thousandths(c.cores));
    let offcpu_s = offcpu_s.map(thousandths);
    let measured = Measured {
        cpu_cores,
        window_s,
        heap_growth_bytes,
        offcpu_s,
        waits,
    };
    SessionRow {
        container: container.to_string(),
        cpu_cores,
        pid: cpu.map(|c| c.pid),
        samples,
        heap_growth_bytes,
        offcpu_s,
        verdict: if errors.is_empty() {
            judge(&measured)
        } else {
            None
        },
        errors,
    }
}

fn capture_record(c: &CaptureEnd, output_dir: &Path) -> SessionCapture {
    let (manifest, started, stopped, error) = match &c.result {
        Ok(done) => (
            Some(
                done.manifest_path
                    .strip_prefix(output_dir)
                    .unwrap_or(&done.manifest_path)
                    .display()
                    .to_string(),
            ),
            done.manifest.window_started_at.clone(),
            done.manifest.window_stopped_at.clone(),
            None,
        ),
        Err(e) => (None, None, None, Some(e.clone())),
    };
    SessionCapture {
        container: c.container.clone(),
        kind: c.kind.to_string(),
        manifest,
        window_started_at: started,
        window_stopped_at: stopped,
        error,
    }
}

/// One container's progress line: its kinds and how each is going. Off a terminal, each
/// change is one plain line.
#[derive(Clone)]
struct Line {
    container: String,
    bar: ProgressBar,
    states: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl Line {
    fn new(container: &str, kinds: &[Kind]) -> Self {
        let line = Line {
            container: container.to_string(),
            bar: progress::session_line(container),
            states: Arc::new(Mutex::new(
                kinds
                    .iter()
                    .map(|k| (k.name(), "preparing".to_string()))
                    .collect(),
            )),
        };
        line.show();
        line
    }

    fn set(&self, kind: Option<&str>, state: &str) {
        {
            let mut states = self.states.lock().expect("line lock");
            for (k, s) in states.iter_mut() {
                if kind.is_none_or(|kind| kind == *k) && (kind.is_some() || s == "preparing") {
                    *s = state.to_string();
                }
            }
        }
        self.show();
    }

    fn show(&self) {
        let text = self
            .states
            .lock()
            .expect("line lock")
            .iter()
            .map(|(k, s)| format!("{k}: {s}"))
            .collect::<Vec<_>>()
            .join(" · ");
        if self.bar.is_hidden() || progress::start_session().is_hidden() {
            eprintln!("{}: {text}", self.container);
        } else {
            self.bar.set_message(text);
        }
    }

    fn recording(&self) {
        self.set(None, "recording");
    }

    fn finished(&self, kind: &str, result: &Result<Done>) {
        let state = match result {
            Ok(d) if d.manifest.kind == "cpu" => {
                format!("done, {} samples", d.manifest.sample_count)
            }
            Ok(_) => "done".to_string(),
            Err(e) => format!("failed: {}", truncate(first_line(&e.to_string()), 70)),
        };
        self.set(Some(kind), &state);
    }

    fn done(&self) {
        self.bar.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn container(name: &str, state: &str, project: Option<&str>, sidecar: bool) -> ContainerInfo {
        let mut labels = HashMap::new();
        if sidecar {
            labels.insert(SIDECAR_LABEL.to_string(), "x".to_string());
        }
        ContainerInfo {
            id: format!("{name}0123456789abcdef"),
            name: name.into(),
            image: "img".into(),
            state: state.into(),
            service: None,
            project: project.map(str::to_string),
            labels,
        }
    }

    #[test]
    fn targets_are_grouped_by_the_context_after_their_at_sign() {
        assert_eq!(
            split_context("demo-seq@podman"),
            ("demo-seq", Some("podman"))
        );
        assert_eq!(split_context("demo-seq"), ("demo-seq", None));
        // Nothing on one side: not a context.
        assert_eq!(split_context("demo-seq@"), ("demo-seq@", None));
        let named = |items: &[&str]| Targets::Named(items.iter().map(|s| s.to_string()).collect());
        let groups = by_endpoint(&named(&["a", "b@p", "c", "d@q", "e@p"]));
        assert_eq!(
            groups,
            vec![
                (None, named(&["a", "c"])),
                (Some("p".into()), named(&["b", "e"])),
                (Some("q".into()), named(&["d"])),
            ]
        );
        assert_eq!(by_endpoint(&Targets::All), vec![(None, Targets::All)]);
    }

    #[test]
    fn a_project_is_its_running_containers_without_sidecars() {
        let all = vec![
            container("b-seq", "running", Some("net"), false),
            container("a-rpc", "running", Some("net"), false),
            container("c-old", "exited", Some("net"), false),
            container("devprof-sidecar-x", "running", Some("net"), true),
            container("other", "running", Some("else"), false),
        ];
        let names = |t: &Targets| -> Vec<String> {
            select(t, &all)
                .unwrap()
                .into_iter()
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(names(&Targets::Project("net".into())), ["a-rpc", "b-seq"]);
        assert_eq!(names(&Targets::All), ["a-rpc", "b-seq", "other"]);
        assert_eq!(
            names(&Targets::Named(vec![
                "other".into(),
                "a-rpc".into(),
                "other".into()
            ])),
            ["other", "a-rpc"]
        );
        let err = select(&Targets::Project("none".into()), &all).unwrap_err();
        assert!(err.to_string().contains("compose project 'none'"), "{err}");
        assert!(select(&Targets::Named(vec!["c-old".into()]), &all).is_err());
    }
}
