//! The path `devprof cpu` would take: perf inside the container (exec), or the profiler
//! sidecar beside it. Checks that only matter inside the container do not block a target
//! the sidecar can profile; they say so.

use super::{check, Check, Status};
use crate::settings::CaptureMode;
use crate::setup::doctor::facts::ImageUnusable;

/// Checks about running perf inside the target container, which a sidecar (its own perf,
/// its own capabilities, seccomp and tracefs) does not need.
pub const EXEC_ONLY: &[&str] = &[
    "perf",
    "perf_event_open",
    "perf_event_paranoid",
    "kptr_restrict",
    "tracefs",
    "capabilities",
    "seccomp",
];

/// Judges the path and rewrites the exec-only checks when the sidecar takes over. `mode`
/// None: no path asked for (the checklist stays as gathered).
pub fn judge_path(
    checks: &mut Vec<Check>,
    mode: Option<CaptureMode>,
    sidecar_image: Option<&Result<String, ImageUnusable>>,
) {
    let Some(mode) = mode else {
        return;
    };
    let exec_blocked: Vec<&'static str> = checks
        .iter()
        .filter(|c| EXEC_ONLY.contains(&c.id) && c.status == Status::Fail)
        .map(|c| c.title)
        .collect();
    let use_sidecar = match mode {
        CaptureMode::Exec => false,
        CaptureMode::Sidecar => true,
        CaptureMode::Auto => !exec_blocked.is_empty(),
    };
    if !use_sidecar {
        checks.push(if exec_blocked.is_empty() {
            check(
                "path",
                "capture path",
                Status::Pass,
                "ready (exec): perf records inside the container",
                None,
            )
        } else {
            check(
                "path",
                "capture path",
                Status::Fail,
                format!("blocked (exec): {}", exec_blocked.join(", ")),
                Some("fix the ✗ above, or let devprof profile from a sidecar (`--mode auto`, the default, or `--mode sidecar`)".into()),
            )
        });
        return;
    }
    match sidecar_image {
        Some(Ok(image)) => {
            for c in checks.iter_mut().filter(|c| EXEC_ONLY.contains(&c.id)) {
                if matches!(c.status, Status::Fail | Status::Warn) {
                    c.status = Status::Skip;
                    c.detail = format!("exec mode only (the sidecar has its own): {}", c.detail);
                }
            }
            checks.push(check(
                "path",
                "capture path",
                Status::Pass,
                format!(
                    "ready (sidecar): devprof cpu profiles it from a {image} container beside it, sharing its pid namespace{}",
                    if exec_blocked.is_empty() {
                        String::new()
                    } else {
                        format!(" (inside the container: {} would block)", exec_blocked.join(", "))
                    }
                ),
                None,
            ));
        }
        other => {
            let (why, fix) = match other {
                Some(Err(unusable)) => (unusable.why.clone(), unusable.fix.clone()),
                _ => (
                    "the profiler image was not looked for".to_string(),
                    crate::error::profiler_image_fix(crate::error::DEFAULT_PROFILER_IMAGE),
                ),
            };
            checks.push(check(
                "path",
                "capture path",
                Status::Fail,
                format!(
                    "blocked: no sidecar ({why}){}",
                    if exec_blocked.is_empty() {
                        String::new()
                    } else {
                        format!(
                            ", and inside the container {} block",
                            exec_blocked.join(", ")
                        )
                    }
                ),
                Some(format!("{fix}; or fix the ✗ above for exec mode")),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec_denied() -> Vec<Check> {
        vec![
            check("perf", "perf", Status::Pass, "found", None),
            check(
                "perf_event_open",
                "perf_event_open",
                Status::Fail,
                "denied",
                Some("caps".into()),
            ),
            check(
                "seccomp",
                "seccomp",
                Status::Fail,
                "filtered",
                Some("unconfined".into()),
            ),
            check("symbols", "symbols", Status::Pass, "ok", None),
        ]
    }

    #[test]
    fn auto_takes_the_sidecar_when_exec_is_blocked_and_nothing_blocks() {
        let mut checks = exec_denied();
        judge_path(
            &mut checks,
            Some(CaptureMode::Auto),
            Some(&Ok("devprof-profiler:latest".into())),
        );
        assert!(
            checks.iter().all(|c| c.status != Status::Fail),
            "{checks:?}"
        );
        let path = checks.last().unwrap();
        assert_eq!((path.id, path.status), ("path", Status::Pass));
        assert!(path.detail.starts_with("ready (sidecar)"));
        assert!(checks[1].detail.starts_with("exec mode only"));
    }

    #[test]
    fn exec_mode_keeps_the_failures_and_a_missing_image_blocks_the_sidecar() {
        let mut checks = exec_denied();
        judge_path(
            &mut checks,
            Some(CaptureMode::Exec),
            Some(&Ok("img".into())),
        );
        assert_eq!(checks[1].status, Status::Fail);
        assert_eq!(checks.last().unwrap().status, Status::Fail);

        let mut checks = exec_denied();
        judge_path(
            &mut checks,
            Some(CaptureMode::Auto),
            Some(&Err(ImageUnusable {
                why: "the profiler image my-profiler:1 is not on this engine".into(),
                fix: crate::docker::Flavour::Docker.image_fix("my-profiler:1"),
            })),
        );
        let last = checks.last().unwrap();
        assert_eq!(last.status, Status::Fail);
        assert!(last.detail.contains("my-profiler:1 is not on this engine"));
        // The same fix as the capture's error for the same problem.
        let fix = crate::error::profiler_image_fix("my-profiler:1");
        assert!(last.fix.as_deref().unwrap().starts_with(&fix), "{last:?}");
        let error = crate::error::Error::ProfilerImageMissing {
            container: "c".into(),
            image: "my-profiler:1".into(),
            fix: crate::docker::Flavour::Docker.image_fix("my-profiler:1"),
        };
        assert!(error.to_string().contains(&fix), "{error}");

        let mut checks = vec![check("perf", "perf", Status::Pass, "found", None)];
        judge_path(&mut checks, Some(CaptureMode::Auto), None);
        assert!(checks.last().unwrap().detail.starts_with("ready (exec)"));
    }
}
