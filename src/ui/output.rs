//! What every capture command prints at the end: JSON on stdout, or the human summary,
//! then the warnings on stderr; and the list of files written.

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
        eprintln!("warning: {warning}");
    }
}

/// Prints `value` as pretty JSON on stdout: what every `--json` prints.
pub fn print_json(value: &impl serde::Serialize) {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    write_stdout(&text);
}

/// Writes `text` to stdout; a reader that went away (`| head -1`) ends the output quietly
/// where `print!` would panic.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("devprof: cannot write the output: {e}");
        }
    }
}

/// For `or_else` on a write to stdout: a reader that went away is the end of the output,
/// not an error.
pub fn reader_gone(e: std::io::Error) -> std::io::Result<()> {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => Ok(()),
        _ => Err(e),
    }
}

/// `process: demo-node (exe /usr/local/bin/demo-node, user root, native)`: which program
/// was recorded, by the names a person would look for it.
pub fn process_line(m: &Manifest) -> String {
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
        format!("process: {name}\n")
    } else {
        format!("process: {name} ({})\n", parts.join(", "))
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
pub fn files_written(files: &[(PathBuf, u64)]) -> String {
    let mut out = String::from("files written:\n");
    for (path, bytes) in files {
        out.push_str(&format!(
            "  {:>10}  {}\n",
            human_bytes(*bytes),
            path.display()
        ));
    }
    out
}

/// `print!` for command output: a reader that went away ends the output quietly.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::ui::output::write_stdout(&format!($($arg)*))
    };
}

/// `println!` for command output: a reader that went away ends the output quietly.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::ui::output::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::ui::output::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}
