//! py-spy as an engine for Python targets: it reads the interpreter's own frame list from
//! outside the process (ptrace and /proc/<pid>/mem), so Python functions get their names
//! whatever the interpreter was built with. It runs where it is installed: in the target,
//! or in the profiler sidecar (which has it), needing SYS_PTRACE and the target's pid
//! namespace. Its raw output is folded stacks, folded here into devprof's.

use super::{CollectJob, Collected, Engine, Reached, RecordCommand, RecordJob, Tool};
use crate::docker::probe::TRUSTED_FN;
use crate::docker::ContainerShell;
use crate::error::{Error, Result};
use crate::profile::pyspy::fold_pyspy_raw;
use crate::text::{first_error_line, is_permission_error};
use std::time::Instant;

/// What py-spy records, beyond the Python frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PySpyEngine {
    /// `--native`: native frames (C extensions, libraries) mixed under the Python ones.
    pub native: bool,
    /// `--idle`: also threads that wait (py-spy leaves idle threads out otherwise).
    pub idle: bool,
    /// `--gil`: only samples of the thread holding the GIL.
    pub gil: bool,
}

/// A py-spy that may read the process.
#[derive(Debug, Clone)]
pub struct PySpyReady {
    pub tool: Tool,
    pub python: String,
}

const OUTPUT_NAME: &str = "pyspy.txt";

/// Where py-spy is looked for besides PATH (pip installs it into /usr/local/bin); it runs
/// as root, so only a file root alone may change is taken (`trusted`).
const LOCATIONS: &str = r#"
for f in "$(command -v py-spy 2>/dev/null)" /usr/local/bin/py-spy /root/.local/bin/py-spy; do
  [ -n "$f" ] && r=$(trusted "$f") && [ -x "$r" ] && { printf '%s\n' "$f"; exit 0; }
done
"#;

impl From<crate::settings::PythonOptions> for PySpyEngine {
    fn from(options: crate::settings::PythonOptions) -> Self {
        PySpyEngine {
            native: options.native,
            idle: options.idle,
            gil: options.gil,
        }
    }
}

impl Engine for PySpyEngine {
    type Ready = PySpyReady;

    /// py-spy reads Python stacks from the interpreter's own frame chain, whole by
    /// construction; only its native unwinding (`--native-frames`) can stop early.
    fn broken_stacks_advice(
        &self,
        _runtime: crate::runtime::Runtime,
        _call_graph: crate::settings::CallGraph,
    ) -> Option<(String, String)> {
        self.native.then(|| {
            (
                "py-spy's native unwinding (--native-frames) stopped early in code without unwind \
                 information; the Python frames themselves are whole"
                    .to_string(),
                "read the Python frames, or record without --native-frames".to_string(),
            )
        })
    }

