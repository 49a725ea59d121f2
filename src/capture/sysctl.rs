//! `--allow-sysctl`: the host-wide kernel.perf_event_paranoid and kptr_restrict lowered for
//! one capture through a target container that may write them, and put back on every way
//! out. The target is also how they are restored, unless it is gone by then (stopped,
//! removed, paused): then a short-lived helper container does it (CAP_SYS_ADMIN and an
//! unconfined /proc, not privileged), from the profiler image, as sidecars are. That
//! helper is tried before anything is lowered; where it cannot write them, --allow-sysctl
//! is refused.

use crate::docker::trust::{short_id, untrusted_fix, Refusal, TrustedImage};
use crate::docker::{ContainerShell, Docker, Shell};
use crate::error::{Error, Result};
use std::time::Duration;

const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";
const KPTR_RESTRICT: &str = "/proc/sys/kernel/kptr_restrict";

/// Longest one write through the target may take.
const WRITE_LIMIT: Duration = Duration::from_secs(10);

/// The host-wide perf sysctls as they were before devprof lowered them, and the image of
/// the helper that can put them back without the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSysctls {
    pub paranoid: i32,
    pub kptr_restrict: i32,
    /// Run by its ID, named by its name.
    pub helper: TrustedImage,
}

impl SavedSysctls {
    /// The command that restores them on the host, for when nothing else could.
    pub fn host_command(&self) -> String {
        format!(
            "run on the host: sudo sysctl kernel.perf_event_paranoid={} kernel.kptr_restrict={}",
            self.paranoid, self.kptr_restrict
        )
    }

    fn script(&self) -> String {
        write_script(self.paranoid, self.kptr_restrict)
    }
}

fn write_script(paranoid: i32, kptr_restrict: i32) -> String {
    format!("echo {paranoid} > {PARANOID} && echo {kptr_restrict} > {KPTR_RESTRICT}")
}

/// The helper's trial: each value written back as it is, which changes nothing and shows
/// that the helper may write them.
const TRIAL_SCRIPT: &str = "p=$(cat /proc/sys/kernel/perf_event_paranoid) && echo \"$p\" > /proc/sys/kernel/perf_event_paranoid && \
     k=$(cat /proc/sys/kernel/kptr_restrict) && echo \"$k\" > /proc/sys/kernel/kptr_restrict";

/// Reads the values as they are and lowers them to -1 and 0 through `shell` (the target,
/// which may write them). The values are read by this very script, as root: nothing a
/// process in the container prints can become the value restored. On a half-done change the
/// old values are put back. Returns what they were.
pub async fn lower(shell: &Shell, helper: TrustedImage) -> Option<SavedSysctls> {
    let script = format!(
        "p=$(cat {PARANOID}) && k=$(cat {KPTR_RESTRICT}) && echo \"saved $p $k\" && \
         echo -1 > {PARANOID} && echo 0 > {KPTR_RESTRICT}"
    );
    let out = tokio::time::timeout(WRITE_LIMIT, shell.sh(&script))
        .await
        .ok()?
        .ok()?;
    let saved = parse_saved(&out.stdout, helper)?;
    if out.success() {
        crate::note!(
            "lowered the host's kernel.perf_event_paranoid ({} -> -1) and kptr_restrict ({} -> 0) for this capture (--allow-sysctl); they are restored when it ends",
            saved.paranoid, saved.kptr_restrict
        );
        // Should a third Ctrl-C end devprof before it restores them, the user is told how.
        crate::signals::set_exit_note(Some(saved.host_command()));
        Some(saved)
    } else {
        restore(shell, &saved).await;
        None
    }
}

/// `saved P K` from the lowering script: two integers, nothing else.
fn parse_saved(stdout: &str, helper: TrustedImage) -> Option<SavedSysctls> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("saved "))?;
    let mut values = line.split(' ');
    let paranoid = values.next()?.parse().ok()?;
    let kptr_restrict = values.next()?.parse().ok()?;
    if values.next().is_some() {
        return None;
    }
    Some(SavedSysctls {
        paranoid,
        kptr_restrict,
        helper,
    })
}

/// Puts the sysctls back: through the target, else through a helper container; when
/// neither can, says how to by hand.
pub async fn restore(shell: &Shell, saved: &SavedSysctls) {
    let script = saved.script();
    let through_target = tokio::time::timeout(WRITE_LIMIT, shell.sh(&script)).await;
    if matches!(through_target, Ok(Ok(ref o)) if o.success()) {
        crate::signals::set_exit_note(None);
        return;
    }
    match shell
        .docker()
        .run_sysctl_helper(&saved.helper.id, &script)
        .await
    {
        Ok(true) => {
            crate::signals::set_exit_note(None);
            crate::note!(
                "restored the host's sysctls through a helper container from {} (image {}; {} could not run it)",
                saved.helper.name,
                short_id(&saved.helper.id),
                shell.container()
            );
        }
        outcome => {
            let why = match outcome {
                Err(e) => crate::text::first_line(&e.to_string()).to_string(),
                _ => "it could not write them".into(),
            };
            crate::warn!(
                "could not restore the host's sysctls through {} nor through a helper container from {} ({why}); {}",
                shell.container(),
                saved.helper.name,
                saved.host_command()
            );
        }
    }
}

/// Before lowering anything: the helper that would restore the sysctls without the target
/// must be able to write them, from the profiler image (the image sidecars are made from),
/// else --allow-sysctl is refused. Returns the image, trusted.
pub async fn check_helper(docker: &Docker, container: &str, image: &str) -> Result<TrustedImage> {
    let refused = |reason: String| Error::SysctlHelperUnavailable {
        container: container.to_string(),
        image: image.to_string(),
        reason,
    };
    // The helper writes the host's /proc/sys: only a trusted image may, run by its ID.
    let trusted = match docker.trusted_image(image).await? {
        Ok(trusted) => trusted,
        Err(Refusal::Missing) => return Err(refused(format!("{image} is not on the engine"))),
        Err(Refusal::Untrusted { id }) => {
            return Err(refused(format!(
                "{image} is {}, an image devprof does not trust on this endpoint; {}",
                short_id(&id),
                untrusted_fix(image)
            )))
        }
    };
    match docker.run_sysctl_helper(&trusted.id, TRIAL_SCRIPT).await {
        Ok(true) => Ok(trusted),
        Ok(false) => Err(refused(
            "a container from it (CAP_SYS_ADMIN, unconfined /proc) could not write them".into(),
        )),
        Err(e) => Err(refused(crate::text::first_line(&e.to_string()).to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> TrustedImage {
        TrustedImage {
            name: "img".into(),
            id: "sha256:0123456789abcdef".into(),
        }
    }

    #[test]
    fn the_saved_values_are_two_integers_from_the_script() {
        let saved = parse_saved("saved 2 1\n", helper()).unwrap();
        assert_eq!((saved.paranoid, saved.kptr_restrict), (2, 1));
        assert_eq!(
            saved.script(),
            "echo 2 > /proc/sys/kernel/perf_event_paranoid && echo 1 > /proc/sys/kernel/kptr_restrict"
        );
        assert!(parse_saved("saved 2\n", helper()).is_none());
        assert!(parse_saved("saved 2 1; rm -rf /\n", helper()).is_none());
        assert!(parse_saved("saved -1 0 3\n", helper()).is_none());
        assert_eq!(
            parse_saved("saved -1 0", helper()).map(|s| s.paranoid),
            Some(-1)
        );
    }
}
