//! The captures in the store, as their manifests describe them: listing (`devprof ls`,
//! and for `store::lookup`, which finds what a name stands for), the files devprof writes
//! beside a capture later (`list_beside`), the retention plan (`clean --older`), and the
//! removal of the files a manifest says devprof wrote, never anything else.
//!
//! Only `*.json` files that are regular files and parse as a [`Manifest`] count; anything
//! else in the store is left alone. Symbolic links are never followed: a container
//! directory that is a link is skipped, and a listed file that is a link is kept.

use crate::error::{Error, Result};
use crate::store::names::{self, TargetName};
use crate::store::session::SESSIONS_DIR;
use crate::store::{FileRecord, Manifest};
use crate::units::{human_bytes, thousands};
use chrono::{DateTime, FixedOffset};
use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// One capture: a manifest that parsed, and where it lives.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The container directory's name under the output directory.
    pub container: String,
    pub dir: PathBuf,
    pub manifest_path: PathBuf,
    pub manifest: Manifest,
    pub created: DateTime<FixedOffset>,
}

impl Capture {
    /// The capture's name: the manifest's file stem, e.g. `perf-20261122-101500`.
    pub fn name(&self) -> String {
        self.manifest_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn manifest_file_name(&self) -> String {
        self.manifest_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// A listed file by extension (e.g. `folded`), resolved safely, if the manifest has one.
    pub fn file_with_extension(&self, extension: &str) -> Option<PathBuf> {
        self.manifest
            .files
            .iter()
            .filter(|f| {
                Path::new(&f.name)
                    .extension()
                    .is_some_and(|e| e == extension)
            })
            .find_map(|f| listed_path(&self.dir, &f.name))
    }

    /// The capture's own folded stacks, on disk: `<stem>.folded` when the manifest lists it
    /// (an off-CPU capture's event counts, not its `.offcpu.folded` time; a CPU capture's
    /// whole window, not its `.session.folded` cut nor a set's parts), else the first
    /// `.folded` it lists. None for a capture without stacks (stat).
    pub fn main_folded(&self) -> Option<PathBuf> {
        let own = format!("{}.folded", self.name());
        self.manifest
            .files
            .iter()
            .find(|f| f.name == own)
            .and_then(|f| listed_path(&self.dir, &f.name))
            .or_else(|| self.file_with_extension("folded"))
            .filter(|p| p.is_file())
    }

    /// `perf-20261207-051036 (3 min ago)`: its name and age, as commands say which
    /// capture they took.
    pub fn named_with_age(&self) -> String {
        format!("{} ({})", self.name(), ago(self.created))
    }

    /// What the capture's count counts, by kind: samples (cpu), events (offcpu), bytes
    /// (heap), runs of a command or counters over a window (stat).
    pub fn count_text(&self) -> String {
        let n = self.manifest.sample_count;
        match self.manifest.kind.as_str() {
            "heap" => human_bytes(n),
            "offcpu" => format!("{} events", thousands(n)),
            "stat" if n > 0 => format!("{} runs", thousands(n)),
            "stat" => format!("{} counters", self.manifest.events.len()),
            _ => format!("{} samples", thousands(n)),
        }
    }

    /// Bytes on disk of the files the manifest lists (regular files only; links count 0).
    pub fn bytes_on_disk(&self) -> u64 {
        self.manifest
            .files
            .iter()
            .filter_map(|f| listed_path(&self.dir, &f.name))
            .filter_map(|p| fs::symlink_metadata(p).ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    }
}

/// The path of a file a manifest lists, inside the manifest's directory: `None` for a
/// name that is not a plain file name (`a/b`, `..`, `/etc/passwd`, empty).
pub fn listed_path(dir: &Path, name: &str) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name.contains('\0') {
        return None;
    }
    let mut components = Path::new(name).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(n)), None) if n == name => Some(dir.join(name)),
        _ => None,
    }
}

fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// The container directories under `output_dir` (real directories, not links), sorted.
pub fn containers(output_dir: &Path) -> Result<Vec<String>> {
    let entries = match fs::read_dir(output_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("read {}", output_dir.display()), e)),
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

/// The captures of one container (`Some`) or of all (`None`), oldest first. A container
/// given by name must have a directory in the store.
pub fn list(output_dir: &Path, container: Option<&str>) -> Result<Vec<Capture>> {
    let names = match container {
        Some(target) => dirs_of(output_dir, target)?,
        None => containers(output_dir)?,
    };
    list_dirs(output_dir, names)
}

