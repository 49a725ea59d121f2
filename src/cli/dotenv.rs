//! `.env`: devprof settings kept in a file, below flags and the environment. The file is
//! read, never loaded into the process's environment: a cloned repository's `.env` must
//! not choose the Docker engine (DOCKER_HOST), grant a privilege (DEVPROF_ALLOW_*) or reach
//! child processes (LD_PRELOAD). Only `DEVPROF_*` keys are taken, and never `DEVPROF_ALLOW_*`
//! nor `DEVPROF_PROFILER_IMAGE` (the image whose code a sidecar runs with the rights perf
//! needs, beside the target: choosing it is as good as a privilege); the engine comes from
//! the environment and docker contexts, as the docker CLI takes it.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The settings a `.env` may give: devprof's own, except the ones that grant privileges.
pub fn accepted(key: &str) -> bool {
    key.starts_with("DEVPROF_") && !grants_privilege(key)
}

/// Keys whose value amounts to a privilege: the flags that grant one, and the image whose
/// code runs with the sidecar's rights.
fn grants_privilege(key: &str) -> bool {
    key.starts_with("DEVPROF_ALLOW_") || key == "DEVPROF_PROFILER_IMAGE"
}

/// Keys a `.env` may set that devprof ignores on purpose and says so: privileges and the
/// engine's address and credentials. Other keys (the demo's, compose's) are left silently.
fn ignored_on_purpose(key: &str) -> bool {
    grants_privilege(key) || key.starts_with("DOCKER_") || key.starts_with("LD_") || key == "PATH"
}

/// What a `.env` gives: the accepted settings (the first of several declarations wins, as
/// dotenvy's loading did) and the keys ignored on purpose.
#[derive(Debug, Default, PartialEq)]
pub struct DotEnv {
    pub settings: BTreeMap<String, String>,
    pub ignored: Vec<String>,
}

impl DotEnv {
    pub fn from_entries(entries: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut env = DotEnv::default();
        for (key, value) in entries {
            if accepted(&key) {
                env.settings.entry(key).or_insert(value);
            } else if ignored_on_purpose(&key) && !env.ignored.contains(&key) {
                env.ignored.push(key);
            }
        }
        env
    }
}

static DOTENV: OnceLock<DotEnv> = OnceLock::new();

/// Reads `.env` from the current directory or the nearest parent that has one, once.
/// A line dotenvy cannot parse ends the reading there, with a warning.
pub fn load() -> &'static DotEnv {
    DOTENV.get_or_init(|| {
        let Ok(iter) = dotenvy::dotenv_iter() else {
            return DotEnv::default();
        };
        let mut entries = Vec::new();
        for item in iter {
            match item {
                Ok(entry) => entries.push(entry),
                Err(e) => {
                    let line = format!("warning: .env: {e}; the lines after it are ignored");
                    eprintln!("{}", crate::text::terminal(&line));
                    break;
                }
            }
        }
        let env = DotEnv::from_entries(entries);
        if !env.ignored.is_empty() {
            // The keys are a cloned repository's text.
            let line = format!(
                "note: .env sets {}: ignored (devprof takes only DEVPROF_* settings from .env, never DEVPROF_ALLOW_* nor \
                 DEVPROF_PROFILER_IMAGE; the Docker engine comes from the environment and docker contexts; pass privileges \
                 and the profiler image as flags or in the environment)",
                env.ignored.join(", ")
            );
            eprintln!("{}", crate::text::terminal(&line));
        }
        env
    })
}

/// A setting's value: the environment's, else `.env`'s (accepted keys only).
pub fn var(key: &str) -> Option<String> {
    match std::env::var(key) {
        Ok(value) => Some(value),
        Err(_) => load().settings.get(key).cloned(),
    }
}

