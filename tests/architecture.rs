//! The shape ARCHITECTURE.md promises, checked on the source tree itself: few files at the
//! top of src/, no file too long to read, the capture and engine folders in small pieces,
//! no import circle between the top-level modules nor between the files of any folder,
//! each engine named only where it is chosen, and ARCHITECTURE.md's layer table and file
//! list exactly what the code says (`DEVPROF_WRITE_ARCHITECTURE=1 cargo test --test
//! architecture` writes them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn src() -> PathBuf {
    root().join("src")
}

/// A file's code: comments and its test module left out (tests may reach anywhere).
fn code_of(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    code.lines()
        .map(strip_comment)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` without a `//` comment (one inside a string literal is kept: a URL, say).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The top-level module a file belongs to: `capture/cpu.rs` -> `capture`.
fn top_module(file: &Path) -> String {
    let relative = file.strip_prefix(src()).unwrap();
    let first = relative.components().next().unwrap();
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// `crate::X` references in code, per top-level module, with where each was first seen.
fn module_edges() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let from = top_module(&file);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = strip_comment(line);
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // `crate::exit` is error.rs's codes, re-exported at the crate root.
                // `crate::out!`/`crate::outln!` are ui/output.rs's writers, and `crate::say!`,
                // `crate::note!` and `crate::warn!` ui/term.rs's, exported at the root.
                let to = match to.as_str() {
                    "exit" => "error".to_string(),
                    "out" | "outln" | "say" | "note" | "warn" => "ui".to_string(),
                    _ => to,
                };
                if !to.is_empty() && to != from {
                    edges
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| {
                            format!("{}:{}", file.strip_prefix(src()).unwrap().display(), n + 1)
                        });
                }
            }
        }
    }
    edges
}

#[test]
fn src_top_level_holds_at_most_eight_files() {
    let top: Vec<String> = std::fs::read_dir(src())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        top.len() <= 8,
        "src/ holds {} .rs files: {top:?}",
        top.len()
    );
}

/// The pure crates beside the binary's: text and units, symbols, profiles.
const PURE_CRATES: [&str; 3] = ["base", "symbols", "profile"];

fn crate_dir(name: &str) -> PathBuf {
    root().join("crates").join(name)
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    for name in PURE_CRATES {
        rust_files(&crate_dir(name).join("src"), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > 800).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 800 lines: {long:?}");
}

/// The functions of a file's code, as (name, first line, lines), found by their `fn`
/// line and the brace that closes their body (a declaration without one ends at its `;`).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = strip_comment(line).trim_start();
        let signature = trimmed
            .split_once("fn ")
            .filter(|(before, _)| {
                before.split_whitespace().all(|w| {
                    [
                        "pub",
                        "pub(crate)",
                        "pub(super)",
                        "async",
                        "const",
                        "unsafe",
                    ]
                    .contains(&w)
                })
            })
            .map(|(_, after)| after);
        let Some(after) = signature else { continue };
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        if let Some(length) = body_lines(&lines[i..]) {
            found.push((name, i + 1, length));
        }
    }
    found
}

/// How many lines from the first of `lines` (a `fn` line) to the end of its body, braces
/// in strings, raw strings, chars and comments not counted.
fn body_lines(lines: &[&str]) -> Option<usize> {
    let mut depth = 0usize;
    let mut opened = false;
    let mut raw_hashes: Option<usize> = None;
    let mut in_string = false;
    for (n, line) in lines.iter().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if let Some(hashes) = raw_hashes {
                let closes = c == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|h| **h == '#')
                        .count()
                        == hashes;
                if closes {
                    raw_hashes = None;
                    i += hashes;
                }
            } else if in_string {
                match c {
                    '\\' => i += 1,
                    '"' => in_string = false,
                    _ => {}
                }
            } else {
                match c {
                    '/' if chars.get(i + 1) == Some(&'/') => break,
                    '"' => in_string = true,
                    'r' if matches!(chars.get(i + 1), Some('"') | Some('#'))
                        && (i == 0
                            || !(chars[i - 1].is_ascii_alphanumeric() || chars[i - 1] == '_')) =>
                    {
                        let hashes = chars[i + 1..].iter().take_while(|h| **h == '#').count();
                        if chars.get(i + 1 + hashes) == Some(&'"') {
                            raw_hashes = Some(hashes);
                            i += 1 + hashes;
                        }
                    }
                    '\'' if chars.get(i + 2) == Some(&'\'') => i += 2,
                    '\'' if chars.get(i + 1) == Some(&'\\') => {
                        i += 2;
                        while i < chars.len() && chars[i] != '\'' {
                            i += 1;
                        }
                    }
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth = depth.checked_sub(1)?;
                        if opened && depth == 0 {
                            return Some(n + 1);
                        }
                    }
                    ';' if !opened && depth == 0 => return Some(n + 1),
                    _ => {}
                }
            }
            i += 1;
        }
    }
    None
}

