//! Progress display on stderr; indicatif hides it when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// A bar over the capture window, in tenths of a second.
pub fn capture_bar(window: Duration, label: &str) -> ProgressBar {
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
    match bar {
        Some(b) if !b.is_hidden() => b.println(text),
        _ => eprintln!("{text}"),
    }
}
