//! The check after a build: the image is started once, idling, and looked into — perf runs
//! (its path and version), and the program has symbols, debug info and frame pointers,
//! read from its ELF sections after copying it out.

use crate::docker::binary;
use crate::docker::probe::ContainerFacts;
use crate::docker::{ContainerShell, Docker};
use crate::engines::diagnosis;
use crate::error::{Error, Result};
use crate::symbols::elf::{ElfReport, FpVerdict};

/// The post-build check.
#[derive(Debug, Clone)]
pub struct ImageCheck {
    /// perf's path and version, or why it does not run.
    pub perf: std::result::Result<(String, String), String>,
    /// The program checked, and what its ELF sections say (or why they could not be read).
    pub binary: Option<(String, std::result::Result<ElfReport, String>)>,
    /// Whether the program's symbols and debug info are required (source builds).
    pub binary_required: bool,
}

impl ImageCheck {
    /// ✓/✗ lines, and the problems that make the image not ready.
    pub fn lines(&self) -> (Vec<String>, Vec<String>) {
        let mut lines = Vec::new();
        let mut problems = Vec::new();
        match &self.perf {
            Ok((path, version)) => lines.push(format!("✓ perf runs: {path}, version {version}")),
            Err(why) => {
                lines.push(format!("✗ perf does not run: {why}"));
                problems.push(format!("perf does not run: {why}"));
            }
        }
        // The program of a tools-layer image is someone else's: advisory only.
        let bad = if self.binary_required { "✗" } else { "!" };
        match &self.binary {
            None => lines
                .push("- no program to check (the image's command is a shell or nothing)".into()),
            Some((path, Err(why))) => {
                lines.push(format!("{bad} {path}: {why}"));
                if self.binary_required {
                    problems.push(format!("{path}: {why}"));
                }
            }
            Some((path, Ok(elf))) => {
                if elf.has_symbols() {
                    lines.push(format!(
                        "✓ {path} has symbols: {} functions in .symtab",
                        elf.symtab_functions
                    ));
                } else {
                    lines.push(format!(
                        "{bad} {path} has no symbols (stripped): frames will show as addresses{}",
                        elf.debuglink
                            .as_deref()
                            .map(|l| format!(
                                "; its debug file {l} is in a -dbgsym/-debuginfo package"
                            ))
                            .unwrap_or_default()
                    ));
                    if self.binary_required {
                        problems.push(format!("{path} has no symbols"));
                    }
                }
                if elf.has_debug_info() {
                    lines.push(format!(
                        "✓ {path} has debug info: .debug_info {}{}",
                        crate::units::human_bytes(elf.debug_info_bytes),
                        if elf.has_debug_line {
                            ", .debug_line"
                        } else {
                            ""
                        }
                    ));
                } else {
                    lines.push(format!("{bad} {path} has no debug info (.debug_info): no inlined frames or source lines"));
                    if self.binary_required {
                        problems.push(format!("{path} has no debug info"));
                    }
                }
                let fp = &elf.frame_pointers;
                let verdict = format!(
                    "{} of {} functions set up a frame pointer; judged on {}",
                    fp.with_fp, fp.examined, fp.basis
                );
                match fp.verdict {
                    FpVerdict::Yes if fp.examined == 0 => {
                        lines.push(format!("✓ frame pointers: {}", fp.basis))
                    }
                    FpVerdict::Yes => lines.push(format!("✓ frame pointers: {verdict}")),
                    FpVerdict::Partly | FpVerdict::No => {
                        lines.push(format!(
                            "{bad} frame pointers: only {verdict}; use --call-graph dwarf"
                        ));
                        if self.binary_required {
                            problems.push(format!("{path} has no frame pointers"));
                        }
                    }
                    FpVerdict::Unknown => {
                        lines.push(format!("- frame pointers: not judged ({})", fp.basis))
                    }
                }
            }
        }
        (lines, problems)
    }
}