/// The capture driver and the engines are read most: their files stay small and their
/// functions short. The limits give them a shape; they are not quotas to fill.
#[test]
fn capture_and_engine_files_stay_small_and_their_functions_short() {
    let mut files = Vec::new();
    for folder in ["capture", "engines"] {
        rust_files(&src().join(folder), &mut files);
    }
    files.sort();
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(src()).unwrap().display().to_string();
        let lines = text.lines().count();
        if lines > 600 {
            wrong.push(format!("{name}: {lines} lines (at most 600)"));
        }
        for (function, at, length) in functions(&text) {
            if length > 120 {
                wrong.push(format!(
                    "{name}:{at} fn {function}: {length} lines (at most 120)"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "too long: {wrong:#?}");
}

#[test]
fn the_function_lengths_are_read_from_their_braces() {
    let text = "fn a() {\n    x(\"}\", '{');\n    let s = r#\"{\"#;\n}\n\n    pub async fn b(\n        y: u32,\n    ) -> u32 {\n        y\n    }\n    fn c(&self) -> u32;\n";
    let found = functions(text);
    assert_eq!(
        found,
        vec![
            ("a".to_string(), 1, 4),
            ("b".to_string(), 6, 5),
            ("c".to_string(), 11, 1)
        ]
    );
}

#[test]
fn top_level_modules_form_no_import_circle() {
    let edges = module_edges();
    // Depth-first search for a back edge, reporting the circle with a line of each step.
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flat_map(|m| m.keys()) {
            if let Some(circle) = visit(next, edges, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for start in edges.keys() {
        if let Some(circle) = visit(start, &edges, &mut Vec::new(), &mut done) {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
                .collect();
            panic!("import circle: {}", steps.join("; "));
        }
    }
}

#[test]
fn the_engine_is_the_only_way_captures_reach_profilers() {
    // Engines sit below capture: nothing in engines/ may reach up into capture/ or commands/.
    let edges = module_edges();
    for upward in ["capture", "commands", "cli"] {
        assert!(
            !edges.get("engines").is_some_and(|m| m.contains_key(upward)),
            "engines/ uses {upward}/ at {}",
            edges["engines"][upward]
        );
    }
}

/// The layers ARCHITECTURE.md draws, lowest first: a top-level module may import only
/// modules on a lower line. Each with what the layer is for, as the table says it.
const LAYERS: &[(&[&str], &str)] = &[
    // The pure crates (crates/base, crates/symbols, crates/profile), re-exported by lib.rs.
    (
        &["text", "units"],
        "small helpers every layer uses (crate `devprof-base`)",
    ),
    (
        &["symbols"],
        "names for frames from local files (crate `devprof-symbols`)",
    ),
    (&["profile"], "pure analysis (crate `devprof-profile`)"),
    // The binary's own folders.
    (
        &["error", "cli"],
        "the errors users see; the command line as typed",
    ),
    (&["docker"], "the only code that talks to the Docker engine"),
    (&["runtime", "signals"], "what runs in a process; Ctrl-C"),
    (
        &["store", "export"],
        "the profile store; captures in other tools' formats",
    ),
    (
        &["render", "ui"],
        "drawing profiles; what the user sees on the terminal",
    ),
    (
        &["settings"],
        "validated settings, made once: raw strings stop here",
    ),
    (&["engines"], "the profilers, chosen in one place"),
    (
        &["capture", "setup", "view"],
        "the capture driver and its recipes; images, compose, doctor; the viewer",
    ),
    (&["commands"], "one file per subcommand, and `dispatch`"),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(layer, _)| layer.contains(&module))
}

#[test]
fn every_top_level_module_imports_only_lower_layers() {
    let mut wrong = Vec::new();
    for (from, targets) in module_edges() {
        let Some(from_layer) = layer_of(&from) else {
            wrong.push(format!(
                "{from} is in no layer of LAYERS (and ARCHITECTURE.md)"
            ));
            continue;
        };
        for (to, at) in targets {
            match layer_of(&to) {
                Some(to_layer) if to_layer < from_layer => {}
                Some(_) => wrong.push(format!("{from} -> {to} at {at} runs sideways or up")),
                None => wrong.push(format!("{to} is in no layer (used by {from} at {at})")),
            }
        }
    }
    assert!(wrong.is_empty(), "layering broken: {wrong:#?}");
}

#[test]
fn the_layering_check_catches_an_upward_import() {
    // The check above is only as good as its reading of the edges: an engine that reached
    // up into capture must be seen.
    assert!(layer_of("engines") < layer_of("capture"));
    assert!(module_edges()
        .get("capture")
        .is_some_and(|m| m.contains_key("engines")));
}

#[test]
fn lib_rs_is_a_list_of_modules() {
    // Dispatch lives in `commands`: lib.rs imports nothing that sits above the modules
    // that use it (every `crate::profile::...` resolves through it).
    let text = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    for line in code_of(&text).lines().filter(|l| !l.trim().is_empty()) {
        let line = line.trim();
        assert!(
            line.starts_with("pub mod ") || line.starts_with("pub use "),
            "lib.rs holds more than modules and re-exports: {line}"
        );
    }
}

// ----- ARCHITECTURE.md, generated -----

/// The files of `dir` (any kind), sorted, as paths relative to `base`.
fn all_files(dir: &Path, base: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all_files(&path, base, out);
        } else {
            out.push(path.strip_prefix(base).unwrap().display().to_string());
        }
    }
}

/// What a file is, for the map: its doc comment's first sentence (`//!`; a script's or a
/// stylesheet's first comment), else the line this test keeps for a file that can hold
/// none.
fn first_sentence(path: &Path, named: &str) -> String {
    const NO_COMMENT: &[(&str, &str)] = &[
        (
            "render/heatmap/page.html",
            "The heatmap page, self-contained: `mod.rs` embeds its data and its script.",
        ),
        ("view/assets/icon.svg", "The viewer's icon."),
    ];
    if let Some((_, line)) = NO_COMMENT.iter().find(|(n, _)| *n == named) {
        return line.to_string();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let comment: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| l.starts_with("//") || l.starts_with("/*"))
        .map(|l| {
            l.trim_start_matches("//!")
                .trim_start_matches("//")
                .trim_start_matches("/*")
                .trim_end_matches("*/")
                .trim()
        })
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = comment.join(" ");
    assert!(
        !joined.is_empty(),
        "{named} opens with no comment saying what it is"
    );
    let sentence = match joined.find(". ") {
        Some(end) => &joined[..=end],
        None => &joined,
    };
    let sentence = sentence.trim();
    // A long first sentence is named by what comes before its colon.
    match sentence.split_once(": ") {
        Some((head, _)) if sentence.chars().count() > 120 => format!("{head}."),
        _ => sentence.to_string(),
    }
}

/// Every file of src/ and of the pure crates, by the module path the binary knows it by
/// (`profile/heap/parse.rs` is `crates/profile/src/heap/parse.rs`, a crate's `lib.rs` its
/// `mod.rs`, `crates/base/src/text.rs` is `text.rs`), with what it is.
fn file_map() -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut names = Vec::new();
    all_files(&src(), &src(), &mut names);
    for name in names {
        let line = first_sentence(&src().join(&name), &name);
        map.insert(name, line);
    }
    for krate in PURE_CRATES {
        let root = crate_dir(krate).join("src");
        let mut names = Vec::new();
        all_files(&root, &root, &mut names);
        for name in names {
            let line = first_sentence(&root.join(&name), &name);
            let named = if name == "lib.rs" {
                "mod.rs".to_string()
            } else {
                name
            };
            let named = match krate {
                "base" => named,
                _ => format!("{krate}/{named}"),
            };
            if named != "mod.rs" {
                map.insert(named, line);
            }
        }
    }
    map
}

/// The layer table, highest first, with the imports each module has today.
fn layer_table() -> String {
    let edges = module_edges();
    let mut out = String::from(
        "| layer | modules | what for | imports, as the code has them today |\n|---|---|---|---|\n",
    );
    for (n, (modules, purpose)) in LAYERS.iter().enumerate().rev() {
        let names: Vec<String> = modules.iter().map(|m| format!("`{m}`")).collect();
        let imports: Vec<String> = modules
            .iter()
            .map(|m| {
                let used: Vec<&str> = edges
                    .get(*m)
                    .map(|e| e.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                let used = if used.is_empty() {
                    "nothing".to_string()
                } else {
                    used.join(", ")
                };
                format!("{m}: {used}")
            })
            .collect();
        out.push_str(&format!(
            "| {n} | {} | {purpose} | {} |\n",
            names.join(", "),
            imports.join("; ")
        ));
    }
    out
}

/// The file list: one heading per folder, one line per file.
fn file_list() -> String {
    let mut out = String::new();
    let mut heading = None;
    let mut files: Vec<(String, String)> = file_map().into_iter().collect();
    // Each folder's own files together, its sub-folders after them.
    files.sort_by_key(|(name, _)| match name.rsplit_once('/') {
        Some((folder, file)) => (folder.to_string(), file.to_string()),
        None => (String::new(), name.clone()),
    });
    for (name, line) in files {
        let folder = match name.rsplit_once('/') {
            Some((folder, _)) => format!("`{folder}/`"),
            None => "the top of `src/`".to_string(),
        };
        if heading.as_ref() != Some(&folder) {
            out.push_str(&format!("\n### {folder}\n\n"));
            heading = Some(folder);
        }
        out.push_str(&format!("- `{name}`: {line}\n"));
    }
    out
}

const LAYERS_BEGIN: &str = "<!-- generated from tests/architecture.rs: layers -->\n";
const FILES_BEGIN: &str = "<!-- generated from the files' doc comments: files -->\n";
const END: &str = "<!-- end of generated -->\n";

/// `doc` with the text between `begin` and the next end marker replaced by `body`.
fn with_section(doc: &str, begin: &str, body: &str) -> Option<String> {
    let start = doc.find(begin)? + begin.len();
    let end = start + doc[start..].find(END)?;
    Some(format!("{}{body}{}", &doc[..start], &doc[end..]))
}

#[test]
fn architecture_md_is_generated_from_the_code() {
    let path = root().join("ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let expected = with_section(&doc, LAYERS_BEGIN, &layer_table())
        .and_then(|doc| with_section(&doc, FILES_BEGIN, &file_list()))
        .expect("ARCHITECTURE.md has both generated sections, each closed by its end marker");
    if std::env::var_os("DEVPROF_WRITE_ARCHITECTURE").is_some() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    if doc != expected {
        let first = doc
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(doc.lines().count().min(expected.lines().count()));
        panic!(
            "ARCHITECTURE.md differs from the code from line {}:\n  has:       {}\n  should be: {}\n\
             regenerate it with `DEVPROF_WRITE_ARCHITECTURE=1 cargo test --test architecture`",
            first + 1,
            doc.lines().nth(first).unwrap_or("(end)"),
            expected.lines().nth(first).unwrap_or("(end)")
        );
    }
}

// ----- circles between files, at every depth -----

/// The identifiers a path brings in after `prefix` at each place in `code`: the first
/// segment (`prefix::name::...`), or each top-level one of a group (`prefix::{a, b::c}`).
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        // `foo::crate::x` is not a path from the crate root.
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            out.push(ident(&item));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// Edges between the files (and sub-folders) of `dir`, whose module path is `module`
/// (`crate::capture::heap`; `crate` at a crate's root): `super::X` and the full path.
fn sibling_edges(dir: &Path, module: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return edges;
    };
    let entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    let name_of = |p: &Path| -> String {
        if p.is_dir() {
            p.file_name().unwrap().to_string_lossy().into_owned()
        } else {
            p.file_stem().unwrap().to_string_lossy().into_owned()
        }
    };
    let names: BTreeSet<String> = entries
        .iter()
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| name_of(p))
        .filter(|n| n != "mod" && n != "lib" && n != "main")
        .collect();
    for entry in &entries {
        let from = name_of(entry);
        if !names.contains(&from) {
            continue;
        }
        // A sub-folder counts as one, with every file in it.
        let mut files = Vec::new();
        if entry.is_dir() {
            rust_files(entry, &mut files);
        } else {
            files.push(entry.clone());
        }
        let full = format!("{module}::");
        for file in files {
            let code = code_of(&std::fs::read_to_string(&file).unwrap());
            let parts = file.strip_prefix(dir).unwrap().components().count();
            let in_mod_rs = file.file_name().is_some_and(|n| n == "mod.rs");
            // `super::` from a file right in `dir` (or a sub-folder's mod.rs) is `dir`'s
            // module; from a file one folder down, `super::super::` is.
            let up = match (parts, in_mod_rs) {
                (1, _) | (2, true) => Some("super::"),
                (2, false) => Some("super::super::"),
                _ => None,
            };
            for prefix in std::iter::once(full.as_str()).chain(up) {
                for to in named_after(&code, prefix) {
                    if to != from && names.contains(&to) {
                        edges.entry(from.clone()).or_default().insert(to);
                    }
                }
            }
        }
    }
    edges
}

/// Each folder to check, with its module path.
fn folders() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    fn walk(dir: &Path, module: &str, out: &mut Vec<(PathBuf, String)>) {
        out.push((dir.to_path_buf(), module.to_string()));
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                walk(&path, &format!("{module}::{name}"), out);
            }
        }
    }
    walk(&src(), "crate", &mut out);
    for krate in PURE_CRATES {
        walk(&crate_dir(krate).join("src"), "crate", &mut out);
    }
    out
}

