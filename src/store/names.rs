//! The grammar of the names the store answers to, the same for every store command and the
//! viewer. A reference ([`Reference`]) is, read from its text alone: `session` (the newest
//! session) or a session's name (`session-YYYYMMDD-HHMMSS`, also as
//! `sessions/session-…`); a capture's stem (`perf-20261207-051036`), alone or under a
//! TARGET (`demo-seq/perf-20261207-051036`); or a TARGET. A TARGET is, in this order: a
//! container name (its directory in the store), a container id prefix (hex, as the
//! manifests record the id), or a compose service, `SERVICE` or `PROJECT/SERVICE` when
//! several projects run one. Manifests record the compose project and service; captures
//! from before they did are matched by their container's name, which compose makes
//! `<project>-<service>-N` (`<project>_<service>_N` before Compose v2). Paths (a file of a
//! capture) are told apart before this grammar, by `loader::ProfileRef`; `lookup::find`
//! looks a reference up in the store.

use crate::error::{Error, Result};
use crate::store::session::SESSIONS_DIR;
use crate::store::{valid_container_name, ContainerRecord};
use std::collections::BTreeMap;

/// The kinds of capture, as manifests name them (`kind`).
pub const KINDS: [&str; 4] = ["cpu", "offcpu", "heap", "stat"];

/// The kinds whose captures hold stacks (`top`, `diff`, `render`, `export` read them); a
/// stat capture holds counters.
pub const STACK_KINDS: [&str; 3] = ["cpu", "offcpu", "heap"];

/// The name that means the newest session.
pub const NEWEST_SESSION: &str = "session";

/// Whether `name` is a stem devprof makes: `<kind>-YYYYMMDD-HHMMSS[-N]` (the kind's prefix
/// in lower-case letters: `perf`, `offcpu`, `heap`, `stat`, `session`).
pub fn is_stem(name: &str) -> bool {
    let Some((kind, rest)) = name.split_once('-') else {
        return false;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = rest.split('-').collect();
    let kind_ok = !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase());
    let time_ok = match parts.as_slice() {
        [d, t] => digits(d, 8) && digits(t, 6),
        [d, t, n] => {
            digits(d, 8) && digits(t, 6) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    };
    kind_ok && time_ok
}

/// Whether `name` is a session's name (its manifest's stem), `session-YYYYMMDD-HHMMSS[-N]`.
pub fn is_session_name(name: &str) -> bool {
    name.starts_with("session-") && is_stem(name)
}

/// What a reference names, read from its text alone; the store decides the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// `session`: the newest session (None); `session-…`: that one.
    Session(Option<String>),
    /// One capture by its stem, under a TARGET (`demo-seq/perf-…`) or anywhere in the store.
    Capture {
        target: Option<TargetName>,
        stem: String,
    },
    /// A target's captures.
    Target(TargetName),
}

impl Reference {
    /// The reference `text` is, or None when it is none of the grammar's forms.
    pub fn parse(text: &str) -> Option<Reference> {
        let text = text
            .strip_suffix(".json")
            .filter(|t| is_session_name(t))
            .unwrap_or(text);
        if text == NEWEST_SESSION {
            return Some(Reference::Session(None));
        }
        if is_session_name(text) {
            return Some(Reference::Session(Some(text.to_string())));
        }
        if is_stem(text) {
            return Some(Reference::Capture {
                target: None,
                stem: text.to_string(),
            });
        }
        if let Some((head, tail)) = text.split_once('/') {
            let tail = tail.strip_suffix(".json").unwrap_or(tail);
            if head == SESSIONS_DIR && is_session_name(tail) {
                return Some(Reference::Session(Some(tail.to_string())));
            }
            if is_stem(tail) && valid_container_name(head) {
                return Some(Reference::Capture {
                    target: Some(TargetName::Plain(head.to_string())),
                    stem: tail.to_string(),
                });
            }
        }
        TargetName::parse(text).map(Reference::Target)
    }

    /// The target a name that the store does not know as a capture may still be (a
    /// container whose name looks like a stem): `perf-…` alone, or `A/perf-…` as
    /// `PROJECT/SERVICE`.
    pub fn as_target(&self, text: &str) -> Option<TargetName> {
        match self {
            Reference::Target(t) => Some(t.clone()),
            Reference::Capture { .. } => TargetName::parse(text),
            Reference::Session(_) => None,
        }
    }
}

/// A target name as typed, checked against the grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetName {
    /// A container name, an id prefix or a service: which one, the store decides.
    Plain(String),
    /// `PROJECT/SERVICE`.
    Service { project: String, service: String },
}

impl TargetName {
    /// `NAME` or `PROJECT/SERVICE`, each part a Docker name (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`).
    pub fn parse(text: &str) -> Option<TargetName> {
        match text.split_once('/') {
            None if valid_container_name(text) => Some(TargetName::Plain(text.to_string())),
            Some((project, service))
                if valid_container_name(project) && valid_container_name(service) =>
            {
                Some(TargetName::Service {
                    project: project.to_string(),
                    service: service.to_string(),
                })
            }
            _ => None,
        }
    }

