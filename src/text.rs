//! Small text helpers every layer uses: shell quoting, shortening for titles and
//! summaries, the first line of an error.

/// Single-quotes a word for sh.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// At most `max` characters, with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max).collect::<String>())
    }
}

/// The first line of a (possibly multi-line) message.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