fn circles() -> Vec<String> {
    let mut circles = Vec::new();
    for (dir, module) in folders() {
        let edges = sibling_edges(&dir, &module);
        for (a, targets) in &edges {
            for b in targets {
                // A circle through two or three files is what creeps in.
                if edges.get(b).is_some_and(|t| t.contains(a)) && a < b {
                    circles.push(format!("{}: {a} <-> {b}", dir.display()));
                }
                for c in edges.get(b).into_iter().flatten() {
                    if edges.get(c).is_some_and(|t| t.contains(a)) && c != a && a < b && a < c {
                        circles.push(format!("{}: {a} -> {b} -> {c} -> {a}", dir.display()));
                    }
                }
            }
        }
    }
    circles
}

#[test]
fn files_inside_a_folder_form_no_import_circle() {
    let circles = circles();
    assert!(
        circles.is_empty(),
        "import circles between files: {circles:#?}"
    );
}

#[test]
fn the_circle_check_reads_crate_paths_and_groups() {
    assert_eq!(
        named_after(
            "use crate::store::{catalog::Capture, names};",
            "crate::store::"
        ),
        vec!["catalog", "names"]
    );
    assert_eq!(
        named_after("x = crate::store::names::resolve(y);", "crate::store::"),
        vec!["names"]
    );
    assert!(named_after("a::crate::store::names", "crate::store::").is_empty());
}

