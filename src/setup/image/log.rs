//! The build log as the engine streams it: which step runs (`Step 7/15 : RUN cargo
//! build ...`), the output of the current step (kept for the failure report), and the
//! image id. Pure: text in, state out.

use crate::text::strip_ansi;
use std::collections::VecDeque;

/// Lines of the failing step's output kept for the error message.
const TAIL_LINES: usize = 25;

#[derive(Debug, Clone, Default)]
pub struct BuildLog {
    /// The step running now, as the engine names it (`Step 7/15 : RUN cargo build ...`).
    pub step: Option<String>,
    /// Whether the current step was answered from the cache.
    pub cached: bool,
    pub steps_cached: usize,
    /// Steps the engine announced.
    pub steps_total: usize,
    /// The image id from `Successfully built <id>`.
    pub built: Option<String>,
    partial: String,
    tail: VecDeque<String>,
}

/// What a chunk of output changed, for the spinner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogEvent {
    Step(String),
    Line(String),
}

impl BuildLog {
    /// Takes a chunk of the `stream` text (lines may be split across chunks).
    pub fn push(&mut self, chunk: &str) -> Vec<LogEvent> {
        self.partial.push_str(chunk);
        let mut events = Vec::new();
        while let Some(newline) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=newline).collect();
            let line = line.trim_end().to_string();
            if let Some(event) = self.line(line) {
                events.push(event);
            }
        }
        events
    }

    fn line(&mut self, line: String) -> Option<LogEvent> {
        let line = strip_ansi(&line);
        let trimmed = line.trim();
        if let Some(step) = step_line(trimmed) {
            self.steps_total += 1;
            self.step = Some(step.clone());
            self.cached = false;
            self.tail.clear();
            return Some(LogEvent::Step(step));
        }
        // Docker's classic builder: `---> Using cache`; buildah (Podman): `--> Using cache ID`.
        if trimmed == "---> Using cache" || trimmed.starts_with("--> Using cache") {
            self.cached = true;
            self.steps_cached += 1;
            return None;
        }
        if let Some(id) = trimmed.strip_prefix("Successfully built ") {
            self.built = Some(id.to_string());
            return None;
        }
        if trimmed.starts_with("---> ")
            || trimmed.starts_with("--> ")
            || trimmed.starts_with("Removing intermediate container")
            || trimmed.starts_with("Successfully tagged")
            || trimmed.is_empty()
        {
            return None;
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.clone());
        Some(LogEvent::Line(line))
    }

    /// The last lines the current step printed.
    pub fn tail(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.tail.iter().cloned().collect();
        if !self.partial.trim().is_empty() {
            lines.push(self.partial.trim_end().to_string());
        }
        lines
    }
}

/// A step's announcement in Docker's words (`Step 7/15 : RUN cargo build`), also when
/// buildah, Podman's builder, announces it (`STEP 7/15: RUN cargo build`).
fn step_line(line: &str) -> Option<String> {
    if line.starts_with("Step ") && line.contains(" : ") {
        return Some(line.to_string());
    }
    let rest = line.strip_prefix("STEP ")?;
    let (number, instruction) = rest.split_once(": ")?;
    let (n, m) = number.split_once('/')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(n) && digits(m)).then(|| format!("Step {number} : {instruction}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buildahs_steps_are_read_as_dockers() {
        // As Podman 4.3's /build streamed a failing build on the test bed.
        let mut log = BuildLog::default();
        log.push("STEP 1/5: FROM debian:bookworm-slim\nSTEP 2/5: RUN echo devprof-test-marker && exit 3\n");
        log.push("devprof-test-marker\n");
        assert_eq!(
            log.step.as_deref(),
            Some("Step 2/5 : RUN echo devprof-test-marker && exit 3")
        );
        assert_eq!(log.steps_total, 2);
        assert_eq!(log.tail(), ["devprof-test-marker"]);
        log.push("STEP 3/5: USER root\n--> Using cache 1f0e6c0b9a2d\n--> 1f0e6c0b9a2d\n");
        assert_eq!((log.steps_total, log.steps_cached), (3, 1));
        assert!(log.tail().is_empty());
        // Neither a step nor a number: output.
        assert_eq!(step_line("STEP x/5: RUN"), None);
        assert_eq!(step_line("STEPS 1/5: RUN"), None);
    }

    /// Output of a real classic-builder run (Docker 20.10), split at awkward places.
    const LOG: &str =
        "Step 1/4 : ARG FROM_IMAGE\nStep 2/4 : FROM ${FROM_IMAGE}\n ---> ccd69f65ba64\n\
Step 3/4 : USER root\n ---> Using cache\n ---> 1f0e6c0b9a2d\n\
Step 4/4 : RUN apt-get update && apt-get install -y nope\n ---> Running in 5d2c1f0a\n\
Get:1 bookworm InRelease [151 kB]\nReading package lists...\nE: Unable to locate package nope\n";

    #[test]
    fn follows_steps_and_keeps_the_failing_steps_output() {
        let mut log = BuildLog::default();
        let mut events = Vec::new();
        for chunk in LOG.as_bytes().chunks(17) {
            events.extend(log.push(std::str::from_utf8(chunk).unwrap()));
        }
        let steps: Vec<&LogEvent> = events
            .iter()
            .filter(|e| matches!(e, LogEvent::Step(_)))
            .collect();
        assert_eq!(steps.len(), 4);
        assert_eq!(
            log.step.as_deref(),
            Some("Step 4/4 : RUN apt-get update && apt-get install -y nope")
        );
        assert_eq!((log.steps_cached, log.steps_total), (1, 4));
        assert_eq!(
            log.tail(),
            vec![
                "Get:1 bookworm InRelease [151 kB]",
                "Reading package lists...",
                "E: Unable to locate package nope"
            ]
        );
    }

    #[test]
    fn colours_are_dropped() {
        let mut log = BuildLog::default();
        log.push("Step 1/1 : RUN cargo build\n\u{1b}[91m    Updating\u{1b}[0m\u{1b}[91m crates.io index\n");
        assert_eq!(log.tail(), vec!["    Updating crates.io index"]);
    }

    #[test]
    fn sees_the_image_id() {
        let mut log = BuildLog::default();
        log.push("Step 1/1 : FROM debian\n ---> ccd69f65ba64\nSuccessfully built ccd69f65ba64\nSuccessfully tagged x:latest\n");
        assert_eq!(log.built.as_deref(), Some("ccd69f65ba64"));
        assert!(log.tail().is_empty());
    }
}
