//! `devprof clean --older AGE`: retention. Removes the files the manifests of old captures
//! list, inside their directories, never through a link, each manifest last; the leftovers
//! of killed captures; and binaries of the heap symbol cache (`.symbols/`) that no kept
//! manifest uses, once they are older than AGE; and the session manifests
//! (`sessions/session-*.json`) older than AGE whose captures are all gone.

use crate::cli::CleanArgs;
use crate::error::Result;
use crate::settings::store::CleanSettings;
use crate::store::catalog::{self, Action};
use crate::store::session;
use crate::units::human_bytes;
use chrono::Local;
use std::path::PathBuf;

pub fn run(args: CleanArgs, output_dir: PathBuf) -> Result<()> {
    let settings = CleanSettings::from_args(args, output_dir)?;
    let captures = catalog::list(&settings.output_dir, settings.container.as_deref())?;
    let now = Local::now().fixed_offset();
    let expired = catalog::expired(&captures, now, settings.older, settings.keep_last);
    let spared_by_keep_last =
        catalog::expired(&captures, now, settings.older, 0).len() - expired.len();

    let verb = if settings.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut removed_files: Vec<serde_json::Value> = Vec::new();
    let mut kept: Vec<serde_json::Value> = Vec::new();
    let (mut freed, mut file_count) = (0u64, 0usize);
    let listed = catalog::still_listed(&captures, &expired);
    let cutoff = std::time::SystemTime::now()
        .checked_sub(settings.older)
        .unwrap_or(std::time::UNIX_EPOCH);
    let leftovers =
        catalog::leftovers(&settings.output_dir, settings.container.as_deref(), cutoff)?;
    let leftover_plans = leftovers.iter().map(|l| {
        l.files
            .iter()
            .map(|(path, bytes)| Action::Remove {
                path: path.clone(),
                bytes: *bytes,
            })
            .collect::<Vec<_>>()
    });
    // Binaries cached for heap symbols that no capture left after this clean uses.
    let orphaned = catalog::orphaned_symbol_cache(
        &settings.output_dir,
        settings.container.as_deref(),
        &captures,
        &expired,
        cutoff,
    )?;
    let cache_plan: Vec<Action> = orphaned
        .iter()
        .map(|(path, bytes)| Action::Remove {
            path: path.clone(),
            bytes: *bytes,
        })
        .collect();
    // Sessions span containers: a clean of one container's captures leaves them alone.
    let sessions = match settings.container {
        Some(_) => Vec::new(),
        None => session::list(&settings.output_dir)?,
    };
    let kept_manifests: std::collections::HashSet<PathBuf> = captures
        .iter()
        .enumerate()
        .filter(|(i, _)| !expired.contains(i))
        .filter_map(|(_, c)| c.manifest_path.strip_prefix(&settings.output_dir).ok())
        .map(PathBuf::from)
        .collect();
    let old_sessions: Vec<PathBuf> =
        session::expired(&sessions, now, settings.older, &kept_manifests)
            .into_iter()
            .map(|i| sessions[i].0.clone())
            .collect();
    let session_plan: Vec<Action> = old_sessions
        .iter()
        .map(|path| Action::Remove {
            path: path.clone(),
            bytes: std::fs::symlink_metadata(path)
                .map(|m| m.len())
                .unwrap_or(0),
        })
        .collect();
    let plans: Vec<Vec<Action>> = expired
        .iter()
        .map(|&i| catalog::spare_shared(catalog::removal_plan(&captures[i]), &listed))
        .chain(leftover_plans)
        .chain(std::iter::once(cache_plan))
        .chain(std::iter::once(session_plan))
        .collect();
    for plan in plans {
        for action in plan {
            match action {
                Action::Remove { path, bytes } => {
                    let done = settings.dry_run || catalog::remove_file(&path)?;
                    if !done {
                        continue;
                    }
                    freed += bytes;
                    file_count += 1;
                    if !settings.json {
                        crate::outln!("{verb} {} ({})", path.display(), human_bytes(bytes));
                    }
                    removed_files.push(serde_json::json!({"path": path, "bytes": bytes}));
                }
                Action::Keep { what, why } => {
                    if !settings.json {
                        crate::outln!("kept {what}: {why}");
                    }
                    kept.push(serde_json::json!({"path": what, "why": why}));
                }
            }
        }
    }
    if !settings.dry_run {
        let cached: Vec<PathBuf> = orphaned.iter().map(|(p, _)| p.clone()).collect();
        catalog::prune_empty_cache_dirs(&cached);
        // Derived from the manifests that remain: nothing is lost if it cannot be written.
        let _ = crate::store::index::rebuild(&settings.output_dir);
    }
    if settings.json {
        let summary = serde_json::json!({
            "dry_run": settings.dry_run,
            "older_than_s": settings.older.as_secs(),
            "keep_last": settings.keep_last,
            "captures": expired.iter().map(|&i| captures[i].manifest_path.clone()).collect::<Vec<_>>(),
            "leftovers": leftovers.iter().map(|l| l.reservation.clone()).collect::<Vec<_>>(),
            "symbol_cache": orphaned.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
            "sessions": old_sessions,
            "removed": removed_files,
            "kept": kept,
            "bytes_freed": freed,
            "spared_by_keep_last": spared_by_keep_last,
        });
        crate::ui::output::print_json(&summary);
        return Ok(());
    }
    let age = age_text(settings.older);
    if expired.is_empty() {
        crate::outln!(
            "nothing to remove: no capture in {} is older than {age}",
            settings.output_dir.display()
        );
    } else {
        crate::outln!(
            "{verb} {} capture{} ({file_count} files), {} {}",
            expired.len(),
            if expired.len() == 1 { "" } else { "s" },
            if settings.dry_run {
                "would free"
            } else {
                "freed"
            },
            human_bytes(freed)
        );
    }
    if !leftovers.is_empty() {
        crate::outln!(
            "{verb} the leftovers of {} interrupted capture{} (no manifest, older than {age})",
            leftovers.len(),
            if leftovers.len() == 1 { "" } else { "s" }
        );
    }
    if !orphaned.is_empty() {
        crate::outln!(
            "{verb} {} cached file{} of .symbols/ (binaries no kept capture uses, kernel symbols; older than {age})",
            orphaned.len(),
            if orphaned.len() == 1 { "" } else { "s" }
        );
    }
    if !old_sessions.is_empty() {
        crate::outln!(
            "{verb} {} session manifest{} (older than {age}, their captures gone)",
            old_sessions.len(),
            if old_sessions.len() == 1 { "" } else { "s" }
        );
    }
    if spared_by_keep_last > 0 {
        crate::outln!(
            "kept {spared_by_keep_last} capture{} older than {age} (--keep-last {})",
            if spared_by_keep_last == 1 { "" } else { "s" },
            settings.keep_last
        );
    }
    if settings.dry_run {
        crate::outln!("dry run: nothing was removed");
    }
    Ok(())
}

