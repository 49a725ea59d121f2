//! The profiler images devprof trusts, by image ID and per endpoint. A sidecar (and the
//! sysctl helper) runs its image's `sh` and `perf` with the rights perf needs beside the
//! target, so the image must be one the user chose: one `devprof build tools` made from
//! flags and the environment, or one named to `devprof trust`. A tag is only a name that
//! anyone who can build on the engine may move (a `.env` setting `DEVPROF_BUILD_TAG`, a
//! compose file's `image:` with `build:`); the ID is the image's content. The list lives in
//! `$XDG_CONFIG_HOME/devprof/trusted-images.json` (default `~/.config/...`), private to the
//! user, and is never read from a project's `.env`.

use super::Docker;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file's name under the user's configuration directory.
const FILE: &str = "devprof/trusted-images.json";
/// A trust file larger than this is not devprof's (it lists a few IDs per endpoint).
const FILE_LIMIT: u64 = 1 << 20;

/// One trusted image on one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// The image ID (`sha256:...`), what the engine runs.
    pub id: String,
    /// The name it had when it was trusted, for the user's eyes only.
    pub name: String,
    /// How it came to be trusted: `built` (devprof build tools) or `named` (devprof trust).
    pub how: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

/// Every endpoint's trusted images, keyed by the endpoint's address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustList {
    pub endpoints: BTreeMap<String, Vec<Trusted>>,
}

impl TrustList {
    /// Whether `id` is trusted on `endpoint`.
    pub fn trusts(&self, endpoint: &str, id: &str) -> bool {
        self.endpoints
            .get(endpoint)
            .is_some_and(|list| list.iter().any(|t| t.id == id))
    }

    /// Adds `trusted` on `endpoint` (an ID already there takes the new name).
    pub fn add(&mut self, endpoint: &str, trusted: Trusted) {
        let list = self.endpoints.entry(endpoint.to_string()).or_default();
        list.retain(|t| t.id != trusted.id);
        list.push(trusted);
    }

    /// Removes `id` from `endpoint`; whether it was there.
    pub fn remove(&mut self, endpoint: &str, id: &str) -> bool {
        let Some(list) = self.endpoints.get_mut(endpoint) else {
            return false;
        };
        let before = list.len();
        list.retain(|t| t.id != id);
        let removed = list.len() != before;
        if list.is_empty() {
            self.endpoints.remove(endpoint);
        }
        removed
    }
}

/// Where the list is kept: `$XDG_CONFIG_HOME`, else `~/.config` (from the process's
/// environment: `.env` gives only `DEVPROF_*` settings).
pub fn file() -> Result<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| Error::Usage("neither XDG_CONFIG_HOME nor HOME is set: devprof has nowhere to keep the profiler images it trusts".into()))?;
    Ok(base.join(FILE))
}

/// Reads the list at `path`; a missing file is an empty list.
pub fn read(path: &Path) -> Result<TrustList> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TrustList::default()),
        Err(e) => return Err(Error::io(format!("read {}", path.display()), e)),
    };
    let mut text = String::new();
    file.take(FILE_LIMIT)
        .read_to_string(&mut text)
        .map_err(|e| Error::io(format!("read {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Usage(format!(
            "{} is not a list of trusted images devprof can read ({e}); remove it and trust the profiler image again (`devprof trust IMAGE`)",
            path.display()
        ))
    })
}

/// Writes the list to `path`, private to the user (0600 in a 0700 directory), whole or
/// not at all (a temporary file renamed over it).
pub fn write(path: &Path, list: &TrustList) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("create {}", dir.display()), e))?;
    let temp = dir.join(format!(".trusted-images.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(list).unwrap_or_default();
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&temp, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        Error::io(format!("write {}", path.display()), e)
    })
}

/// A profiler image this endpoint has and devprof trusts: run it by `id`, never by name
/// (the name may be moved between the check and the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedImage {
    pub name: String,
    pub id: String,
}

/// Why a profiler image may not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The endpoint has no image by that name.
    Missing,
    /// It has one, but not one devprof trusts on this endpoint.
    Untrusted { id: String },
}

