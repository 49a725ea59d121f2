//! `devprof build`: profiling images made through the engine's build API from devprof's
//! own Dockerfiles (dockerfiles/, embedded in the binary). Recipes here; the Cargo
//! manifests (`manifest`), the build context (`context`) and the build log (`log`) are
//! pure and unit-tested. After a build the image is started once and checked: perf runs,
//! the program has symbols, debug info and frame pointers.

pub mod check;
pub mod context;
pub mod log;
pub mod manifest;

pub use check::{check_image, ImageCheck};

use crate::docker::{BuildEnd, BuildRequest, Docker};
use crate::error::{Error, Result};
use crate::settings::setup::{BuildKind, BuildSettings, ProfilerTrust, SourceBuild};
use crate::ui::Reporter;
use manifest::{JemallocProfiling, Project};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The Rust source build (dockerfiles/rust-source.Dockerfile).
pub const RUST_SOURCE_DOCKERFILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/dockerfiles/rust-source.Dockerfile"
));
/// The tools layer (dockerfiles/tools.Dockerfile).
pub const TOOLS_DOCKERFILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/dockerfiles/tools.Dockerfile"
));
/// Where a source build installs the program.
pub const BINARY_DIR: &str = "/usr/local/bin";

/// What was built, and what the check found.
#[derive(Debug, Clone)]
pub struct BuildOutcome {
    pub tag: String,
    pub image_id: String,
    pub elapsed: Duration,
    pub steps_total: usize,
    pub steps_cached: usize,
    /// Lines said before the build (what was chosen and why).
    pub plan: Vec<String>,
    pub check: Option<ImageCheck>,
    /// Whether it became a trusted profiler image, said once (None: a program's image).
    pub trust: Option<String>,
}

