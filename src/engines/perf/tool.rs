//! Finding a perf that runs in the container: versioned `perf_X.Y` binaries matched to the
//! kernel, the version it reports, and whether it was built with zstd (`-z`).

use crate::docker::probe::ContainerFacts;
use crate::docker::ContainerShell;
use crate::error::{Error, Result};

/// Orders perf binaries by preference: the versioned one matching the kernel
/// (`perf_6.1` on 6.1.x), other versioned ones newest first, then plain `perf`.
pub fn order_perf_candidates(candidates: &[String], kernel: &str) -> Vec<String> {
    let kernel_mm: Option<(u32, u32)> = major_minor(kernel);
    let version_of = |path: &str| -> Option<(u32, u32)> {
        let name = path.rsplit('/').next()?;
        major_minor(name.strip_prefix("perf_")?)
    };
    let mut ordered: Vec<(u8, (u32, u32), String)> = candidates
        .iter()
        .map(|c| match version_of(c) {
            Some(v) if Some(v) == kernel_mm => (0, v, c.clone()),
            Some(v) => (1, v, c.clone()),
            None => (2, (0, 0), c.clone()),
        })
        .collect();
    ordered.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    ordered.dedup_by(|a, b| a.2 == b.2);
    ordered.into_iter().map(|(_, _, c)| c).collect()
}

pub fn major_minor(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A perf binary that runs in the container.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfTool {
    pub path: String,
    /// As perf reports it, e.g. `6.1.187`.
    pub version: String,
    pub supports_zstd: bool,
}

impl PerfTool {
    /// `perf --buildid-dir WORKDIR/buildid SUBCOMMAND`: whatever perf reads or writes of a
    /// build-id cache stays in the capture's own workdir, which is removed afterwards,
    /// never in the container user's `~/.debug`.
    pub fn in_workdir(&self, workdir: &str, subcommand: &str) -> Vec<String> {
        vec![
            self.path.clone(),
            "--buildid-dir".into(),
            format!("{workdir}/buildid"),
            subcommand.into(),
        ]
    }

    /// `perf ... record -N`: no build-id cache at all. perf hard-links every binary it saw
    /// into the cache, and on overlayfs a link copies the binary up into the container's
    /// writable layer, where the copy stays after the link is removed.
    pub fn record_in(&self, workdir: &str) -> Vec<String> {
        let mut argv = self.in_workdir(workdir, "record");
        argv.push("-N".into());
        argv
    }
}

/// Finds a working perf: the first candidate, in preference order, whose `--version` runs.
/// Debian's old `perf` wrapper, for one, fails when no perf matches the kernel.
pub async fn find_perf<S: ContainerShell>(shell: &S, facts: &ContainerFacts) -> Result<PerfTool> {
    for path in order_perf_candidates(&facts.perf_candidates, &facts.kernel) {
        let out = shell.run(&[&path, "--version"]).await?;
        if !out.success() {
            continue;
        }
        let Some(version) = out.stdout.trim().strip_prefix("perf version ") else {
            continue;
        };
        let options = shell.run(&[&path, "version", "--build-options"]).await?;
        return Ok(PerfTool {
            path,
            version: version.trim().to_string(),
            supports_zstd: build_option_on(&options.stdout, "zstd"),
        });
    }
    Err(Error::PerfMissing {
        container: shell.container().to_string(),
    })
}

/// Reads `perf version --build-options` lines like `zstd: [ on  ]  # HAVE_ZSTD_SUPPORT`.
pub fn build_option_on(text: &str, option: &str) -> bool {
    text.lines().any(|line| {
        let mut parts = line.trim().splitn(2, ':');
        parts.next().map(str::trim) == Some(option)
            && parts.next().is_some_and(|rest| rest.contains("[ on"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_the_perf_matching_the_kernel() {
        let c: Vec<String> = [
            "/usr/bin/perf",
            "/usr/bin/perf_5.10",
            "/usr/bin/perf_6.1",
            "/usr/bin/perf_5.19",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            order_perf_candidates(&c, "6.1.0-18-amd64"),
            vec![
                "/usr/bin/perf_6.1",
                "/usr/bin/perf_5.19",
                "/usr/bin/perf_5.10",
                "/usr/bin/perf"
            ]
        );
        assert_eq!(
            order_perf_candidates(&c[..1], "6.18.44"),
            vec!["/usr/bin/perf"]
        );
    }
}
