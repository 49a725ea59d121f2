//! The store as the viewer sees it: captures by id (`<container>/<capture>`), the files
//! their manifests list, and the sessions. Every file the viewer serves is found here, and
//! only by name equality with a manifest's list: nothing from a URL is ever joined into a
//! path.

use crate::error::{Error, Result};
use crate::store::catalog::{self, listed_path, Capture};
use crate::store::lookup::Found;
use crate::store::session::{self, SessionRecord};
use crate::store::valid_container_name;
use std::fs;
use std::path::{Path, PathBuf};

/// No file larger is read into memory to be served; the page names its path instead.
pub const MAX_SERVED_BYTES: u64 = 256 << 20;

/// A capture's id in URLs: its container directory and its manifest's stem.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CaptureId {
    pub container: String,
    pub name: String,
}

impl CaptureId {
    pub fn of(capture: &Capture) -> CaptureId {
        CaptureId {
            container: capture.container.clone(),
            name: capture.name(),
        }
    }

    /// `demo-seq/perf-20261122-101500`: both parts must be plain names.
    pub fn parse(text: &str) -> Option<CaptureId> {
        let (container, name) = text.split_once('/')?;
        let id = CaptureId {
            container: container.to_string(),
            name: name.to_string(),
        };
        id.is_plain().then_some(id)
    }

    pub fn is_plain(&self) -> bool {
        valid_container_name(&self.container) && valid_container_name(&self.name)
    }

    /// The capture's page.
    pub fn href(&self) -> String {
        format!("/capture/{}/{}", self.container, self.name)
    }
}

impl std::fmt::Display for CaptureId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.container, self.name)
    }
}

/// A file a manifest lists, found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    File(PathBuf),
    /// Listed and present, but larger than [`MAX_SERVED_BYTES`].
    TooLarge(PathBuf, u64),
}

#[derive(Debug, Clone)]
pub struct Library {
    output_dir: PathBuf,
}

impl Library {
    pub fn new(output_dir: PathBuf) -> Library {
        Library { output_dir }
    }

    pub fn output_dir(&self) -> &Path {
        &self.output_dir
    }

    /// Every capture, oldest first: what `devprof ls` lists.
    pub fn captures(&self) -> Result<Vec<Capture>> {
        catalog::list(&self.output_dir, None)
    }

    pub fn capture(&self, id: &CaptureId) -> Option<Capture> {
        if !id.is_plain() {
            return None;
        }
        catalog::list(&self.output_dir, Some(&id.container))
            .ok()?
            .into_iter()
            .find(|c| c.name() == id.name)
    }

    /// The file `name` of `capture`, when its manifest lists exactly that name and it is a
    /// regular file (not a link) in the capture's directory.
    pub fn listed_file(capture: &Capture, name: &str) -> Option<Listed> {
        let record = capture.manifest.files.iter().find(|f| f.name == name)?;
        let path = listed_path(&capture.dir, &record.name)?;
        let meta = fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() {
            return None;
        }
        Some(if meta.len() > MAX_SERVED_BYTES {
            Listed::TooLarge(path, meta.len())
        } else {
            Listed::File(path)
        })
    }

    /// The bytes of a listed file, or None when it is not listed, gone, or too large.
    pub fn read_listed(capture: &Capture, name: &str) -> Option<Vec<u8>> {
        match Self::listed_file(capture, name)? {
            Listed::File(path) => fs::read(path).ok(),
            Listed::TooLarge(..) => None,
        }
    }

    /// The sessions, oldest first, each with its id (the manifest's stem).
    pub fn sessions(&self) -> Result<Vec<(String, SessionRecord)>> {
        Ok(session::list(&self.output_dir)?
            .into_iter()
            .filter_map(|(path, record)| {
                let id = path.file_stem()?.to_str()?.to_string();
                valid_container_name(&id).then_some((id, record))
            })
            .collect())
    }

    pub fn session(&self, id: &str) -> Option<SessionRecord> {
        self.sessions()
            .ok()?
            .into_iter()
            .find(|(s, _)| s == id)
            .map(|(_, r)| r)
    }

    /// The capture a session lists by manifest path (`demo-seq/perf-….json`, relative to
    /// the store).
    pub fn capture_of_session_manifest(&self, relative: &str) -> Option<CaptureId> {
        let (container, file) = relative.split_once('/')?;
        let id = CaptureId {
            container: container.to_string(),
            name: file.strip_suffix(".json")?.to_string(),
        };
        self.capture(&id).map(|c| CaptureId::of(&c))
    }

    /// The page `devprof view WHAT` starts on: a session, a capture (by name or a file of
    /// it), or a container's captures.
    pub fn start_page(&self, what: &str) -> Result<String> {
        if let Ok(sessions) = self.sessions() {
            let wanted = Path::new(what)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or(what);
            if let Some((id, _)) = sessions.iter().find(|(id, _)| id == wanted) {
                return Ok(format!("/session/{id}"));
            }
        }
        if what.contains('/') || Path::new(what).is_file() {
            if let Some(capture) = crate::store::loader::capture_of_file(Path::new(what)) {
                if let Some(found) = self
                    .captures()?
                    .into_iter()
                    .find(|c| same_file(&c.manifest_path, &capture.manifest_path))
                {
                    return Ok(CaptureId::of(&found).href());
                }
                return Err(Error::Usage(format!(
                    "{what} belongs to a capture outside the store {} (the viewer shows one store; pass --output-dir {})",
                    self.output_dir.display(),
                    capture.dir.parent().unwrap_or(Path::new(".")).display()
                )));
            }
        }
        // The store commands' grammar: a capture's name (with or without its container),
        // a session, a target.
        match crate::store::lookup::find(&self.output_dir, what)? {
            Found::Session { path, .. } => {
                let id = path.file_stem().and_then(|s| s.to_str()).unwrap_or(what);
                Ok(format!("/session/{id}"))
            }
            Found::Capture(capture) => Ok(CaptureId::of(&capture).href()),
            Found::Target { name, captures } => {
                let mut dirs: Vec<&str> = captures.iter().map(|c| c.container.as_str()).collect();
                dirs.sort_unstable();
                dirs.dedup();
                match dirs.as_slice() {
                    [dir] => Ok(format!("/?container={dir}")),
                    _ => Err(Error::Usage(format!(
                        "{name} names the captures of several containers ({}): pass one",
                        dirs.join(", ")
                    ))),
                }
            }
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