    fn name(&self) -> &'static str {
        "py-spy"
    }

    async fn prepare<'a>(&'a self, at: Reached<'a>) -> Result<PySpyReady> {
        let (shell, process) = (at.shell, at.process);
        let container = shell.container().to_string();
        let found = shell.sh(&format!("{TRUSTED_FN}{LOCATIONS}")).await?;
        let path = found.stdout.lines().next().unwrap_or("").trim().to_string();
        let version = if path.is_empty() {
            None
        } else {
            let out = shell.run(&[&path, "--version"]).await?;
            out.success().then(|| out.stdout.trim().to_string())
        };
        let Some(version) = version else {
            return Err(Error::ToolMissing {
                container,
                tool: "py-spy".into(),
                fix: "profile it from a sidecar, which has py-spy: `--mode sidecar` (or `--mode auto`, \
                      the default) with the profiler image (devprof-profiler); or put py-spy into the \
                      target's image (`pip install py-spy`, or a tools layer made with `devprof build tools`)"
                    .into(),
            });
        };
        // A trial read of the stacks: says now, before the window, whether ptrace is allowed.
        let pid = process.pid.to_string();
        let trial = shell
            .run(&[&path, "dump", "--pid", &pid, "--nonblocking"])
            .await?;
        if !trial.success() {
            let text = format!("{}\n{}", trial.stderr, trial.stdout);
            let detail = first_error_line(&text);
            if is_permission_error(&text) {
                return Err(Error::PerfDenied {
                    container,
                    detail,
                    missing: vec!["CAP_SYS_PTRACE (py-spy reads the process's memory)".into()],
                    fixes: vec![
                        "profile from the sidecar (`--mode sidecar`), which gets SYS_PTRACE, or add `cap_add: [SYS_PTRACE]` to the service".into(),
                    ],
                });
            }
            return Err(Error::PerfFailed {
                container,
                step: "py-spy dump".into(),
                detail,
            });
        }
        let python = trial
            .stdout
            .lines()
            .find(|l| l.starts_with("Python v"))
            .unwrap_or("")
            .trim()
            .to_string();
        Ok(PySpyReady {
            tool: Tool {
                path,
                version: version.trim_start_matches("py-spy ").to_string(),
            },
            python,
        })
    }

    fn sidecar_minimum(&self) -> Option<(&'static [&'static str], &'static str)> {
        Some((
            &["SYS_PTRACE"],
            "CAP_SYS_PTRACE (py-spy reads the process's memory; no perf rights needed)",
        ))
    }

    fn tool(&self, ready: &PySpyReady) -> Tool {
        ready.tool.clone()
    }

    fn event(&self, _ready: &PySpyReady) -> String {
        let what = if self.gil {
            "py-spy (thread holding the GIL)"
        } else if self.idle {
            "py-spy (all threads, idle included)"
        } else {
            "py-spy (active threads)"
        };
        what.to_string()
    }

    fn notes(&self, ready: &PySpyReady) -> Vec<String> {
        let mut notes = Vec::new();
        if !ready.python.is_empty() {
            notes.push(format!("py-spy reads {}", ready.python));
        }
        if self.native {
            notes.push(
                "--native-frames: py-spy pauses the process for each sample to unwind its native stack"
                    .into(),
            );
        }
        notes
    }

    fn record_command(&self, ready: &PySpyReady, job: &RecordJob) -> RecordCommand {
        let mut argv: Vec<String> = vec![
            ready.tool.path.clone(),
            "record".into(),
            "--pid".into(),
            job.pid.to_string(),
            "--rate".into(),
            job.frequency.to_string(),
            // py-spy takes whole seconds.
            "--duration".into(),
            job.duration.as_secs_f64().ceil().max(1.0).to_string(),
            "--format".into(),
            "raw".into(),
            "--output".into(),
            format!("{}/{OUTPUT_NAME}", job.workdir),
            // Thread names as roots; samples aggregated per function, not per line.
            "--threads".into(),
            "--function".into(),
        ];
        if self.native {
            argv.push("--native".into());
        } else {
            // Without native unwinding there is no need to stop the target for each sample.
            argv.push("--nonblocking".into());
        }
        if self.idle {
            argv.push("--idle".into());
        }
        if self.gil {
            argv.push("--gil".into());
        }
        RecordCommand { argv, user: None }
    }

    async fn collect<'a>(
        &'a self,
        _ready: &'a PySpyReady,
        job: &'a CollectJob<'a>,
    ) -> Result<Collected> {
        let started = Instant::now();
        let path = format!("{}/{OUTPUT_NAME}", job.workdir);
        let out = job.shell.run(&["cat", &path]).await?;
        if !out.success() {
            job.stem.discard(&[]);
            return Err(Error::PerfFailed {
                container: job.shell.container().to_string(),
                step: "py-spy record".into(),
                detail: first_error_line(&format!(
                    "{}\n{}",
                    job.recorded.stderr, job.recorded.stdout
                )),
            });
        }
        let folded = fold_pyspy_raw(&out.stdout);
        Ok(Collected {
            folded,
            raw_files: Vec::new(),
            reported_samples: reported_samples(&job.recorded.stdout)
                .or_else(|| reported_samples(&job.recorded.stderr)),
            lost_chunks: None,
            stderr: format!("{}\n{}", job.recorded.stderr, job.recorded.stdout),
            timings_ms: vec![("fold", started.elapsed().as_millis() as u64)],
            ..Collected::default()
        })
    }
}

/// `Samples: 940 Errors: 0` from py-spy's closing line.
pub fn reported_samples(text: &str) -> Option<u64> {
    let rest = text.rsplit_once("Samples: ")?.1;
    rest.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_spy_stacks_break_only_with_native_frames() {
        use crate::runtime::Runtime;
        use crate::settings::CallGraph;
        let python_only = PySpyEngine::default();
        assert!(python_only
            .broken_stacks_advice(Runtime::Python, CallGraph::FramePointer)
            .is_none());
        let native = PySpyEngine {
            native: true,
            ..PySpyEngine::default()
        };
        let (why, _) = native
            .broken_stacks_advice(Runtime::Python, CallGraph::FramePointer)
            .expect("native unwinding can stop early");
        assert!(why.contains("--native-frames"), "{why}");
    }

    #[test]
    fn reads_the_sample_count_py_spy_prints() {
        let text = "py-spy> Wrote raw flamegraph data to '/tmp/o.txt'. Samples: 940 Errors: 0\n";
        assert_eq!(reported_samples(text), Some(940));
        assert_eq!(reported_samples("nothing"), None);
    }
}
