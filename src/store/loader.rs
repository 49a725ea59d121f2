//! Reading a profile from disk for `render`, `top`, `diff` and `export`. Folded stacks are
//! read as they are, `perf script` text folded on the way in, perf.data through this host's
//! perf (streamed into the folder); a name in the store stands for a capture (`resolve`:
//! the grammar of `store::names`, looked up by `lookup::find` and `lookup::pick`).

use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::perfscript::fold_perf_script;
use crate::profile::perfscript::{fold, FoldOptions, SampleSink};
use crate::store::catalog::Capture;
use crate::store::lookup;
use crate::store::names::Reference;
use crate::store::units;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which profile a command reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileRef {
    /// A file: .folded text, `perf script` text (.script), or perf.data (.data); or a file
    /// of a capture (its .timeline or .json manifest).
    File(PathBuf),
    /// A name in the store (`store::names::Reference`): a target (its newest capture of the
    /// kind asked for), a capture's stem, a session.
    Newest(String),
}

/// The extensions of the files a profile is read from.
const PROFILE_EXTENSIONS: [&str; 6] = ["folded", "data", "script", "txt", "timeline", "json"];

impl ProfileRef {
    /// A path that exists is a file; so is a text that looks like one (a file extension
    /// devprof reads, or more than the one `/` of `PROJECT/SERVICE` or `CONTAINER/STEM`)
    /// unless it is a capture's stem or a session's name; anything else must be a name in the
    /// store (see `store::names`).
    pub fn parse(text: &str, what: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Err(Error::Usage(format!("{what} is empty")));
        }
        let path = Path::new(text);
        if path.is_file() || (text.contains('/') && path.exists()) {
            return Ok(ProfileRef::File(path.to_path_buf()));
        }
        let reference = Reference::parse(text);
        let named = matches!(
            reference,
            Some(Reference::Session(_) | Reference::Capture { .. })
        );
        let looks_like_file = (text.contains('/') && reference.is_none())
            || path
                .extension()
                .is_some_and(|e| PROFILE_EXTENSIONS.iter().any(|x| e == *x));
        if looks_like_file && !named {
            return Ok(ProfileRef::File(path.to_path_buf()));
        }
        if reference.is_none() {
            return Err(Error::Usage(format!(
                "{what} '{text}' is neither a file nor a name in the store (a container, an id prefix, SERVICE, \
                 PROJECT/SERVICE, a capture such as perf-20261207-051036 or CONTAINER/perf-20261207-051036, \
                 a session)"
            )));
        }
        Ok(ProfileRef::Newest(text.to_string()))
    }
}

/// Above this share of unsymbolized frames, a perf.data read on the host probably lacked
/// the container's binaries.
const UNSYMBOLIZED_WARNING: f64 = 0.5;

/// The fields `devprof cpu` asks of `perf script`, so host and container folds agree.
pub const PERF_SCRIPT_FIELDS: &str = "comm,pid,tid,time,event,ip,sym,dso";

/// The file a reference stands for, and the capture it is part of.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The folded stacks (or another profile file, when a file was given).
    pub path: PathBuf,
    /// The capture, when its manifest was found.
    pub capture: Option<Capture>,
    /// How the capture was taken from a target or a session (see `lookup::Picked`); None
    /// when the reference named it.
    pub picked: Option<String>,
}

