//! Reading a profile from disk for `render`, `top` and `diff`: folded stacks as they are,
//! `perf script` text folded on the way in, perf.data through this host's perf (streamed
//! into the folder), or a container's newest capture in the store.

use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::profile::perfscript::fold_perf_script;
use crate::profile::perfscript::{fold, FoldOptions, SampleSink};
use crate::store::catalog::{self, Capture};
use crate::store::names::TargetName;
use crate::store::units;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Which profile a command reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileRef {
    /// A file: .folded text, `perf script` text (.script), or perf.data (.data).
    File(PathBuf),
    /// A container directory in the store: its newest capture with folded stacks.
    Newest(String),
}

impl ProfileRef {
    /// A path that exists, or that looks like one (a file extension devprof reads, or
    /// more than the one `/` of `PROJECT/SERVICE`), is a file; otherwise it is a TARGET
    /// (see `store::names`) whose newest capture is meant.
    pub fn parse(text: &str, what: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Err(Error::Usage(format!("{what} is empty")));
        }
        let path = Path::new(text);
        let looks_like_file = (text.contains('/') && TargetName::parse(text).is_none())
            || path.extension().is_some_and(|e| {
                ["folded", "data", "script", "txt", "timeline", "json"]
                    .iter()
                    .any(|x| e == *x)
            });
        if path.is_file() || (text.contains('/') && path.exists()) || looks_like_file {
            return Ok(ProfileRef::File(path.to_path_buf()));
        }
        if TargetName::parse(text).is_none() {
            return Err(Error::Usage(format!(
                "{what} '{text}' is neither a file nor a target name (a container, an id prefix, SERVICE or PROJECT/SERVICE)"
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

/// A profile read, with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    /// The capture it belongs to, when it was found through the store.
    pub capture: Option<Capture>,
    pub folded: Folded,
    /// What one count is (one of `store::units`).
    pub unit: &'static str,
}

/// Resolves a profile reference (a container means its newest capture with folded
/// stacks) and reads it.
pub fn load(profile: &ProfileRef, output_dir: &Path) -> Result<Loaded> {
    let (path, capture) = match profile {
        ProfileRef::File(path) => (path.clone(), None),
        ProfileRef::Newest(container) => {
            let capture = newest_with_folded(output_dir, container)?;
            let path = capture
                .file_with_extension("folded")
                .expect("selected for having a .folded file");
            (path, Some(capture))
        }
    };
    let folded = read(&path)?;
    let unit = match &capture {
        Some(c) => unit_of(&path, Some(c)),
        None => unit_of(&path, capture_of_file(&path).as_ref()),
    };
    Ok(Loaded {
        path,
        capture,
        folded,
        unit,
    })
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

/// Reads a profile as windows: a container, a set's manifest or its whole .folded file
/// give the set's parts; any other file is one window, with its capture's length when a
/// manifest lies beside it.
pub fn load_set(profile: &ProfileRef, output_dir: &Path) -> Result<LoadedSet> {
    let (path, capture) = find_capture(profile, output_dir)?;
    let whole = load(&ProfileRef::File(path.clone()), output_dir)?;
    let whole = Loaded {
        capture: capture.clone().or(whole.capture),
        ..whole
    };
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let set = capture.filter(|c| {
        !c.manifest.parts.is_empty()
            && c.file_with_extension("folded")
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

/// The newest capture of `container` whose manifest lists a .folded file that exists.
pub fn newest_with_folded(output_dir: &Path, container: &str) -> Result<Capture> {
    catalog::list(output_dir, Some(container))?
        .into_iter()
        .rev()
        .find(|c| c.file_with_extension("folded").is_some_and(|p| p.is_file()))
        .ok_or_else(|| catalog::no_captures(output_dir, container))
}

/// The folded file of the capture, and the capture when its manifest is found.
pub fn find_capture(capture: &ProfileRef, output_dir: &Path) -> Result<(PathBuf, Option<Capture>)> {
    match capture {
        ProfileRef::Newest(container) => {
            let c = newest_with_folded(output_dir, container)?;
            let folded = c
                .file_with_extension("folded")
                .expect("selected for having a .folded file");
            Ok((folded, Some(c)))
        }
        ProfileRef::File(path) => {
            let found = capture_of_file(path);
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if matches!(extension, "timeline" | "json") {
                let c = found.ok_or_else(|| {
                    Error::Usage(format!(
                        "{} is not part of a capture devprof wrote (no manifest beside it); pass a .folded file",
                        path.display()
                    ))
                })?;
                let folded = c.file_with_extension("folded").ok_or_else(|| {
                    Error::Usage(format!(
                        "the capture {} lists no .folded file",
                        c.manifest_path.display()
                    ))
                })?;
                return Ok((folded, Some(c)));
            }
            Ok((path.clone(), found))
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
        eprintln!(
            "warning: {:.0}% of the frames of {} are unsymbolized: this host's perf cannot see the \
             container's binaries. Use the .folded file devprof cpu wrote next to it instead.",
            folded.unsymbolized_share() * 100.0,
            path.display()
        );
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
