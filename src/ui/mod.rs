//! What the user sees on the terminal: progress bars and spinners (`progress`, hidden when
//! stderr is not a terminal), the closing summary of a capture (`output`), aligned tables
//! (`table`), and opening a result in a browser (`browser`).

pub mod browser;
pub mod output;
pub mod phases;
pub mod progress;
pub mod table;

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);
static VERBOSE: AtomicBool = AtomicBool::new(false);

/// The global `--quiet` and `--verbose`, set once from the command line.
pub fn set_verbosity(quiet: bool, verbose: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    VERBOSE.store(verbose, Ordering::Relaxed);
}

/// `--quiet`: no progress display and no notes; results, warnings and errors only.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `--verbose`: the details a command can give (the whole build log).
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}