    /// The usage error for a text that is not a target name.
    pub fn invalid(text: &str, what: &str) -> Error {
        Error::Usage(format!(
            "{what} '{text}' is not a target name: a container name, a container id prefix, a compose SERVICE or PROJECT/SERVICE (letters, digits, '_', '.', '-')"
        ))
    }
}

impl std::fmt::Display for TargetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetName::Plain(name) => f.write_str(name),
            TargetName::Service { project, service } => write!(f, "{project}/{service}"),
        }
    }
}

/// The compose project and service a container directory's name gives for `service`:
/// `Some(project)` when `dir` is `<project>-<service>-N` or `<project>_<service>_N`.
pub fn legacy_project<'a>(dir: &'a str, service: &str) -> Option<&'a str> {
    for sep in ['-', '_'] {
        let Some((head, n)) = dir.rsplit_once(sep) else {
            continue;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Some(project) = head.strip_suffix(service).and_then(|p| p.strip_suffix(sep)) else {
            continue;
        };
        if !project.is_empty() {
            return Some(project);
        }
    }
    None
}

/// The compose project of `dir`'s captures if they are of `service`: from the newest
/// manifest that records one, else (a store written before manifests recorded them) from
/// the directory's name.
fn project_of(dir: &str, containers: &[&ContainerRecord], service: &str) -> Option<String> {
    let recorded = containers.iter().rev().find(|c| c.service.is_some());
    match recorded {
        Some(c) if c.service.as_deref() == Some(service) => {
            Some(c.project.clone().unwrap_or_default())
        }
        Some(_) => None,
        None => legacy_project(dir, service).map(str::to_string),
    }
}