/// Starts the image once (idling) and checks perf and the program.
pub async fn check_image(docker: &Docker, image: &str, binary: Option<&str>) -> Result<ImageCheck> {
    let name = format!("devprof-check-{}", std::process::id());
    let info = docker.start_idle_container(image, &name).await?;
    let shell = docker.shell(&info);
    let result = async {
        let facts = ContainerFacts::probe(&shell).await?;
        let perf = match diagnosis::find_perf(&shell, &facts).await {
            Ok(tool) => Ok((tool.path, tool.version)),
            Err(Error::PerfMissing { .. }) => Err(format!("no {}", crate::error::PERF_SEARCH)),
            Err(e) => Err(e.to_string()),
        };
        let program = match binary {
            Some(b) => Some(b.to_string()),
            None => image_program(docker, image, &shell).await?,
        };
        let binary_required = binary.is_some();
        let checked = match program {
            Some(path) => {
                let real = binary::resolve(&shell, &path).await.unwrap_or(path.clone());
                let report = binary::read_from_container(docker, &info.name, &real).await;
                Some((real, report))
            }
            None => None,
        };
        Ok::<_, Error>(ImageCheck {
            perf,
            binary: checked,
            binary_required,
        })
    }
    .await;
    docker.remove_container(&info.id).await;
    result
}

/// The program an image runs (its entrypoint, else its command), looked up on PATH;
/// None when that is a shell.
async fn image_program<S: ContainerShell>(
    docker: &Docker,
    image: &str,
    shell: &S,
) -> Result<Option<String>> {
    let Some(details) = docker.image_details(image).await? else {
        return Ok(None);
    };
    let first = details.entrypoint.first().or(details.cmd.first()).cloned();
    let Some(program) = first else {
        return Ok(None);
    };
    let base = program.rsplit('/').next().unwrap_or(&program);
    if matches!(base, "sh" | "bash" | "dash" | "ash") {
        // A profiling image of devprof's names its program.
        return Ok(details
            .env
            .iter()
            .find_map(|e| e.strip_prefix("DEVPROF_BINARY="))
            .map(str::to_string));
    }
    if program.starts_with('/') {
        return Ok(Some(program));
    }
    let out = shell
        .run(&["sh", "-c", "command -v \"$1\"", "sh", &program])
        .await?;
    let found = out.stdout.trim();
    Ok(found.starts_with('/').then(|| found.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::elf::{Arch, FramePointers, Jemalloc};

    fn stripped_bash() -> ElfReport {
        // /usr/bin/bash of Debian bookworm, as elf::read_file reports it.
        ElfReport {
            arch: Arch::X86_64,
            symtab_functions: 0,
            dynsym_functions: 1670,
            debug_info_bytes: 0,
            has_debug_line: false,
            debuglink: Some("5afc8c6d1b9e02356cce218bf0109c3687ad9f.debug".into()),
            build_id: None,
            has_eh_frame: true,
            has_debug_frame: false,
            frame_pointers: FramePointers {
                verdict: FpVerdict::No,
                examined: 2094,
                with_fp: 5,
                basis: "the .eh_frame entries".into(),
            },
            jemalloc: Jemalloc::None,
            go_tables: false,
        }
    }

    #[test]
    fn someone_elses_stripped_program_is_advisory_in_a_tools_image() {
        let check = ImageCheck {
            perf: Ok(("/usr/bin/perf".into(), "6.1.176".into())),
            binary: Some(("/usr/bin/bash".into(), Ok(stripped_bash()))),
            binary_required: false,
        };
        let (lines, problems) = check.lines();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(lines[0], "✓ perf runs: /usr/bin/perf, version 6.1.176");
        assert!(
            lines[1].starts_with("! /usr/bin/bash has no symbols (stripped)"),
            "{lines:?}"
        );
        assert!(lines[1].contains("5afc8c6d1b9e02356cce218bf0109c3687ad9f.debug"));
        assert!(
            lines[3].starts_with("! frame pointers: only 5 of 2094"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_source_build_needs_symbols_debuginfo_frame_pointers_and_perf() {
        let check = ImageCheck {
            perf: Err(format!("no {}", crate::error::PERF_SEARCH)),
            binary: Some(("/usr/local/bin/node".into(), Ok(stripped_bash()))),
            binary_required: true,
        };
        let (lines, problems) = check.lines();
        assert!(
            lines.iter().filter(|l| l.starts_with('✗')).count() == 4,
            "{lines:?}"
        );
        assert_eq!(
            problems,
            vec![
                format!("perf does not run: no {}", crate::error::PERF_SEARCH),
                "/usr/local/bin/node has no symbols".to_string(),
                "/usr/local/bin/node has no debug info".to_string(),
                "/usr/local/bin/node has no frame pointers".to_string(),
            ]
        );
    }
}
