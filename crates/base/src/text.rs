//! Small text helpers every layer uses: shell quoting, shortening for titles and
//! summaries, the first line of an error, escaping for HTML and SVG.

/// Single-quotes a word for sh.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `word` as it is typed in a command shown to a user: bare when it holds only characters
/// no shell treats specially, else single-quoted, and with a control character (which
/// could forge a line of the message it is shown in) as bash's `$'\xHH'`.
pub fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./,:=@%+-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    if !word.chars().any(char::is_control) {
        return quote(word);
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\'' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            // Each byte of its UTF-8, as bash reads `\xHH`: a C1 control is two bytes.
            c if c.is_control() => {
                for byte in c.to_string().bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// At most `max` characters, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// Drops terminal escape sequences that tools print even into logs: CSI sequences
/// (`ESC [ parameters final-byte`, colours among them) whole, any other escape with the
/// character after it.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
        } else if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

/// `text` with every control character written as an escape (`\n`, `\t`, `\u{1b}`): text
/// a container controls (a command line, a file name) shown on one line, never able to
/// move the cursor or start a line of its own.
pub fn printable(text: &str) -> String {
    escape_controls(text, |_| false).into_owned()
}

/// `text` as the terminal is given it: line feeds and tabs kept, every other control
/// character (the rest of C0 — ESC, CR, BEL, backspace —, DEL and C1) written as an escape
/// the way `printable` writes it. No escape sequence, carriage return or backspace a
/// container put into a message can move the cursor, rewrite a line already shown, set the
/// window's title or ring; only a line feed starts a line, and where that matters (one
/// line per fact) the text is `printable` first. Every line devprof shows a person passes
/// here (`ui::term`).
pub fn terminal(text: &str) -> std::borrow::Cow<'_, str> {
    escape_controls(text, |c| c == '\n' || c == '\t')
}

/// `text` with the control characters `keep` does not keep written as escapes; borrowed
/// when there is none to escape.
fn escape_controls(text: &str, keep: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() && !keep(c);
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !escaped(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first line of a (possibly multi-line) message.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Text as XML character data or attribute value: markup characters escaped, control
/// characters (which XML 1.0 forbids) dropped.
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The most telling line of a tool's error output: its first `error` line, else its first
/// line about permissions, else its first line.
pub fn first_error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let at = lines
        .iter()
        .position(|l| l.to_ascii_lowercase().starts_with("error"))
        .or_else(|| lines.iter().position(|l| is_permission_error(l)))
        .unwrap_or(0);
    match (lines.get(at), lines.get(at + 1)) {
        // perf's "Error:" alone heads the sentence on the next line.
        (Some(head), Some(next)) if head.trim_end_matches(':').eq_ignore_ascii_case("error") => {
            format!("{head} {next}")
        }
        (Some(line), _) => line.to_string(),
        (None, _) => "no error output".to_string(),
    }
}

/// Whether a tool's error text is about being denied (perf_event_open, ptrace).
pub fn is_permission_error(stderr: &str) -> bool {
    let s = stderr.to_ascii_lowercase();
    s.contains("no permission")
        || s.contains("permission denied")
        || s.contains("operation not permitted")
        || s.contains("access to performance monitoring")
        || s.contains("perf_event_paranoid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_word_is_bare_quoted_or_escaped_as_it_needs() {
        assert_eq!(
            shell_word("/tmp/jeprof.7.3.m1.heap"),
            "/tmp/jeprof.7.3.m1.heap"
        );
        assert_eq!(shell_word("a;reboot;$(x)"), "'a;reboot;$(x)'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("a\nerror: b'"), r"$'a\x0aerror: b\''");
        assert_eq!(shell_word(""), "''");
        // A C1 control is two bytes in UTF-8: bash's `$'\xc2\x9b'` names the same file.
        assert_eq!(shell_word("a\u{9b}\u{1b}b"), r"$'a\xc2\x9b\x1bb'");
    }

    #[test]
    fn a_bare_error_heading_takes_the_sentence_under_it() {
        let perf =
            "Error:\nNo permission to enable cpu-clock event.\n\nYou may not have permission\n";
        assert_eq!(
            first_error_line(perf),
            "Error: No permission to enable cpu-clock event."
        );
        assert_eq!(
            first_error_line("warn\nerror: bad event\n"),
            "error: bad event"
        );
        assert_eq!(first_error_line("only this"), "only this");
        assert_eq!(first_error_line("Error:"), "Error:");
        assert_eq!(first_error_line(""), "no error output");
    }

    #[test]
    fn escaped_text_cannot_become_markup() {
        assert_eq!(
            escape_markup("<script>a&b\"c'</script>\u{1}"),
            "&lt;script&gt;a&amp;b&quot;c&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn quotes_for_sh() {
        assert_eq!(quote("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn truncates_by_characters() {
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("äöü", 3), "äöü");
        assert_eq!(first_line("a\nb"), "a");
        assert_eq!(first_line(""), "");
    }

    #[test]
    fn control_characters_are_shown_as_escapes() {
        assert_eq!(
            printable("x\nperf\t/tmp/p\u{1b}[2J"),
            "x\\nperf\\t/tmp/p\\u{1b}[2J"
        );
        assert_eq!(printable("java -Xmx64m"), "java -Xmx64m");
        assert_eq!(printable("äö\u{85}"), "äö\\u{85}");
    }

    #[test]
    fn the_terminal_gets_line_feeds_and_tabs_and_every_other_control_escaped() {
        // ESC (a CSI that clears the line, an OSC that sets the title and ends in BEL), CR.
        assert_eq!(
            terminal("\u{1b}[2K\rok \u{1b}]0;owned\u{7}"),
            "\\u{1b}[2K\\rok \\u{1b}]0;owned\\u{7}"
        );
        // The rest of C0 (NUL, backspace, vertical tab, form feed), DEL and C1 (CSI, NEL).
        assert_eq!(
            terminal("a\u{0}b\u{8}c\u{b}\u{c}d\u{7f}e\u{9b}31m\u{85}f"),
            "a\\u{0}b\\u{8}c\\u{b}\\u{c}d\\u{7f}e\\u{9b}31m\\u{85}f"
        );
        // Line feeds and tabs stay what they are.
        assert_eq!(terminal("a\tb\nc\n"), "a\tb\nc\n");
        // UTF-8 text is kept as it is, and needs no copy.
        let text = "✓ profil — ünïcode 日本 \u{a0}\u{2003}";
        assert!(matches!(terminal(text), std::borrow::Cow::Borrowed(t) if t == text));
        // Every control character but LF and TAB, from 0 to U+009F, is escaped.
        for c in (0u32..=0x9f).filter_map(char::from_u32) {
            let shown = terminal(&c.to_string()).into_owned();
            let kept = c == '\n' || c == '\t' || !c.is_control();
            assert_eq!(
                shown == c.to_string(),
                kept,
                "{:#x} shown as {shown:?}",
                c as u32
            );
            assert!(shown
                .chars()
                .all(|s| s == '\n' || s == '\t' || !s.is_control()));
        }
    }
}
