//! Markers during a recording window: the target's log stream is followed from the moment
//! the window opens (`docker::logs`), every line is matched against the marker rules
//! (`profile::markers`), and when the window closes the lines stamped inside it that are
//! still on their way are read back once from the engine's log (the stream is drained
//! briefly where that read fails), then the markers of the
//! window are written as `<stem>.markers`. The one hook is `window::record`; the rules
//! come from the capture's context (`CaptureCtx::marks`), so every kind's recipe follows
//! the same rules without carrying them.
//!
//! Lines are data: bounded in length (`docker::logs`), cleaned and matched only
//! (`profile::markers::rules`), bounded in count (`MAX_MARKERS`) and in the bytes of their
//! text (`MAX_MARKER_BYTES`).

use crate::docker::logs::{LogEvent, LogLine};
use crate::docker::target::ContainerInfo;
use crate::docker::Docker;
use crate::profile::markers::rules::{clean_line, Matcher, Rule};
use crate::profile::markers::{
    Budget, Header, MarkPlan, Marker, Markers, RuleRecord, MAX_MARKERS, MAX_MARKER_BYTES,
};
use crate::store::Stem;
use chrono::{DateTime, Local};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

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
const PAST_END_NS: i64 = 150_000_000;
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
    /// What the markers kept so far hold, against the count and byte caps.
    budget: Budget,
    times: Vec<i64>,
    uncounted: u64,
    cut: u64,
    dropped: u64,
    ended: Option<String>,
    /// The stamp of the newest line taken (before the window's start when none was).
    newest_ns: i64,
    /// The lines taken in the last `RECENT_NS` (stamp, hash of the text), oldest first,
    /// at most `MAX_RECENT`: what a read-back gives again and must not be taken twice.
    /// Stamps are not in order (the engine stamps stdout and stderr apart), so a line is
    /// known by both.
    recent: std::collections::VecDeque<(i64, u64)>,
    recent_set: std::collections::HashSet<(i64, u64)>,
}

/// How far back the read-back looks for lines the stream had not given yet.
const RECENT_NS: i64 = 2_000_000_000;
const MAX_RECENT: usize = 1 << 16;

impl Collected {
    fn remember(&mut self, key: (i64, u64)) {
        self.recent.push_back(key);
        self.recent_set.insert(key);
        let horizon = self.newest_ns.saturating_sub(RECENT_NS);
        while let Some(&oldest) = self.recent.front() {
            if oldest.0 >= horizon && self.recent.len() <= MAX_RECENT {
                break;
            }
            self.recent.pop_front();
            self.recent_set.remove(&oldest);
        }
    }

    /// Whether this very line (stamp and text) was taken already.
    fn has(&self, line: &LogLine) -> bool {
        self.recent_set.contains(&line_key(line))
    }

    /// The earliest stamp the remembered lines cover: a read-back from there gives back
    /// nothing taken that it could not recognise.
    fn remembered_from(&self) -> i64 {
        let horizon = self.newest_ns.saturating_sub(RECENT_NS);
        match self.recent.front() {
            Some(&(oldest, _)) if self.recent.len() >= MAX_RECENT => oldest.max(horizon),
            _ => horizon,
        }
    }
}

fn line_key(line: &LogLine) -> (i64, u64) {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    line.text.hash(&mut hasher);
    (line.time_ns, hasher.finish())
}

/// Starts following `container`'s logs now, when `plan` has rules for it.
pub fn follow(
    plan: Option<&MarkPlan>,
    docker: &Docker,
    container: &ContainerInfo,
) -> Option<Follower> {
    let plan = plan?;
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
    let (engine, id) = (docker.clone(), container.id.clone());
    let read_back: ReadBack =
        Box::new(move |from_s, until_s| engine.logs_until(&id, from_s, until_s));
    let task = tokio::spawn(collect(rx, matcher.clone(), since_ns, stopped, read_back));
    Some(Follower {
        container: container.name.clone(),
        matcher,
        since,
        stop: Some(stop),
        task,
    })
}

/// Reads the logs from one second to another once (`Docker::logs_until`).
type ReadBack = Box<dyn FnOnce(i64, i64) -> mpsc::Receiver<LogEvent> + Send>;

/// Takes the lines the engine holds up to `end` that the stream had not given, read back
/// once when the window closes: a read that ends by itself has given them all, where the
/// followed stream was drained for up to `DRAIN_LIMIT` waiting for a later line (most of a
/// second after every window of a quiet container). The read waits until `PAST_END_NS`
/// after the end, so a line stamped in the window is written by then (the drain asked the
/// same margin of the engine's stamps), and it looks back `RECENT_NS` for lines stamped
/// earlier than one the stream gave (stdout and stderr are stamped apart). False when the
/// read failed or did not end in time: the stream is drained then, as before.
async fn read_back_tail(
    read_back: ReadBack,
    got: &mut Collected,
    matcher: &Matcher,
    since_ns: i64,
    end: i64,
) -> bool {
    const NS: i64 = 1_000_000_000;
    let last = end.saturating_add(PAST_END_NS);
    let now = Local::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    if now < last {
        tokio::time::sleep(Duration::from_nanos((last - now) as u64)).await;
    }
    let from = got.remembered_from().max(since_ns);
    let mut rx = read_back(from.div_euclid(NS), last.div_euclid(NS) + 1);
    let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(LogEvent::Line(line))) => {
                if (from..=last).contains(&line.time_ns) && !got.has(&line) {
                    take(got, matcher, line);
                }
            }
            Ok(Some(LogEvent::End(None))) => return true,
            Ok(Some(LogEvent::End(Some(_))) | None) | Err(_) => return false,
        }
    }
}