/// The container directories `target` names among `captures` (every capture in the
/// store, oldest first, as its directory and the container its manifest records): an
/// exact directory name, else the directories whose captures' container id starts with
/// it, else those of the compose service. A service that several projects have is an
/// error listing `PROJECT/SERVICE` for each; nothing matching is `Ok(empty)`.
pub fn resolve(target: &TargetName, captures: &[(&str, &ContainerRecord)]) -> Result<Vec<String>> {
    let mut by_dir: BTreeMap<&str, Vec<&ContainerRecord>> = BTreeMap::new();
    for (dir, container) in captures {
        by_dir.entry(dir).or_default().push(container);
    }
    let (project, service) = match target {
        TargetName::Plain(name) => {
            if by_dir.contains_key(name.as_str()) {
                return Ok(vec![name.clone()]);
            }
            if name.bytes().all(|b| b.is_ascii_hexdigit()) {
                let by_id: Vec<String> = by_dir
                    .iter()
                    .filter(|(_, cs)| cs.iter().any(|c| c.id.starts_with(name.as_str())))
                    .map(|(d, _)| d.to_string())
                    .collect();
                if !by_id.is_empty() {
                    return Ok(by_id);
                }
            }
            (None, name.as_str())
        }
        TargetName::Service { project, service } => (Some(project.as_str()), service.as_str()),
    };
    let mut projects: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (dir, cs) in &by_dir {
        if let Some(p) = project_of(dir, cs, service) {
            if project.is_none_or(|want| want == p) {
                projects.entry(p).or_default().push(dir.to_string());
            }
        }
    }
    if projects.len() > 1 {
        return Err(Error::AmbiguousTarget {
            target: service.to_string(),
            containers: projects
                .iter()
                .map(|(p, dirs)| format!("{p}/{service} (captures in {})", dirs.join(", ")))
                .collect(),
        });
    }
    Ok(projects.into_values().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(dir: &str, id: &str, compose: Option<(&str, &str)>) -> (String, ContainerRecord) {
        let record = ContainerRecord {
            name: dir.into(),
            id: id.into(),
            image: String::new(),
            project: compose.map(|(p, _)| p.into()),
            service: compose.map(|(_, s)| s.into()),
        };
        (dir.to_string(), record)
    }

    fn resolve_in(target: &TargetName, store: &[(String, ContainerRecord)]) -> Result<Vec<String>> {
        let store: Vec<(&str, &ContainerRecord)> =
            store.iter().map(|(d, c)| (d.as_str(), c)).collect();
        resolve(target, &store)
    }

    fn plain(s: &str) -> TargetName {
        TargetName::parse(s).unwrap()
    }

    #[test]
    fn the_grammar_takes_names_and_project_slash_service() {
        assert_eq!(
            plain("op-reth-seq"),
            TargetName::Plain("op-reth-seq".into())
        );
        assert_eq!(
            plain("devnet/op-reth-seq"),
            TargetName::Service {
                project: "devnet".into(),
                service: "op-reth-seq".into()
            }
        );
        for bad in ["", "a/b/c", "/x", "x/", "../x", "a b", ".x"] {
            assert_eq!(TargetName::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_reference_is_a_session_a_capture_stem_or_a_target() {
        let capture = |target: Option<&str>, stem: &str| Reference::Capture {
            target: target.map(|t| TargetName::Plain(t.into())),
            stem: stem.into(),
        };
        let cases = [
            ("session", Reference::Session(None)),
            (
                "session-20261207-051036",
                Reference::Session(Some("session-20261207-051036".into())),
            ),
            (
                "sessions/session-20261207-051036.json",
                Reference::Session(Some("session-20261207-051036".into())),
            ),
            (
                "perf-20261207-051036",
                capture(None, "perf-20261207-051036"),
            ),
            (
                "offcpu-20261207-051036-2",
                capture(None, "offcpu-20261207-051036-2"),
            ),
            (
                "demo-seq/perf-20261207-051036",
                capture(Some("demo-seq"), "perf-20261207-051036"),
            ),
            (
                "demo-seq/perf-20261207-051036.json",
                capture(Some("demo-seq"), "perf-20261207-051036"),
            ),
            ("demo-seq", Reference::Target(plain("demo-seq"))),
            (
                "devnet/op-reth-seq",
                Reference::Target(plain("devnet/op-reth-seq")),
            ),
            // Not a stem: a name.
            ("perf-2026", Reference::Target(plain("perf-2026"))),
        ];
        for (text, expected) in cases {
            assert_eq!(Reference::parse(text), Some(expected), "{text}");
        }
        for bad in ["", "a/b/c", "../perf-20261207-051036", "a b"] {
            assert_eq!(Reference::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            plain("devnet/op-reth-seq").to_string(),
            "devnet/op-reth-seq"
        );
    }

    #[test]
    fn compose_container_names_give_their_project() {
        assert_eq!(
            legacy_project("devnet-op-reth-seq-1", "op-reth-seq"),
            Some("devnet")
        );
        assert_eq!(
            legacy_project("devnet_op-reth-seq_2", "op-reth-seq"),
            Some("devnet")
        );
        assert_eq!(legacy_project("my-net-seq-10", "seq"), Some("my-net"));
        for (dir, service) in [
            ("op-reth-seq", "op-reth-seq"),
            ("devnet-op-reth-seq", "op-reth-seq"),
            ("devnet-op-reth-seq-x", "op-reth-seq"),
            ("-op-reth-seq-1", "op-reth-seq"),
            ("devnet-reth-seq-1", "op-reth-seq"),
        ] {
            assert_eq!(legacy_project(dir, service), None, "{dir} {service}");
        }
    }

    #[test]
    fn a_target_is_a_name_an_id_prefix_or_a_service() {
        let store = vec![
            capture("demo-seq", "aa11", None),
            capture(
                "devnet-op-reth-seq-1",
                "bb22",
                Some(("devnet", "op-reth-seq")),
            ),
            capture("other-rpc-1", "cc33", Some(("other", "rpc"))),
        ];
        let dirs = |t: &str| resolve_in(&plain(t), &store).unwrap();
        assert_eq!(dirs("demo-seq"), vec!["demo-seq"]);
        assert_eq!(dirs("bb"), vec!["devnet-op-reth-seq-1"]);
        assert_eq!(dirs("op-reth-seq"), vec!["devnet-op-reth-seq-1"]);
        assert_eq!(dirs("devnet/op-reth-seq"), vec!["devnet-op-reth-seq-1"]);
        assert!(dirs("other/op-reth-seq").is_empty());
        assert!(dirs("seq").is_empty());
        assert!(dirs("dd").is_empty());
    }

    #[test]
    fn old_captures_are_found_by_their_container_names_compose_pattern() {
        let store = vec![
            capture("devnet-op-reth-seq-1", "aa", None),
            capture("devnet-op-reth-seq-2", "bb", None),
            capture("legacy_op-reth-seq_1", "cc", None),
            capture("devnet-op-reth-1", "dd", None),
        ];
        let dirs = |t: &str| resolve_in(&plain(t), &store);
        assert_eq!(
            dirs("devnet/op-reth-seq").unwrap(),
            vec!["devnet-op-reth-seq-1", "devnet-op-reth-seq-2"]
        );
        assert_eq!(
            dirs("legacy/op-reth-seq").unwrap(),
            vec!["legacy_op-reth-seq_1"]
        );
        assert_eq!(dirs("op-reth").unwrap(), vec!["devnet-op-reth-1"]);
        // Two projects run the service: the error names each as PROJECT/SERVICE.
        let err = dirs("op-reth-seq").unwrap_err().to_string();
        assert!(err.contains("devnet/op-reth-seq"), "{err}");
        assert!(err.contains("legacy/op-reth-seq"), "{err}");
    }
}