/// An age the way AGE is written: `7d`, `12h`, `1d12h`, `30m`, `45s`.
pub fn age_text(age: std::time::Duration) -> String {
    let mut secs = age.as_secs();
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// `devprof clean --containers`: removes profiler sidecars a killed devprof left behind
/// (they also remove themselves once their lifetime ends); the sidecars of captures that
/// are running now stay.
pub async fn remove_sidecars(dry_run: bool, json: bool) -> Result<()> {
    use crate::capture::sidecar::{devprof_alive, is_spare};
    let docker = crate::docker::Docker::connect().await?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let host = crate::docker::containers::host_name();
    let (leftovers, in_use): (Vec<_>, Vec<_>) = docker
        .containers_with_label(crate::docker::SIDECAR_LABEL)
        .await?
        .into_iter()
        .partition(|c| is_spare(&c.labels, c.is_running(), now, &host, devprof_alive));
    if !json {
        for c in &in_use {
            crate::outln!("kept sidecar {} (its capture is still running)", c.name);
        }
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    for container in &leftovers {
        if !dry_run {
            docker.remove_container(&container.id).await;
        }
        if !json {
            crate::outln!(
                "{verb} sidecar {} ({}, {})",
                container.name,
                container.short_id(),
                container.state
            );
        }
    }
    if json {
        let names: Vec<&str> = leftovers.iter().map(|c| c.name.as_str()).collect();
        crate::outln!(
            "{}",
            serde_json::json!({ "dry_run": dry_run, "containers": names })
        );
    } else if leftovers.is_empty() {
        crate::outln!("no devprof sidecar containers");
    } else {
        crate::outln!("{verb} {} sidecar container(s)", leftovers.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ages_read_as_they_are_written() {
        assert_eq!(age_text(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(age_text(Duration::from_secs(36 * 3_600)), "1d12h");
        assert_eq!(age_text(Duration::from_secs(30 * 60)), "30m");
        assert_eq!(age_text(Duration::from_secs(0)), "0s");
    }
}
