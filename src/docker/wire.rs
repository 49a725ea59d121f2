//! The one place where what a script printed in a container is read back. Processes in the
//! container control much of that text (command lines, environments, comm, file and link
//! names), so the scripts never print it raw: such a field is hex (`od`), or, where a
//! container has no `od`, its text with every control byte removed. Either way it cannot
//! hold the tab and newline that delimit fields and records, so a process cannot forge a
//! record. A record is `key<TAB>field<TAB>...` on one line; keys and the other fields are
//! written by devprof's own scripts and are validated strictly here.

use std::collections::HashSet;
use std::str::FromStr;

/// Shell functions the scripts start with. `enc LIMIT` reads at most LIMIT bytes of its
/// standard input and prints them as one field: `x` and hex pairs where the container's
/// `od` can (tried on one byte first: a minimal busybox od has no -t or -N); else `t` and
/// the text with NUL made a space and every other control byte dropped (lossy, still
/// unforgeable); `-` where neither can be made. `cap LIMIT` copies at most LIMIT bytes of
/// its standard input.
pub const PRELUDE: &str = r#"
case "$(printf abc | head -c 1 2>/dev/null)" in
  a) cap() { head -c "$1"; };;
  *) cap() { dd bs="$1" count=1 2>/dev/null; };;
esac
case "$(printf a | od -An -v -tx1 -N 1 2>/dev/null)" in
  *61*) enc() { printf x; printf '%s' $(od -An -v -tx1 -N "$1"); };;
  *) if command -v tr >/dev/null 2>&1; then
       enc() { printf t; cap "$1" | tr '\000' ' ' | tr -d '\001-\037\177'; }
     else
       enc() { printf -- -; }
     fi;;
esac
"#;

/// Longest command line or environment read from /proc (bytes); more is cut off.
pub const PROC_TEXT_LIMIT: usize = 64 * 1024;
/// Longest path or name read (a readlink result, a comm, a user name).
pub const NAME_LIMIT: usize = 4096;

/// Shell text that prints an `env<TAB>ENTRY` record for each entry of /proc/<pid>/environ
/// (`pid` is shell text, e.g. `$p`) that matches one of the case `patterns`. Entries are
/// NUL-separated there; a newline inside one stays in it (lossy only for a \001 byte,
/// which comes back as a newline).
pub fn env_records(pid: &str, patterns: &[String]) -> String {
    format!(
        "{{ cap {PROC_TEXT_LIMIT} < /proc/{pid}/environ; }} 2>/dev/null | tr '\\n\\000' '\\001\\n' | \
         while IFS= read -r l; do case \"$l\" in {}) printf 'env\\t'; printf '%s' \"$l\" | tr '\\001' '\\n' | enc {PROC_TEXT_LIMIT}; echo;; esac; done\n",
        patterns.join("|")
    )
}

/// What is wrong with a script's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("line {line} of the script's output should be `{expected}`, found {found:?}")]
    Header {
        line: usize,
        expected: &'static str,
        found: String,
    },
    #[error("`{key}` has an invalid value {value:?}")]
    Invalid { key: &'static str, value: String },
}

/// One line of a script's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub key: &'a str,
    fields: Vec<&'a str>,
}

impl<'a> Record<'a> {
    pub fn parse(line: &'a str) -> Self {
        let mut parts = line.split('\t');
        let key = parts.next().unwrap_or("");
        Record {
            key,
            fields: parts.collect(),
        }
    }

    /// The field as the script printed it (devprof's own words and numbers).
    pub fn raw(&self, i: usize) -> Option<&'a str> {
        self.fields.get(i).copied()
    }

    /// An encoded field's bytes (None: missing, malformed, or not available there).
    pub fn bytes(&self, i: usize) -> Option<Vec<u8>> {
        decode(self.raw(i)?)
    }

    /// An encoded field as text (invalid UTF-8 replaced).
    pub fn text(&self, i: usize) -> Option<String> {
        self.bytes(i)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// A number field: only ASCII digits (and a leading `-` for signed types).
    pub fn number<T: FromStr>(&self, i: usize) -> Option<T> {
        number(self.raw(i)?)
    }
}