/// What `profile` stands for, for a command that reads stacks: a file as it is (a
/// capture's .timeline or .json manifest: its folded stacks); a name in the store, the
/// capture `lookup::pick` takes (of `kind` when given) and its folded stacks. A capture
/// of another kind than `kind` is an error, and so is one without stacks.
pub fn resolve(profile: &ProfileRef, output_dir: &Path, kind: Option<&str>) -> Result<Resolved> {
    let (path, capture, picked) = match profile {
        ProfileRef::File(path) => {
            let found = capture_of_file(path);
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if let (Some(k), Some(c)) = (kind, &found) {
                if c.manifest.kind != k {
                    return Err(Error::Usage(format!(
                        "{} is a file of {}, a {} capture, not {k} (--kind {k})",
                        path.display(),
                        c.name(),
                        c.manifest.kind
                    )));
                }
            }
            if matches!(extension, "timeline" | "json") {
                let c = found.ok_or_else(|| {
                    Error::Usage(format!(
                        "{} is not part of a capture devprof wrote (no manifest beside it); pass a .folded file",
                        path.display()
                    ))
                })?;
                let folded = stacks_of(&c)?;
                (folded, Some(c), None)
            } else {
                (path.clone(), found, None)
            }
        }
        ProfileRef::Newest(text) => {
            let picked = lookup::pick(lookup::find(output_dir, text)?, text, kind)?;
            let folded = stacks_of(&picked.capture)?;
            (folded, Some(picked.capture), picked.how)
        }
    };
    Ok(Resolved {
        path,
        capture,
        picked,
    })
}

/// A capture's own folded stacks, or the error for a capture without any.
fn stacks_of(capture: &Capture) -> Result<PathBuf> {
    capture.main_folded().ok_or_else(|| {
        let stat = capture.manifest.kind == "stat";
        Error::Usage(format!(
            "{} {}; {}",
            capture.manifest_path.display(),
            if stat {
                "is a stat capture (counters, no stacks)"
            } else {
                "lists no .folded file that is there"
            },
            if stat {
                "`devprof diff` compares two stat captures"
            } else {
                "record it again"
            }
        ))
    })
}

/// A profile read, with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    /// The capture it belongs to, when it was found through the store.
    pub capture: Option<Capture>,
    /// Its stacks, each rooted at its thread (or process) name: an off-CPU capture's event
    /// counts have the event above it, taken off here ([`thread_rooted`]).
    pub folded: Folded,
    /// What one count is (one of `store::units`).
    pub unit: &'static str,
    /// How the capture was taken from a target or a session, for the line the command
    /// prints (`lookup::Picked::how`).
    pub picked: Option<String>,
}

impl Loaded {
    /// What its counts measure, in words (`CPU samples`, `off-CPU events`, ...).
    pub fn measure(&self) -> &'static str {
        measure_words(self.unit)
    }

    /// The capture's name, else the file's.
    pub fn name(&self) -> String {
        match &self.capture {
            Some(c) => c.name(),
            None => self
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }
}

/// A unit of `store::units` as the measure it is.
pub fn measure_words(unit: &str) -> &'static str {
    match unit {
        units::EVENTS => "off-CPU events",
        units::OFF_CPU_US => "off-CPU time (us)",
        units::BYTES => "heap bytes",
        _ => "CPU samples",
    }
}

/// Why two profiles do not compare: they measure different things (CPU samples against
/// off-CPU events or time, heap bytes, ...); None when they measure the same. `diff`
/// refuses such a pair unless told (`--mixed`); the viewer's diff says it too.
pub fn mixed_measures(before: &Loaded, after: &Loaded) -> Option<String> {
    (before.unit != after.unit).then(|| {
        format!(
            "BEFORE ({}) counts {} and AFTER ({}) counts {}",
            before.name(),
            before.measure(),
            after.name(),
            after.measure()
        )
    })
}

/// Resolves a profile reference (a name in the store: the capture `resolve` takes, by
/// default of kind cpu) and reads it.
pub fn load(profile: &ProfileRef, output_dir: &Path) -> Result<Loaded> {
    load_kind(profile, output_dir, None)
}

/// [`load`] of a capture of `kind` when the reference leaves the choice to the store.
pub fn load_kind(profile: &ProfileRef, output_dir: &Path, kind: Option<&str>) -> Result<Loaded> {
    let resolved = resolve(profile, output_dir, kind)?;
    let path = resolved.path;
    let capture = resolved.capture;
    let unit = unit_of(&path, capture.as_ref());
    let folded = thread_rooted(read(&path)?, capture.as_ref(), unit);
    Ok(Loaded {
        path,
        capture,
        folded,
        unit,
        picked: resolved.picked,
    })
}

