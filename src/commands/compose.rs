//! `devprof compose`: read the user's compose file, ask the engine what it needs to know
//! (which images are profiling images, whether it knows CAP_PERFMON, its kernel), write
//! the override file next to it, and print the command that uses both.

use crate::cli::ComposeArgs;
use crate::docker::Docker;
use crate::error::{Error, Result};
use crate::settings::setup::ComposeSettings;
use crate::setup::compose::{self, CapabilityChoice, OverrideOptions};
use std::path::Path;

/// The named volume mounted at /profiling.
const VOLUME: &str = "devprof-profiling";

pub async fn run(args: ComposeArgs) -> Result<()> {
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current directory", e))?;
    let settings = ComposeSettings::from_args(args, &cwd)?;
    let shown = |p: &Path| p.strip_prefix(&cwd).unwrap_or(p).display().to_string();
    let file_name = shown(&settings.file);
    let compose_error = |detail: String| Error::ComposeFile {
        path: file_name.clone(),
        detail,
    };

    let text = std::fs::read_to_string(&settings.file)
        .map_err(|e| Error::io(format!("read {file_name}"), e))?;
    let env_vars = match std::fs::read_to_string(&settings.env_file) {
        Ok(text) => compose::parse_env_file(&text),
        Err(_) => Default::default(),
    };
    let lookup = |k: &str| std::env::var(k).ok().or_else(|| env_vars.get(k).cloned());
    let file = compose::parse(&text, &lookup).map_err(compose_error)?;

    let docker = Docker::connect().await;
    let mut notes = Vec::new();
    let services = if !settings.services.is_empty() {
        settings.services.clone()
    } else {
        let docker = docker.as_ref().map_err(|e| {
            Error::Usage(format!(
                "no --services given, and the engine cannot say which images are profiling images ({e})"
            ))
        })?;
        let mut chosen = Vec::new();
        for service in &file.services {
            let Some(image) = &service.image else {
                continue;
            };
            if let Some(details) = docker.image_details(image).await? {
                if details.labels.contains_key("devprof.profiling") {
                    chosen.push(service.name.clone());
                }
            }
        }
        if chosen.is_empty() {
            return Err(Error::Usage(format!(
                "no service of {file_name} runs a profiling image (made by `devprof build`); choose them with --services ({})",
                file.services.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(",")
            )));
        }
        chosen
    };

    let choice = capabilities(
        &settings,
        docker.as_ref().ok(),
        &services,
        &file,
        &mut notes,
    )
    .await?;
    let command = compose_command();
    let override_name = shown(&settings.output);
    let up = format!(
        "{command} -f {file_name} -f {override_name} up -d {}",
        services.join(" ")
    );
    let options = OverrideOptions {
        services: services.clone(),
        caps: choice.caps.clone(),
        privileged: settings.privileged,
        heap: settings.heap.then_some(settings.lg_prof_sample),
        node: settings.node,
        jvm: settings.jvm,
        images: settings.images.clone(),
        volume: VOLUME.to_string(),
        header: format!(
            "Written by `devprof compose` from {file_name}, which it never edits; regenerate rather than edit.\n\
             Profiling settings for: {}.\nUse both files: {up}",
            services.join(", ")
        ),
    };
    let (yaml, override_notes) = compose::make_override(&file, &options).map_err(compose_error)?;
    notes.extend(override_notes);
    std::fs::write(&settings.output, yaml)
        .map_err(|e| Error::io(format!("write {override_name}"), e))?;

    let mut given = vec![
        format!("cap_add {}", choice.caps.join(", ")),
        "security_opt seccomp=unconfined".into(),
    ];
    given.push(format!("tracefs at {}", compose::overlay::TRACEFS));
    given.push(format!(
        "volume {VOLUME} at {}",
        compose::overlay::PROFILING_DIR
    ));
    if settings.heap {
        given.push("jemalloc heap profiling (_RJEM_MALLOC_CONF and MALLOC_CONF)".into());
    }
    if settings.jvm {
        given.push("the JVM profile (-XX:+PreserveFramePointer in JAVA_TOOL_OPTIONS)".into());
    }
    if settings.privileged {
        given.push("privileged".into());
    }
    if !settings.images.is_empty() {
        given.push("the image(s) asked for".into());
    }
    crate::outln!(
        "wrote {override_name} ({file_name} is unchanged) for {}:\n  {}",
        services.join(", "),
        given.join("; ")
    );
    for reason in &choice.reasons {
        crate::outln!("note: {reason}");
    }
    for note in &notes {
        crate::outln!("note: {note}");
    }
    crate::outln!("start (or recreate) the services with both files (add the -p/--project-name you use):\n  {up}");
    Ok(())
}

/// Least privilege: PERFMON unless asked otherwise or the engine rejects it (a container
/// is created with it, never started, and removed).
async fn capabilities(
    settings: &ComposeSettings,
    docker: Option<&Docker>,
    services: &[String],
    file: &compose::ComposeFile,
    notes: &mut Vec<String>,
) -> Result<CapabilityChoice> {
    if settings.privileged {
        notes.push("privileged: the services get every capability and device; use it only when PERFMON/SYS_ADMIN and seccomp=unconfined are not enough".into());
    }
    let Some(docker) = docker else {
        notes.push(
            "the engine cannot be reached to check that it knows CAP_PERFMON; if `up` fails with \
             'unknown capability', run again with --sys-admin"
                .into(),
        );
        return Ok(compose::choose_capabilities(
            settings.sys_admin,
            &Ok(()),
            "",
            settings.kernel_symbols,
        ));
    };
    let kernel = docker.endpoint_version().kernel.clone();
    if settings.sys_admin {
        return Ok(compose::choose_capabilities(
            true,
            &Ok(()),
            &kernel,
            settings.kernel_symbols,
        ));
    }
    // Any image the engine has will do for the trial; the services' own first.
    let mut candidates: Vec<String> = services
        .iter()
        .filter_map(|s| file.services.iter().find(|f| f.name == *s))
        .filter_map(|s| s.image.clone())
        .collect();
    candidates.extend(docker.image_tags().await?);
    let mut trial_image = None;
    for image in candidates {
        if docker.image_details(&image).await?.is_some() {
            trial_image = Some(image);
            break;
        }
    }
    let perfmon = match trial_image {
        Some(image) => docker.trial_cap_add(&image, &["PERFMON"]).await?,
        None => {
            notes.push(
                "no image on the engine to check that it knows CAP_PERFMON with; if `up` fails with \
                 'unknown capability', run again with --sys-admin"
                    .into(),
            );
            Ok(())
        }
    };
    Ok(compose::choose_capabilities(
        false,
        &perfmon,
        &kernel,
        settings.kernel_symbols,
    ))
}

/// `docker-compose` where it is installed, else the compose plugin.
fn compose_command() -> &'static str {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("docker-compose").is_file()))
        .unwrap_or(false);
    if on_path {
        "docker-compose"
    } else {
        "docker compose"
    }
}
