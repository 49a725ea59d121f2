//! One container's progress line in a session's display: its kinds and how each is
//! going. Off a terminal, each change is one plain line.

use super::Done;
use crate::error::Result;
use crate::settings::profile::Kind;
use crate::text::{first_line, truncate};
use crate::ui::Reporter;
use indicatif::ProgressBar;
use std::sync::{Arc, Mutex};

/// One container's progress line: its kinds and how each is going. Off a terminal, each
/// change is one plain line.
#[derive(Clone)]
pub(super) struct Line {
    container: String,
    bar: ProgressBar,
    report: Reporter,
    states: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl Line {
    pub(super) fn new(container: &str, kinds: &[Kind], report: &Reporter) -> Self {
        let line = Line {
            container: container.to_string(),
            bar: report.session_line(container),
            report: report.clone(),
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
        if self.bar.is_hidden() || self.report.session_hidden() {
            crate::say!("{}: {text}", self.container);
        } else {
            crate::ui::Reporter::bar_message(&self.bar, &text);
        }
    }

    pub(super) fn recording(&self) {
        self.set(None, "recording");
    }

    pub(super) fn finished(&self, kind: &str, result: &Result<Done>) {
        let state = match result {
            Ok(d) if d.manifest.kind == "cpu" => {
                format!("done, {} samples", d.manifest.sample_count)
            }
            Ok(_) => "done".to_string(),
            Err(e) => format!("failed: {}", truncate(first_line(&e.to_string()), 70)),
        };
        self.set(Some(kind), &state);
    }

    pub(super) fn done(&self) {
        self.bar.finish();
    }
}