/// The container directories a TARGET names (see [`names`]): its own directory when there
/// is one, else those the manifests give to the id prefix or compose service. None is an
/// error naming the containers that have captures.
pub fn dirs_of(output_dir: &Path, target: &str) -> Result<Vec<String>> {
    let name = TargetName::parse(target).ok_or_else(|| no_captures(output_dir, target))?;
    if let TargetName::Plain(plain) = &name {
        // `sessions/` holds session manifests, not a container's captures.
        if plain != SESSIONS_DIR && is_real_dir(&output_dir.join(plain)) {
            return Ok(vec![plain.clone()]);
        }
    }
    let everything = list_dirs(output_dir, containers(output_dir)?)?;
    let recorded: Vec<(&str, &crate::store::ContainerRecord)> = everything
        .iter()
        .map(|c| (c.container.as_str(), &c.manifest.container))
        .collect();
    let dirs = names::resolve(&name, &recorded)?;
    if dirs.is_empty() {
        return Err(no_captures(output_dir, target));
    }
    Ok(dirs)
}

pub(super) fn list_dirs(output_dir: &Path, names: Vec<String>) -> Result<Vec<Capture>> {
    let mut captures = Vec::new();
    for name in names {
        let dir = output_dir.join(&name);
        let entries =
            fs::read_dir(&dir).map_err(|e| Error::io(format!("read {}", dir.display()), e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json")
                || !entry.file_type().is_ok_and(|t| t.is_file())
            {
                continue;
            }
            captures.extend(read_capture(&name, &dir, path));
        }
    }
    captures.sort_by(|a, b| {
        a.created
            .cmp(&b.created)
            .then_with(|| a.container.cmp(&b.container))
            .then_with(|| a.manifest_path.cmp(&b.manifest_path))
    });
    Ok(captures)
}

/// The capture whose manifest is `path` in the container directory `name`, when it is a
/// devprof manifest (not another JSON file, nor a capture still being written).
pub(super) fn read_capture(name: &str, dir: &Path, path: PathBuf) -> Option<Capture> {
    let manifest = fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<Manifest>(&text).ok())?;
    let created = DateTime::parse_from_rfc3339(&manifest.created).ok()?;
    Some(Capture {
        container: name.to_string(),
        dir: dir.to_path_buf(),
        manifest_path: path,
        manifest,
        created,
    })
}

/// Lists `path`, a file devprof has just written beside a capture (an export, a
/// differential flamegraph), among the capture's files: `clean` then removes it with the
/// capture, and the viewer offers it. The manifest is read again and replaced whole; a
/// file elsewhere is left out.
pub fn list_beside(capture: &Capture, path: &Path) -> Result<()> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(());
    };
    if path.parent() != Some(capture.dir.as_path()) || listed_path(&capture.dir, name).is_none() {
        return Ok(());
    }
    let manifest_path = &capture.manifest_path;
    let failed =
        |what: &str, e: std::io::Error| Error::io(format!("{what} {}", manifest_path.display()), e);
    let text = fs::read_to_string(manifest_path).map_err(|e| failed("read", e))?;
    let mut manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| failed("read", std::io::Error::other(e)))?;
    let bytes = crate::store::file_size(path);
    match manifest.files.iter_mut().find(|f| f.name == name) {
        Some(record) if record.bytes == bytes => return Ok(()),
        Some(record) => record.bytes = bytes,
        None => manifest.files.push(FileRecord {
            name: name.to_string(),
            bytes,
        }),
    }
    let mut text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| failed("write", std::io::Error::other(e)))?;
    text.push('\n');
    // A temporary file of this process's own, renamed over the manifest: two commands
    // listing files at once leave a whole manifest (the last one's), never a torn one.
    let tmp = capture.dir.join(format!(
        ".{}.json.{}.tmp",
        capture.name(),
        std::process::id()
    ));
    let written = fs::write(&tmp, text).and_then(|()| fs::rename(&tmp, manifest_path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(failed("write", e));
    }
    Ok(())
}

