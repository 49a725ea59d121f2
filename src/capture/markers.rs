//! Markers during a recording window: the target's log stream is followed from the moment
//! the window opens (`docker::logs`), every line is matched against the marker rules
//! (`profile::markers`), and when the window closes the stream is drained briefly for
//! lines stamped inside the window that are still on their way, then the markers of the
//! window are written as `<stem>.markers`. The one hook is `session::record`; the rules
//! come from the command line once per run (`configure`), like the session's name in
//! `gate`, so every kind's recipe gets them without carrying them.
//!
//! Lines are data: bounded in length (`docker::logs`), cleaned and matched only
//! (`profile::markers::rules`), bounded in count (`MAX_MARKERS`).

use crate::docker::logs::{LogEvent, LogLine};
use crate::docker::target::ContainerInfo;
use crate::docker::Docker;
use crate::profile::markers::rules::{clean_line, Matcher, Rule};
use crate::profile::markers::{Header, MarkPlan, Marker, Markers, RuleRecord, MAX_MARKERS};
use crate::store::Stem;
use chrono::{DateTime, Local};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

static PLAN: OnceLock<MarkPlan> = OnceLock::new();

/// Sets this run's marker rules (once; commands that record call it). A run that never
/// calls it (stat, heap) follows no logs.
pub fn configure(plan: MarkPlan) {
    let _ = PLAN.set(plan);
}

/// The rules for `container`, empty when none apply.
pub fn rules_for(plan: &MarkPlan, container: &ContainerInfo) -> Vec<Rule> {
    let names: Vec<&str> = [
        Some(container.image.as_str()),
        Some(container.name.as_str()),
        container.service.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    plan.rules_for(&names)
}

/// How long the stream is read after the window closes, for lines still on their way.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
/// A line stamped this long after the window's end shows the engine has sent everything
/// before it: the drain stops there.
const PAST_END_NS: i64 = 250_000_000;
/// Line times kept to count the lines of the window exactly; past it, lines are counted
/// without their time.
const MAX_COUNTED: usize = 1 << 20;

/// A log stream being followed.
pub struct Follower {
    container: String,
    matcher: Matcher,
    since: DateTime<Local>,
    stop: Option<oneshot::Sender<i64>>,
    task: JoinHandle<Collected>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        // An aborted window leaves no task reading the engine's stream.
        self.task.abort();
    }
}

#[derive(Default)]
struct Collected {
    markers: Vec<Marker>,
    times: Vec<i64>,
    uncounted: u64,
    cut: u64,
    dropped: u64,
    ended: Option<String>,
}

/// Starts following `container`'s logs now, when this run has rules for it.
pub fn follow(docker: &Docker, container: &ContainerInfo) -> Option<Follower> {
    let plan = PLAN.get()?;
    let rules = rules_for(plan, container);
    if rules.is_empty() {
        return None;
    }
    let matcher = Matcher::new(rules);
    let since = Local::now();
    // The engine filters by whole seconds: one earlier, then by the exact instant here.
    let rx = docker.follow_logs(&container.id, since.timestamp() - 1);
    let (stop, stopped) = oneshot::channel();
    let since_ns = since.timestamp_nanos_opt().unwrap_or(0);
    let task = tokio::spawn(collect(rx, matcher.clone(), since_ns, stopped));
    Some(Follower {
        container: container.name.clone(),
        matcher,
        since,
        stop: Some(stop),
        task,
    })
}

async fn collect(
    mut rx: mpsc::Receiver<LogEvent>,
    matcher: Matcher,
    since_ns: i64,
    mut stopped: oneshot::Receiver<i64>,
) -> Collected {
    let mut got = Collected::default();
    let mut until: Option<(i64, tokio::time::Instant)> = None;
    loop {
        let event = match until {
            None => tokio::select! {
                event = rx.recv() => event,
                end = &mut stopped => {
                    until = Some((end.unwrap_or(i64::MAX), tokio::time::Instant::now() + DRAIN_LIMIT));
                    continue;
                }
            },
            Some((_, deadline)) => match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(event) => event,
                Err(_) => break,
            },
        };
        match event {
            None => break,
            Some(LogEvent::End(why)) => {
                got.ended = why;
                break;
            }
            Some(LogEvent::Line(line)) => {
                if line.time_ns < since_ns {
                    continue;
                }
                if let Some((end, _)) = until {
                    if line.time_ns > end.saturating_add(PAST_END_NS) {
                        break;
                    }
                }
                take(&mut got, &matcher, line);
            }
        }
    }
    got
}

