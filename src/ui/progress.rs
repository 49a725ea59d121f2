//! What a command shows on stderr while it works, as one value it is given (`Reporter`):
//! progress bars and spinners (indicatif hides them when stderr is not a terminal), notes
//! above them, a session's display of one line per container, and the instants each phase
//! ended at for `--verbose`. `--quiet` and `--verbose` live here, set once from the
//! command line; nothing reads them from a global.

use super::phases::Phases;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Arc;
use std::time::Duration;

/// A window's bar text: elapsed and remaining seconds, from its position and length in
/// tenths of a second.
fn window_seconds(tenths: u64, length: Option<u64>) -> String {
    let elapsed = tenths as f64 / 10.0;
    match length {
        Some(length) => {
            let left = length.saturating_sub(tenths) as f64 / 10.0;
            format!(
                "{elapsed:.1} s of {:.0} s, {left:.1} s left",
                length as f64 / 10.0
            )
        }
        None => format!("{elapsed:.1} s"),
    }
}

/// How a command reports its progress. Cheap to clone: clones share the phases and the
/// session display.
#[derive(Clone)]
pub struct Reporter {
    quiet: bool,
    verbose: bool,
    /// A multi-target session's display: one line per container, which the session draws
    /// itself; the captures' own bars stay hidden while it is set.
    session: Option<MultiProgress>,
    phases: Arc<Phases>,
}

impl Default for Reporter {
    fn default() -> Self {
        Reporter::new(false, false)
    }
}

impl Reporter {
    /// `--quiet`: no progress display and no notes; results, warnings and errors only.
    /// `--verbose`: the details a command can give. The command starts now.
    pub fn new(quiet: bool, verbose: bool) -> Self {
        let phases = Phases::default();
        phases.mark("started");
        Reporter {
            quiet,
            verbose,
            session: None,
            phases: Arc::new(phases),
        }
    }

    pub fn quiet(&self) -> bool {
        self.quiet
    }

    pub fn verbose(&self) -> bool {
        self.verbose
    }

    /// `phase` ended now (printed after the summary with `--verbose`).
    pub fn mark(&self, phase: &'static str) {
        self.phases.mark(phase);
    }

    /// Each phase with the time it took, when anything was marked after the start.
    pub fn phases(&self) -> Option<String> {
        self.phases.report()
    }

    /// The same reporter drawing a session's display: the captures' own bars hide.
    pub fn for_session(&self) -> Reporter {
        Reporter {
            session: Some(MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            ..self.clone()
        }
    }

    /// Whether nothing of a session's display is drawn (no terminal, or no session).
    pub fn session_hidden(&self) -> bool {
        self.session.as_ref().is_none_or(MultiProgress::is_hidden)
    }

    /// One container's line in the session display (hidden off a terminal).
    pub fn session_line(&self, label: &str) -> ProgressBar {
        let Some(session) = self.session.as_ref().filter(|_| !self.quiet) else {
            return ProgressBar::hidden();
        };
        let bar = session.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix:<24} {elapsed:>4} {msg}")
                .expect("valid template"),
        );
        bar.set_prefix(crate::text::printable(label));
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }

    /// A bar over the capture window, in tenths of a second.
    pub fn capture_bar(&self, window: Duration, label: &str) -> ProgressBar {
        if self.session.is_some() || self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(
            Some((window.as_millis() / 100) as u64),
            ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            ProgressStyle::with_template("{prefix} [{bar:40.cyan/blue}] {seconds} {msg}")
                .expect("valid template")
                .with_key(
                    "seconds",
                    |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&window_seconds(state.pos(), state.len()));
                    },
                )
                .progress_chars("=> "),
        );
        bar.set_prefix(crate::text::printable(label));
        bar
    }

    /// A spinner for work of unknown length (download, folding).
    pub fn spinner(&self, message: &str) -> ProgressBar {
        if self.session.is_some() || self.quiet {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template"),
        );
        bar.set_message(crate::text::printable(message));
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    /// Sets `bar`'s message to `text`, written on one line (`text::printable`): a bar's
    /// message is redrawn in place, where a line feed or an escape would tear it.
    pub fn bar_message(bar: &ProgressBar, text: &str) {
        bar.set_message(crate::text::printable(text));
    }

    /// A step before the window is done, said on a line of its own (hidden with --quiet
    /// and in a session, whose display says it): no silence while a capture sets up.
    pub fn step(&self, text: &str) {
        if self.session.is_none() {
            self.note(None, &crate::text::printable(text));
        }
    }

    /// A line for the user while a bar may be drawn, through the terminal's sanitizer.
    pub fn note(&self, bar: Option<&ProgressBar>, text: &str) {
        if self.quiet {
            return;
        }
        let text = crate::text::terminal(text);
        match bar {
            Some(b) if !b.is_hidden() => b.println(text),
            _ => match &self.session {
                Some(multi) if !multi.is_hidden() => {
                    let _ = multi.println(text);
                }
                _ => super::term::eprint_line(&text),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bar_says_elapsed_and_remaining_seconds() {
        assert_eq!(window_seconds(32, Some(50)), "3.2 s of 5 s, 1.8 s left");
        assert_eq!(window_seconds(50, Some(50)), "5.0 s of 5 s, 0.0 s left");
        assert_eq!(window_seconds(7, None), "0.7 s");
    }
}