/// An image ID as `docker images` shows it: twelve hex digits.
pub fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    hex.get(..12).unwrap_or(hex)
}

/// The command that trusts `image` on the endpoint this process talks to.
pub fn trust_command(image: &str) -> String {
    format!("devprof trust {}", crate::text::shell_word(image))
}

/// What to do about an untrusted profiler image: build it with devprof, or say it is
/// yours.
pub fn untrusted_fix(image: &str) -> String {
    format!(
        "if you built it yourself and want devprof to run it as root beside your containers, trust it: `{}`; \
         or build it with devprof, which trusts what it builds: `devprof build tools debian:bookworm-slim -t {}`",
        trust_command(image),
        crate::text::shell_word(image)
    )
}

impl Docker {
    /// `image` as this endpoint has it, when devprof trusts it here.
    pub async fn trusted_image(
        &self,
        image: &str,
    ) -> Result<std::result::Result<TrustedImage, Refusal>> {
        let Some(details) = self.image_details(image).await? else {
            return Ok(Err(Refusal::Missing));
        };
        let list = read(&file()?)?;
        if list.trusts(self.address(), &details.id) {
            Ok(Ok(TrustedImage {
                name: image.to_string(),
                id: details.id,
            }))
        } else {
            Ok(Err(Refusal::Untrusted { id: details.id }))
        }
    }

    /// Trusts the image `image` names now on this endpoint (`shown`: the name the list
    /// keeps for it); returns its ID.
    pub async fn trust_image(&self, image: &str, shown: &str, how: &str) -> Result<String> {
        let details = self.image_details(image).await?.ok_or_else(|| {
            Error::Usage(format!(
                "the endpoint {} has no image {image}: build or load it first",
                self.address()
            ))
        })?;
        let path = file()?;
        let mut list = read(&path)?;
        list.add(
            self.address(),
            Trusted {
                id: details.id.clone(),
                name: shown.to_string(),
                how: how.to_string(),
                at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            },
        );
        write(&path, &list)?;
        Ok(details.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted(id: &str) -> Trusted {
        Trusted {
            id: id.into(),
            name: "devprof-profiler:latest".into(),
            how: "built".into(),
            at: "2026-12-07T00:00:00Z".into(),
        }
    }

    #[test]
    fn an_id_is_trusted_only_on_the_endpoint_it_was_trusted_on() {
        let mut list = TrustList::default();
        list.add("unix:///var/run/docker.sock", trusted("sha256:aa"));
        assert!(list.trusts("unix:///var/run/docker.sock", "sha256:aa"));
        assert!(!list.trusts("unix:///run/podman/podman.sock", "sha256:aa"));
        assert!(!list.trusts("unix:///var/run/docker.sock", "sha256:bb"));
    }

    #[test]
    fn trusting_an_id_again_keeps_one_entry_and_removing_it_empties_the_endpoint() {
        let mut list = TrustList::default();
        list.add("e", trusted("sha256:aa"));
        list.add("e", trusted("sha256:aa"));
        assert_eq!(list.endpoints["e"].len(), 1);
        assert!(list.remove("e", "sha256:aa"));
        assert!(!list.remove("e", "sha256:aa"));
        assert!(list.endpoints.is_empty());
    }

    #[test]
    fn the_list_is_written_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("devprof-trust-{}", std::process::id()));
        let path = dir.join("devprof/trusted-images.json");
        let mut list = TrustList::default();
        list.add("e", trusted("sha256:aa"));
        write(&path, &list).unwrap();
        assert_eq!(read(&path).unwrap(), list);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_list_trusts_nothing_and_a_foreign_file_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("devprof-trust-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir.join("none.json")).unwrap(), TrustList::default());
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "not json").unwrap();
        let err = read(&bad).unwrap_err().to_string();
        assert!(err.contains("bad.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_fix_names_both_ways_with_the_image_quoted() {
        let fix = untrusted_fix("my profiler:1");
        assert!(fix.contains("devprof trust 'my profiler:1'"), "{fix}");
        assert!(fix.contains("devprof build tools"), "{fix}");
    }
}
