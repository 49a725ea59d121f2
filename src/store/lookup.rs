//! What a name in the store stands for: the one lookup every store command and the viewer
//! share. `find` reads a name (`store::names::Reference`: a session, a capture by its stem,
//! a target) against the store; `pick` takes from what it found the capture a command
//! reads (a target's newest of a kind, cpu by default) and says how it took it.

use crate::error::{Error, Result};
use crate::store::catalog::{
    containers, dirs_of, list_dirs, listed_path, no_captures, read_capture, Capture,
};
use crate::store::names::{self, Reference, STACK_KINDS};
use crate::store::session::{self, SessionRecord, SESSIONS_DIR};
use std::fs;
use std::path::{Path, PathBuf};

/// What a reference ([`names::Reference`]) found in the store.
#[derive(Debug, Clone)]
pub enum Found {
    /// One capture, named by its stem.
    Capture(Box<Capture>),
    /// A target's captures, oldest first (every directory it names).
    Target {
        name: String,
        captures: Vec<Capture>,
    },
    /// A session of `devprof profile`: its manifest and what it lists.
    Session {
        path: PathBuf,
        record: Box<SessionRecord>,
    },
}

/// Looks up what `text` names (see [`names`]): a session, a capture by its stem (in the
/// container directories of its TARGET when one is given, else in every one), or a
/// target's captures. A stem no capture has is tried as a target (a container may be named
/// like one). Nothing found is an error naming the containers that have captures.
pub fn find(output_dir: &Path, text: &str) -> Result<Found> {
    let reference = Reference::parse(text).ok_or_else(|| no_captures(output_dir, text))?;
    match &reference {
        Reference::Session(name) => return find_session(output_dir, name.as_deref()),
        Reference::Capture { target, stem } => {
            let dirs = match target {
                Some(t) => dirs_of(output_dir, &t.to_string()).unwrap_or_default(),
                None => containers(output_dir)?
                    .into_iter()
                    .filter(|d| d != SESSIONS_DIR)
                    .collect(),
            };
            let named: Vec<Capture> = dirs
                .iter()
                .filter_map(|d| {
                    let dir = output_dir.join(d);
                    let path = dir.join(format!("{stem}.json"));
                    let regular = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
                    regular.then(|| read_capture(d, &dir, path)).flatten()
                })
                .collect();
            match named.len() {
                0 => {}
                1 => {
                    return Ok(Found::Capture(Box::new(
                        named.into_iter().next().expect("one"),
                    )))
                }
                _ => {
                    let ids: Vec<String> = named
                        .iter()
                        .map(|c| format!("{}/{}", c.container, c.name()))
                        .collect();
                    return Err(Error::Usage(format!(
                        "several captures are named {stem}: {}; name one as CONTAINER/{stem}",
                        ids.join(", ")
                    )));
                }
            }
        }
        Reference::Target(_) => {}
    }
    if reference.as_target(text).is_none() {
        return Err(no_captures(output_dir, text));
    }
    let dirs = dirs_of(output_dir, text)?;
    let captures = list_dirs(output_dir, dirs)?;
    if captures.is_empty() {
        return Err(no_captures(output_dir, text));
    }
    Ok(Found::Target {
        name: text.to_string(),
        captures,
    })
}

/// The newest session (`None`) or the one named.
fn find_session(output_dir: &Path, name: Option<&str>) -> Result<Found> {
    let sessions = session::list(output_dir)?;
    let found = match name {
        None => sessions.into_iter().next_back(),
        Some(name) => sessions
            .into_iter()
            .find(|(path, _)| path.file_stem().is_some_and(|s| s == name)),
    };
    let (path, record) = found.ok_or_else(|| {
        Error::Usage(match name {
            None => format!(
                "no session in {}: `devprof profile` records one",
                output_dir.join(SESSIONS_DIR).display()
            ),
            Some(name) => format!(
                "no session {name} in {} (`devprof ls --sessions` lists them)",
                output_dir.join(SESSIONS_DIR).display()
            ),
        })
    })?;
    Ok(Found::Session {
        path,
        record: Box::new(record),
    })
}

