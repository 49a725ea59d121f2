//! What every capture command prints at the end: JSON on stdout, or the human summary,
//! then the warnings on stderr; and the list of files written. All of it through
//! `term`, the terminal's one sanitizer.

use crate::store::Manifest;
use crate::units::human_bytes;
use std::path::PathBuf;

/// Prints the closing summary: `json` when asked for, `human` otherwise; warnings after.
pub fn emit(
    as_json: bool,
    json: impl FnOnce() -> serde_json::Value,
    human: impl FnOnce() -> String,
    warnings: &[String],
) {
    if as_json {
        print_json(&json());
    } else {
        write_stdout(&human());
    }
    for warning in warnings {
        crate::warn!("{warning}");
    }
}

/// Prints `value` as pretty JSON on stdout: what every `--json` prints (`term::json`).
pub fn print_json(value: &impl serde::Serialize) {
    super::term::json(value);
}

/// Writes `text`, meant for people, to stdout through the terminal's sanitizer
/// (`term::print`); a reader that went away (`| head -1`) ends the output quietly.
pub fn write_stdout(text: &str) {
    super::term::print(text);
}

pub use super::term::reader_gone;

/// `process: demo-node (exe /usr/local/bin/demo-node, user root, native)`: which program
/// was recorded, by the names a person would look for it. One line: the names are the
/// container's, so a line feed or an escape in them is shown as one (`text::printable`).
pub fn process_line(m: &Manifest) -> String {
    printable_line(&process_text(m))
}

/// `text` on one line, ended by a line feed.
fn printable_line(text: &str) -> String {
    format!("{}\n", crate::text::printable(text))
}

fn process_text(m: &Manifest) -> String {
    let p = &m.process;
    let mut parts: Vec<String> = Vec::new();
    if !p.exe.is_empty() {
        parts.push(format!("exe {}", p.exe));
    }
    if !p.user.is_empty() {
        parts.push(format!("user {}", p.user));
    }
    if !m.runtime.is_empty() {
        match &m.runtime_version {
            Some(version) => parts.push(format!("{} ({version})", m.runtime)),
            None => parts.push(m.runtime.clone()),
        }
    }
    let name = if p.comm.is_empty() {
        p.command_line.split_whitespace().next().unwrap_or("")
    } else {
        p.comm.as_str()
    };
    if parts.is_empty() {
        format!("process: {name}")
    } else {
        format!("process: {name} ({})", parts.join(", "))
    }
}

/// The files written, for JSON output.
pub fn files_json(files: &[(PathBuf, u64)]) -> serde_json::Value {
    files
        .iter()
        .map(|(path, bytes)| serde_json::json!({"path": path, "bytes": bytes}))
        .collect()
}

/// `files written:` and one line per file with its size.
pub fn files_written(files: &[(PathBuf, u64)], markers_kept: Option<usize>) -> String {
    let mut out = String::from("files written:\n");
    for (path, bytes) in files {
        let markers = match markers_kept {
            Some(n) if path.extension().is_some_and(|e| e == "markers") => {
                format!(
                    "  ({n} marker{} from the target's log)",
                    if n == 1 { "" } else { "s" }
                )
            }
            _ => String::new(),
        };
        out.push_str(&format!(
            "  {:>10}  {}{markers}\n",
            human_bytes(*bytes),
            path.display()
        ));
    }
    out
}

/// `print!` for command output meant for people, through the terminal's sanitizer
/// (`term::print`): a reader that went away ends the output quietly.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::ui::output::write_stdout(&format!($($arg)*))
    };
}

/// `println!` for command output meant for people, through the terminal's sanitizer
/// (`term::print`): a reader that went away ends the output quietly.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::ui::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::ui::output::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}