/// Stacks rooted at their thread (or process) name, as every capture but one writes them:
/// an off-CPU capture's event counts are folded `EVENT;THREAD;frames`
/// (`profile::offcpu::summary`), the event a root above the thread. Rankings and
/// comparisons take the root as the thread and leave it out, so the event is taken off
/// here (stacks that become the same are merged); anything else is returned as it is.
pub fn thread_rooted(folded: Folded, capture: Option<&Capture>, unit: &str) -> Folded {
    let Some(capture) = capture.filter(|c| c.manifest.kind == "offcpu") else {
        return folded;
    };
    if unit != units::EVENTS {
        return folded;
    }
    let events = &capture.manifest.events;
    let rooted_at_an_event = |stack: &str| {
        let root = stack.split(';').next().unwrap_or("");
        stack.contains(';') && (events.iter().any(|e| e == root) || root.contains(':'))
    };
    if !folded.stacks.iter().all(|(s, _)| rooted_at_an_event(s)) {
        return folded;
    }
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (stack, count) in folded.stacks {
        let below = stack
            .split_once(';')
            .map_or("", |(_, rest)| rest)
            .to_string();
        let total = merged.entry(below).or_default();
        *total = total.saturating_add(count);
    }
    Folded::from_pairs(merged.into_iter())
}

/// A profile as windows: a capture set's parts (each with its length), or one window.
#[derive(Debug, Clone)]
pub struct LoadedSet {
    /// The whole profile (a set's uncut window).
    pub whole: Loaded,
    /// Each window's folded stacks and length in seconds (None for a bare .folded file).
    pub windows: Vec<(Folded, Option<f64>)>,
    /// Whether it is a capture set (`--repeat K`) rather than one window.
    pub is_set: bool,
}

/// Reads a profile as windows: a name in the store, a set's manifest or its whole .folded
/// file give the set's parts; any other file is one window, with its capture's length when
/// a manifest lies beside it.
pub fn load_set(profile: &ProfileRef, output_dir: &Path) -> Result<LoadedSet> {
    load_set_kind(profile, output_dir, None)
}