/// The capture a command takes from what a reference found, and how it was taken.
#[derive(Debug, Clone)]
pub struct Picked {
    pub capture: Capture,
    /// How it was chosen, when the reference did not name it (a target's newest, a
    /// session's): `demo-seq's newest cpu capture, perf-20261207-051036 (3 min ago)`.
    pub how: Option<String>,
}

/// The capture of `found` a command takes (`text`: the reference as typed). A capture
/// named is taken as it is (of `kind` when one is given). From a target or a session: the
/// newest capture of `kind` that holds stacks (a stat capture for `stat`); without a kind,
/// the newest cpu capture, else the newest of the one other kind with stacks it has
/// (several such kinds, and no cpu: an error asking for `--kind`). So a CPU reading never
/// takes an off-CPU capture silently, and the line it prints says which it took.
pub fn pick(found: Found, text: &str, kind: Option<&str>) -> Result<Picked> {
    let (captures, whose, from_session) = match found {
        Found::Capture(capture) => {
            if let Some(k) = kind.filter(|k| *k != capture.manifest.kind) {
                return Err(Error::Usage(format!(
                    "{} is a{} {} capture, not {k} (--kind {k})",
                    capture.name(),
                    if capture.manifest.kind.starts_with('o') {
                        "n"
                    } else {
                        ""
                    },
                    capture.manifest.kind
                )));
            }
            return Ok(Picked {
                capture: *capture,
                how: None,
            });
        }
        Found::Target { name, captures } => (captures, format!("{name}'s"), false),
        Found::Session { path, record } => {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let store = path
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("."));
            (session_captures(store, &record), format!("{name}'s"), true)
        }
    };
    let readable = |c: &&Capture| c.manifest.kind == "stat" || c.main_folded().is_some();
    let of_kind = |k: &str| -> Vec<&Capture> {
        captures
            .iter()
            .filter(|c| c.manifest.kind == k)
            .filter(readable)
            .collect()
    };
    let kinds_held = || -> String {
        let mut held: Vec<String> = Vec::new();
        for k in names::KINDS {
            let n = captures.iter().filter(|c| c.manifest.kind == k).count();
            if n > 0 {
                held.push(format!("{n} {k}"));
            }
        }
        if held.is_empty() {
            "none".into()
        } else {
            held.join(", ")
        }
    };
    let (chosen, k, why) = match kind {
        Some(k) => (of_kind(k), k.to_string(), ""),
        None => {
            let cpu = of_kind("cpu");
            if cpu.is_empty() {
                let others: Vec<&str> = STACK_KINDS
                    .into_iter()
                    .filter(|k| !of_kind(k).is_empty())
                    .collect();
                match others.as_slice() {
                    [one] => (of_kind(one), one.to_string(), ", its only kind with stacks"),
                    [] => {
                        return Err(Error::Usage(format!(
                            "{text} has no capture with stacks (its captures: {}): top, diff, render and                              export read stacks; `devprof diff` compares two stat captures by their files or                              with --kind stat",
                            kinds_held()
                        )))
                    }
                    several => {
                        return Err(Error::Usage(format!(
                            "{text} has no cpu capture but {} captures: say which with --kind {}",
                            several.join(" and "),
                            several.join("|")
                        )))
                    }
                }
            } else {
                (cpu, "cpu".to_string(), "")
            }
        }
    };
    // A session lists one capture per container and kind: several containers are a choice.
    let mut containers: Vec<&str> = chosen.iter().map(|c| c.container.as_str()).collect();
    containers.sort_unstable();
    containers.dedup();
    if from_session && containers.len() > 1 {
        let ids: Vec<String> = chosen
            .iter()
            .map(|c| format!("{}/{}", c.container, c.name()))
            .collect();
        return Err(Error::Usage(format!(
            "{text} has a {k} capture of {} containers; name one: {}",
            containers.len(),
            ids.join(", ")
        )));
    }
    let Some(capture) = chosen.last().map(|c| (*c).clone()) else {
        return Err(Error::Usage(format!(
            "{text} has no {k} capture{} (its captures: {})",
            if k == "stat" { "" } else { " with stacks" },
            kinds_held()
        )));
    };
    let place = if from_session || whose == format!("{}'s", capture.container) {
        String::new()
    } else {
        format!(" in {}", capture.container)
    };
    let how = if from_session {
        format!(
            "{whose} {k} capture of {}, {}",
            capture.container,
            capture.named_with_age()
        )
    } else {
        format!(
            "{whose} newest {k} capture{why}{place}, {}",
            capture.named_with_age()
        )
    };
    Ok(Picked {
        capture,
        how: Some(how),
    })
}

