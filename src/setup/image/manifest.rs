//! Cargo manifests, read without cargo: the workspace's packages and their binaries, the
//! package and binary to build, the project's jemalloc profiling feature, and the
//! "skeleton" (manifests, lock file and stub sources) that lets the dependencies be
//! compiled in an image layer of their own. Pure: files come in as text, with a closure
//! that says whether a path exists in the source tree.

use std::collections::BTreeMap;

/// One Cargo.toml.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// Directory relative to the source root, `""` for the root itself, `/`-separated.
    pub dir: String,
    pub text: String,
    pub package: Option<Package>,
    /// `[workspace] members` (glob patterns) and `exclude`, when this is a workspace root.
    pub workspace: Option<(Vec<String>, Vec<String>)>,
    /// `[workspace.dependencies]`: name -> features, for inherited dependencies.
    pub workspace_dep_features: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub name: String,
    pub features: BTreeMap<String, Vec<String>>,
    /// Binary targets: (name, path relative to the source root).
    pub bins: Vec<(String, String)>,
    /// Every target source the manifest needs to exist (lib, bins, build script, declared
    /// examples/tests/benches), relative to the source root, with whether it is a `main`.
    pub target_files: Vec<(String, bool)>,
    /// Dependencies (any kind) whose name contains "jemalloc", with their features, and
    /// whether they are inherited from the workspace (`workspace = true`).
    pub jemalloc_deps: Vec<(String, Vec<String>, bool)>,
}

fn join(dir: &str, path: &str) -> String {
    let path = path.trim_start_matches("./");
    if dir.is_empty() {
        path.to_string()
    } else {
        format!("{dir}/{path}")
    }
}

fn strings(value: Option<&toml::Value>) -> Vec<String> {
    value
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Parses one Cargo.toml found in `dir`. `exists` answers for paths relative to the
/// source root.
pub fn parse_manifest(
    dir: &str,
    text: &str,
    exists: &dyn Fn(&str) -> bool,
) -> Result<Manifest, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("{}: {}", join(dir, "Cargo.toml"), e.message()))?;
    let workspace = table.get("workspace").and_then(|w| w.as_table());
    let workspace_dep_features = workspace
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table())
        .map(|deps| {
            deps.iter()
                .map(|(name, spec)| (name.clone(), strings(spec.get("features"))))
                .collect()
        })
        .unwrap_or_default();
    let package = match table.get("package").and_then(|p| p.as_table()) {
        Some(p) => Some(parse_package(dir, &table, p, exists)?),
        None => None,
    };
    Ok(Manifest {
        dir: dir.to_string(),
        text: text.to_string(),
        package,
        workspace: workspace.map(|w| (strings(w.get("members")), strings(w.get("exclude")))),
        workspace_dep_features,
    })
}

