//! Marker rules: `NAME=REGEX`, from `--mark`, from a rules file, or from a built-in set.
//! A rule's named groups mean something when present: `number` (a block number; thousands
//! separators allowed: `3,609,949`), `elapsed` or `duration` (the work the line reports,
//! ending when it was logged: `2.877896ms`, `51.146µs`, `0.874s`, Go's `2m22.439s`),
//! `hash`, `slot`. A group that is absent, or whose text does not read as its kind, leaves
//! the field empty; the line is still a marker.
//!
//! Log lines are hostile data: each is cut to `MAX_LINE` bytes, ANSI colour sequences and
//! other control characters are removed, and nothing but the regexes looks at it. The
//! regex engine runs in time linear in the line (no backtracking).

use super::Marker;
use regex::{Regex, RegexBuilder};

/// Longest line matched; the rest of a longer line is cut (and counted).
pub const MAX_LINE: usize = 4096;
/// What a marker keeps of its line (a line is matched whole, up to `MAX_LINE`, then cut to
/// this, with the cut said at its end): 200,000 markers of 4 KiB lines of invalid UTF-8,
/// each byte made a 3-byte U+FFFD, held 2.4 GB.
pub const MAX_STORED_LINE: usize = 512;
/// Compiled size a user's regex may take.
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Rules a rules file may hold.
const MAX_RULES: usize = 64;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub set: String,
    pub name: String,
    pub regex: Regex,
}

impl Rule {
    pub fn new(set: &str, name: &str, pattern: &str) -> Result<Rule, String> {
        if !valid_name(name) {
            return Err(format!(
                "marker name '{name}' is not a name (a letter, then letters, digits, '_', '-', '.'; at most 40)"
            ));
        }
        let regex = RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("marker '{name}': invalid regex '{pattern}': {e}"))?;
        Ok(Rule {
            set: set.to_string(),
            name: name.to_string(),
            regex,
        })
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 40
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// `NAME=REGEX`, as `--mark` takes it.
pub fn parse_mark(text: &str) -> Result<Rule, String> {
    let (name, pattern) = text.split_once('=').ok_or_else(|| {
        format!("--mark '{text}': expected NAME=REGEX, @FILE, a rule set, auto, off or help")
    })?;
    if pattern.is_empty() {
        return Err(format!("--mark '{text}': the regex is empty"));
    }
    Rule::new("user", name.trim(), pattern)
}

/// A rules file: one `NAME=REGEX` per line; blank lines and lines starting with `#` are
/// skipped. The regex is everything after the first `=` (spaces around the name are
/// trimmed, the regex is taken as written).
pub fn parse_rules_file(text: &str, origin: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if rules.len() == MAX_RULES {
            return Err(format!("{origin}: more than {MAX_RULES} rules"));
        }
        let rule = parse_mark(trimmed).map_err(|e| format!("{origin} line {}: {e}", n + 1))?;
        rules.push(rule);
    }
    if rules.is_empty() {
        return Err(format!("{origin}: no NAME=REGEX line"));
    }
    Ok(rules)
}