/// [`load_set`] of a capture of `kind` when the reference leaves the choice to the store
/// (as for [`resolve`]).
pub fn load_set_kind(
    profile: &ProfileRef,
    output_dir: &Path,
    kind: Option<&str>,
) -> Result<LoadedSet> {
    let resolved = resolve(profile, output_dir, kind)?;
    let path = resolved.path.clone();
    let capture = resolved.capture.clone();
    let whole = load(&ProfileRef::File(path.clone()), output_dir)?;
    let whole = Loaded {
        capture: capture.clone().or(whole.capture),
        picked: resolved.picked,
        ..whole
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let set = capture.filter(|c| {
        !c.manifest.parts.is_empty()
            && c.main_folded()
                .is_some_and(|f| f.file_name().and_then(|n| n.to_str()) == Some(name))
    });
    let Some(set) = set else {
        // A part's own length, else the capture's window.
        let seconds = capture_of_file(&path)
            .map(|c| {
                c.manifest
                    .parts
                    .iter()
                    .find(|p| p.folded == name)
                    .map_or(c.manifest.duration_recorded_s, |p| p.duration_s)
            })
            .filter(|s| *s > 0.0);
        return Ok(LoadedSet {
            windows: vec![(whole.folded.clone(), seconds)],
            whole,
            is_set: false,
        });
    };
    let mut windows = Vec::new();
    for part in &set.manifest.parts {
        if part.folded.contains('/') || part.folded.starts_with('.') {
            return Err(Error::Usage(format!(
                "{} names a part file outside its directory: {}",
                set.manifest_path.display(),
                part.folded
            )));
        }
        windows.push((read(&set.dir.join(&part.folded))?, Some(part.duration_s)));
    }
    Ok(LoadedSet {
        whole,
        windows,
        is_set: true,
    })
}

/// What one count of the profile at `path` is: what its capture's manifest says of the
/// file, by the capture's kind for manifests older than that, samples without a capture.
pub fn unit_of(path: &Path, capture: Option<&Capture>) -> &'static str {
    let Some(capture) = capture else {
        return units::SAMPLES;
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let known = [
        units::SAMPLES,
        units::EVENTS,
        units::OFF_CPU_US,
        units::BYTES,
    ];
    let listed = capture
        .manifest
        .graphs
        .iter()
        .filter(|g| g.folded == name)
        .find_map(|g| known.into_iter().find(|u| *u == g.unit));
    listed.unwrap_or(match capture.manifest.kind.as_str() {
        "heap" => units::BYTES,
        "offcpu" if name.ends_with(".offcpu.folded") => units::OFF_CPU_US,
        "offcpu" => units::EVENTS,
        _ => units::SAMPLES,
    })
}

/// The kind of the capture a reference names outright (a file of a capture, a capture's
/// stem), None for a target, a session, or a file outside the store.
pub fn named_kind(profile: &ProfileRef, output_dir: &Path) -> Option<String> {
    match profile {
        ProfileRef::File(path) => capture_of_file(path).map(|c| c.manifest.kind),
        ProfileRef::Newest(text) => match Reference::parse(text)? {
            Reference::Capture { .. } => match lookup::find(output_dir, text).ok()? {
                lookup::Found::Capture(c) => Some(c.manifest.kind),
                _ => None,
            },
            _ => None,
        },
    }
}

/// The capture of a name in the store when it is a stat capture: the capture named, or a
/// target's (a session's) newest stat capture with `kind` stat; None otherwise.
pub fn stat_capture(
    profile: &ProfileRef,
    output_dir: &Path,
    kind: Option<&str>,
) -> Option<Capture> {
    match profile {
        ProfileRef::File(path) => capture_of_file(path).filter(|c| c.manifest.kind == "stat"),
        ProfileRef::Newest(text) => {
            let found = lookup::find(output_dir, text).ok()?;
            if let lookup::Found::Capture(c) = &found {
                return (c.manifest.kind == "stat").then(|| (**c).clone());
            }
            if kind != Some("stat") {
                return None;
            }
            lookup::pick(found, text, kind).ok().map(|p| p.capture)
        }
    }
}

/// The capture a file belongs to: the manifest `<stem>.json` beside it (the stem is the
/// file name up to its first dot), when it parses.
pub fn capture_of_file(path: &Path) -> Option<Capture> {
    let name = path.file_name()?.to_str()?;
    let stem = name.split('.').next().filter(|s| !s.is_empty())?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let manifest_path = dir.join(format!("{stem}.json"));
    let text = std::fs::read_to_string(&manifest_path).ok()?;
    let manifest: crate::store::Manifest = serde_json::from_str(&text).ok()?;
    let created = chrono::DateTime::parse_from_rfc3339(&manifest.created).ok()?;
    let container = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(Capture {
        container,
        dir: dir.to_path_buf(),
        manifest_path,
        manifest,
        created,
    })
}

/// Reads one profile file by its extension: `.data` through perf on this host,
/// `.script`/`.txt` as `perf script` text, anything else as folded stacks.
pub fn read(path: &Path) -> Result<Folded> {
    if path.is_dir() {
        return Err(Error::Usage(format!(
            "{} is a directory: pass a .folded file, or the container's name for its newest capture",
            path.display()
        )));
    }
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let folded = match extension {
        "data" => read_perf_data(path)?,
        "script" | "txt" => {
            let file = open(path)?;
            fold_perf_script(BufReader::with_capacity(1 << 20, file))
                .map_err(|e| Error::io(format!("fold {}", path.display()), e))?
        }
        _ => {
            let mut text = String::new();
            open(path)?
                .read_to_string(&mut text)
                .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
            Folded::from_folded_text(&text)
        }
    };
    if folded.total() == 0 {
        return Err(Error::EmptyProfile {
            path: path.display().to_string(),
            reason: None,
            hint: "expected folded stacks (`frame;frame;frame COUNT` lines, as devprof cpu \
                   writes to .folded), perf script text (.script) or perf.data (.data)"
                .into(),
        });
    }
    Ok(folded)
}

fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| Error::io(format!("open {}", path.display()), e))
}