/// Every argument that reads an environment variable the environment does not set takes
/// `.env`'s value as its default: flags, then the environment, then `.env`, then the
/// built-in defaults.
pub fn with_defaults(mut cmd: clap::Command, env: &DotEnv) -> clap::Command {
    cmd = cmd.mut_args(|arg| {
        let value = arg
            .get_env()
            .and_then(|name| name.to_str())
            .filter(|name| std::env::var_os(name).is_none())
            .and_then(|name| env.settings.get(name))
            .filter(|value| !value.is_empty())
            .cloned();
        match value {
            Some(value) => arg.default_value(value),
            None => arg,
        }
    });
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |sub| with_defaults(sub, env));
    }
    cmd
}

/// The settings whose value in `matches` came from `.env` (not a flag, not the
/// environment, not a built-in default), in the subcommand `matches` chose, at any depth.
pub fn supplied(cmd: &clap::Command, matches: &clap::ArgMatches, env: &DotEnv) -> Vec<String> {
    let mut found: Vec<String> = cmd
        .get_arguments()
        .filter(|arg| {
            matches.value_source(arg.get_id().as_str())
                == Some(clap::parser::ValueSource::DefaultValue)
        })
        .filter_map(|arg| arg.get_env().and_then(|name| name.to_str()))
        .filter(|name| std::env::var_os(name).is_none())
        .filter(|name| env.settings.get(*name).is_some_and(|v| !v.is_empty()))
        .map(str::to_string)
        .collect();
    if let Some((name, sub_matches)) = matches.subcommand() {
        if let Some(sub) = cmd.find_subcommand(name) {
            found.extend(supplied(sub, sub_matches, env));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Regression: `.env` was loaded whole into the environment, so a cloned repository
    /// could grant a privilege, choose the engine or preload a library into ssh.
    #[test]
    fn dotenv_grants_no_privilege_and_chooses_no_engine() {
        let env = DotEnv::from_entries(entries(&[
            ("DEVPROF_TARGET", "demo-seq"),
            ("DEVPROF_ALLOW_PRIVILEGED", "true"),
            ("DEVPROF_ALLOW_SYSCTL", "true"),
            ("DEVPROF_PROFILER_IMAGE", "attacker/perf:latest"),
            ("DOCKER_HOST", "tcp://attacker:2375"),
            ("LD_PRELOAD", "/tmp/x.so"),
            ("DEMO_LOCK_THREADS", "4"),
            ("DEVPROF_TARGET", "second"),
        ]));
        assert_eq!(
            env.settings.into_iter().collect::<Vec<_>>(),
            entries(&[("DEVPROF_TARGET", "demo-seq")])
        );
        assert_eq!(
            env.ignored,
            [
                "DEVPROF_ALLOW_PRIVILEGED",
                "DEVPROF_ALLOW_SYSCTL",
                "DEVPROF_PROFILER_IMAGE",
                "DOCKER_HOST",
                "LD_PRELOAD"
            ]
        );
    }

    #[test]
    fn dotenv_values_are_defaults_below_flags() {
        use clap::{Arg, Command};
        let cmd = || {
            Command::new("t").subcommand(
                Command::new("cpu")
                    .arg(Arg::new("target").env("DEVPROF_TEST_DOTENV_TARGET"))
                    .arg(
                        Arg::new("features")
                            .long("features")
                            .env("DEVPROF_TEST_DOTENV_FEATURES")
                            .value_delimiter(','),
                    ),
            )
        };
        let env = DotEnv::from_entries(entries(&[
            ("DEVPROF_TEST_DOTENV_TARGET", "from-dotenv"),
            ("DEVPROF_TEST_DOTENV_FEATURES", "a,b"),
        ]));
        let m = with_defaults(cmd(), &env).get_matches_from(["t", "cpu"]);
        let cpu = m.subcommand_matches("cpu").unwrap();
        assert_eq!(cpu.get_one::<String>("target").unwrap(), "from-dotenv");
        let features: Vec<&String> = cpu.get_many::<String>("features").unwrap().collect();
        assert_eq!(features, ["a", "b"]);
        let m = with_defaults(cmd(), &env).get_matches_from(["t", "cpu", "typed"]);
        let cpu = m.subcommand_matches("cpu").unwrap();
        assert_eq!(cpu.get_one::<String>("target").unwrap(), "typed");
    }
}
