//! The shape ARCHITECTURE.md promises, checked on the source tree itself: few files at the
//! top of src/, no file too long to read, and no import circle between the top-level
//! modules (the data path reads top to bottom).

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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
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

/// `crate::X` references outside comments, per top-level module.
fn module_edges() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let from = top_module(&file);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // `crate::exit` is error.rs's codes, re-exported at the crate root.
                let to = if to == "exit" {
                    "error".to_string()
                } else {
                    to
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

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > 800).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 800 lines: {long:?}");
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