async fn collect(
    mut rx: mpsc::Receiver<LogEvent>,
    matcher: Matcher,
    since_ns: i64,
    mut stopped: oneshot::Receiver<i64>,
    read_back: ReadBack,
) -> Collected {
    let mut got = Collected {
        newest_ns: since_ns.saturating_sub(1),
        ..Collected::default()
    };
    let mut until: Option<(i64, tokio::time::Instant)> = None;
    let mut read_back = Some(read_back);
    // After a read-back that failed part way, what it took is not taken again.
    let mut read_back_failed = false;
    loop {
        let event = match until {
            None => tokio::select! {
                event = rx.recv() => event,
                end = &mut stopped => {
                    let end = end.unwrap_or(i64::MAX);
                    if let Some(read) = read_back.take().filter(|_| end != i64::MAX) {
                        if read_back_tail(read, &mut got, &matcher, since_ns, end).await {
                            break;
                        }
                        read_back_failed = true;
                    }
                    until = Some((end, tokio::time::Instant::now() + DRAIN_LIMIT));
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
                if line.time_ns < since_ns || (read_back_failed && got.has(&line)) {
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
    got.newest_ns = got.newest_ns.max(line.time_ns);
    got.remember(line_key(&line));
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
        if got.budget.admit(&marker) {
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
                "{} more markers than the {MAX_MARKERS} (or {} MiB of their text) kept; narrow the rules",
                got.dropped,
                MAX_MARKER_BYTES >> 20
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(time_ns: i64, text: &str) -> LogEvent {
        LogEvent::Line(LogLine {
            time_ns,
            text: text.as_bytes().to_vec(),
            cut: false,
        })
    }

    fn matcher() -> Matcher {
        Matcher::new(vec![Rule::new("t", "block", r"block (\d+)").unwrap()])
    }

    const S: i64 = 1_000_000_000;

    /// A quiet container's window cost a second after its end: the stream was drained
    /// until a later line came or `DRAIN_LIMIT` passed. The tail is read back once now.
    #[tokio::test(start_paused = true)]
    async fn the_tail_is_read_back_once_not_drained_for_a_second() {
        let (tx, rx) = mpsc::channel(16);
        let (stop, stopped) = oneshot::channel();
        let asked = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = asked.clone();
        let read_back: ReadBack = Box::new(move |from, until| {
            *seen.lock().unwrap() = Some((from, until));
            let (tx, rx) = mpsc::channel(16);
            // What the engine's log holds: one line the stream gave, three it had not yet
            // (one stamped before it: stderr and stdout are stamped apart), one past the
            // window's end and its margin.
            for event in [
                line(100 * S + 10, "block 1"),
                line(100 * S + 5, "block 0"),
                line(100 * S + 20, "block 2"),
                line(101 * S, "block 3"),
                line(103 * S, "block 4"),
                LogEvent::End(None),
            ] {
                tx.try_send(event).unwrap();
            }
            rx
        });
        tx.send(line(100 * S + 10, "block 1")).await.unwrap();
        let task = tokio::spawn(collect(rx, matcher(), 99 * S, stopped, read_back));
        tokio::task::yield_now().await;
        let started = tokio::time::Instant::now();
        stop.send(101 * S).unwrap();
        let got = task.await.unwrap();
        assert!(started.elapsed() < DRAIN_LIMIT / 10, "no drain");
        // From RECENT_NS before the newest line the stream gave (not before the window).
        assert_eq!(*asked.lock().unwrap(), Some((99, 102)));
        let mut blocks: Vec<i64> = got.markers.iter().map(|m| m.time_ns).collect();
        blocks.sort();
        assert_eq!(
            blocks,
            [100 * S + 5, 100 * S + 10, 100 * S + 20, 101 * S],
            "each once"
        );
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_back_the_engine_refuses_falls_back_to_the_drain() {
        let (tx, rx) = mpsc::channel(16);
        let (stop, stopped) = oneshot::channel();
        let read_back: ReadBack = Box::new(|_, _| {
            let (tx, rx) = mpsc::channel(4);
            tx.try_send(line(100 * S + 10, "block 1")).unwrap();
            tx.try_send(LogEvent::End(Some("until is not supported".into())))
                .unwrap();
            rx
        });
        let task = tokio::spawn(collect(rx, matcher(), 99 * S, stopped, read_back));
        stop.send(101 * S).unwrap();
        tokio::task::yield_now().await;
        // The stream still brings the window's lines; the one read back is not taken twice.
        tx.send(line(100 * S + 10, "block 1")).await.unwrap();
        tx.send(line(100 * S + 30, "block 2")).await.unwrap();
        let got = task.await.unwrap();
        let blocks: Vec<i64> = got.markers.iter().map(|m| m.time_ns).collect();
        assert_eq!(blocks, [100 * S + 10, 100 * S + 30]);
    }
}
