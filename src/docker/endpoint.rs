//! Which engine to talk to, chosen as the docker CLI chooses it: DOCKER_HOST, else the
//! context named by DOCKER_CONTEXT, else the config's `currentContext`
//! (`$DOCKER_CONFIG` or `~/.docker`, `config.json`), else the local socket. A context's
//! endpoint is in `contexts/meta/<sha256 of its name>/meta.json`; devprof finds it by the
//! `Name` inside (the directory name is only a hash of it).
//!
//! TLS as the CLI does it: DOCKER_TLS_VERIFY (or an https:// host) with the client files in
//! DOCKER_CERT_PATH (default: the config directory); a context keeps its files in
//! `contexts/tls/<same hash>/docker/`. Each directory holds `ca.pem`, and optionally
//! `cert.pem` + `key.pem` for a client certificate.

use std::path::{Path, PathBuf};

pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The engine's address and where it came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub source: String,
    /// Where the TLS files are, when the endpoint asks for TLS (DOCKER_TLS_VERIFY,
    /// https://, or a context with TLS material).
    pub tls: Option<TlsFiles>,
}

/// A directory of TLS material in the docker CLI's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub dir: PathBuf,
    /// What named the directory, for messages ("DOCKER_CERT_PATH", "docker context 'x'").
    pub named_by: String,
}

/// The files bollard is given: the CA that signs the engine's certificate, and the
/// client's certificate and key (the engine may not ask for them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// Checks the files are there as the CLI expects them: ca.pem always, cert.pem and
    /// key.pem together or not at all.
    pub fn paths(&self) -> Result<TlsPaths, String> {
        let paths = TlsPaths {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join("cert.pem"),
            key: self.dir.join("key.pem"),
        };
        if !paths.ca.is_file() {
            return Err(format!(
                "TLS is asked for but there is no CA certificate {} (the directory comes from {}); \
                 put the engine's ca.pem there (with cert.pem and key.pem for a client certificate), \
                 or unset DOCKER_TLS_VERIFY for a plain endpoint",
                paths.ca.display(),
                self.named_by
            ));
        }
        if paths.cert.is_file() != paths.key.is_file() {
            let (has, lacks) = if paths.cert.is_file() {
                (&paths.cert, &paths.key)
            } else {
                (&paths.key, &paths.cert)
            };
            return Err(format!(
                "{} is there but {} is not: a client certificate needs both",
                has.display(),
                lacks.display()
            ));
        }
        Ok(paths)
    }
}

/// Whether an address is reached over the network (where TLS applies; the CLI ignores
/// DOCKER_TLS_VERIFY for sockets and ssh).
pub fn is_network(host: &str) -> bool {
    ["tcp://", "http://", "https://"]
        .iter()
        .any(|scheme| host.starts_with(scheme))
}

/// Resolves the endpoint from `env` (a variable lookup) and `home`.
pub fn resolve(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<Endpoint, String> {
    let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let config_dir = var("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".docker")));
    if let Some(host) = var("DOCKER_HOST") {
        let wants_tls = is_network(&host)
            && (var("DOCKER_TLS_VERIFY").is_some_and(|v| v != "0") || host.starts_with("https://"));
        let tls = if wants_tls {
            let (dir, named_by) = match var("DOCKER_CERT_PATH") {
                Some(dir) => (PathBuf::from(dir), "DOCKER_CERT_PATH"),
                None => (
                    config_dir.clone().ok_or_else(|| {
                        "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH, DOCKER_CONFIG nor HOME \
                         says where ca.pem is"
                            .to_string()
                    })?,
                    "the docker config directory (DOCKER_CERT_PATH unset)",
                ),
            };
            Some(TlsFiles {
                dir,
                named_by: named_by.into(),
            })
        } else {
            None
        };
        return Ok(Endpoint {
            tls,
            host,
            source: "DOCKER_HOST".into(),
        });
    }
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
            tls: None,
        }),
        Some(name) => {
            let dir = config_dir.ok_or_else(|| {
                format!("docker context '{name}' ({from}): no HOME or DOCKER_CONFIG to find it in")
            })?;
            let source = format!("docker context '{name}' ({from})");
            let found = context_endpoint(&dir, &name).ok_or_else(|| {
                format!(
                    "{source} has no docker endpoint in {}; list contexts with `docker context ls`",
                    dir.join("contexts/meta").display()
                )
            })?;
            if found.skip_verify && found.tls_dir.is_some() {
                return Err(format!(
                    "{source} skips TLS verification (SkipTLSVerify), which devprof does not do; \
                     store the engine's CA in the context (`docker context update {name} --docker ca=...`)"
                ));
            }
            Ok(Endpoint {
                host: found.host,
                tls: found.tls_dir.map(|dir| TlsFiles {
                    dir,
                    named_by: source.clone(),
                }),
                source,
            })
        }
    }
}