/// Builds the image `settings` describe, then checks it.
pub async fn build(settings: &BuildSettings, report: &Reporter) -> Result<BuildOutcome> {
    let mut plan = Vec::new();
    // The source tree is read first: its mistakes are the user's, whatever the engine.
    let prepared = match &settings.kind {
        BuildKind::Source(source) => Some(prepare_source(source, settings, &mut plan)?),
        BuildKind::Tools { .. } => None,
    };
    let docker = Docker::connect().await?;
    let mut tag = settings.tag.clone();
    let (request, sources, generated, binary_path) = match (&settings.kind, prepared) {
        (BuildKind::Source(source), Some(prepared)) => {
            if tag.is_empty() {
                tag = format!("{}-profiling:latest", prepared.bin.to_lowercase());
            }
            for (what, image) in [
                ("rust image", &source.rust_image),
                ("base image", &source.base_image),
            ] {
                if docker.image_details(image).await?.is_none() {
                    plan.push(format!(
                        "note: the {what} {image} is not on this machine: the engine will try to pull it \
                         (without a registry, make it locally: scripts/rust-image.sh, scripts/base-image.sh)"
                    ));
                }
            }
            let mut labels = HashMap::from([
                ("devprof.profiling".to_string(), "source".to_string()),
                ("devprof.image".to_string(), prepared.bin.clone()),
                (
                    "devprof.binary".to_string(),
                    format!("{BINARY_DIR}/{}", prepared.bin),
                ),
                ("devprof.package".to_string(), prepared.package.clone()),
                ("devprof.features".to_string(), prepared.features.join(",")),
            ]);
            labels.extend(settings.labels.iter().cloned());
            let request = BuildRequest {
                dockerfile: format!("{}/Dockerfile", context::DEVPROF_DIR),
                tag: tag.clone(),
                build_args: HashMap::from([
                    ("RUST_IMAGE".to_string(), source.rust_image.clone()),
                    ("BASE_IMAGE".to_string(), source.base_image.clone()),
                    ("PACKAGE".to_string(), prepared.package.clone()),
                    ("BIN".to_string(), prepared.bin.clone()),
                    ("FEATURES".to_string(), prepared.features.join(",")),
                    (
                        "BUILD_PACKAGES".to_string(),
                        source.build_packages.join(" "),
                    ),
                ]),
                labels,
                network: network_mode(&settings.network),
                no_cache: settings.no_cache,
            };
            let binary = format!("{BINARY_DIR}/{}", prepared.bin);
            (request, prepared.sources, prepared.generated, Some(binary))
        }
        (BuildKind::Source(_), None) => unreachable!("a source build is prepared above"),
        (BuildKind::Tools { from }, _) => {
            let details = docker.image_details(from).await?;
            let user = match &details {
                Some(d) => d.user.clone(),
                None => {
                    plan.push(format!(
                        "note: {from} is not on this machine: the engine will try to pull it"
                    ));
                    String::new()
                }
            };
            plan.push(format!(
                "adding perf, procps and binutils to {from}{}",
                if user.is_empty() {
                    String::new()
                } else {
                    format!(" (its user {user} is kept)")
                }
            ));
            let mut labels = HashMap::from([
                ("devprof.profiling".to_string(), "tools".to_string()),
                ("devprof.image".to_string(), "tools".to_string()),
                ("devprof.from".to_string(), from.clone()),
            ]);
            labels.extend(settings.labels.iter().cloned());
            let dockerfile = dockerfile_text(settings, TOOLS_DOCKERFILE)?;
            let request = BuildRequest {
                dockerfile: format!("{}/Dockerfile", context::DEVPROF_DIR),
                tag: tag.clone(),
                build_args: HashMap::from([
                    ("FROM_IMAGE".to_string(), from.clone()),
                    (
                        "RESTORE_USER".to_string(),
                        if user.is_empty() {
                            "root".to_string()
                        } else {
                            user
                        },
                    ),
                ]),
                labels,
                network: network_mode(&settings.network),
                no_cache: settings.no_cache,
            };
            (
                request,
                Vec::new(),
                vec![("Dockerfile".to_string(), dockerfile.into_bytes())],
                None,
            )
        }
    };

    // The context goes to a private temporary file and is streamed from there.
    let tar_path = std::env::temp_dir().join(format!("devprof-context-{}.tar", std::process::id()));
    let written = (|| -> std::io::Result<u64> {
        let file = std::fs::File::create(&tar_path)?;
        let file = context::write_tar(std::io::BufWriter::new(file), &sources, &generated)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(std::fs::metadata(&tar_path)?.len())
    })();
    let size = match written {
        Ok(size) => size,
        Err(e) => {
            let _ = std::fs::remove_file(&tar_path);
            return Err(Error::io(
                format!("write the build context {}", tar_path.display()),
                e,
            ));
        }
    };
    plan.push(format!(
        "context: {} files, {}",
        sources.len() + generated.len(),
        crate::units::human_bytes(size)
    ));
    for line in &plan {
        crate::say!("{line}");
    }

    let started = Instant::now();
    let result = run_build(&docker, &request, &tar_path, report).await;
    let _ = std::fs::remove_file(&tar_path);
    let (image_id, build_log) = result?;
    let elapsed = started.elapsed();

    let check = if settings.check {
        match check_image(&docker, &tag, binary_path.as_deref()).await {
            Ok(check) => Some(check),
            // An image without `sleep` (distroless) cannot be started idling; it was built.
            Err(e) => {
                crate::warn!("{tag} was built but could not be started to check it: {e}");
                None
            }
        }
    } else {
        None
    };
    let trust = match settings.profiler_trust() {
        ProfilerTrust::NotAProfiler => None,
        ProfilerTrust::Trusted => {
            docker.trust_image(&image_id, &tag, "built").await?;
            Some(format!(
                "trusted as a profiler image on {}: sidecars may run it (`devprof trust --list`)",
                docker.address()
            ))
        }
        ProfilerTrust::SteeredByDotenv(keys) => Some(format!(
            "not trusted as a profiler image: .env set {} for this build (a project's .env must not choose what a sidecar \
             runs as root); if it is the image you meant, trust it: `{}`",
            keys.join(", "),
            crate::docker::trust::trust_command(&tag)
        )),
    };
    Ok(BuildOutcome {
        tag,
        image_id,
        elapsed,
        steps_total: build_log.steps_total,
        steps_cached: build_log.steps_cached,
        plan,
        check,
        trust,
    })
}

