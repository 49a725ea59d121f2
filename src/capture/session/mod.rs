//! Several containers and kinds in one window. Every (container, kind) capture runs the
//! same recipe as its single-target command, with a context of its own (its endpoint, its
//! seat at the session's start gate); each prepares (container, process, engine, sidecar,
//! work directory) and then waits at the gate, which opens when all are ready, so the
//! recorders start together. Beside them, one meter per container reads the process's CPU
//! time from /proc at the gate and at the end of the window (`record`). A capture that
//! fails is one row's error, never the session's end.

mod endpoints;
mod line;
mod record;

use super::context::CaptureCtx;
use super::gate::{Seat, StartGate};
use super::lifecycle::Captured;
use super::{cpu, heap, offcpu};
use crate::error::{Error, Result};
use crate::settings::profile::{CaptureSettings, Kind, ProfileSettings};
use crate::store::session::{SessionRecord, SESSIONS_DIR};
use crate::store::Stem;
use crate::ui::Reporter;
use chrono::Local;
use endpoints::{Chosen, Endpoints};
use futures_util::future::join_all;
use line::Line;
use record::{cut_to_window, kinds_given, meter, row, session_record, CpuReading};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use endpoints::{by_endpoint, select, split_context};

/// A finished capture of the session.
pub type Done = Captured;

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

/// Runs the session: every capture of every container over one aligned window.
pub async fn run_session(
    settings: &ProfileSettings,
    ctx: &mut CaptureCtx,
) -> Result<SessionOutcome> {
    let endpoints = Endpoints::reach(&settings.targets).await?;
    let mut plans: Vec<(Chosen, Kind, CaptureSettings)> = Vec::new();
    for c in &endpoints.chosen {
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
    let report = ctx.report.for_session();
    let gate = StartGate::new(plans.len() + endpoints.chosen.len());
    let window = Window {
        settings,
        ctx,
        report: &report,
        gate: &gate,
        endpoints: &endpoints,
        session: stem.file_name("json"),
    };
    let (mut captures, readings) = window.record(plans).await;
    // The windows start the release lead after the gate opened (capture/armed_stop.rs).
    let started_at = gate
        .opened_at()
        .map(|at| super::armed_stop::instant_on_wall_clock(at + super::armed_stop::RELEASE_LEAD))
        .unwrap_or_else(Local::now);
    let session_endpoints = endpoints.after_window().await;
    if gate.opened_at().is_some() {
        let duration = settings.duration;
        cut_to_window(
            &mut captures,
            &session_endpoints,
            started_at,
            duration,
            &report,
        );
    }
    let given = kinds_given(settings);
    let rows = endpoints
        .chosen
        .iter()
        .map(|c| {
            let reading = readings.get(&c.key);
            row(&c.key, &captures, reading, settings.duration, given)
        })
        .collect();
    let interrupted = ctx.interrupts.pending();
    let record = session_record(
        settings,
        started_at,
        interrupted,
        rows,
        &captures,
        session_endpoints,
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

/// The session's one window: what every capture and meter shares.
struct Window<'a> {
    settings: &'a ProfileSettings,
    ctx: &'a CaptureCtx,
    report: &'a Reporter,
    gate: &'a StartGate,
    endpoints: &'a Endpoints,
    /// The session's manifest name, in every capture's manifest.
    session: String,
}

type Readings = BTreeMap<String, std::result::Result<CpuReading, String>>;

impl Window<'_> {
    /// A capture's context: its endpoint, its seat, the session's display, Ctrl-C.
    fn capture_ctx(&self, endpoint: Option<String>, seat: Option<Seat>) -> CaptureCtx {
        CaptureCtx {
            endpoint,
            marks: self.ctx.marks.clone(),
            seat,
            report: self.report.clone(),
            interrupts: self.ctx.interrupts.subscribe(),
            fault: self.ctx.fault,
            pause: self.ctx.pause.clone(),
        }
    }

    /// Every capture and meter, on one task (the recipes need not be Send): they wait on
    /// their endpoints almost all the time, so they proceed side by side. Each runs with
    /// its endpoint's context: its recipe connects by itself.
    async fn record(
        &self,
        plans: Vec<(Chosen, Kind, CaptureSettings)>,
    ) -> (Vec<CaptureEnd>, Readings) {
        let kinds = &self.settings.kinds;
        let lines: BTreeMap<String, Line> = self
            .endpoints
            .chosen
            .iter()
            .map(|c| (c.key.clone(), Line::new(&c.key, kinds, self.report)))
            .collect();
        let meters = self.endpoints.chosen.iter().map(|c| {
            let ticket = self.gate.ticket();
            let mut meter_ctx = self.capture_ctx(c.context.clone(), None);
            meter_ctx.fault = None;
            let window = self.settings.duration;
            async move {
                let reading = meter(&c.container.name, ticket, window, &mut meter_ctx).await;
                (c.key.clone(), reading.map_err(|e| reason(&e)))
            }
        });
        let runs = plans.into_iter().map(|(chosen, kind, capture)| {
            // Its container is told the instants to act at on its endpoint's clock.
            let offset_ns = self.endpoints.offset_ns(chosen.context.as_deref());
            let ticket = self.gate.ticket().on_clock(offset_ns);
            let seat = Seat::new(self.session.clone(), ticket);
            let mut capture_ctx = self.capture_ctx(chosen.context.clone(), Some(seat));
            let line = lines[&chosen.key].clone();
            let name = kind.name();
            async move {
                let result = run_one(capture, &mut capture_ctx).await;
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
            self.gate.opened().await;
            for line in lines.values() {
                line.recording();
            }
        };
        let (captures, readings, ()) = tokio::join!(join_all(runs), join_all(meters), announce);
        for line in lines.values() {
            line.done();
        }
        (captures, readings.into_iter().collect())
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

async fn run_one(capture: CaptureSettings, ctx: &mut CaptureCtx) -> Result<Done> {
    match capture {
        CaptureSettings::Cpu(s) => cpu::run_cpu(&s, ctx).await,
        CaptureSettings::Heap(s) => heap::run_heap(&s, ctx).await,
        CaptureSettings::Offcpu(s) => offcpu::run_offcpu(&s, ctx).await,
    }
}
