//! A capture's private directory in a container's /tmp, made by the container's own
//! `mktemp -d` (in the probe, beside it, or on its own) and taken only in the form devprof
//! asked for: it is later searched and removed as root.

use super::exec::ContainerShell;
use crate::error::{Error, Result};

/// `mktemp -d`'s template for every workdir.
pub const TEMPLATE: &str = "/tmp/devprof.XXXXXXXX";

/// Makes a private directory in the container's /tmp for the recorder's output and its pid.
pub async fn make<S: ContainerShell>(shell: &S) -> Result<String> {
    let out = shell.run(&["mktemp", "-d", TEMPLATE]).await?;
    match made(&out.stdout) {
        Some(dir) if out.success() => Ok(dir),
        _ => Err(Error::PerfFailed {
            container: shell.container().to_string(),
            step: "create a temporary directory in /tmp".into(),
            detail: crate::text::first_error_line(&out.stderr),
        }),
    }
}

/// The directory `mktemp -d /tmp/devprof.XXXXXXXX` printed, only when it is one: the
/// container's mktemp answers, and the workdir is later searched and removed as root in
/// it (never `/tmp/devprof.x/../..`).
pub fn made(stdout: &str) -> Option<String> {
    let dir = stdout.trim_end_matches('\n');
    let suffix = dir.strip_prefix("/tmp/devprof.")?;
    (!suffix.is_empty() && suffix.len() <= 64 && suffix.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then(|| dir.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_directory_mktemp_makes_is_taken_as_the_workdir() {
        assert_eq!(
            made("/tmp/devprof.aB3xY9zQ\n").as_deref(),
            Some("/tmp/devprof.aB3xY9zQ")
        );
        for told in [
            "",
            "/tmp/devprof.\n",
            "/tmp/devprof.x/../../app\n",
            "/tmp/devprof.ab cd\n",
            "/tmp/devprof.ab\n/etc\n",
            "/tmp/other.aB3xY9zQ\n",
        ] {
            assert_eq!(made(told), None, "{told:?}");
        }
    }
}
