//! Which engine to talk to, chosen as the docker CLI chooses it: DOCKER_HOST, else the
//! context named by DOCKER_CONTEXT, else the config's `currentContext`
//! (`$DOCKER_CONFIG` or `~/.docker`, `config.json`), else the local socket. A context's
//! endpoint is in `contexts/meta/<sha256 of its name>/meta.json`; devprof finds it by the
//! `Name` inside (the directory name is only a hash of it).

use std::path::{Path, PathBuf};

pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The engine's address and where it came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub source: String,
    /// The endpoint asks for TLS (DOCKER_TLS_VERIFY, https://, or a context with TLS).
    pub tls: bool,
}

/// Resolves the endpoint from `env` (a variable lookup) and `home`.
pub fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<Endpoint, String> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(host) = var("DOCKER_HOST") {
        return Ok(Endpoint {
            tls: var("DOCKER_TLS_VERIFY").is_some_and(|v| v != "0") || host.starts_with("https://"),
            host,
            source: "DOCKER_HOST".into(),
        });
    }
    let config_dir = var("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".docker")));
    let (name, from) = match var("DOCKER_CONTEXT") {
        Some(name) => (Some(name), "DOCKER_CONTEXT"),
        None => (
            config_dir.as_deref().and_then(current_context),
            "currentContext in config.json",
        ),
    };
    match name.filter(|n| n != "default") {
        None => Ok(Endpoint {
            host: DEFAULT_HOST.into(),
            source: "the default socket".into(),
            tls: false,
        }),
        Some(name) => {
            let dir = config_dir.ok_or_else(|| {
                format!("docker context '{name}' ({from}): no HOME or DOCKER_CONFIG to find it in")
            })?;
            context_endpoint(&dir, &name)
                .map(|(host, tls)| Endpoint {
                    host,
                    source: format!("docker context '{name}' ({from})"),
                    tls,
                })
                .ok_or_else(|| {
                    format!(
                        "docker context '{name}' ({from}) has no docker endpoint in {}; list contexts with `docker context ls`",
                        dir.join("contexts/meta").display()
                    )
                })
        }
    }
}

fn current_context(config_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config_dir.join("config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    config.get("currentContext")?.as_str().map(str::to_string)
}

/// The context's docker host, and whether it uses TLS (material stored for it, or
/// verification not skipped on a tcp endpoint that has some).
fn context_endpoint(config_dir: &Path, name: &str) -> Option<(String, bool)> {
    let meta = config_dir.join("contexts/meta");
    for entry in std::fs::read_dir(&meta).ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("meta.json")) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if value.get("Name").and_then(|n| n.as_str()) != Some(name) {
            continue;
        }
        let docker = value.get("Endpoints")?.get("docker")?;
        let host = docker.get("Host")?.as_str()?.to_string();
        let tls_dir = config_dir
            .join("contexts/tls")
            .join(entry.file_name())
            .join("docker");
        let tls = tls_dir.is_dir() || host.starts_with("https://");
        return Some((host, tls));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    /// A context as `docker context create NAME --docker host=HOST` stores it.
    fn make_context(home: &Path, name: &str, host: &str) {
        // The CLI names the directory by the name's sha256; any name works for lookup.
        let dir = home.join(".docker/contexts/meta/0f1e2d3c");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("meta.json"),
            format!(
                r#"{{"Name":"{name}","Metadata":{{"Description":"test"}},"Endpoints":{{"docker":{{"Host":"{host}","SkipTLSVerify":false}}}}}}"#
            ),
        )
        .unwrap();
    }

    #[test]
    fn docker_host_wins_over_contexts() {
        let home = tempfile::tempdir().unwrap();
        make_context(home.path(), "remote", "tcp://10.0.0.9:2375");
        let e = resolve(
            &lookup(&[
                ("DOCKER_HOST", "tcp://127.0.0.1:2375"),
                ("DOCKER_CONTEXT", "remote"),
            ]),
            Some(home.path()),
        )
        .unwrap();
        assert_eq!(e.host, "tcp://127.0.0.1:2375");
        assert!(!e.tls);
        let e = resolve(
            &lookup(&[("DOCKER_HOST", "tcp://h:2376"), ("DOCKER_TLS_VERIFY", "1")]),
            None,
        )
        .unwrap();
        assert!(e.tls);
    }

    #[test]
    fn the_current_context_of_config_json_names_the_endpoint() {
        let home = tempfile::tempdir().unwrap();
        make_context(home.path(), "proxy", "tcp://127.0.0.1:40001");
        std::fs::write(
            home.path().join(".docker/config.json"),
            r#"{"auths":{},"currentContext":"proxy"}"#,
        )
        .unwrap();
        let e = resolve(&lookup(&[]), Some(home.path())).unwrap();
        assert_eq!(e.host, "tcp://127.0.0.1:40001");
        assert!(e.source.contains("currentContext"), "{}", e.source);
        // DOCKER_CONTEXT overrides the config's choice; `default` is the local socket.
        let e = resolve(&lookup(&[("DOCKER_CONTEXT", "default")]), Some(home.path())).unwrap();
        assert_eq!(e.host, DEFAULT_HOST);
    }

    #[test]
    fn an_unknown_context_is_an_error_that_says_where_it_looked() {
        let home = tempfile::tempdir().unwrap();
        let err = resolve(&lookup(&[("DOCKER_CONTEXT", "nope")]), Some(home.path())).unwrap_err();
        assert!(
            err.contains("'nope'") && err.contains("contexts/meta"),
            "{err}"
        );
    }

    #[test]
    fn docker_config_moves_the_config_directory() {
        let home = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        make_context(other.path(), "x", "unix:///run/other.sock");
        let config = other.path().join(".docker");
        let e = resolve(
            &lookup(&[
                ("DOCKER_CONFIG", config.to_str().unwrap()),
                ("DOCKER_CONTEXT", "x"),
            ]),
            Some(home.path()),
        )
        .unwrap();
        assert_eq!(e.host, "unix:///run/other.sock");
    }

    #[test]
    fn no_settings_means_the_local_socket() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve(&lookup(&[]), Some(home.path())).unwrap().host,
            DEFAULT_HOST
        );
        assert_eq!(resolve(&lookup(&[]), None).unwrap().host, DEFAULT_HOST);
    }
}
