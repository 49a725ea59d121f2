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
                // `crate::out!`/`crate::outln!` are ui/output.rs's writers, exported at the root.
                let to = match to.as_str() {
                    "exit" => "error".to_string(),
                    "out" | "outln" => "ui".to_string(),
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
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates")
        .join(name)
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
/// modules on a lower line.
const LAYERS: &[&[&str]] = &[
    // The pure crates (crates/base, crates/symbols, crates/profile), re-exported by lib.rs.
    &["text", "units"],
    &["symbols"],
    &["profile"],
    // The binary's own folders.
    &["error", "cli"],
    &["docker"],
    &["runtime", "signals"],
    &["store", "export"],
    &["render", "ui"],
    &["settings"],
    &["engines"],
    &["capture", "setup", "view"],
    &["commands"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
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
fn every_file_under_src_is_named_in_architecture_md() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let mut files = Vec::new();
    all_files(&src(), &mut files);
    let mut names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(src()).unwrap().display().to_string())
        .collect();
    // The pure crates' files go by the module path the binary re-exports them under:
    // crates/profile/src/heap/parse.rs is `profile/heap/parse.rs`, its lib.rs `profile/mod.rs`,
    // and crates/base/src/text.rs is `text.rs`.
    for name in PURE_CRATES {
        let root = crate_dir(name).join("src");
        let mut files = Vec::new();
        all_files(&root, &mut files);
        for f in files {
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            let rel = if rel == "lib.rs" {
                "mod.rs".to_string()
            } else {
                rel
            };
            names.push(match name {
                "base" => rel,
                _ => format!("{name}/{rel}"),
            });
        }
    }
    let missing: Vec<String> = names
        .into_iter()
        .filter(|rel| rel != "mod.rs" && !doc.contains(&format!("`{rel}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "source files that ARCHITECTURE.md does not name: {missing:?}"
    );
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// `use super::X` / `super::X::` between sibling files of one folder, as `file -> sibling`;
/// at a crate's root, `crate::X` too.
fn sibling_edges(dir: &Path, crate_root: bool) -> BTreeMap<String, BTreeSet<String>> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return edges;
    };
    let files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    let names: BTreeSet<String> = files
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for file in &files {
        let from = file.file_stem().unwrap().to_string_lossy().into_owned();
        if from == "mod" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Tests may reach anywhere; only the code's own imports count.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines() {
            let line = line.split("//").next().unwrap_or("");
            let prefixes: &[&str] = if crate_root {
                &["super::", "crate::"]
            } else {
                &["super::"]
            };
            for (i, prefix) in prefixes.iter().flat_map(|p| line.match_indices(*p)) {
                let to: String = line[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if to != from && to != "mod" && names.contains(&to) {
                    edges.entry(from.clone()).or_default().insert(to);
                }
            }
        }
    }
    edges
}

#[test]
fn files_inside_a_folder_form_no_import_circle() {
    let roots: Vec<PathBuf> = PURE_CRATES
        .iter()
        .map(|name| crate_dir(name).join("src"))
        .collect();
    let mut dirs = vec![src()];
    dirs.extend(roots.iter().cloned());
    let mut circles = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.path().is_dir() {
                dirs.push(entry.path());
            }
        }
        let edges = sibling_edges(&dir, roots.contains(&dir));
        for (a, targets) in &edges {
            for b in targets {
                // A circle through two or three files is what creeps in.
                if edges.get(b).is_some_and(|t| t.contains(a)) {
                    circles.push(format!("{}: {a} <-> {b}", dir.display()));
                }
                for c in edges.get(b).into_iter().flatten() {
                    if edges.get(c).is_some_and(|t| t.contains(a)) && c != a {
                        circles.push(format!("{}: {a} -> {b} -> {c} -> {a}", dir.display()));
                    }
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between files: {circles:#?}"
    );
}

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
