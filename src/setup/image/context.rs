//! The build context: which files of the source tree go into it (never `target/`,
//! `profiling/` or `.git`, nor what `.dockerignore` excludes) and the tar archive sent to
//! the engine, with devprof's own files (Dockerfile, skeleton) under `.devprof/`.

use regex::Regex;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Where devprof's generated files live in the context.
pub const DEVPROF_DIR: &str = ".devprof";
/// A fixed modification time for generated files, so identical content keeps the cache.
const GENERATED_MTIME: u64 = 1_700_000_000;

/// `.dockerignore` rules plus devprof's own: `.git` anywhere, `target/` and `profiling/`
/// at the root, and any directory cargo marked as a build directory (`CACHEDIR.TAG`).
#[derive(Debug, Clone, Default)]
pub struct Ignore {
    rules: Vec<(Regex, bool)>,
}

impl Ignore {
    /// Parses `.dockerignore` text: one pattern a line, `#` comments, `!` re-includes,
    /// `*` and `?` within a path component, `**` across components. The last matching
    /// rule wins; a pattern that matches a directory excludes what is under it.
    pub fn parse(text: &str) -> Self {
        let mut rules = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (negate, pattern) = match line.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line),
            };
            let pattern = pattern
                .trim_start_matches("./")
                .trim_start_matches('/')
                .trim_end_matches('/');
            if pattern.is_empty() {
                continue;
            }
            if let Ok(re) = Regex::new(&format!("^{}(/.*)?$", glob_to_regex(pattern))) {
                rules.push((re, negate));
            }
        }
        Ignore { rules }
    }

    /// Whether `rel` (relative to the root, `/`-separated) is excluded.
    pub fn excluded(&self, rel: &str) -> bool {
        let first = rel.split('/').next().unwrap_or("");
        if rel.split('/').any(|c| c == ".git")
            || matches!(first, "target" | "profiling" | DEVPROF_DIR)
            || rel == ".dockerignore"
        {
            return true;
        }
        let mut excluded = false;
        for (re, negate) in &self.rules {
            if re.is_match(rel) {
                excluded = !negate;
            }
        }
        excluded
    }
}

fn glob_to_regex(pattern: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' if chars.get(i + 1) == Some(&'*') => {
                // `**/` matches zero or more directories.
                if chars.get(i + 2) == Some(&'/') {
                    out.push_str("(.*/)?");
                    i += 3;
                } else {
                    out.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    out
}

/// One file (or symbolic link) of the source tree that goes into the context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Relative to the root, `/`-separated.
    pub rel: String,
    pub path: PathBuf,
}

/// The files of the source tree that go into the context, in a stable order.
pub fn walk(root: &Path, ignore: &Ignore) -> io::Result<Vec<SourceFile>> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel_dir)) = stack.pop() {
        // A directory cargo builds into (a member's own target/) has a CACHEDIR.TAG.
        if !rel_dir.is_empty() && dir.join("CACHEDIR.TAG").exists() {
            continue;
        }
        let mut entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = if rel_dir.is_empty() {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            if ignore.excluded(&rel) {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push((entry.path(), rel));
            } else if kind.is_file() || kind.is_symlink() {
                out.push(SourceFile {
                    rel,
                    path: entry.path(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// Writes the context: the source files as they are (links kept as links), then the
/// generated files under `.devprof/`.
pub fn write_tar<W: Write>(
    out: W,
    sources: &[SourceFile],
    generated: &[(String, Vec<u8>)],
) -> io::Result<W> {
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    tar.mode(tar::HeaderMode::Deterministic);
    for file in sources {
        tar.append_path_with_name(&file.path, &file.rel)?;
    }
    for (rel, data) in generated {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(GENERATED_MTIME);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, format!("{DEVPROF_DIR}/{rel}"), data.as_slice())?;
    }
    tar.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devprof_rules_apply_without_a_dockerignore() {
        let ignore = Ignore::default();
        for excluded in [
            "target",
            "target/release/demo-node",
            "profiling/demo-seq/x.svg",
            ".git/HEAD",
            "demo/.git/x",
            ".dockerignore",
            ".devprof/Dockerfile",
        ] {
            assert!(ignore.excluded(excluded), "{excluded}");
        }
        for kept in [
            "src/main.rs",
            "Cargo.toml",
            "demo/node/src/target.rs",
            "src/profiling.rs",
            "demo/target-x",
        ] {
            assert!(!ignore.excluded(kept), "{kept}");
        }
    }

    #[test]
    fn dockerignore_patterns_negations_and_double_stars() {
        let ignore =
            Ignore::parse("# comment\n*.md\n**/*.log\ndocs/\n!docs/keep.txt\n/tests/data\n");
        assert!(ignore.excluded("README.md"));
        assert!(
            !ignore.excluded("demo/README.md"),
            "* stays within one component"
        );
        assert!(ignore.excluded("a/b/c.log") && ignore.excluded("c.log"));
        assert!(ignore.excluded("docs") && ignore.excluded("docs/x.txt"));
        assert!(!ignore.excluded("docs/keep.txt"));
        assert!(ignore.excluded("tests/data/perf.txt"));
        assert!(!ignore.excluded("tests/cpu.rs"));
    }

    #[test]
    fn walks_this_repository_without_build_output() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = walk(root, &Ignore::default()).unwrap();
        let rels: Vec<&str> = files.iter().map(|f| f.rel.as_str()).collect();
        assert!(rels.contains(&"Cargo.toml") && rels.contains(&"demo/node/src/main.rs"));
        assert!(!rels
            .iter()
            .any(|r| r.starts_with("target/") || r.starts_with(".git/")));
        let mut sorted = rels.clone();
        sorted.sort();
        assert_eq!(rels, sorted, "stable order");
    }

    #[test]
    fn tar_holds_sources_and_generated_files() {
        let dir = std::env::temp_dir().join(format!("devprof-ctx-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
        let files = walk(&dir, &Ignore::default()).unwrap();
        let bytes = write_tar(
            Vec::new(),
            &files,
            &[("Dockerfile".into(), b"FROM x\n".to_vec())],
        )
        .unwrap();
        let mut archive = tar::Archive::new(bytes.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, vec!["src/main.rs", ".devprof/Dockerfile"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
