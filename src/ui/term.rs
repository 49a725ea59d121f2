//! The one way text reaches the terminal: every line devprof shows a person (errors,
//! warnings, notes, the doctor's checklist, the closing summaries, progress notes) passes
//! `text::terminal`, which keeps line feeds and tabs and writes every other control
//! character (ESC, CR, BEL, backspace, DEL, C1) as an escape. Nothing a container says (an
//! executable's name, `MALLOC_CONF`, jcmd's reply, a dump's text) can then move the cursor,
//! rewrite a line already shown or retitle the terminal, with or without a newline.
//!
//! Stderr: `eprint_line`, `eprint`, and the macros `crate::say!` (a line), `crate::note!`
//! (`note: ...`) and `crate::warn!` (`warning: ...`). Stdout for people: `print` (and
//! `crate::out!`/`crate::outln!`). Data for pipes (folded stacks, exports, SVG, completion
//! scripts) goes out unchanged through `data` or `data_writer`; JSON through `json`, which
//! escapes every control character. `tests/architecture.rs` fails on a `println!`,
//! `eprintln!`, `print!` or `eprint!`, or a handle on stdout or stderr, outside `ui/`.

use crate::text::terminal;
use std::io::Write;

/// Writes `text` to stderr as the terminal may be given it, nothing added. A write that
/// fails (a terminal that closed) ends nothing: `eprint!` would panic, and skip the
/// clean-up of the capture that was printing.
pub fn eprint(text: &str) {
    eprint_raw(terminal(text).as_bytes());
}

/// `eprint` of `text` as one line: a line feed is added.
pub fn eprint_line(text: &str) {
    let mut line = terminal(text).into_owned();
    line.push('\n');
    eprint_raw(line.as_bytes());
}

/// Bytes already made safe for the terminal, to stderr.
fn eprint_raw(bytes: &[u8]) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(bytes).and_then(|()| err.flush());
}

/// Writes `text` to stdout as the terminal may be given it: output meant for people (a
/// summary, a table, the doctor's checklist). A reader that went away (`| head -1`) ends
/// the output quietly, where `print!` would panic.
pub fn print(text: &str) {
    write_stdout(terminal(text).as_bytes());
}

/// Data for a pipe, written to stdout unchanged (folded stacks, an export, an SVG, a
/// completion script): what a person reads goes through `print`. A reader that went away
/// is the end of the output, not an error.
pub fn data(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .or_else(reader_gone)
}

/// Standard output for a writer of data (`data`'s rule: unchanged, for pipes).
pub fn data_writer() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

/// `value` as pretty JSON on stdout, with a line feed: serde escapes C0; DEL and C1, which
/// it leaves as they are, are escaped here too (`\u007f`), so no control character reaches
/// a terminal the JSON is shown on. The same JSON value as serde's.
pub fn json(value: &impl serde::Serialize) {
    let mut text = json_text(value);
    text.push('\n');
    write_stdout(text.as_bytes());
}

/// `value` as pretty JSON with every control character escaped (see `json`).
pub fn json_text(value: &impl serde::Serialize) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    // Outside strings JSON is ASCII without controls: each one left is inside a string,
    // where `\uXXXX` means the same character.
    if !text.chars().any(beyond_c0) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if beyond_c0(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// DEL and C1: the control characters serde_json writes as they are.
fn beyond_c0(c: char) -> bool {
    c.is_control() && c as u32 >= 0x7f
}

fn write_stdout(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprint_line(&format!("devprof: cannot write the output: {e}"));
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

/// `eprintln!` for a person: one line on stderr through `text::terminal`.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::ui::term::eprint_line(&format!($($arg)*))
    };
}

/// `note: ...` on stderr, through `text::terminal`.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::ui::term::eprint_line(&format!("note: {}", format_args!($($arg)*)))
    };
}

/// `warning: ...` on stderr, through `text::terminal`.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::ui::term::eprint_line(&format!("warning: {}", format_args!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_del_and_c1_and_means_the_same() {
        let value = serde_json::json!({"exe": "/tmp/x\u{1b}[2K\r\u{7f}\u{9b}31m\u{85}✓", "n": 1});
        let text = json_text(&value);
        assert!(
            text.chars().all(|c| c == '\n' || !c.is_control()),
            "{text:?}"
        );
        assert!(
            text.contains(r"\u001b[2K\r\u007f\u009b31m\u0085✓"),
            "{text}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
