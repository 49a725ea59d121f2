//! What the user sees on the terminal: progress bars, spinners and notes through one
//! `Reporter` (`progress`, hidden when stderr is not a terminal), the closing summary of a capture (`output`), aligned tables
//! (`table`), and opening a result in a browser (`browser`). Every line of it passes one
//! sanitizer (`term`, with `crate::say!`, `crate::note!` and `crate::warn!`), so that no
//! text a container controls reaches the terminal as a control sequence.

pub mod browser;
pub mod output;
pub mod phases;
pub mod progress;
pub mod table;
pub mod term;

pub use progress::Reporter;
