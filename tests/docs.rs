//! The manual stays true to the command line: every `devprof ...` line in a ```sh block of
//! README.md and docs/ parses with the current CLI, so do the examples in each command's
//! `--help`, and every subcommand and every flag a user can type appears in docs/.
//! (Synopsis blocks, fenced without `sh`, show placeholders and are not parsed.)

use clap::CommandFactory;
use devprof::cli::Cli;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/.
fn manual_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files
}

/// The lines of ```sh blocks, with their line numbers.
fn sh_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut in_other = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            if in_sh || in_other {
                in_sh = false;
                in_other = false;
            } else if lang.trim() == "sh" {
                in_sh = true;
            } else {
                in_other = true;
            }
            continue;
        }
        if in_sh {
            out.push((i + 1, line.to_string()));
        }
    }
    out
}

/// Splits a shell line into words the way sh would for the simple lines the manual shows
/// (quotes, backslashes); stops at an unquoted comment, pipe, `;`, `&&`, `||` or
/// redirection, which end the devprof invocation.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut has_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                has_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                has_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            '#' if !has_word => break,
            '|' | ';' | '>' | '<' | '&' => break,
            c if c.is_whitespace() => {
                if has_word {
                    words.push(std::mem::take(&mut word));
                    has_word = false;
                }
            }
            c => {
                has_word = true;
                word.push(c);
            }
        }
    }
    if has_word {
        words.push(word);
    }
    words
}

/// The devprof invocation on a line, if any: from the word `devprof` on (environment
/// assignments and a pipeline before it are skipped).
fn invocation(line: &str) -> Option<Vec<String>> {
    // A pipeline such as `perf script | devprof fold -`: the devprof part.
    let start = line.find("devprof ")?;
    let before = &line[..start];
    // `devprof` must be a command word: at the start, after assignments, or after a pipe.
    let command_position = before.trim().is_empty()
        || before.trim_end().ends_with('|')
        || before.trim_end().ends_with("&&")
        || before
            .split_whitespace()
            .all(|w| w.contains('=') && !w.starts_with('-'));
    if !command_position {
        return None;
    }
    let words = shell_words(&line[start..]);
    (words.first().map(String::as_str) == Some("devprof")).then_some(words)
}

fn parse(words: &[String]) -> Result<(), String> {
    match Cli::command().try_get_matches_from(words) {
        Ok(_) => Ok(()),
        // `--help` and `--version` lines are documentation too.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn every_command_line_in_the_manual_parses() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for file in manual_files() {
        let text = std::fs::read_to_string(&file).expect("read the manual");
        for (line_no, line) in sh_lines(&text) {
            let Some(words) = invocation(&line) else {
                continue;
            };
            checked += 1;
            if let Err(e) = parse(&words) {
                failures.push(format!(
                    "{}:{line_no}: `{}`\n    {}",
                    file.strip_prefix(root()).unwrap_or(&file).display(),
                    line.trim(),
                    e.lines().next().unwrap_or("")
                ));
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} command lines found: the extraction is broken"
    );
    assert!(
        failures.is_empty(),
        "{} command line(s) in the manual do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every subcommand, nested ones included, with its path (`build source`).
fn subcommands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let here = if path.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{path} {}", sub.get_name())
        };
        out.push((here.clone(), sub.clone()));
        subcommands(sub, &here, out);
    }
}

#[test]
fn the_examples_in_every_help_page_parse() {
    let mut all = Vec::new();
    subcommands(&Cli::command(), "", &mut all);
    let mut checked = 0;
    let mut failures = Vec::new();
    for (path, cmd) in &all {
        let Some(after) = cmd.get_after_help() else {
            continue;
        };
        for line in after.to_string().lines() {
            let Some(words) = invocation(line.trim()) else {
                continue;
            };
            checked += 1;
            if let Err(e) = parse(&words) {
                failures.push(format!(
                    "`devprof {path} --help`: `{}`\n    {}",
                    line.trim(),
                    e.lines().next().unwrap_or("")
                ));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} examples found in --help pages"
    );
    assert!(
        failures.is_empty(),
        "{} example(s) in --help do not parse:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_subcommand_and_flag_is_documented() {
    let mut text = String::new();
    for file in manual_files() {
        text.push_str(&std::fs::read_to_string(&file).expect("read the manual"));
        text.push('\n');
    }
    let mut all = Vec::new();
    subcommands(&Cli::command(), "", &mut all);
    let mut missing = Vec::new();
    for (path, cmd) in &all {
        if !text.contains(&format!("devprof {path}")) {
            missing.push(format!("subcommand `devprof {path}`"));
        }
        for arg in cmd.get_arguments() {
            if arg.is_hide_set() {
                continue;
            }
            let Some(long) = arg.get_long() else {
                continue;
            };
            if matches!(long, "help" | "version") {
                continue;
            }
            // The long flag, or its short form, followed by something that cannot
            // continue a longer flag's name.
            let mut spellings = vec![format!("--{long}")];
            spellings.extend(arg.get_short().map(|c| format!("-{c}")));
            let documented = spellings.iter().any(|flag| {
                text.match_indices(flag.as_str()).any(|(at, _)| {
                    let starts_word = text[..at]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-');
                    starts_word
                        && !text[at + flag.len()..]
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                })
            });
            let flag = &spellings[0];
            if !documented {
                missing.push(format!("`devprof {path} {flag}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "not in README.md or docs/ ({}):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn shell_words_split_as_sh_would() {
    assert_eq!(
        shell_words("devprof cpu --process 'reth node' op-reth 30 # comment"),
        ["devprof", "cpu", "--process", "reth node", "op-reth", "30"]
    );
    assert_eq!(
        shell_words("devprof cpu --json demo-seq 10 | jq .files"),
        ["devprof", "cpu", "--json", "demo-seq", "10"]
    );
    assert_eq!(
        invocation("DEVPROF_TARGET=demo-seq devprof cpu").unwrap(),
        ["devprof", "cpu"]
    );
    assert_eq!(
        invocation("perf script | devprof fold - --svg out.svg > out.folded").unwrap(),
        ["devprof", "fold", "-", "--svg", "out.svg"]
    );
    assert!(invocation("cargo install devprof stuff").is_none());
}