/// The records of `text`, one per line.
pub fn records(text: &str) -> impl Iterator<Item = Record<'_>> {
    text.lines().map(Record::parse)
}

/// A strictly written number: digits only, an optional leading `-`, at most 20 of them.
pub fn number<T: FromStr>(text: &str) -> Option<T> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let plain =
        !digits.is_empty() && digits.len() <= 20 && digits.bytes().all(|b| b.is_ascii_digit());
    plain.then(|| text.parse().ok()).flatten()
}

/// A 64-bit mask as /proc prints it: exactly 16 hex digits.
pub fn mask(text: &str) -> Option<u64> {
    (text.len() == 16 && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u64::from_str_radix(text, 16).ok())
        .flatten()
}

/// A field's bytes: `x` + hex pairs, or `t` + text without control bytes.
pub fn decode(field: &str) -> Option<Vec<u8>> {
    if let Some(hex) = field.strip_prefix('x') {
        if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return hex
            .as_bytes()
            .chunks(2)
            .map(|pair| {
                let pair = std::str::from_utf8(pair).ok()?;
                u8::from_str_radix(pair, 16).ok()
            })
            .collect();
    }
    let text = field.strip_prefix('t')?;
    (!text.bytes().any(|b| b.is_ascii_control())).then(|| text.as_bytes().to_vec())
}

/// `bytes` as the hex field `enc` prints (for fixtures and tests).
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(1 + 2 * bytes.len());
    out.push('x');
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// The keys a parser has taken: the first record of a key counts, a later one never
/// overrides it.
#[derive(Debug, Default)]
pub struct Once(HashSet<String>);

impl Once {
    /// Whether `key` is seen for the first time.
    pub fn first(&mut self, key: &str) -> bool {
        self.0.insert(key.to_string())
    }
}

/// The first `keys.len()` lines of `text`, which must be those keys in that order, each
/// with one field; returns the fields and the lines after them.
pub fn header<'a>(
    text: &'a str,
    keys: &[&'static str],
) -> Result<(Vec<&'a str>, std::str::Lines<'a>), WireError> {
    let mut lines = text.lines();
    let mut values = Vec::with_capacity(keys.len());
    for (line, key) in keys.iter().enumerate() {
        let found = lines.next().unwrap_or("");
        let record = Record::parse(found);
        match (record.key == *key, record.fields.as_slice()) {
            (true, [value]) => values.push(*value),
            _ => {
                return Err(WireError::Header {
                    line: line + 1,
                    expected: key,
                    found: crate::text::printable(&crate::text::truncate(found, 80)),
                })
            }
        }
    }
    Ok((values, lines))
}

