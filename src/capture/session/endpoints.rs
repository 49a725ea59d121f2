//! A session's containers and their endpoints: which containers the targets mean, on
//! which endpoints (`NAME@CONTEXT`), reached side by side, and each endpoint's clock
//! against this host's before and after the window.

use crate::capture::clocks;
use crate::docker::containers::SIDECAR_LABEL;
use crate::docker::target::{resolve_container, ContainerInfo};
use crate::docker::Docker;
use crate::error::{Error, Result};
use crate::profile::clock::ClockOffset;
use crate::settings::profile::Targets;
use crate::store::session::SessionEndpoint;
use futures_util::future::join_all;

use super::reason;

/// The containers `targets` means, running ones only (devprof's sidecars never).
pub fn select(targets: &Targets, containers: &[ContainerInfo]) -> Result<Vec<ContainerInfo>> {
    let running: Vec<&ContainerInfo> = containers
        .iter()
        .filter(|c| c.is_running() && !c.labels.contains_key(SIDECAR_LABEL))
        .collect();
    let names = || {
        let mut n: Vec<String> = running.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    };
    let mut chosen: Vec<ContainerInfo> = match targets {
        Targets::Named(list) => {
            let mut out: Vec<ContainerInfo> = Vec::new();
            for name in list {
                let c = resolve_container(name, containers)?;
                if !out.iter().any(|o| o.id == c.id) {
                    out.push(c);
                }
            }
            return Ok(out);
        }
        Targets::Project(project) => running
            .iter()
            .filter(|c| c.project.as_deref() == Some(project.as_str()))
            .map(|c| (*c).clone())
            .collect(),
        Targets::All => running.iter().map(|c| (*c).clone()).collect(),
    };
    if chosen.is_empty() {
        return Err(Error::NoSessionTargets {
            what: match targets {
                Targets::Project(p) => format!("in compose project '{p}'"),
                _ => "to profile".into(),
            },
            running: names(),
        });
    }
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(chosen)
}

/// A target written `NAME@CONTEXT`: the container and the docker context of its endpoint
/// (None: the endpoint the environment names). Container names never contain `@`.
pub fn split_context(target: &str) -> (&str, Option<&str>) {
    match target.rsplit_once('@') {
        Some((name, context)) if !name.is_empty() && !context.is_empty() => (name, Some(context)),
        _ => (target, None),
    }
}

/// The targets of each endpoint, in the order first named (the environment's endpoint
/// first when the targets are not named).
pub fn by_endpoint(targets: &Targets) -> Vec<(Option<String>, Targets)> {
    let Targets::Named(list) = targets else {
        return vec![(None, targets.clone())];
    };
    let mut groups: Vec<(Option<String>, Vec<String>)> = Vec::new();
    for item in list {
        let (name, context) = split_context(item);
        let context = context.map(str::to_string);
        match groups.iter_mut().find(|(c, _)| *c == context) {
            Some((_, names)) => names.push(name.to_string()),
            None => groups.push((context, vec![name.to_string()])),
        }
    }
    groups
        .into_iter()
        .map(|(c, names)| (c, Targets::Named(names)))
        .collect()
}

/// A container of the session and the endpoint it is on.
#[derive(Clone)]
pub(super) struct Chosen {
    pub(super) container: ContainerInfo,
    pub(super) context: Option<String>,
    /// How rows and lines name it: the container's name, with `@CONTEXT` off the
    /// environment's endpoint.
    pub(super) key: String,
}

/// An endpoint of the session: where it is, and its containers.
struct Reached {
    context: Option<String>,
    docker: Docker,
    containers: Vec<ContainerInfo>,
}

/// Connects to every endpoint the targets name and chooses their containers, the
/// endpoints side by side.
async fn reach(targets: &Targets) -> Result<Vec<Reached>> {
    let groups = by_endpoint(targets);
    let reached = join_all(groups.into_iter().map(|(context, targets)| async move {
        let docker = Docker::connect_to(context.as_deref()).await?;
        let containers = select(&targets, &docker.containers().await?)?;
        Ok::<_, Error>(Reached {
            context,
            docker,
            containers,
        })
    }))
    .await;
    reached.into_iter().collect()
}