/// How long ago `then` was, in the coarsest unit that says it: `12 s`, `3 min`, `5 h`,
/// `2 days ago`.
pub fn ago(then: DateTime<FixedOffset>) -> String {
    let secs = (chrono::Local::now().fixed_offset() - then).num_seconds();
    match secs {
        i64::MIN..=0 => "just now".into(),
        1..=59 => format!("{secs} s ago"),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=172_799 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}

/// The error for a reference the store does not know, naming the containers that have
/// captures (directories holding at least one manifest; not `sessions/`).
pub fn no_captures(output_dir: &Path, container: &str) -> Error {
    let available = containers(output_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d != SESSIONS_DIR)
        .filter(|d| list_dirs(output_dir, vec![d.clone()]).is_ok_and(|c| !c.is_empty()))
        .collect();
    Error::NoCaptures {
        container: container.to_string(),
        output_dir: output_dir.display().to_string(),
        available,
    }
}

/// Which captures `clean --older AGE --keep-last N` removes (indices into `captures`):
/// those created more than `older` before `now`, except the newest `keep_last` of each
/// container and kind, which stay whatever their age.
pub fn expired(
    captures: &[Capture],
    now: DateTime<FixedOffset>,
    older: Duration,
    keep_last: usize,
) -> Vec<usize> {
    let cutoff = chrono::Duration::from_std(older)
        .ok()
        .and_then(|age| now.checked_sub_signed(age));
    let Some(cutoff) = cutoff else {
        return Vec::new(); // an age reaching before the calendar: nothing is that old
    };
    let mut groups: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (i, c) in captures.iter().enumerate() {
        groups
            .entry((c.container.as_str(), c.manifest.kind.as_str()))
            .or_default()
            .push(i);
    }
    let mut out = Vec::new();
    for indices in groups.values_mut() {
        indices.sort_by(|&a, &b| captures[b].created.cmp(&captures[a].created));
        out.extend(
            indices
                .iter()
                .skip(keep_last)
                .filter(|&&i| captures[i].created < cutoff),
        );
    }
    out.sort_unstable();
    out
}

/// What removing a capture does to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A regular file devprof wrote: removed (or, in a dry run, would be).
    Remove { path: PathBuf, bytes: u64 },
    /// Listed but left alone (`what` is the listed name or its path), with the reason.
    Keep { what: String, why: String },
}

/// The plan for removing one capture: its listed files, then its manifest last. Only
/// regular files inside the capture's directory are removed; listed names that are not
/// plain file names, links and directories are kept; files already gone are omitted.
pub fn removal_plan(capture: &Capture) -> Vec<Action> {
    let own = capture.manifest_file_name();
    let mut actions = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let listed = capture
        .manifest
        .files
        .iter()
        .map(|FileRecord { name, .. }| name.as_str())
        .filter(|name| *name != own);
    for name in listed {
        if !seen.insert(name) {
            continue;
        }
        let Some(path) = listed_path(&capture.dir, name) else {
            actions.push(Action::Keep {
                what: format!("'{name}' (listed in {})", capture.manifest_path.display()),
                why: "not a plain file name inside the capture's directory".into(),
            });
            continue;
        };
        match fs::symlink_metadata(&path) {
            Err(_) => {} // already gone
            Ok(m) if m.file_type().is_symlink() => actions.push(Action::Keep {
                what: path.display().to_string(),
                why: "a symbolic link, not a file devprof wrote".into(),
            }),
            Ok(m) if !m.is_file() => actions.push(Action::Keep {
                what: path.display().to_string(),
                why: "not a regular file".into(),
            }),
            Ok(m) => actions.push(Action::Remove {
                path,
                bytes: m.len(),
            }),
        }
    }
    if let Ok(m) = fs::symlink_metadata(&capture.manifest_path) {
        if m.is_file() {
            actions.push(Action::Remove {
                path: capture.manifest_path.clone(),
                bytes: m.len(),
            });
        }
    }
    actions
}

/// Files that captures which stay still list, each with the manifest that lists it: a file
/// two captures share (heap captures reuse jemalloc's dumps by name) must outlive the
/// older one.
pub fn still_listed(
    captures: &[Capture],
    removed: &[usize],
) -> std::collections::HashMap<PathBuf, PathBuf> {
    let mut out = std::collections::HashMap::new();
    for (i, c) in captures.iter().enumerate() {
        if removed.contains(&i) {
            continue;
        }
        for f in &c.manifest.files {
            if let Some(path) = listed_path(&c.dir, &f.name) {
                out.entry(path).or_insert_with(|| c.manifest_path.clone());
            }
        }
    }
    out
}

/// `plan` with every removal of a file another kept manifest lists turned into a keep.
pub fn spare_shared(
    plan: Vec<Action>,
    listed: &std::collections::HashMap<PathBuf, PathBuf>,
) -> Vec<Action> {
    plan.into_iter()
        .map(|action| match action {
            Action::Remove { path, .. } if listed.contains_key(&path) => Action::Keep {
                why: format!("still listed by {}", listed[&path].display()),
                what: path.display().to_string(),
            },
            other => other,
        })
        .collect()
}

