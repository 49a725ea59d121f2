//! Settings of `devprof profile`: which containers, which kinds, the window.

use super::{window_of, CpuSettings, HeapSettings, OffcpuSettings};
use crate::cli::{CpuArgs, HeapArgs, OffcpuArgs, ProfileArgs, DEFAULT_DURATION};
use crate::error::{Error, Result};
use crate::units::parse_duration;
use clap::{Args, FromArgMatches};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which containers a session records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Targets {
    /// Names, id prefixes or compose services, as typed.
    Named(Vec<String>),
    /// Every running container of a compose project.
    Project(String),
    /// Every running container.
    All,
}

/// One kind of capture, run on every target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Cpu,
    Heap,
    /// Off-CPU with this event config.
    Offcpu(String),
}

/// The off-CPU config a session uses when none is named: the one that gives off-CPU time.
pub const SESSION_OFFCPU_CONFIG: &str = "contextswitches";

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Heap => "heap",
            Kind::Offcpu(_) => "offcpu",
        }
    }

    fn parse(text: &str) -> Result<Self> {
        let text = text.trim();
        match text.split_once(':') {
            None if text == "cpu" => Ok(Kind::Cpu),
            None if text == "heap" => Ok(Kind::Heap),
            None if text == "offcpu" => Ok(Kind::Offcpu(SESSION_OFFCPU_CONFIG.into())),
            Some(("offcpu", config)) if !config.trim().is_empty() => {
                Ok(Kind::Offcpu(config.trim().into()))
            }
            _ => Err(Error::Usage(format!(
                "--kinds: '{text}' is not a kind; use cpu, heap, offcpu or offcpu:CONFIG (e.g. --kinds cpu,heap,offcpu:iobandwidth)"
            ))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProfileSettings {
    pub targets: Targets,
    pub duration: Duration,
    pub kinds: Vec<Kind>,
    pub frequency: u32,
    /// `--repeat K` for the CPU captures.
    pub repeat: Option<u32>,
    pub output_dir: PathBuf,
    pub json: bool,
}

impl ProfileSettings {
    /// `cwd` is where a compose file names the default project.
    pub fn from_args(args: ProfileArgs, output_dir: PathBuf, cwd: &Path) -> Result<Self> {
        let mut items = args.items;
        // The last item is the window when it reads as one (no container is named `30s`).
        let duration = match items.last() {
            Some(last) if parse_duration(last).is_ok() => {
                let d = window_of(last)?;
                items.pop();
                d
            }
            _ => window_of(
                &crate::cli::dotenv::var("DEVPROF_DURATION")
                    .unwrap_or_else(|| DEFAULT_DURATION.into()),
            )?,
        };
        let targets = match (args.project, args.all, items.is_empty()) {
            (Some(_), _, false) | (_, true, false) => {
                return Err(Error::Usage(format!(
                    "name containers ({}) or use --project/--all-containers, not both",
                    items.join(" ")
                )))
            }
            (Some(p), _, true) => Targets::Project(p),
            (None, true, true) => Targets::All,
            (None, false, false) => Targets::Named(items),
            (None, false, true) => Targets::Project(compose_project(cwd).ok_or_else(|| {
                Error::Usage(
                    "no targets: name containers, or use --project NAME or --all-containers (no compose file in the current directory names a project)"
                        .into(),
                )
            })?),
        };
        let mut kinds: Vec<Kind> = Vec::new();
        for text in &args.kinds {
            let kind = Kind::parse(text)?;
            if kinds.iter().any(|k| k.name() == kind.name()) {
                return Err(Error::Usage(format!("--kinds names {} twice", kind.name())));
            }
            kinds.push(kind);
        }
        if kinds.is_empty() {
            return Err(Error::Usage("--kinds is empty".into()));
        }
        if !(1..=100_000).contains(&args.frequency) {
            return Err(Error::Usage(format!(
                "--frequency {} is out of range (1..=100000 Hz)",
                args.frequency
            )));
        }
        let settings = ProfileSettings {
            targets,
            duration,
            kinds,
            frequency: args.frequency,
            repeat: args.repeat,
            output_dir,
            json: args.json,
        };
        // Every kind's own settings are checked now, before anything runs.
        for kind in &settings.kinds {
            settings.capture("check", kind)?;
        }
        Ok(settings)
    }

    /// The single-target settings of one capture of the session: the same validation and
    /// defaults as `devprof cpu|heap|offcpu CONTAINER DURATION`.
    pub fn capture(&self, container: &str, kind: &Kind) -> Result<CaptureSettings> {
        let secs = self.duration.as_secs().max(1).to_string();
        let base = [container.to_string(), secs];
        let out = self.output_dir.clone();
        Ok(match kind {
            Kind::Cpu => {
                let mut argv = base.to_vec();
                argv.extend(["--frequency".into(), self.frequency.to_string()]);
                if let Some(k) = self.repeat {
                    argv.extend(["--repeat".into(), k.to_string()]);
                }
                CaptureSettings::Cpu(CpuSettings::from_args(parse::<CpuArgs>(&argv)?, out)?)
            }
            Kind::Heap => {
                CaptureSettings::Heap(HeapSettings::from_args(parse::<HeapArgs>(&base)?, out)?)
            }
            Kind::Offcpu(config) => {
                let mut argv = base.to_vec();
                argv.extend(["--config".into(), config.clone()]);
                CaptureSettings::Offcpu(OffcpuSettings::from_args(
                    parse::<OffcpuArgs>(&argv)?,
                    out,
                )?)
            }
        })
    }
}

/// One capture's settings.
#[derive(Debug, Clone)]
pub enum CaptureSettings {
    Cpu(CpuSettings),
    Heap(HeapSettings),
    Offcpu(OffcpuSettings),
}

/// Parses a single-target command's arguments, so a session capture gets exactly the
/// defaults that command has.
fn parse<A: Args + FromArgMatches>(argv: &[String]) -> Result<A> {
    let command = crate::cli::dotenv::with_defaults(
        A::augment_args(clap::Command::new("devprof").no_binary_name(true)),
        crate::cli::dotenv::load(),
    );
    let matches = command
        .try_get_matches_from(argv)
        .map_err(|e| Error::Usage(e.to_string()))?;
    A::from_arg_matches(&matches).map_err(|e| Error::Usage(e.to_string()))
}

/// The compose project of the compose file in `dir`, as `docker compose` names it:
/// COMPOSE_PROJECT_NAME (the environment's, else the directory's .env), else the file's
/// top-level `name:`, else the directory's name.
pub fn compose_project(dir: &Path) -> Option<String> {
    let file = [
        "compose.yaml",
        "compose.yml",
        "docker-compose.yaml",
        "docker-compose.yml",
    ]
    .iter()
    .map(|f| dir.join(f))
    .find(|p| p.is_file())?;
    // docker compose reads it from the environment, else from the project's .env (read
    // here as data: devprof's environment takes nothing from a .env).
    let from_dotenv = || {
        dotenvy::from_path_iter(dir.join(".env"))
            .ok()?
            .map_while(|entry| entry.ok())
            .find(|(key, _)| key == "COMPOSE_PROJECT_NAME")
            .map(|(_, name)| name)
    };
    if let Some(name) = std::env::var("COMPOSE_PROJECT_NAME")
        .ok()
        .or_else(from_dotenv)
        .filter(|n| !n.is_empty())
    {
        return Some(name);
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let named = serde_yaml::from_str::<serde_yaml::Value>(&text)
        .ok()
        .and_then(|v| v.get("name")?.as_str().map(str::to_string));
    named.or_else(|| {
        let base = dir
            .canonicalize()
            .ok()?
            .file_name()?
            .to_str()?
            .to_lowercase();
        let name: String = base
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        (!name.is_empty()).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(argv: &[&str], cwd: &Path) -> Result<ProfileSettings> {
        let cli = crate::cli::Cli::try_parse_from(
            ["devprof", "profile"].iter().chain(argv.iter()).copied(),
        )
        .expect("parses");
        match cli.command {
            crate::cli::Command::Profile(args) => {
                ProfileSettings::from_args(args, "profiling".into(), cwd)
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_last_item_is_the_window_when_it_reads_as_one() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(&["a", "b", "45s", "--kinds", "cpu,offcpu"], dir.path()).unwrap();
        assert_eq!(s.targets, Targets::Named(vec!["a".into(), "b".into()]));
        assert_eq!(s.duration, Duration::from_secs(45));
        assert_eq!(
            s.kinds,
            vec![Kind::Cpu, Kind::Offcpu(SESSION_OFFCPU_CONFIG.into())]
        );
    }

    #[test]
    fn kinds_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let err = settings(&["a", "5", "--kinds", "cpu,disk"], dir.path()).unwrap_err();
        assert!(err.to_string().contains("'disk' is not a kind"), "{err}");
        let err = settings(&["a", "5", "--kinds", "cpu,cpu"], dir.path()).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
        let err =
            settings(&["a", "5", "--kinds", "offcpu:no-such-config"], dir.path()).unwrap_err();
        assert!(err.to_string().contains("no-such-config"), "{err}");
    }

    #[test]
    fn without_targets_the_compose_file_here_names_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let err = settings(&["5"], dir.path()).unwrap_err();
        assert!(err.to_string().contains("--project"), "{err}");
        std::fs::write(
            dir.path().join("compose.yaml"),
            "name: mynet\nservices: {}\n",
        )
        .unwrap();
        let s = settings(&["5"], dir.path()).unwrap();
        assert_eq!(s.targets, Targets::Project("mynet".into()));
        let s = settings(&["--project", "other"], dir.path()).unwrap();
        assert_eq!(s.targets, Targets::Project("other".into()));
        assert!(settings(&["x", "--all"], dir.path()).is_err());
    }

    #[test]
    fn each_capture_gets_the_single_target_commands_settings() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(
            &[
                "a",
                "7",
                "--kinds",
                "cpu,heap,offcpu:iobandwidth",
                "-F",
                "499",
            ],
            dir.path(),
        )
        .unwrap();
        match s.capture("demo-seq", &Kind::Cpu).unwrap() {
            CaptureSettings::Cpu(c) => {
                assert_eq!(c.target, "demo-seq");
                assert_eq!(c.duration, Duration::from_secs(7));
                assert_eq!(c.frequency, 499);
            }
            other => panic!("{other:?}"),
        }
        match s.capture("demo-seq", &s.kinds[2]).unwrap() {
            CaptureSettings::Offcpu(o) => {
                assert!(o.config.name.contains("iobandwidth"), "{}", o.config.name)
            }
            other => panic!("{other:?}"),
        }
    }
}
