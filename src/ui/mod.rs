//! What the user sees on the terminal: progress bars and spinners (`progress`, hidden when
//! stderr is not a terminal), the closing summary of a capture (`output`), aligned tables
//! (`table`).

pub mod output;
pub mod progress;
pub mod table;
