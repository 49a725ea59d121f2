//! Validated settings of the set-up commands (build, compose, doctor), made once from
//! their raw arguments (which clap has merged with the environment and .env).

use crate::cli::{BuildArgs, BuildCommonArgs, BuildKindArgs, ComposeArgs, DoctorArgs};
use crate::docker::target::ProcessSelector;
use crate::error::{Error, Result};
use crate::settings::{selector_of, target_of};
use regex::Regex;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
pub struct SourceBuild {
    pub source_dir: PathBuf,
    pub package: Option<String>,
    pub bin: Option<String>,
    pub features: Vec<String>,
    /// Turn on the project's jemalloc profiling feature when it has one.
    pub jemalloc_feature: bool,
    pub base_image: String,
    pub rust_image: String,
    pub build_packages: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum BuildKind {
    Source(SourceBuild),
    Tools { from: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct BuildSettings {
    pub kind: BuildKind,
    pub tag: String,
    pub labels: Vec<(String, String)>,
    pub dockerfile: Option<PathBuf>,
    pub no_cache: bool,
    pub network: String,
    pub check: bool,
    /// The settings of this build `.env` gave.
    pub from_dotenv: Vec<String>,
}

/// Whether a build's image becomes a trusted profiler image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfilerTrust {
    /// A source build makes a program's image, not a profiler's.
    NotAProfiler,
    /// A tools build from the user's flags and environment only.
    Trusted,
    /// A tools build `.env` steered (these keys): built, not trusted.
    SteeredByDotenv(Vec<String>),
}

fn image_reference() -> Regex {
    // name components (lowercase), optional registry host with port, optional tag or digest.
    Regex::new(r"^([a-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")
        .expect("valid regex")
}

fn check_image(what: &str, image: &str) -> Result<String> {
    let image = image.trim();
    if image_reference().is_match(image) {
        Ok(image.to_string())
    } else {
        Err(Error::Usage(format!(
            "{what} '{image}' is not an image reference (name[:tag], lowercase, e.g. op-reth:profiling)"
        )))
    }
}

/// The tag a tools-layer image gets by default: `<name>-profiling:<tag>` from the last
/// path component of the image it extends.
pub fn default_tools_tag(from: &str) -> String {
    let without_digest = from.split('@').next().unwrap_or(from);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (name, tag) = match last.split_once(':') {
        Some((n, t)) => (n, t),
        None => (last, "latest"),
    };
    format!("{name}-profiling:{tag}")
}

fn split_words(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(|c: char| c == ',' || c.is_whitespace()))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

impl BuildSettings {
    pub fn from_args(args: BuildArgs) -> Result<Self> {
        let from_dotenv = args.from_dotenv;
        let (kind, common, default_tag) = match args.kind {
            BuildKindArgs::Source(a) => {
                let source_dir = a.source.clone();
                if !source_dir.join("Cargo.toml").is_file() {
                    return Err(Error::Usage(format!(
                        "{} has no Cargo.toml: give the Cargo project or workspace root (DEVPROF_BUILD_SOURCE)",
                        source_dir.display()
                    )));
                }
                let features = split_words(&a.features);
                let feature_re =
                    Regex::new(r"^[A-Za-z0-9_][A-Za-z0-9_+./-]*$").expect("valid regex");
                if let Some(bad) = features.iter().find(|f| !feature_re.is_match(f)) {
                    return Err(Error::Usage(format!(
                        "--features: '{bad}' is not a feature name"
                    )));
                }
                let build_packages = split_words(std::slice::from_ref(&a.build_packages));
                let package_re = Regex::new(r"^[a-z0-9][a-z0-9+.:-]*$").expect("valid regex");
                if let Some(bad) = build_packages.iter().find(|p| !package_re.is_match(p)) {
                    return Err(Error::Usage(format!(
                        "--build-packages: '{bad}' is not a Debian package name"
                    )));
                }
                let default_tag = a
                    .bin
                    .clone()
                    .or_else(|| a.package.clone())
                    .map(|b| format!("{}-profiling:latest", b.to_lowercase()));
                (
                    BuildKind::Source(SourceBuild {
                        source_dir,
                        package: a.package.filter(|p| !p.is_empty()),
                        bin: a.bin.filter(|b| !b.is_empty()),
                        features,
                        jemalloc_feature: !a.no_jemalloc_feature,
                        base_image: check_image("--base", &a.base)?,
                        rust_image: check_image("--rust-image", &a.rust_image)?,
                        build_packages,
                    }),
                    a.common,
                    default_tag,
                )
            }
            BuildKindArgs::Tools(a) => {
                let from = check_image("the image to extend", &a.from)?;
                let tag = default_tools_tag(&from);
                (BuildKind::Tools { from }, a.common, Some(tag))
            }
        };
        let mut settings = Self::with_common(kind, common, default_tag)?;
        settings.from_dotenv = from_dotenv;
        Ok(settings)
    }

    /// Whether the image built is trusted as a profiler image: a tools build (perf added
    /// to an image) whose settings came only from flags and the environment. A `.env` that
    /// names the tag, the image to extend or the network would otherwise choose what a
    /// sidecar runs as root.
    pub fn profiler_trust(&self) -> ProfilerTrust {
        match (&self.kind, self.from_dotenv.is_empty()) {
            (BuildKind::Source(_), _) => ProfilerTrust::NotAProfiler,
            (BuildKind::Tools { .. }, true) => ProfilerTrust::Trusted,
            (BuildKind::Tools { .. }, false) => {
                ProfilerTrust::SteeredByDotenv(self.from_dotenv.clone())
            }
        }
    }

    fn with_common(
        kind: BuildKind,
        common: BuildCommonArgs,
        default_tag: Option<String>,
    ) -> Result<Self> {
        let tag = match common.tag.filter(|t| !t.is_empty()) {
            Some(t) => check_image("--tag", &t)?,
            // A source build without --bin/--package: known once the manifest is read.
            None => default_tag.unwrap_or_default(),
        };
        let mut labels = Vec::new();
        for label in &common.labels {
            match label.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    labels.push((k.trim().to_string(), v.to_string()))
                }
                _ => {
                    return Err(Error::Usage(format!(
                        "--label '{label}': expected KEY=VALUE"
                    )))
                }
            }
        }
        if let Some(path) = &common.dockerfile {
            if !path.is_file() {
                return Err(Error::Usage(format!(
                    "--dockerfile {}: no such file",
                    path.display()
                )));
            }
        }
        if common.network.trim().is_empty() {
            return Err(Error::Usage("--network: empty".into()));
        }
        Ok(BuildSettings {
            kind,
            tag,
            labels,
            dockerfile: common.dockerfile,
            no_cache: common.no_cache,
            network: common.network.trim().to_string(),
            check: !common.no_check,
            from_dotenv: Vec::new(),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ComposeSettings {
    pub file: PathBuf,
    /// Empty: the services that run a profiling image.
    pub services: Vec<String>,
    pub heap: bool,
    /// Node services: NODE_OPTIONS with V8's perf-map flag.
    pub node: bool,
    /// The JVM profile: -XX:+PreserveFramePointer in JAVA_TOOL_OPTIONS.
    pub jvm: bool,
    pub lg_prof_sample: u32,
    /// (service or None for every chosen service, image)
    pub images: Vec<(Option<String>, String)>,
    pub sys_admin: bool,
    pub kernel_symbols: bool,
    pub privileged: bool,
    pub output: PathBuf,
    pub env_file: PathBuf,
}

/// The compose file names docker-compose looks for, in its order.
pub const COMPOSE_FILE_NAMES: &[&str] = &[
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
];

/// `<dir>/<stem>.devprof.yml` next to the compose file.
pub fn default_override_path(file: &Path) -> PathBuf {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "compose".into());
    file.with_file_name(format!("{stem}.devprof.yml"))
}

impl ComposeSettings {
    pub fn from_args(args: ComposeArgs, cwd: &Path) -> Result<Self> {
        let file = match args.file {
            Some(f) => f,
            None => COMPOSE_FILE_NAMES
                .iter()
                .map(|n| cwd.join(n))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "no compose file given and none of {} in {}: pass -f FILE",
                        COMPOSE_FILE_NAMES.join(", "),
                        cwd.display()
                    ))
                })?,
        };
        if !file.is_file() {
            return Err(Error::Usage(format!(
                "compose file {}: no such file",
                file.display()
            )));
        }
        let mut images = Vec::new();
        for spec in &args.images {
            let (service, image) = match spec.split_once('=') {
                Some((s, i)) => (Some(s.trim().to_string()), i),
                None => (None, spec.as_str()),
            };
            images.push((service, check_image("--image", image)?));
        }
        if args.lg_prof_sample > 62 {
            return Err(Error::Usage(format!(
                "--lg-prof-sample {}: must be 0..=62",
                args.lg_prof_sample
            )));
        }
        let services: Vec<String> = split_words(&args.services);
        let output = args.output.unwrap_or_else(|| default_override_path(&file));
        if output == file {
            return Err(Error::Usage(
                "--output is the compose file itself; devprof never edits it".into(),
            ));
        }
        let env_file = args
            .env_file
            .unwrap_or_else(|| file.parent().unwrap_or(Path::new(".")).join(".env"));
        Ok(ComposeSettings {
            file,
            services,
            heap: args.heap,
            node: args.node,
            jvm: args.jvm,
            lg_prof_sample: args.lg_prof_sample,
            images,
            sys_admin: args.sys_admin,
            kernel_symbols: args.kernel_symbols,
            privileged: args.privileged,
            output,
            env_file,
        })
    }
}