/// A log line made safe to match and to keep: invalid UTF-8 replaced, ANSI escape
/// sequences and control characters removed, and cut to `MAX_LINE` bytes (on a character
/// boundary) both before and after (a replaced byte takes three). Returns the line and
/// whether it was cut.
pub fn clean_line(raw: &[u8]) -> (String, bool) {
    let mut cut = raw.len() > MAX_LINE;
    let bytes = &raw[..raw.len().min(MAX_LINE)];
    let text = devprof_base::text::strip_ansi(&String::from_utf8_lossy(bytes));
    let mut out: String = text
        .chars()
        .filter_map(|c| match c {
            '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    if out.len() > MAX_LINE {
        cut = true;
        out.truncate(prefix(&out, MAX_LINE).len());
    }
    let trimmed_len = out.trim_end().len();
    out.truncate(trimmed_len);
    (out, cut)
}

/// What a marker keeps of a (clean) line: the line, or its start (on a character
/// boundary) and how long it was, `MAX_STORED_LINE` bytes in all (so a line kept is kept
/// alike when read back).
pub fn stored_line(line: &str) -> String {
    if line.len() <= MAX_STORED_LINE {
        return line.to_string();
    }
    let said = format!("… [cut: {} bytes]", line.len());
    let head = prefix(line, MAX_STORED_LINE - said.len());
    format!("{head}{said}")
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// An integer as logs print them: digits with optional `,` or `_` thousands separators.
pub fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut value: u64 = 0;
    for c in text.chars() {
        match c {
            '0'..='9' => {
                value = value
                    .checked_mul(10)?
                    .checked_add(u64::from(c as u8 - b'0'))?;
            }
            ',' | '_' => {}
            _ => return None,
        }
    }
    Some(value)
}

/// A duration as Rust's `Debug`, Go's `time.Duration` and the clients print them, in ns:
/// `2.877896ms`, `51.146µs` (or `μs`, `us`), `100ns`, `0.874s`, `2m22.439s`, `1h2m3s`;
/// `0` alone is zero. None for anything else.
pub fn parse_elapsed(text: &str) -> Option<u64> {
    let text = text.trim().trim_matches('"');
    if text == "0" {
        return Some(0);
    }
    let mut rest = text;
    let mut total: f64 = 0.0;
    let mut parts = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let value: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let (scale, unit_len) = [
            ("ns", 1.0),
            ("us", 1e3),
            ("µs", 1e3),
            ("μs", 1e3),
            ("ms", 1e6),
            ("s", 1e9),
            ("m", 60e9),
            ("h", 3600e9),
        ]
        .iter()
        .find(|(unit, _)| rest.starts_with(unit))
        .map(|(unit, scale)| (*scale, unit.len()))?;
        rest = &rest[unit_len..];
        total += value * scale;
        parts += 1;
    }
    (parts > 0 && total.is_finite() && total < 1e19).then(|| total.round() as u64)
}

