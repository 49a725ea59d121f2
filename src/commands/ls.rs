//! `devprof ls`: the captures in the store, from their manifests: all of them, a target's,
//! one capture by its name, or a session's (the names of `store::names`).

use crate::cli::LsArgs;
use crate::error::Result;
use crate::settings::store::LsSettings;
use crate::store::catalog::{self, Capture};
use crate::store::lookup::{self, Found};
use crate::store::names::Reference;
use crate::store::session;
use crate::ui::table;
use crate::units::human_bytes;
use chrono::Local;
use std::path::PathBuf;

pub fn run(args: LsArgs, output_dir: PathBuf) -> Result<()> {
    let settings = LsSettings::from_args(args, output_dir)?;
    if settings.sessions {
        return list_sessions(&settings);
    }
    let captures = match settings.container.as_deref() {
        // A capture's name or a session's: that capture, the session's captures.
        Some(name) if !matches!(Reference::parse(name), Some(Reference::Target(_))) => {
            match lookup::find(&settings.output_dir, name)? {
                Found::Capture(capture) => vec![*capture],
                Found::Session { record, .. } => {
                    lookup::session_captures(&settings.output_dir, &record)
                }
                Found::Target { captures, .. } => captures,
            }
        }
        target => catalog::list(&settings.output_dir, target)?,
    };
    if settings.container.is_none() && !captures.is_empty() {
        // The store's index, from what was just read (a read-only store keeps its old one).
        let _ = crate::store::index::rebuild_from(&settings.output_dir, &captures);
    }
    if settings.json {
        let rows: Vec<serde_json::Value> = captures.iter().map(json_row).collect();
        crate::ui::output::print_json(&rows);
        return Ok(());
    }
    if captures.is_empty() {
        crate::outln!("no captures in {}", settings.output_dir.display());
        return Ok(());
    }
    crate::out!("{}", human_table(&captures));
    Ok(())
}

/// `ls --sessions`: one line per `devprof profile` run, from the session manifests.
fn list_sessions(settings: &LsSettings) -> Result<()> {
    let sessions = session::list(&settings.output_dir)?;
    if settings.json {
        let rows: Vec<serde_json::Value> = sessions
            .iter()
            .map(|(path, record)| serde_json::json!({"manifest": path, "session": record}))
            .collect();
        crate::ui::output::print_json(&rows);
        return Ok(());
    }
    if sessions.is_empty() {
        crate::outln!("no sessions in {}", settings.output_dir.display());
        return Ok(());
    }
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .map(|(path, r)| {
            let failed = r.captures.iter().filter(|c| c.error.is_some()).count();
            let mut containers: Vec<&str> =
                r.rows.iter().map(|row| row.container.as_str()).collect();
            containers.dedup();
            vec![
                r.started_at.clone(),
                r.targets.clone(),
                r.kinds.join(","),
                format!("{:.0} s", r.duration_requested_s),
                format!("{}", r.captures.len() - failed),
                failed.to_string(),
                containers.join(" "),
                path.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    crate::out!(
        "{}",
        table::render(
            &[
                "STARTED",
                "TARGETS",
                "KINDS",
                "WINDOW",
                "WRITTEN",
                "FAILED",
                "CONTAINERS",
                "SESSION"
            ],
            "LLLRRRLL",
            &rows,
            0
        )
    );
    Ok(())
}

pub fn human_table(captures: &[Capture]) -> String {
    let rows: Vec<Vec<String>> = captures
        .iter()
        .map(|c| {
            vec![
                c.created
                    .with_timezone(&Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string(),
                c.manifest.kind.clone(),
                c.container.clone(),
                format!("{:.1} s", c.manifest.duration_recorded_s),
                c.count_text(),
                c.manifest.files.len().to_string(),
                human_bytes(c.bytes_on_disk()),
                c.name(),
                part_of(c),
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "TIME",
            "KIND",
            "CONTAINER",
            "DURATION",
            "COUNT",
            "FILES",
            "SIZE",
            "CAPTURE",
            "PART OF",
        ],
        "LLLRRRRLL",
        &rows,
        0,
    );
    let total: u64 = captures.iter().map(Capture::bytes_on_disk).sum();
    out.push_str(&format!(
        "{} capture{}, {}\n",
        captures.len(),
        if captures.len() == 1 { "" } else { "s" },
        human_bytes(total)
    ));
    out
}

/// The session of `devprof profile` a capture belongs to and whether it is a capture set
/// (`--repeat K`: K windows), for the PART OF column; `-` for neither.
fn part_of(c: &Capture) -> String {
    let mut parts = Vec::new();
    if let Some(session) = session_of(c) {
        parts.push(session);
    }
    if !c.manifest.parts.is_empty() {
        parts.push(format!("set of {}", c.manifest.parts.len()));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// The session's name (its manifest's stem, as `view`, `export` and `top` take it).
fn session_of(c: &Capture) -> Option<String> {
    let file = c.manifest.session.as_deref()?;
    Some(file.strip_suffix(".json").unwrap_or(file).to_string())
}

fn json_row(c: &Capture) -> serde_json::Value {
    let files: Vec<serde_json::Value> = c
        .manifest
        .files
        .iter()
        .map(|f| {
            let bytes = catalog::listed_path(&c.dir, &f.name)
                .and_then(|p| std::fs::symlink_metadata(p).ok())
                .filter(|m| m.is_file())
                .map(|m| m.len());
            serde_json::json!({"name": f.name, "bytes": bytes})
        })
        .collect();
    serde_json::json!({
        "container": c.container,
        "capture": c.name(),
        "kind": c.manifest.kind,
        "created": c.manifest.created,
        "duration_s": c.manifest.duration_recorded_s,
        "count": c.manifest.sample_count,
        "events": c.manifest.events,
        "interrupted": c.manifest.interrupted,
        "manifest": c.manifest_path,
        "session": session_of(c),
        "set_windows": (!c.manifest.parts.is_empty()).then_some(c.manifest.parts.len()),
        "files": files,
        "bytes": c.bytes_on_disk(),
    })
}