/// The arguments of a NUL-separated command line (the trailing NUL ends the last one).
pub fn split_argv(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_decode_from_hex_or_clean_text_only() {
        assert_eq!(decode("x780a09"), Some(b"x\n\t".to_vec()));
        assert_eq!(decode("x"), Some(Vec::new()));
        assert_eq!(decode("x7"), None, "odd length");
        assert_eq!(decode("xzz"), None);
        assert_eq!(decode("x+1"), None);
        assert_eq!(decode("tsleep 1000"), Some(b"sleep 1000".to_vec()));
        assert_eq!(
            decode("ta\rb"),
            None,
            "a control byte cannot be in a text field"
        );
        assert_eq!(decode("-"), None);
        assert_eq!(decode("/usr/bin/perf"), None, "a raw value is never taken");
        assert_eq!(decode(&encode(b"\x00\xff\n")), Some(b"\x00\xff\n".to_vec()));
    }

    #[test]
    fn numbers_and_masks_are_strict() {
        assert_eq!(number::<i32>("-1"), Some(-1));
        assert_eq!(number::<u32>("42"), Some(42));
        assert_eq!(number::<u32>("-1"), None);
        assert_eq!(number::<i32>(" 2"), None);
        assert_eq!(number::<i32>("+2"), None);
        assert_eq!(number::<i32>(""), None);
        assert_eq!(number::<i32>("-"), None);
        assert_eq!(mask("00000040a80c25fb"), Some(0x40a80c25fb));
        assert_eq!(mask("40a80c25fb"), None);
        assert_eq!(mask("00000040a80c25fg"), None);
    }

    #[test]
    fn a_header_is_its_keys_in_order_with_one_field_each() {
        let (values, mut rest) = header("a\t1\nb\t\nc\tx", &["a", "b"]).unwrap();
        assert_eq!(values, vec!["1", ""]);
        assert_eq!(rest.next(), Some("c\tx"));
        assert!(matches!(
            header("b\t1\na\t2\n", &["a", "b"]),
            Err(WireError::Header { line: 1, .. })
        ));
        assert!(matches!(
            header("a\t1\t2\n", &["a"]),
            Err(WireError::Header { line: 1, .. })
        ));
        assert!(matches!(
            header("a\t1\n", &["a", "b"]),
            Err(WireError::Header { line: 2, .. })
        ));
    }

    #[test]
    fn only_the_first_record_of_a_key_counts() {
        let mut once = Once::default();
        assert!(once.first("exe"));
        assert!(!once.first("exe"));
        assert!(once.first("cwd"));
    }

    #[test]
    fn command_lines_split_on_nul_exactly() {
        assert_eq!(
            split_argv(b"x\nperf\t/tmp/p\0sleep\0\0"),
            vec!["x\nperf\t/tmp/p", "sleep", ""]
        );
        assert_eq!(split_argv(b"demo-node\0"), vec!["demo-node"]);
        assert!(split_argv(b"").is_empty());
        // A process that rewrote its title without NULs.
        assert_eq!(split_argv(b"nginx: worker"), vec!["nginx: worker"]);
    }

    /// The prelude's `enc`, run by the host's sh, prints what `decode` reads back.
    #[test]
    fn the_prelude_encodes_what_decode_reads() {
        let script = format!(
            "{PRELUDE}\nprintf 'a\\nb\\tc\\000d\\377' | enc 64; echo; printf 'abcdef' | enc 3"
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh on this host");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            decode(lines.next().unwrap()),
            Some(b"a\nb\tc\0d\xff".to_vec())
        );
        assert_eq!(
            decode(lines.next().unwrap()),
            Some(b"abc".to_vec()),
            "bounded"
        );
    }

    /// The environment records, run by the host's sh over a file standing in for
    /// /proc/<pid>/environ: entries split on NUL only, each one exact.
    #[test]
    fn env_entries_keep_their_newlines_and_match_whole() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("proc");
        std::fs::create_dir_all(fake.join("7")).unwrap();
        std::fs::write(
            fake.join("7/environ"),
            b"A=1\nB=forged\0XB=2\0B=3\tx\0PATH=/bin\0",
        )
        .unwrap();
        let script = format!(
            "{PRELUDE}\n{}",
            env_records("7", &["A=*".into(), "B=*".into()])
        )
        .replace("/proc/7", &format!("{}/7", fake.display()));
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let entries: Vec<String> = records(&text)
            .filter(|r| r.key == "env")
            .map(|r| r.text(0).unwrap())
            .collect();
        assert_eq!(entries, ["A=1\nB=forged", "B=3\tx"]);
    }

    /// Where a container has no `od`, a field is its text without control bytes: lossy,
    /// and still unable to hold a delimiter.
    #[test]
    fn without_od_a_field_is_text_without_control_bytes() {
        let tools = tempfile::tempdir().unwrap();
        for tool in ["head", "tr"] {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| std::path::Path::new(d).join(tool))
                .find(|p| p.exists())
                .expect("head and tr on this host");
            std::os::unix::fs::symlink(found, tools.path().join(tool)).unwrap();
        }
        let script = format!(
            "{PRELUDE}\nprintf 'a\\nb\\tc\\000d\\033e' | enc 64; echo; printf abcdef | enc 2"
        );
        let out = std::process::Command::new("/bin/sh")
            .env("PATH", tools.path())
            .args(["-c", &script])
            .output()
            .expect("sh on this host");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        let first = lines.next().unwrap();
        assert!(first.starts_with('t'), "{text}");
        assert_eq!(decode(first), Some(b"abc de".to_vec()));
        assert_eq!(
            decode(lines.next().unwrap()),
            Some(b"ab".to_vec()),
            "bounded"
        );
    }
}