/// `2.88 ms`, `51.1 µs`, `2.40 s`.
pub fn human_ns(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

/// Rules applied to log lines, in order: the first that matches makes the marker.
#[derive(Debug, Clone, Default)]
pub struct Matcher {
    pub rules: Vec<Rule>,
}

impl Matcher {
    pub fn new(rules: Vec<Rule>) -> Matcher {
        Matcher { rules }
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The marker `line` (already cleaned) makes at `time_ns`, if a rule matches it: the
    /// rules read the whole line, the marker keeps `stored_line` of it.
    pub fn marker(&self, time_ns: i64, line: &str) -> Option<Marker> {
        self.rules.iter().find_map(|rule| {
            let caps = rule.regex.captures(line)?;
            let group = |name: &str| caps.name(name).map(|m| m.as_str());
            Some(Marker {
                time_ns,
                name: rule.name.clone(),
                set: rule.set.clone(),
                number: group("number").and_then(parse_number),
                elapsed_ns: group("elapsed")
                    .or_else(|| group("duration"))
                    .and_then(parse_elapsed),
                hash: group("hash")
                    .map(|h| h.chars().take(80).collect::<String>())
                    .filter(|h| !h.is_empty()),
                slot: group("slot").and_then(parse_number),
                line: stored_line(line),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_every_unit_the_clients_print() {
        assert_eq!(parse_elapsed("2.877896ms"), Some(2_877_896));
        assert_eq!(parse_elapsed("51.146µs"), Some(51_146));
        assert_eq!(parse_elapsed("51.146μs"), Some(51_146));
        assert_eq!(parse_elapsed("12us"), Some(12_000));
        assert_eq!(parse_elapsed("100ns"), Some(100));
        assert_eq!(parse_elapsed("0.874s"), Some(874_000_000));
        assert_eq!(parse_elapsed("2m22.439s"), Some(142_439_000_000));
        assert_eq!(parse_elapsed("1m2.3s"), Some(62_300_000_000));
        assert_eq!(parse_elapsed("1h2m3s"), Some(3_723_000_000_000));
        assert_eq!(parse_elapsed("\"225.207µs\""), Some(225_207));
        assert_eq!(parse_elapsed("0"), Some(0));
        for bad in ["", "ms", "1.2.3ms", "5 ms", "12parsecs", "1e9s", "-3ms"] {
            assert_eq!(parse_elapsed(bad), None, "{bad}");
        }
    }

    #[test]
    fn numbers_take_thousands_separators() {
        assert_eq!(parse_number("3,609,949"), Some(3_609_949));
        assert_eq!(parse_number("15207178"), Some(15_207_178));
        assert_eq!(parse_number("1_000"), Some(1000));
        assert_eq!(parse_number("99999999999999999999999"), None);
        assert_eq!(parse_number("0x12"), None);
        assert_eq!(parse_number(",12"), None);
    }

    #[test]
    fn lines_are_cut_and_stripped_of_escapes_before_matching() {
        let (line, cut) = clean_line(b"\x1b[2m2024\x1b[0m \x1b[32m INFO\x1b[0m Block added\tok\r");
        assert_eq!((line.as_str(), cut), ("2024  INFO Block added ok", false));
        let long = vec![b'a'; MAX_LINE + 100];
        let (line, cut) = clean_line(&long);
        assert!(cut && line.len() == MAX_LINE);
        let (line, _) = clean_line(b"bad \xff utf8 \x07bell");
        assert_eq!(line, "bad \u{fffd} utf8 bell");
    }

    #[test]
    fn mark_arguments_and_rules_files_are_checked() {
        let rule = parse_mark("block=number=(?P<number>\\d+)").unwrap();
        assert_eq!(rule.name, "block");
        assert!(parse_mark("no-equals").is_err());
        assert!(parse_mark("9bad=x").is_err());
        assert!(parse_mark("ok=(").is_err());
        assert!(parse_mark("ok=").is_err());
        let rules = parse_rules_file(
            "# blocks\n\nblock = imported #(?P<number>[\\d,]+)\nslot=slot: (?P<slot>\\d+)\n",
            "rules.txt",
        )
        .unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].regex.as_str(), " imported #(?P<number>[\\d,]+)");
        let err = parse_rules_file("a=b\nbroken\n", "r").unwrap_err();
        assert!(err.contains("r line 2"), "{err}");
        assert!(parse_rules_file("# nothing\n", "r").is_err());
    }

    #[test]
    fn the_first_matching_rule_makes_the_marker_with_its_fields() {
        let m = Matcher::new(vec![
            Rule::new(
                "user",
                "block",
                r"imported number=(?P<number>[\d,]+) took (?P<duration>\S+) hash=(?P<hash>0x[0-9a-f]+)",
            )
            .unwrap(),
            Rule::new("user", "any", "imported").unwrap(),
        ]);
        let marker = m
            .marker(5, "imported number=1,234 took 3.5ms hash=0xabc")
            .unwrap();
        assert_eq!(marker.name, "block");
        assert_eq!(marker.number, Some(1234));
        assert_eq!(marker.elapsed_ns, Some(3_500_000));
        assert_eq!(marker.hash.as_deref(), Some("0xabc"));
        assert_eq!(marker.label(), "block 1234 (3.50 ms)");
        let other = m.marker(6, "imported number=x took ? hash=0xz").unwrap();
        assert_eq!((other.name.as_str(), other.number), ("any", None));
        assert!(m.marker(7, "nothing here").is_none());
    }

    #[test]
    fn a_line_of_invalid_utf8_is_matched_whole_and_kept_cut_to_a_few_hundred_bytes() {
        // 4 KiB of invalid UTF-8: 12 KiB once each byte is U+FFFD, cut back to 4 KiB.
        let (line, cut) = clean_line(&[0xff; MAX_LINE]);
        assert!(cut && line.len() <= MAX_LINE, "{}", line.len());
        let m = Matcher::new(vec![
            Rule::new("user", "any", r"(?P<number>\d+)$|\x{fffd}").unwrap()
        ]);
        let marker = m.marker(1, &line).unwrap();
        assert!(
            marker.line.len() <= MAX_STORED_LINE,
            "{}",
            marker.line.len()
        );
        assert!(
            marker.line.ends_with("… [cut: 4095 bytes]"),
            "{}",
            marker.line
        );
        assert!(marker.line.starts_with('\u{fffd}'));
        // The rules read the whole line: a number at its end is found, then the line is cut.
        let long = format!("{} block 42", "é".repeat(1000));
        let marker = m.marker(2, &long).unwrap();
        assert_eq!(marker.number, Some(42));
        assert!(marker.line.len() <= MAX_STORED_LINE);
        assert_eq!(
            stored_line(&marker.line),
            marker.line,
            "kept alike when read back"
        );
        // A short line is kept whole.
        assert_eq!(m.marker(3, "block 7").unwrap().line, "block 7");
    }
}