/// A context's docker endpoint as stored.
struct ContextEndpoint {
    host: String,
    /// Where its TLS files are, when it uses TLS.
    tls_dir: Option<PathBuf>,
    skip_verify: bool,
}

fn current_context(config_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config_dir.join("config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    config.get("currentContext")?.as_str().map(str::to_string)
}

/// The context's docker host, and its TLS directory when it uses TLS (material stored for
/// it, or an https:// host).
fn context_endpoint(config_dir: &Path, name: &str) -> Option<ContextEndpoint> {
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
        let tls = is_network(&host) && (tls_dir.is_dir() || host.starts_with("https://"));
        let skip_verify = docker
            .get("SkipTLSVerify")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        return Some(ContextEndpoint {
            host,
            tls_dir: tls.then_some(tls_dir),
            skip_verify,
        });
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
        assert!(e.tls.is_none());
    }

    #[test]
    fn tls_verify_takes_the_files_from_docker_cert_path_or_the_config_directory() {
        let home = tempfile::tempdir().unwrap();
        let e = resolve(
            &lookup(&[
                ("DOCKER_HOST", "tcp://h:2376"),
                ("DOCKER_TLS_VERIFY", "1"),
                ("DOCKER_CERT_PATH", "/certs"),
            ]),
            Some(home.path()),
        )
        .unwrap();
        assert_eq!(e.tls.unwrap().dir, Path::new("/certs"));
        let e = resolve(
            &lookup(&[("DOCKER_HOST", "tcp://h:2376"), ("DOCKER_TLS_VERIFY", "1")]),
            Some(home.path()),
        )
        .unwrap();
        assert_eq!(e.tls.unwrap().dir, home.path().join(".docker"));
        // "0" turns it off, and a socket never uses TLS.
        for (host, verify) in [("tcp://h:2375", "0"), ("unix:///run/d.sock", "1")] {
            let e = resolve(
                &lookup(&[("DOCKER_HOST", host), ("DOCKER_TLS_VERIFY", verify)]),
                Some(home.path()),
            )
            .unwrap();
            assert!(e.tls.is_none(), "{host} {verify}");
        }
    }

    #[test]
    fn a_context_with_tls_material_uses_it_and_skipping_verification_is_refused() {
        let home = tempfile::tempdir().unwrap();
        make_context(home.path(), "secure", "tcp://10.0.0.9:2376");
        let tls = home.path().join(".docker/contexts/tls/0f1e2d3c/docker");
        std::fs::create_dir_all(&tls).unwrap();
        let e = resolve(&lookup(&[("DOCKER_CONTEXT", "secure")]), Some(home.path())).unwrap();
        let files = e.tls.expect("TLS");
        assert_eq!(files.dir, tls);
        // No ca.pem yet: the check names the file.
        let err = files.paths().unwrap_err();
        assert!(err.contains("ca.pem") && err.contains("'secure'"), "{err}");
        std::fs::write(tls.join("ca.pem"), "x").unwrap();
        std::fs::write(tls.join("cert.pem"), "x").unwrap();
        let err = files.paths().unwrap_err();
        assert!(err.contains("key.pem"), "{err}");
        std::fs::write(tls.join("key.pem"), "x").unwrap();
        assert_eq!(files.paths().unwrap().key, tls.join("key.pem"));

        let meta = home.path().join(".docker/contexts/meta/0f1e2d3c/meta.json");
        let text = std::fs::read_to_string(&meta).unwrap();
        std::fs::write(
            &meta,
            text.replace(r#""SkipTLSVerify":false"#, r#""SkipTLSVerify":true"#),
        )
        .unwrap();
        let err = resolve(&lookup(&[("DOCKER_CONTEXT", "secure")]), Some(home.path())).unwrap_err();
        assert!(err.contains("SkipTLSVerify"), "{err}");
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