// ----- where engines are named -----

/// The engines: the folders of src/engines.
fn engine_names() -> Vec<String> {
    std::fs::read_dir(src().join("engines"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Where an engine may be named besides its own folder: the selection, the settings'
/// `EngineSpec` and its flags, and the command line.
const MAY_NAME_ENGINES: &[&str] = &[
    "engines/select.rs",
    "engines/mod.rs",
    "settings/mod.rs",
    "settings/capture.rs",
    "cli/",
];

/// The places in `code` that name the engine module `engine` or its engine type.
fn names_engine(code: &str, engine: &str, type_name: &str) -> bool {
    let by_path = ["crate::engines::", "engines::", "super::"]
        .iter()
        .any(|prefix| named_after(code, prefix).iter().any(|n| n == engine));
    let by_type = code
        .match_indices(type_name)
        .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
    by_path || by_type
}

#[test]
fn an_engine_is_named_only_in_its_folder_the_selection_and_the_settings() {
    let engines = engine_names();
    assert!(engines.len() >= 4, "{engines:?}");
    let type_of = |e: &str| match e {
        "perf" => "PerfEngine",
        "pyspy" => "PySpyEngine",
        "asprof" => "AsprofEngine",
        "pprof" => "PprofEngine",
        other => panic!("an engine folder without its type here: {other}"),
    };
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let name = file.strip_prefix(src()).unwrap().display().to_string();
        if MAY_NAME_ENGINES.iter().any(|m| name.starts_with(m)) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for engine in &engines {
            if name.starts_with(&format!("engines/{engine}/")) {
                continue;
            }
            if names_engine(&code, engine, type_of(engine)) {
                wrong.push(format!("{name} names {engine}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "engines named outside their place: {wrong:#?}"
    );
}

#[test]
fn the_engine_check_sees_a_path_a_group_and_a_type() {
    assert!(names_engine(
        "use crate::engines::pyspy::X;",
        "pyspy",
        "PySpyEngine"
    ));
    assert!(names_engine(
        "use crate::engines::{perf, Engine};",
        "perf",
        "PerfEngine"
    ));
    assert!(names_engine(
        "let e = PySpyEngine::default();",
        "pyspy",
        "PySpyEngine"
    ));
    // The profile's pprof decoder is not the engine.
    assert!(!names_engine(
        "use crate::profile::pprof::decode;",
        "pprof",
        "PprofEngine"
    ));
    assert!(!names_engine(
        "let x = \"perf record\";",
        "perf",
        "PerfEngine"
    ));
}

// ----- the pure crates -----

#[test]
fn the_pure_crates_depend_on_no_runtime_docker_or_network() {
    // The compiler keeps profile/ and symbols/ pure as long as their manifests do: no async
    // runtime, no Docker client, no HTTP, and none of the binary's own crate.
    let forbidden = [
        "tokio",
        "bollard",
        "hyper",
        "hyper-util",
        "futures-util",
        "devprof",
    ];
    for name in PURE_CRATES {
        let manifest = std::fs::read_to_string(crate_dir(name).join("Cargo.toml")).unwrap();
        let table: toml::Table = manifest.parse().unwrap();
        for section in ["dependencies", "dev-dependencies"] {
            let Some(deps) = table.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys() {
                assert!(
                    !forbidden.contains(&dep.as_str()),
                    "crates/{name} depends on {dep} ({section})"
                );
            }
        }
    }
}

#[test]
fn the_pure_crates_reach_nothing_of_the_binary() {
    // A `crate::capture` (say) inside crates/ would not compile, but a `#[path]` or an
    // include of the binary's sources would: no crate file names src/ of the binary.
    for name in PURE_CRATES {
        let mut files = Vec::new();
        rust_files(&crate_dir(name).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                !text.contains("../../src/"),
                "{} reaches into the binary's sources",
                file.display()
            );
        }
    }
}

// ----- what lives in a static -----

/// The statics of src/, each with why it is one; a capture's inputs are never among them
/// (they travel in `capture::CaptureCtx`).
const STATICS: &[(&str, &str, &str)] = &[
    (
        "signals.rs",
        "DELIVERED",
        "the signal handler counts every delivery",
    ),
    (
        "signals.rs",
        "ON_TERMINAL",
        "the signal handler leaves a closed terminal",
    ),
    (
        "signals.rs",
        "EXIT_NOTE",
        "what the third interrupt prints before exiting at once",
    ),
    (
        "docker/ssh.rs",
        "LIVE",
        "ssh bridge sockets removed at exit",
    ),
    (
        "docker/containers.rs",
        "NEXT",
        "unique sidecar names within the process",
    ),
    (
        "cli/dotenv.rs",
        "DOTENV",
        "the .env file, read once like the environment",
    ),
];

#[test]
fn no_capture_input_lives_in_a_static() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut found = Vec::new();
    for file in files {
        let name = file.strip_prefix(src()).unwrap().display().to_string();
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for line in code.lines() {
            let line = line.trim_start();
            for keyword in ["thread_local!", "task_local!", "static mut "] {
                if line.contains(keyword) {
                    found.push(format!("{name}: {line}"));
                }
            }
            let declared = line
                .strip_prefix("pub static ")
                .or_else(|| line.strip_prefix("static "));
            if let Some(rest) = declared {
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !STATICS.iter().any(|(f, s, _)| *f == name && *s == ident) {
                    found.push(format!("{name}: static {ident}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "statics without a reason in STATICS (a capture's input goes in CaptureCtx): {found:#?}"
    );
}

// ----- the terminal's one writer -----

/// Files outside src/ui/ that still write to the terminal themselves, each with why. The
/// rest reach it through ui/term.rs (`crate::say!`, `crate::note!`, `crate::warn!`,
/// `crate::out!`, `ui::term::data`), whose sanitizer escapes every control character but
/// LF and TAB (finding 4 of the security review). An entry whose file no longer writes is
/// stale and fails the test: the list only shrinks.
const OWN_TERMINAL_WRITES: &[(&str, &str)] = &[
    (
        "render/mod.rs",
        "an SVG for a pipe (`render --svg -`), written unchanged like all data; render is ui's \
         sibling layer, so it cannot reach ui::term::data_writer",
    ),
    (
        "docker/containers.rs",
        "a removal's warning from below ui's layer (the engine's words about a container devprof \
         made), passed through text::terminal, the rule ui::term applies",
    ),
    (
        "store/loader.rs",
        "a warning from below ui's layer, passed through text::terminal, the rule ui::term applies",
    ),
    (
        "cli/dotenv.rs",
        "a warning and a note about .env from below ui's layer, read before any command runs; \
         passed through text::terminal (the key names are a cloned repository's text)",
    ),
];

/// A file's code without comments and without its inline test module: cut at the
/// `#[cfg(test)]` that opens a `mod ... {` block (one over `mod tests;` keeps the rest).
fn code_before_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            lines[i].trim() == "#[cfg(test)]"
                && lines.get(i + 1).is_some_and(|next| {
                    let next = next.trim();
                    next.starts_with("mod ") && next.ends_with('{')
                })
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .map(|l| strip_comment(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where `code` writes to the terminal without ui/term.rs: the print macros, `dbg!`, and
/// handles on standard output or error. One entry per line and way.
fn terminal_writes(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for (i, _) in line.match_indices("print") {
            let start = match i.checked_sub(1) {
                Some(e) if line.as_bytes()[e] == b'e' => e,
                _ => i,
            };
            let part_of_a_name = line[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            let rest = &line[i + "print".len()..];
            let rest = rest.strip_prefix("ln").unwrap_or(rest);
            if !part_of_a_name && rest.starts_with('!') {
                found.push(format!("{}: {}", n + 1, line.trim()));
            }
        }
        let handle = ["stdout()", "stderr()", "dbg!("]
            .iter()
            .any(|way| line.contains(way));
        if handle {
            found.push(format!("{}: {}", n + 1, line.trim()));
        }
    }
    found.dedup();
    found
}

#[test]
fn only_ui_writes_to_the_terminal() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let (mut found, mut writing) = (Vec::new(), BTreeSet::new());
    for file in files {
        let name = file.strip_prefix(src()).unwrap().display().to_string();
        if name.starts_with("ui/") {
            continue;
        }
        let writes = terminal_writes(&code_before_tests(&std::fs::read_to_string(&file).unwrap()));
        if writes.is_empty() {
            continue;
        }
        writing.insert(name.clone());
        if !OWN_TERMINAL_WRITES.iter().any(|(f, _)| *f == name) {
            found.extend(writes.into_iter().map(|w| format!("{name}:{w}")));
        }
    }
    assert!(
        found.is_empty(),
        "writes to the terminal outside src/ui/: use crate::say!, crate::note!, crate::warn!, crate::out! \
         (text for people, through the sanitizer) or ui::term::data (data for pipes), or give the \
         file a reason in OWN_TERMINAL_WRITES: {found:#?}"
    );
    let stale: Vec<&str> = OWN_TERMINAL_WRITES
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| !writing.contains(*f))
        .collect();
    assert!(
        stale.is_empty(),
        "OWN_TERMINAL_WRITES names files that no longer write to the terminal: remove {stale:?}"
    );
}

#[test]
fn the_terminal_check_sees_every_way_and_no_namesake() {
    for code in [
        "eprintln!(\"x {y}\");",
        "    println!();",
        "print!(\"{out}\")",
        "x => eprint!(\"{phases}\"),",
        "let mut out = std::io::stdout().lock();",
        "let _ = writeln!(io::stderr(), \"x\");",
        "dbg!(value);",
    ] {
        assert_eq!(terminal_writes(code).len(), 1, "{code}");
    }
    for code in [
        "crate::say!(\"x\");",
        "crate::ui::term::eprint(&phases);",
        "crate::ui::term::print(&text);",
        "let footprint!(x);",
        "blueprint!(x);",
        "let printed = reprint(x);",
    ] {
        assert!(terminal_writes(code).is_empty(), "{code}");
    }
}