fn read_perf_data(path: &Path) -> Result<Folded> {
    fold_with_host_perf(path, None, None)
}

/// The `perf script` command line the folds on this host run (for messages).
pub fn perf_script_command(path: &Path, symfs: Option<&Path>) -> String {
    let mut words = vec![
        "perf script -i".to_string(),
        crate::text::quote(&path.to_string_lossy()),
        format!("-F {PERF_SCRIPT_FIELDS} --no-inline"),
    ];
    if let Some(dir) = symfs {
        words.push(format!(
            "--symfs {}",
            crate::text::quote(&dir.to_string_lossy())
        ));
    }
    words.join(" ")
}

/// `perf script` on this host, its output folded (in samples) as it streams in. `symfs`:
/// where the recorded files are (perf's `--symfs`; None: where they were recorded); `sink`
/// receives every sample in order (a timeline).
pub fn fold_with_host_perf(
    path: &Path,
    symfs: Option<&Path>,
    sink: Option<&mut dyn SampleSink>,
) -> Result<Folded> {
    let folded_sibling = path.with_extension("folded");
    // Opening it first gives a plain "not found" for a missing file rather than perf's.
    open(path)?;
    let mut command = Command::new("perf");
    command
        .args(["script", "-i"])
        .arg(path)
        .args(["-F", PERF_SCRIPT_FIELDS, "--no-inline"]);
    if let Some(dir) = symfs {
        // perf would look for kallsyms under the tree too; the kernel is this host's.
        command
            .arg("--symfs")
            .arg(dir)
            .args(["--kallsyms", "/proc/kallsyms"]);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::HostPerfMissing {
                path: path.display().to_string(),
                folded: folded_sibling.display().to_string(),
            })
        }
        Err(e) => return Err(Error::io("run perf script", e)),
    };
    // Drain stderr on the side so a chatty perf cannot block on a full pipe.
    let mut stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let stdout = child.stdout.take().expect("piped");
    let folded = fold(
        BufReader::with_capacity(1 << 20, stdout),
        FoldOptions {
            sink,
            ..FoldOptions::default()
        },
    )
    .map(|outcome| outcome.folded);
    let status = child
        .wait()
        .map_err(|e| Error::io("wait for perf script", e))?;
    let errors = errors.join().unwrap_or_default();
    let folded =
        folded.map_err(|e| Error::io(format!("fold perf script of {}", path.display()), e))?;
    if !status.success() && folded.is_empty() {
        let detail = errors
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_string();
        return Err(Error::HostPerfFailed {
            path: path.display().to_string(),
            detail: format!("{detail} ({status})"),
        });
    }
    if folded.unsymbolized_share() > UNSYMBOLIZED_WARNING {
        let line = format!(
            "warning: {:.0}% of the frames of {} are unsymbolized: this host's perf cannot see the \
             container's binaries. Use the .folded file devprof cpu wrote next to it instead.",
            folded.unsymbolized_share() * 100.0,
            path.display()
        );
        eprintln!("{}", crate::text::terminal(&line));
    }
    Ok(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_folded_stacks_is_an_empty_profile() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.folded");
        std::fs::write(&path, "this is not a profile\n").unwrap();
        let err = read(&path).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::NO_DATA);
        assert!(err.to_string().contains("holds no samples"), "{err}");
    }
}
