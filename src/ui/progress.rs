//! Progress display on stderr; indicatif hides it when stderr is not a terminal.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::OnceLock;
use std::time::Duration;

/// A multi-target session's display: one line per container, which the session draws
/// itself; the recipes' own bars stay hidden while it is set.
static SESSION: OnceLock<MultiProgress> = OnceLock::new();

/// Switches to the session display (once per process).
pub fn start_session() -> &'static MultiProgress {
    SESSION.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// One container's line in the session display (hidden off a terminal).
pub fn session_line(label: &str) -> ProgressBar {
    if super::quiet() {
        return ProgressBar::hidden();
    }
    let bar = start_session().add(ProgressBar::new_spinner());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix:<24} {elapsed:>4} {msg}")
            .expect("valid template"),
    );
    bar.set_prefix(label.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A bar over the capture window, in tenths of a second.
pub fn capture_bar(window: Duration, label: &str) -> ProgressBar {
    if SESSION.get().is_some() || super::quiet() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(
        Some((window.as_millis() / 100) as u64),
        ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40.cyan/blue}] {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    bar
}

/// A spinner for work of unknown length (download, folding).
pub fn spinner(message: &str) -> ProgressBar {
    if SESSION.get().is_some() || super::quiet() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("valid template"),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A line for the user while a bar may be drawn.
pub fn note(bar: Option<&ProgressBar>, text: &str) {
    if super::quiet() {
        return;
    }
    match bar {
        Some(b) if !b.is_hidden() => b.println(text),
        _ => match SESSION.get() {
            Some(multi) if !multi.is_hidden() => {
                let _ = multi.println(text);
            }
            _ => eprintln!("{text}"),
        },
    }
}