/// Each endpoint's clock against this host's, measured in its first container, the
/// endpoints side by side. A clock that cannot be read is that endpoint's note, not the
/// session's end.
async fn clocks(reached: &[Reached]) -> Vec<std::result::Result<ClockOffset, String>> {
    join_all(reached.iter().map(|r| async move {
        let first = r.containers.first().ok_or("no container")?;
        clocks::measure(&r.docker.shell(first))
            .await
            .map_err(|e| reason(&e))
    }))
    .await
}

/// How far the clock of the endpoint named `context` runs ahead of this host's, in ns,
/// where the measurement before the window shows a shift (0 otherwise, or unmeasured).
fn clock_offset_ns(
    reached: &[Reached],
    clocks_before: &[std::result::Result<ClockOffset, String>],
    context: Option<&str>,
) -> i64 {
    reached
        .iter()
        .zip(clocks_before)
        .find(|(r, _)| r.context.as_deref() == context)
        .and_then(|(_, clock)| clock.as_ref().ok())
        .map_or(0, ClockOffset::known_shift_ns)
}

fn clock_text(clock: &std::result::Result<ClockOffset, String>) -> String {
    match clock {
        Ok(c) => format!("{:+.1} ms ± {:.1} ms", c.offset_ms, c.uncertainty_ms),
        Err(e) => format!("unknown ({e})"),
    }
}

/// Every container once, keyed by name (and endpoint, when there are several).
fn choose(reached: &[Reached]) -> Vec<Chosen> {
    let mut chosen: Vec<Chosen> = Vec::new();
    for r in reached {
        for c in &r.containers {
            let key = match &r.context {
                Some(context) => format!("{}@{context}", c.name),
                None => c.name.clone(),
            };
            if chosen.iter().any(|o| o.key == key) {
                continue;
            }
            chosen.push(Chosen {
                container: c.clone(),
                context: r.context.clone(),
                key,
            });
        }
    }
    chosen
}

/// The endpoints and their clocks before and after the window (none for one endpoint).
fn endpoints(
    reached: &[Reached],
    several: bool,
    clocks_before: &[std::result::Result<ClockOffset, String>],
    clocks_after: &[std::result::Result<ClockOffset, String>],
) -> Vec<SessionEndpoint> {
    reached
        .iter()
        .enumerate()
        .filter(|_| several)
        .map(|(i, r)| {
            let before = clocks_before.get(i);
            let after = clocks_after.get(i);
            SessionEndpoint {
                context: r.context.clone().unwrap_or_else(|| "default".into()),
                address: r.docker.address().to_string(),
                containers: r.containers.iter().map(|c| c.name.clone()).collect(),
                clock_before: before.and_then(|c| c.as_ref().ok().copied()),
                clock_after: after.and_then(|c| c.as_ref().ok().copied()),
                clock_errors: before
                    .into_iter()
                    .chain(after)
                    .filter_map(|c| c.as_ref().err().cloned())
                    .collect(),
            }
        })
        .collect()
}

/// The session's endpoints, its containers on them, and their clocks before the window.
pub(super) struct Endpoints {
    reached: Vec<Reached>,
    /// More than the environment's endpoint: clocks are measured.
    several: bool,
    pub(super) chosen: Vec<Chosen>,
    clocks_before: Vec<std::result::Result<ClockOffset, String>>,
}