fn take(got: &mut Collected, matcher: &Matcher, line: LogLine) {
    if got.times.len() < MAX_COUNTED {
        got.times.push(line.time_ns);
    } else {
        got.uncounted += 1;
    }
    let (text, cut) = clean_line(&line.text);
    if cut || line.cut {
        got.cut += 1;
    }
    if let Some(marker) = matcher.marker(line.time_ns, &text) {
        if got.markers.len() < MAX_MARKERS {
            got.markers.push(marker);
        } else {
            got.dropped += 1;
        }
    }
}

/// What following the logs gave: written beside the capture, or why not.
#[derive(Debug, Clone, Default)]
pub struct MarkersOutcome {
    /// The `.markers` file, when one was written.
    pub path: Option<std::path::PathBuf>,
    pub count: usize,
    pub notes: Vec<String>,
}

impl Follower {
    /// Ends the window at `until`: drains the stream, keeps the markers of
    /// `[since, until]`, writes `<stem>.markers`.
    pub async fn finish(mut self, until: DateTime<Local>, stem: &Stem) -> MarkersOutcome {
        let until_ns = until.timestamp_nanos_opt().unwrap_or(i64::MAX);
        let since_ns = self.since.timestamp_nanos_opt().unwrap_or(0);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(until_ns);
        }
        let got: Collected = (&mut self.task).await.unwrap_or_default();
        let in_window = |t: i64| since_ns <= t && t <= until_ns;
        let lines_read = got.times.iter().filter(|t| in_window(**t)).count() as u64 + got.uncounted;
        let markers: Vec<Marker> = got
            .markers
            .into_iter()
            .filter(|m| in_window(m.time_ns))
            .collect();
        let mut notes = Vec::new();
        if let Some(why) = &got.ended {
            notes.push(format!(
                "the logs of {} could not be read ({}); no markers (a log driver the engine cannot read back, such as `none`, gives none)",
                self.container,
                crate::text::first_line(why)
            ));
        } else if lines_read == 0 {
            notes.push(format!(
                "{} logged nothing during the window; no markers",
                self.container
            ));
        } else if markers.is_empty() {
            notes.push(format!(
                "none of the {lines_read} log lines of {} matched a marker rule (devprof cpu --mark help lists them; add one with --mark NAME=REGEX)",
                self.container
            ));
        }
        if got.dropped > 0 {
            notes.push(format!(
                "{} more markers than the {MAX_MARKERS} kept; narrow the rules",
                got.dropped
            ));
        }
        let mut sets: Vec<String> = Vec::new();
        for rule in &self.matcher.rules {
            if !sets.contains(&rule.set) {
                sets.push(rule.set.clone());
            }
        }
        let header = Header {
            container: self.container.clone(),
            since_ns,
            until_ns,
            sets,
            rules: self
                .matcher
                .rules
                .iter()
                .map(|r| RuleRecord {
                    set: r.set.clone(),
                    name: r.name.clone(),
                    regex: r.regex.as_str().to_string(),
                })
                .collect(),
            lines_read,
            lines_cut: got.cut,
            dropped: got.dropped,
            notes: notes.clone(),
            ..Default::default()
        };
        let file = Markers::new(header, markers);
        let count = file.markers.len();
        let path = stem.path("markers");
        let written =
            std::fs::File::create(&path).and_then(|f| file.write_to(std::io::BufWriter::new(f)));
        match written {
            Ok(()) => MarkersOutcome {
                path: Some(path),
                count,
                notes,
            },
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                notes.push(format!("could not write {}: {e}", path.display()));
                MarkersOutcome {
                    path: None,
                    count: 0,
                    notes,
                }
            }
        }
    }
}
