//! What the user sees on the terminal: progress bars, spinners and notes through one
//! `Reporter` (`progress`, hidden when stderr is not a terminal), the closing summary of a capture (`output`), aligned tables
//! (`table`), and opening a result in a browser (`browser`).

pub mod browser;
pub mod output;
pub mod phases;
pub mod progress;
pub mod table;

pub use progress::Reporter;