/// What a capture that was killed before writing its manifest left: its reservation (the
/// empty `<stem>.json` devprof creates first) and the artifacts next to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub reservation: PathBuf,
    /// Regular files with the stem and an artifact extension, with their sizes; the
    /// reservation last.
    pub files: Vec<(PathBuf, u64)>,
}

/// The leftovers of killed captures in the store (one container or all) whose files are
/// all older than `cutoff` (a capture running now has a fresh reservation).
pub fn leftovers(
    output_dir: &Path,
    container: Option<&str>,
    cutoff: std::time::SystemTime,
) -> Result<Vec<Leftover>> {
    let names = match container {
        Some(target) => dirs_of(output_dir, target)?,
        None => containers(output_dir)?,
    };
    let regular = |p: &Path| fs::symlink_metadata(p).ok().filter(|m| m.is_file());
    let old = |m: &fs::Metadata| m.modified().is_ok_and(|t| t < cutoff);
    let mut out = Vec::new();
    for name in names {
        let dir = output_dir.join(&name);
        if !is_real_dir(&dir) {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut stems: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter_map(|n| n.strip_suffix(".json").map(str::to_string))
            .filter(|stem| names::is_stem(stem))
            .collect();
        stems.sort();
        for stem in stems {
            let reservation = dir.join(format!("{stem}.json"));
            let Some(meta) = regular(&reservation) else {
                continue;
            };
            if meta.len() != 0 || !old(&meta) {
                continue;
            }
            let mut files = Vec::new();
            let mut fresh = false;
            for ext in crate::store::ARTIFACT_EXTENSIONS {
                let path = dir.join(format!("{stem}.{ext}"));
                if let Some(m) = regular(&path) {
                    fresh |= !old(&m);
                    files.push((path, m.len()));
                }
            }
            if fresh {
                continue;
            }
            files.push((reservation.clone(), 0));
            out.push(Leftover { reservation, files });
        }
    }
    Ok(out)
}

/// Binaries cached for heap symbols (`<container>/.symbols/<key>/<file>`) that no kept
/// capture uses any more: not named by the `cached` path of a module in any manifest that
/// stays (`captures` minus `removed`), and older than `cutoff` (a heap capture running
/// now may have fetched one and not yet written the manifest that names it). Only
/// regular files two levels down are taken; links are never followed.
pub fn orphaned_symbol_cache(
    output_dir: &Path,
    container: Option<&str>,
    captures: &[Capture],
    removed: &[usize],
    cutoff: std::time::SystemTime,
) -> Result<Vec<(PathBuf, u64)>> {
    let names = match container {
        Some(target) => dirs_of(output_dir, target)?,
        None => containers(output_dir)?,
    };
    let mut used = std::collections::HashSet::new();
    for (i, c) in captures.iter().enumerate() {
        if removed.contains(&i) {
            continue;
        }
        let modules = c.manifest.heap.iter().flat_map(|h| h.modules.iter());
        for cached in modules.filter_map(|m| m.cached.as_deref()) {
            used.insert(c.dir.join(cached));
        }
    }
    let mut out = Vec::new();
    for name in names {
        let cache = output_dir.join(&name).join(SYMBOL_CACHE_DIR);
        if !is_real_dir(&cache) {
            continue;
        }
        let Ok(keys) = fs::read_dir(&cache) else {
            continue;
        };
        let mut keys: Vec<PathBuf> = keys.flatten().map(|e| e.path()).collect();
        keys.sort();
        for key in keys.into_iter().filter(|k| is_real_dir(k)) {
            let Ok(files) = fs::read_dir(&key) else {
                continue;
            };
            let mut files: Vec<PathBuf> = files.flatten().map(|e| e.path()).collect();
            files.sort();
            for path in files {
                let Ok(m) = fs::symlink_metadata(&path) else {
                    continue;
                };
                let old = m.modified().is_ok_and(|t| t < cutoff);
                if m.is_file() && old && !used.contains(&path) {
                    out.push((path, m.len()));
                }
            }
        }
    }
    Ok(out)
}

/// The directory of the symbol cache (binaries fetched for heap and native CPU folds)
/// inside a container's store directory.
pub const SYMBOL_CACHE_DIR: &str = crate::symbols::binary::SYMBOL_CACHE;

/// Removes the directories of the symbol cache that removals left empty (never through a
/// link; a directory with anything left in it stays).
pub fn prune_empty_cache_dirs(removed: &[PathBuf]) {
    let mut dirs: Vec<&Path> = removed.iter().filter_map(|p| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for dir in dirs {
        if is_real_dir(dir) {
            let _ = fs::remove_dir(dir);
        }
        if let Some(cache) = dir.parent().filter(|c| c.ends_with(SYMBOL_CACHE_DIR)) {
            if is_real_dir(cache) {
                let _ = fs::remove_dir(cache);
            }
        }
    }
}

/// Removes one planned file if it is still a regular file (checked again right before,
/// so a file swapped for a link in the meantime is not followed). `Ok(false)` when it was
/// gone or no longer a regular file.
pub fn remove_file(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(format!("inspect {}", path.display()), e)),
    }
    fs::remove_file(path).map_err(|e| Error::io(format!("remove {}", path.display()), e))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn capture(container: &str, kind: &str, created: DateTime<FixedOffset>) -> Capture {
        Capture {
            container: container.into(),
            dir: PathBuf::from("profiling").join(container),
            manifest_path: PathBuf::from("x.json"),
            manifest: Manifest {
                kind: kind.into(),
                created: created.to_rfc3339(),
                ..Default::default()
            },
            created,
        }
    }

    #[test]
    fn expired_respects_age_and_keeps_the_newest_per_container_and_kind() {
        let tz = FixedOffset::east_opt(3600).unwrap();
        let now = tz.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap();
        let days = |d: i64| now - chrono::Duration::days(d);
        let caps = vec![
            capture("seq", "cpu", days(1)),
            capture("seq", "cpu", days(10)),
            capture("seq", "cpu", days(30)),
            capture("rpc", "cpu", days(20)),
            capture("seq", "heap", days(40)),
        ];
        let week = Duration::from_secs(7 * 86_400);
        assert_eq!(expired(&caps, now, week, 0), vec![1, 2, 3, 4]);
        // keep-last 1: the newest of each (container, kind) stays, however old.
        assert_eq!(expired(&caps, now, week, 1), vec![1, 2]);
        assert_eq!(expired(&caps, now, week, 2), vec![2]);
        // Exactly at the cutoff is not older than it.
        let at = vec![capture("seq", "cpu", days(7))];
        assert!(expired(&at, now, week, 0).is_empty());
        assert!(expired(&caps, now, Duration::from_secs(u64::MAX), 0).is_empty());
    }

    #[test]
    fn a_file_a_kept_manifest_lists_is_spared() {
        let dump = PathBuf::from("profiling/demo-seq/jeprof.demo-seq.7.0.u0.heap");
        let plan = vec![
            Action::Remove {
                path: dump.clone(),
                bytes: 10,
            },
            Action::Remove {
                path: PathBuf::from("profiling/demo-seq/heap-1.svg"),
                bytes: 5,
            },
        ];
        let listed = std::collections::HashMap::from([(
            dump.clone(),
            PathBuf::from("profiling/demo-seq/heap-2.json"),
        )]);
        let out = spare_shared(plan, &listed);
        assert!(matches!(&out[0], Action::Keep { why, .. } if why.contains("heap-2.json")));
        assert!(matches!(&out[1], Action::Remove { .. }));
    }

    #[test]
    fn stems_are_recognized_by_their_shape() {
        for good in ["perf-20261122-101500", "heap-20261122-101500-2"] {
            assert!(names::is_stem(good), "{good}");
        }
        for bad in [
            "perf",
            "notes-1",
            "perf-2026-101500",
            "Perf-20261122-101500",
            "x-20261122-101500-",
        ] {
            assert!(!names::is_stem(bad), "{bad}");
        }
    }

    #[test]
    fn listed_names_must_be_plain_file_names() {
        let dir = Path::new("profiling/demo-seq");
        assert_eq!(
            listed_path(dir, "perf-1.data"),
            Some(dir.join("perf-1.data"))
        );
        for bad in ["", ".", "..", "../x", "a/b", "/etc/passwd", "a\\b", "./x"] {
            assert_eq!(listed_path(dir, bad), None, "{bad:?}");
        }
    }

    #[test]
    fn container_names_are_docker_names() {
        use crate::store::valid_container_name;
        assert!(valid_container_name("demo-seq"));
        assert!(valid_container_name("op_reth.1"));
        for bad in ["", "..", ".x", "a/b", "-x", "a b"] {
            assert!(!valid_container_name(bad), "{bad:?}");
        }
    }
}