#[derive(Debug, Clone)]
pub struct DoctorSettings {
    pub target: String,
    pub process: ProcessSelector,
    pub placement: super::Placement,
    pub json: bool,
}

impl DoctorSettings {
    pub fn from_args(args: DoctorArgs) -> Result<Self> {
        Ok(DoctorSettings {
            target: target_of(args.target)?,
            process: selector_of(args.process)?,
            // The doctor starts no sidecar, so no window bounds one.
            placement: super::placement_of(args.placement, std::time::Duration::ZERO)?,
            json: args.json,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build_settings(args: &[&str], dotenv: &[(&str, &str)]) -> BuildSettings {
        let env = crate::cli::dotenv::DotEnv::from_entries(
            dotenv.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let raw = std::iter::once("devprof")
            .chain(args.iter().copied())
            .map(std::ffi::OsString::from)
            .collect();
        match crate::cli::Cli::parse_with(raw, &env).unwrap().command {
            crate::cli::Command::Build(b) => BuildSettings::from_args(b).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_a_tools_build_from_flags_and_the_environment_becomes_a_trusted_profiler_image() {
        let tools = [
            "build",
            "tools",
            "debian:bookworm-slim",
            "-t",
            "devprof-profiler:latest",
        ];
        assert_eq!(
            build_settings(&tools, &[]).profiler_trust(),
            ProfilerTrust::Trusted
        );
        assert_eq!(
            build_settings(
                &tools[..3],
                &[("DEVPROF_BUILD_TAG", "devprof-profiler:latest")]
            )
            .profiler_trust(),
            ProfilerTrust::SteeredByDotenv(vec!["DEVPROF_BUILD_TAG".into()])
        );
        assert_eq!(
            build_settings(&tools, &[("DEVPROF_BUILD_NETWORK", "attacker-net")]).profiler_trust(),
            ProfilerTrust::SteeredByDotenv(vec!["DEVPROF_BUILD_NETWORK".into()])
        );
        let here = env!("CARGO_MANIFEST_DIR");
        let source = [
            "build",
            "source",
            here,
            "-p",
            "demo-node",
            "-t",
            "devprof-profiler:latest",
        ];
        assert_eq!(
            build_settings(&source, &[]).profiler_trust(),
            ProfilerTrust::NotAProfiler
        );
    }

    #[test]
    fn tools_tags() {
        assert_eq!(
            default_tools_tag("debian:bookworm-slim"),
            "debian-profiling:bookworm-slim"
        );
        assert_eq!(
            default_tools_tag("ghcr.io/paradigmxyz/op-reth:v1.1.0"),
            "op-reth-profiling:v1.1.0"
        );
        assert_eq!(
            default_tools_tag("localhost:5000/geth"),
            "geth-profiling:latest"
        );
        assert_eq!(
            default_tools_tag(&format!("geth@sha256:{}", "a".repeat(64))),
            "geth-profiling:latest"
        );
    }

    #[test]
    fn image_references() {
        for ok in [
            "debian:bookworm-slim",
            "devprof-demo-node:latest",
            "ghcr.io/paradigmxyz/op-reth:v1.1.0",
            "localhost:5000/x/y",
        ] {
            assert!(check_image("x", ok).is_ok(), "{ok}");
        }
        for bad in ["Debian", "a b", "x:", "", "x;rm -rf /"] {
            assert!(check_image("x", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn override_path_sits_next_to_the_file() {
        assert_eq!(
            default_override_path(Path::new("compose/demo.yml")),
            PathBuf::from("compose/demo.devprof.yml")
        );
    }

    #[test]
    fn words_split_on_commas_and_spaces() {
        assert_eq!(
            split_words(&["a,b c".into(), " d ".into()]),
            vec!["a", "b", "c", "d"]
        );
    }
}