fn parse_package(
    dir: &str,
    table: &toml::Table,
    package: &toml::Table,
    exists: &dyn Fn(&str) -> bool,
) -> Result<Package, String> {
    let name = package
        .get("name")
        .and_then(|n| n.as_str())
        .ok_or_else(|| format!("{}: [package] has no name", join(dir, "Cargo.toml")))?
        .to_string();
    let features = table
        .get("features")
        .and_then(|f| f.as_table())
        .map(|f| {
            f.iter()
                .map(|(k, v)| (k.clone(), strings(Some(v))))
                .collect()
        })
        .unwrap_or_default();
    let auto = |key: &str| package.get(key).and_then(|v| v.as_bool()).unwrap_or(true);
    let mut target_files: Vec<(String, bool)> = Vec::new();

    // The library.
    let lib_path = table
        .get("lib")
        .and_then(|l| l.get("path"))
        .and_then(|p| p.as_str())
        .map(|p| join(dir, p))
        .or_else(|| Some(join(dir, "src/lib.rs")).filter(|p| exists(p)));
    if let Some(p) = lib_path {
        target_files.push((p, false));
    }

    // Binaries: declared ones, then src/main.rs and src/bin/ when autobins is on.
    let mut bins: Vec<(String, String)> = Vec::new();
    for bin in table
        .get("bin")
        .and_then(|b| b.as_array())
        .into_iter()
        .flatten()
    {
        let Some(bin_name) = bin.get("name").and_then(|n| n.as_str()) else {
            continue;
        };
        let path = match bin.get("path").and_then(|p| p.as_str()) {
            Some(p) => join(dir, p),
            None => [
                format!("src/bin/{bin_name}.rs"),
                format!("src/bin/{bin_name}/main.rs"),
                "src/main.rs".to_string(),
            ]
            .into_iter()
            .map(|p| join(dir, &p))
            .find(|p| exists(p))
            .unwrap_or_else(|| join(dir, &format!("src/bin/{bin_name}.rs"))),
        };
        bins.push((bin_name.to_string(), path));
    }
    if auto("autobins") {
        let main = join(dir, "src/main.rs");
        if exists(&main) && !bins.iter().any(|(_, p)| *p == main) {
            bins.push((name.clone(), main));
        }
    }
    for (_, path) in &bins {
        target_files.push((path.clone(), true));
    }

    // The build script.
    let build = match package.get("build") {
        Some(toml::Value::String(p)) => Some(join(dir, p)),
        Some(toml::Value::Boolean(false)) => None,
        _ => Some(join(dir, "build.rs")).filter(|p| exists(p)),
    };
    if let Some(p) = build {
        target_files.push((p, true));
    }

    // Declared examples, tests and benches must exist for cargo to load the manifest.
    for (kind, folder) in [
        ("example", "examples"),
        ("test", "tests"),
        ("bench", "benches"),
    ] {
        for target in table
            .get(kind)
            .and_then(|t| t.as_array())
            .into_iter()
            .flatten()
        {
            let path = match (
                target.get("path").and_then(|p| p.as_str()),
                target.get("name").and_then(|n| n.as_str()),
            ) {
                (Some(p), _) => join(dir, p),
                (None, Some(n)) => {
                    let single = join(dir, &format!("{folder}/{n}.rs"));
                    let nested = join(dir, &format!("{folder}/{n}/main.rs"));
                    if exists(&nested) && !exists(&single) {
                        nested
                    } else {
                        single
                    }
                }
                (None, None) => continue,
            };
            target_files.push((path, true));
        }
    }

    // Dependencies that are jemalloc, in every dependency table (also per-target ones).
    let mut jemalloc_deps = Vec::new();
    let mut dep_tables: Vec<&toml::Table> =
        ["dependencies", "dev-dependencies", "build-dependencies"]
            .iter()
            .filter_map(|k| table.get(*k).and_then(|d| d.as_table()))
            .collect();
    if let Some(targets) = table.get("target").and_then(|t| t.as_table()) {
        for cfg in targets.values().filter_map(|c| c.as_table()) {
            dep_tables.extend(
                ["dependencies", "build-dependencies"]
                    .iter()
                    .filter_map(|k| cfg.get(*k).and_then(|d| d.as_table())),
            );
        }
    }
    for deps in dep_tables {
        for (dep, spec) in deps {
            let real = spec.get("package").and_then(|p| p.as_str()).unwrap_or(dep);
            if real.contains("jemalloc") {
                let inherited = spec.get("workspace").and_then(|w| w.as_bool()) == Some(true);
                jemalloc_deps.push((real.to_string(), strings(spec.get("features")), inherited));
            }
        }
    }

    Ok(Package {
        name,
        features,
        bins,
        target_files,
        jemalloc_deps,
    })
}

/// A source tree's manifests.
#[derive(Debug, Clone, Default)]
pub struct Project {
    pub manifests: Vec<Manifest>,
    pub lock_file: Option<String>,
}

/// Matches a workspace member pattern (`crates/*`, `bin/reth`) against a directory.
fn member_matches(pattern: &str, dir: &str) -> bool {
    let pattern = pattern.trim_end_matches('/').trim_start_matches("./");
    let p: Vec<&str> = pattern.split('/').collect();
    let d: Vec<&str> = dir.split('/').collect();
    p.len() == d.len()
        && p.iter().zip(&d).all(|(p, d)| {
            if let Some((pre, post)) = p.split_once('*') {
                d.len() >= pre.len() + post.len() && d.starts_with(pre) && d.ends_with(post)
            } else {
                p == d
            }
        })
}

impl Project {
    /// The workspace root manifest: the source root's, when it has a [workspace].
    fn root(&self) -> Option<&Manifest> {
        self.manifests
            .iter()
            .find(|m| m.dir.is_empty() && m.workspace.is_some())
    }

    /// The packages cargo will see: the workspace members (and the root package), or the
    /// root package alone.
    pub fn packages(&self) -> Vec<(&Manifest, &Package)> {
        let mut out: Vec<(&Manifest, &Package)> = Vec::new();
        match self.root() {
            Some(root) => {
                let (members, exclude) = root.workspace.clone().unwrap_or_default();
                for m in &self.manifests {
                    let Some(p) = &m.package else { continue };
                    let member = m.dir.is_empty()
                        || (members.iter().any(|pat| member_matches(pat, &m.dir))
                            && !exclude.iter().any(|pat| member_matches(pat, &m.dir)));
                    if member {
                        out.push((m, p));
                    }
                }
            }
            None => {
                if let Some(m) = self.manifests.iter().find(|m| m.dir.is_empty()) {
                    if let Some(p) = &m.package {
                        out.push((m, p));
                    }
                }
            }
        }
        out
    }