fn network_mode(network: &str) -> String {
    // `default` is the engine's own choice.
    if network == "default" {
        String::new()
    } else {
        network.to_string()
    }
}

fn dockerfile_text(settings: &BuildSettings, builtin: &str) -> Result<String> {
    match &settings.dockerfile {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read {}", path.display()), e)),
        None => Ok(builtin.to_string()),
    }
}

/// What a source build sends: the context's files, generated files, package and binary.
struct PreparedSource {
    package: String,
    bin: String,
    features: Vec<String>,
    sources: Vec<context::SourceFile>,
    generated: Vec<(String, Vec<u8>)>,
}

fn prepare_source(
    source: &SourceBuild,
    settings: &BuildSettings,
    plan: &mut Vec<String>,
) -> Result<PreparedSource> {
    let root = &source.source_dir;
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| Error::io(format!("read {}", path.display()), e))
    };
    let ignore = match std::fs::read_to_string(root.join(".dockerignore")) {
        Ok(text) => context::Ignore::parse(&text),
        Err(_) => context::Ignore::default(),
    };
    let sources = context::walk(root, &ignore)
        .map_err(|e| Error::io(format!("read the source tree {}", root.display()), e))?;
    let present: std::collections::HashSet<&str> = sources.iter().map(|f| f.rel.as_str()).collect();
    let exists = |p: &str| present.contains(p);
    let mut project = Project::default();
    for file in sources
        .iter()
        .filter(|f| f.rel == "Cargo.toml" || f.rel.ends_with("/Cargo.toml"))
    {
        let dir = file
            .rel
            .strip_suffix("Cargo.toml")
            .unwrap_or("")
            .trim_end_matches('/');
        let text = read(&file.path)?;
        match manifest::parse_manifest(dir, &text, &exists) {
            Ok(m) => project.manifests.push(m),
            // A manifest cargo never reads (a test fixture, say) may be anything; one it
            // reads fails the build later with cargo's own message.
            Err(e) => plan.push(format!("note: skipped {e}")),
        }
    }
    if exists("Cargo.lock") {
        project.lock_file = Some(read(&root.join("Cargo.lock"))?);
    } else {
        return Err(Error::Usage(format!(
            "{} has no Cargo.lock: devprof builds with --locked so the image gets the versions you tested; run `cargo generate-lockfile` there",
            root.display()
        )));
    }
    let package = project
        .choose_package(source.package.as_deref())
        .map_err(Error::Usage)?;
    let bin = match &source.bin {
        Some(b) => {
            if !package.bins.iter().any(|(n, _)| n == b) {
                return Err(Error::Usage(format!(
                    "package {} has no binary '{b}' (binaries: {})",
                    package.name,
                    package
                        .bins
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            b.clone()
        }
        None => match package.bins.as_slice() {
            [(only, _)] => only.clone(),
            [] => {
                return Err(Error::Usage(format!(
                    "package {} has no binary to build",
                    package.name
                )))
            }
            many => many
                .iter()
                .find(|(n, _)| *n == package.name)
                .map(|(n, _)| n.clone())
                .ok_or_else(|| {
                    Error::Usage(format!(
                        "package {} has several binaries ({}): choose one with --bin",
                        package.name,
                        many.iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?,
        },
    };
    let mut features = source.features.clone();
    let jemalloc = project.jemalloc_profiling(package);
    match &jemalloc {
        JemallocProfiling::Feature(f) if source.jemalloc_feature && !features.contains(f) => {
            features.push(f.clone())
        }
        JemallocProfiling::Feature(_) if source.jemalloc_feature => {}
        JemallocProfiling::Feature(f) => plan.push(format!(
            "jemalloc profiling feature '{f}' left off (--no-jemalloc-feature)"
        )),
        _ => {}
    }
    plan.push(format!(
        "building {} from {} (package {}, binary {}{}), release with full debuginfo, no stripping, frame pointers",
        if settings.tag.is_empty() { format!("{bin}-profiling:latest") } else { settings.tag.clone() },
        root.display(),
        package.name,
        bin,
        if features.is_empty() { String::new() } else { format!(", features {}", features.join(",")) }
    ));
    if !matches!(jemalloc, JemallocProfiling::Feature(_)) || source.jemalloc_feature {
        plan.push(jemalloc.describe());
    }
    plan.push(format!(
        "toolchain {}, runtime {}",
        source.rust_image, source.base_image
    ));

    let mut cargo_config = Vec::new();
    for name in [".cargo/config.toml", ".cargo/config"] {
        if exists(name) {
            cargo_config.push((
                name.to_string(),
                std::fs::read(root.join(name)).map_err(|e| Error::io(format!("read {name}"), e))?,
            ));
        }
    }
    let mut generated = vec![(
        "Dockerfile".to_string(),
        dockerfile_text(settings, RUST_SOURCE_DOCKERFILE)?.into_bytes(),
    )];
    for (path, data) in project.skeleton(&cargo_config) {
        generated.push((format!("skeleton/{path}"), data));
    }
    Ok(PreparedSource {
        package: package.name.clone(),
        bin,
        features,
        sources,
        generated,
    })
}

/// Streams the build, with a spinner showing the step (or, without a terminal, one line
/// per step), and turns a failure into the failing step and its message.
async fn run_build(
    docker: &Docker,
    request: &BuildRequest,
    tar_path: &Path,
    report: &Reporter,
) -> Result<(String, log::BuildLog)> {
    let verbose = report.verbose();
    let spinner = report.spinner(&format!("building {}", request.tag));
    let plain = spinner.is_hidden();
    let mut build_log = log::BuildLog::default();
    let end = docker
        .build_image(request, tar_path, |chunk| {
            for event in build_log.push(chunk) {
                match event {
                    log::LogEvent::Step(step) => {
                        if plain {
                            crate::say!("{step}");
                        } else {
                            Reporter::bar_message(&spinner, &crate::text::truncate(&step, 100));
                        }
                    }
                    log::LogEvent::Line(line) if verbose => {
                        report.note(Some(&spinner), &format!("  {line}"))
                    }
                    log::LogEvent::Line(_) => {}
                }
            }
        })
        .await;
    spinner.finish_and_clear();
    match end? {
        BuildEnd::Built(id) => {
            let id = id.or_else(|| build_log.built.clone()).unwrap_or_default();
            Ok((id, build_log))
        }
        BuildEnd::Failed(message) => Err(Error::BuildFailed {
            image: request.tag.clone(),
            step: build_log.step.clone(),
            message: message.trim().to_string(),
            tail: build_log.tail(),
        }),
    }
}

/// The plan lines and the summary, for the user.
pub fn summary(outcome: &BuildOutcome) -> String {
    let mut out = format!(
        "built {} ({}) in {:.0} s: {} of {} steps from the cache\n",
        outcome.tag,
        outcome
            .image_id
            .trim_start_matches("sha256:")
            .chars()
            .take(12)
            .collect::<String>(),
        outcome.elapsed.as_secs_f64(),
        outcome.steps_cached,
        outcome.steps_total
    );
    if let Some(check) = &outcome.check {
        out.push_str("checked by starting it once:\n");
        for line in check.lines().0 {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if let Some(trust) = &outcome.trust {
        out.push_str(trust);
        out.push('\n');
    }
    out
}

/// Problems that make the image not ready for profiling.
pub fn problems(outcome: &BuildOutcome) -> Vec<String> {
    outcome
        .check
        .as_ref()
        .map(|c| c.lines().1)
        .unwrap_or_default()
}