/// The captures a session lists, as their manifests in `store` describe them, oldest first.
pub fn session_captures(store: &Path, record: &SessionRecord) -> Vec<Capture> {
    let mut out: Vec<Capture> = record
        .captures
        .iter()
        .filter_map(|c| {
            let relative = c.manifest.as_deref()?;
            let (dir, file) = relative.split_once('/')?;
            let stem_ok = file.strip_suffix(".json").is_some_and(names::is_stem);
            if !stem_ok || dir == SESSIONS_DIR || !crate::store::valid_container_name(dir) {
                return None;
            }
            let path = listed_path(&store.join(dir), file)?;
            read_capture(dir, &store.join(dir), path)
        })
        .collect();
    out.sort_by_key(|c| c.created);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Manifest;

    /// A capture of `kind` in `store/<dir>/`, `secs` seconds old, with folded stacks
    /// (unless stat).
    fn stored(store: &Path, dir: &str, prefix: &str, kind: &str, secs: i64) -> String {
        let created = chrono::Local::now() - chrono::Duration::seconds(secs);
        let stem = crate::store::Stem::reserve(&store.join(dir), prefix, created).unwrap();
        let mut manifest = Manifest {
            kind: kind.into(),
            created: created.to_rfc3339(),
            ..Default::default()
        };
        if kind != "stat" {
            fs::write(stem.path("folded"), "t;f 1\n").unwrap();
            manifest.record_file(stem.dir(), &stem.file_name("folded"));
        }
        manifest.container.name = dir.into();
        manifest.write(&stem).unwrap();
        stem.name().to_string()
    }

    #[test]
    fn a_target_stands_for_its_newest_cpu_capture_unless_a_kind_is_asked_for() {
        let root = tempfile::tempdir().unwrap();
        let store = root.path();
        let cpu = stored(store, "seq", "perf", "cpu", 120);
        let offcpu = stored(store, "seq", "offcpu", "offcpu", 60);
        let stat = stored(store, "seq", "stat", "stat", 30);
        let heap = stored(store, "rpc", "heap", "heap", 20);
        let off = stored(store, "rpc", "offcpu", "offcpu", 10);
        fs::create_dir_all(store.join(SESSIONS_DIR)).unwrap();
        let take = |text: &str, kind: Option<&str>| pick(find(store, text)?, text, kind);
        let seq = take("seq", None).unwrap();
        assert_eq!(seq.capture.name(), cpu);
        let how = seq.how.unwrap();
        assert!(
            how.starts_with(&format!("seq's newest cpu capture, {cpu} (2 min ago")),
            "{how}"
        );
        assert_eq!(take("seq", Some("offcpu")).unwrap().capture.name(), offcpu);
        assert_eq!(take("seq", Some("stat")).unwrap().capture.name(), stat);
        let err = take("seq", Some("heap")).unwrap_err().to_string();
        assert!(
            err.contains("seq has no heap capture") && err.contains("1 cpu, 1 offcpu, 1 stat"),
            "{err}"
        );
        // No cpu capture and two other kinds with stacks: which is for the user to say.
        let err = take("rpc", None).unwrap_err().to_string();
        assert!(err.contains("--kind offcpu|heap"), "{err}");
        // A stem, alone or under its container, is that capture; of another kind, an error.
        for text in [offcpu.clone(), format!("seq/{offcpu}")] {
            let picked = take(text.as_str(), None).unwrap();
            assert_eq!(picked.capture.name(), offcpu);
            assert!(picked.how.is_none());
        }
        assert!(take(off.as_str(), Some("cpu")).is_err());
        assert!(take(heap.as_str(), Some("heap")).is_ok());
        // Unknown names list the containers that have captures, never `sessions`.
        match find(store, "nope").unwrap_err() {
            Error::NoCaptures { available, .. } => assert_eq!(available, ["rpc", "seq"]),
            other => panic!("{other}"),
        }
        assert!(matches!(
            find(store, "sessions"),
            Err(Error::NoCaptures { .. })
        ));
    }
}