    /// The package to build: the one named, else the only one with a binary.
    pub fn choose_package(&self, wanted: Option<&str>) -> Result<&Package, String> {
        let packages = self.packages();
        if packages.is_empty() {
            return Err("no Cargo package at the root of the source directory (no Cargo.toml with [package] or [workspace])".into());
        }
        let names = || {
            packages
                .iter()
                .map(|(_, p)| p.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match wanted {
            Some(name) => packages
                .iter()
                .find(|(_, p)| p.name == name)
                .map(|(_, p)| *p)
                .ok_or_else(|| {
                    format!(
                        "no package '{name}' in the workspace (packages: {})",
                        names()
                    )
                }),
            None => {
                let with_bins: Vec<&Package> = packages
                    .iter()
                    .map(|(_, p)| *p)
                    .filter(|p| !p.bins.is_empty())
                    .collect();
                match with_bins.as_slice() {
                    [one] => Ok(one),
                    [] => Err(format!(
                        "no package with a binary in the workspace (packages: {})",
                        names()
                    )),
                    many => Err(format!(
                        "several packages have binaries ({}): choose one with --package",
                        many.iter()
                            .map(|p| p.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                }
            }
        }
    }

    /// Which feature turns jemalloc heap profiling on, and what was seen.
    pub fn jemalloc_profiling(&self, package: &Package) -> JemallocProfiling {
        let feature = package
            .features
            .keys()
            .find(|f| f.contains("jemalloc") && f.contains("prof"))
            .or_else(|| {
                package.features.iter().find_map(|(f, enables)| {
                    (matches!(
                        f.as_str(),
                        "profiling" | "heap-profiling" | "heap_profiling"
                    ) && enables.iter().any(|e| e.contains("jemalloc")))
                    .then_some(f)
                })
            })
            .cloned();
        if let Some(feature) = feature {
            return JemallocProfiling::Feature(feature);
        }
        let root_features = self.root().map(|r| &r.workspace_dep_features);
        for (dep, features, inherited) in &package.jemalloc_deps {
            let mut all = features.clone();
            if *inherited {
                if let Some(f) = root_features.and_then(|r| r.get(dep)) {
                    all.extend(f.iter().cloned());
                }
            }
            if all.iter().any(|f| f == "profiling") {
                return JemallocProfiling::BuiltIn(dep.clone());
            }
        }
        if let Some((dep, ..)) = package.jemalloc_deps.first() {
            return JemallocProfiling::WithoutProfiling(dep.clone());
        }
        JemallocProfiling::NoJemalloc
    }

    /// The files of the dependency-only build: every manifest, the lock file and the
    /// cargo configuration as they are, and a stub for every target source.
    pub fn skeleton(&self, cargo_config: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        for m in &self.manifests {
            files.insert(join(&m.dir, "Cargo.toml"), m.text.clone().into_bytes());
            if let Some(p) = &m.package {
                for (path, is_main) in &p.target_files {
                    let stub: &[u8] = if *is_main { b"fn main() {}\n" } else { b"" };
                    files.entry(path.clone()).or_insert_with(|| stub.to_vec());
                }
            }
        }
        if let Some(lock) = &self.lock_file {
            files.insert("Cargo.lock".into(), lock.clone().into_bytes());
        }
        for (path, data) in cargo_config {
            files.insert(path.clone(), data.clone());
        }
        files.into_iter().collect()
    }
}

/// How the built program gets jemalloc heap profiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JemallocProfiling {
    /// The package has a feature for it; devprof turns it on.
    Feature(String),
    /// A jemalloc dependency is always built with its `profiling` feature.
    BuiltIn(String),
    /// jemalloc without profiling: heap profiles will not work.
    WithoutProfiling(String),
    NoJemalloc,
}

impl JemallocProfiling {
    pub fn describe(&self) -> String {
        match self {
            JemallocProfiling::Feature(f) => format!("feature '{f}' turned on (jemalloc heap profiling)"),
            JemallocProfiling::BuiltIn(dep) => {
                format!("jemalloc heap profiling is built in ({dep} with its 'profiling' feature)")
            }
            JemallocProfiling::WithoutProfiling(dep) => format!(
                "{dep} is built without its 'profiling' feature and the package has no jemalloc profiling feature: \
                 heap profiles will not work"
            ),
            JemallocProfiling::NoJemalloc => "no jemalloc: heap profiles (devprof heap) need it".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
    const DEMO: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/node/Cargo.toml"));

    fn exists(path: &str) -> bool {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(path)
            .exists()
    }

    fn this_workspace() -> Project {
        Project {
            manifests: vec![
                parse_manifest("", ROOT, &exists).unwrap(),
                parse_manifest("demo/node", DEMO, &exists).unwrap(),
            ],
            lock_file: Some("# lock\n".into()),
        }
    }

    #[test]
    fn reads_this_workspace() {
        let project = this_workspace();
        let names: Vec<&str> = project
            .packages()
            .iter()
            .map(|(_, p)| p.name.as_str())
            .collect();
        assert_eq!(names, vec!["devprof", "demo-node"]);
        let demo = project.choose_package(Some("demo-node")).unwrap();
        assert_eq!(
            demo.bins,
            vec![("demo-node".to_string(), "demo/node/src/main.rs".to_string())]
        );
        // Two packages with binaries: one must be named.
        let err = project.choose_package(None).unwrap_err();
        assert!(
            err.contains("devprof") && err.contains("demo-node"),
            "{err}"
        );
        assert!(project
            .choose_package(Some("reth"))
            .unwrap_err()
            .contains("packages: devprof, demo-node"));
    }

    #[test]
    fn demo_node_has_jemalloc_profiling_built_in() {
        let project = this_workspace();
        let demo = project.choose_package(Some("demo-node")).unwrap();
        assert_eq!(
            project.jemalloc_profiling(demo),
            JemallocProfiling::BuiltIn("tikv-jemalloc-ctl".into())
        );
        let devprof = project.choose_package(Some("devprof")).unwrap();
        assert_eq!(
            project.jemalloc_profiling(devprof),
            JemallocProfiling::NoJemalloc
        );
    }

    #[test]
    fn skeleton_stubs_every_target_of_this_workspace() {
        let files =
            this_workspace().skeleton(&[(".cargo/config.toml".into(), b"[build]\n".to_vec())]);
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        for want in [
            "Cargo.toml",
            "Cargo.lock",
            ".cargo/config.toml",
            "src/lib.rs",
            "src/main.rs",
            "demo/node/Cargo.toml",
            "demo/node/src/main.rs",
        ] {
            assert!(paths.contains(&want), "{want} missing from {paths:?}");
        }
        let stub = |p: &str| {
            files
                .iter()
                .find(|(f, _)| f == p)
                .map(|(_, d)| d.clone())
                .unwrap()
        };
        assert_eq!(stub("demo/node/src/main.rs"), b"fn main() {}\n");
        assert_eq!(stub("src/lib.rs"), b"");
        assert_eq!(stub("demo/node/Cargo.toml"), DEMO.as_bytes());
    }

    #[test]
    fn reth_like_workspace_with_globs_features_and_inherited_jemalloc() {
        let root = r#"
[workspace]
members = ["bin/reth/", "crates/*"]
exclude = ["crates/skip"]
[workspace.dependencies]
tikv-jemallocator = { version = "0.6", features = ["unprefixed_malloc_on_supported_platforms"] }
"#;
        let bin = r#"
[package]
name = "reth"
build = "build.rs"
[[bin]]
name = "reth"
path = "src/main.rs"
[[bench]]
name = "decode"
[features]
default = ["jemalloc"]
jemalloc = ["dep:tikv-jemallocator"]
jemalloc-prof = ["jemalloc", "tikv-jemallocator?/profiling"]
[target.'cfg(unix)'.dependencies]
tikv-jemallocator = { workspace = true, optional = true }
"#;
        let lib = "[package]\nname = \"reth-db\"\n";
        let skip = "[package]\nname = \"skip\"\n";
        let files = ["bin/reth/src/main.rs", "crates/db/src/lib.rs"];
        let exists = |p: &str| files.contains(&p);
        let project = Project {
            manifests: vec![
                parse_manifest("", root, &exists).unwrap(),
                parse_manifest("bin/reth", bin, &exists).unwrap(),
                parse_manifest("crates/db", lib, &exists).unwrap(),
                parse_manifest("crates/skip", skip, &exists).unwrap(),
            ],
            lock_file: None,
        };
        let names: Vec<&str> = project
            .packages()
            .iter()
            .map(|(_, p)| p.name.as_str())
            .collect();
        assert_eq!(names, vec!["reth", "reth-db"]);
        let reth = project.choose_package(None).unwrap();
        assert_eq!(reth.name, "reth");
        assert_eq!(
            project.jemalloc_profiling(reth),
            JemallocProfiling::Feature("jemalloc-prof".into())
        );
        let skeleton = project.skeleton(&[]);
        let paths: Vec<&str> = skeleton.iter().map(|(p, _)| p.as_str()).collect();
        assert!(paths.contains(&"bin/reth/build.rs"));
        assert!(paths.contains(&"bin/reth/benches/decode.rs"));
        assert!(paths.contains(&"crates/db/src/lib.rs"));
    }

    #[test]
    fn bad_manifest_names_the_file() {
        let err = parse_manifest("x", "[package\n", &|_| false).unwrap_err();
        assert!(err.starts_with("x/Cargo.toml"), "{err}");
    }
}