impl Endpoints {
    /// Reaches every endpoint the targets name, chooses their containers, and (with
    /// several endpoints) measures each one's clock: an endpoint's offset is needed to
    /// read what its containers stamp.
    pub(super) async fn reach(targets: &Targets) -> Result<Endpoints> {
        let reached = reach(targets).await?;
        let several = reached.len() > 1 || reached.iter().any(|r| r.context.is_some());
        let chosen = choose(&reached);
        let clocks_before = if several {
            clocks(&reached).await
        } else {
            Vec::new()
        };
        for (r, clock) in reached.iter().zip(&clocks_before) {
            crate::say!(
                "endpoint {} ({}): clock {} against this host's",
                r.context.as_deref().unwrap_or("default"),
                r.docker.address(),
                clock_text(clock)
            );
        }
        Ok(Endpoints {
            reached,
            several,
            chosen,
            clocks_before,
        })
    }

    /// How far `context`'s clock runs ahead of this host's, in ns (0 where unmeasured).
    pub(super) fn offset_ns(&self, context: Option<&str>) -> i64 {
        clock_offset_ns(&self.reached, &self.clocks_before, context)
    }

    /// After the window: the endpoints and their clocks measured again (a clock that
    /// drifted, or was stepped, shows as a different offset); none for one endpoint.
    pub(super) async fn after_window(&self) -> Vec<SessionEndpoint> {
        let clocks_after = if self.several {
            clocks(&self.reached).await
        } else {
            Vec::new()
        };
        let endpoints = endpoints(
            &self.reached,
            self.several,
            &self.clocks_before,
            &clocks_after,
        );
        for (e, after) in endpoints.iter().zip(&clocks_after) {
            crate::say!(
                "endpoint {} after the window: clock {}",
                e.context,
                clock_text(after)
            );
        }
        endpoints
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn container(name: &str, state: &str, project: Option<&str>, sidecar: bool) -> ContainerInfo {
        let mut labels = HashMap::new();
        if sidecar {
            labels.insert(SIDECAR_LABEL.to_string(), "x".to_string());
        }
        ContainerInfo {
            id: format!("{name}0123456789abcdef"),
            name: name.into(),
            image: "img".into(),
            state: state.into(),
            service: None,
            project: project.map(str::to_string),
            labels,
        }
    }

    #[test]
    fn targets_are_grouped_by_the_context_after_their_at_sign() {
        assert_eq!(
            split_context("demo-seq@podman"),
            ("demo-seq", Some("podman"))
        );
        assert_eq!(split_context("demo-seq"), ("demo-seq", None));
        // Nothing on one side: not a context.
        assert_eq!(split_context("demo-seq@"), ("demo-seq@", None));
        let named = |items: &[&str]| Targets::Named(items.iter().map(|s| s.to_string()).collect());
        let groups = by_endpoint(&named(&["a", "b@p", "c", "d@q", "e@p"]));
        assert_eq!(
            groups,
            vec![
                (None, named(&["a", "c"])),
                (Some("p".into()), named(&["b", "e"])),
                (Some("q".into()), named(&["d"])),
            ]
        );
        assert_eq!(by_endpoint(&Targets::All), vec![(None, Targets::All)]);
    }

    #[test]
    fn a_project_is_its_running_containers_without_sidecars() {
        let all = vec![
            container("b-seq", "running", Some("net"), false),
            container("a-rpc", "running", Some("net"), false),
            container("c-old", "exited", Some("net"), false),
            container("devprof-sidecar-x", "running", Some("net"), true),
            container("other", "running", Some("else"), false),
        ];
        let names = |t: &Targets| -> Vec<String> {
            select(t, &all)
                .unwrap()
                .into_iter()
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(names(&Targets::Project("net".into())), ["a-rpc", "b-seq"]);
        assert_eq!(names(&Targets::All), ["a-rpc", "b-seq", "other"]);
        assert_eq!(
            names(&Targets::Named(vec![
                "other".into(),
                "a-rpc".into(),
                "other".into()
            ])),
            ["other", "a-rpc"]
        );
        let err = select(&Targets::Project("none".into()), &all).unwrap_err();
        assert!(err.to_string().contains("compose project 'none'"), "{err}");
        assert!(select(&Targets::Named(vec!["c-old".into()]), &all).is_err());
    }
}
