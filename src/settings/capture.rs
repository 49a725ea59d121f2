//! Settings of the capture commands (cpu, offcpu, heap).

use super::{
    call_graph_of, config_dirs, fold_path_of, placement_of, selector_of, target_of, window_of,
    AsprofOptions, CallGraph, EngineSpec, FoldPath, Placement, PythonOptions,
};
use crate::cli::{CpuArgs, HeapArgs, OffcpuArgs, StatArgs};
use crate::docker::target::ProcessSelector;
use crate::error::{Error, Result};
use crate::profile::heap::dumps::{Selection, Signal};
use crate::profile::heap::parse::Measure;
use crate::profile::offcpu::config::{self, EventConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most windows `--repeat K` cuts a capture into.
pub const MAX_REPEAT_PARTS: u32 = 100;

#[derive(Debug, Clone)]
pub struct CpuSettings {
    pub placement: Placement,
    /// The engine and its options.
    pub engine: EngineSpec,
    pub target: String,
    pub duration: Duration,
    pub frequency: u32,
    pub call_graph: CallGraph,
    pub fold: FoldPath,
    pub process: ProcessSelector,
    pub keep_script: bool,
    pub inline: bool,
    pub output_dir: PathBuf,
    pub json: bool,
    /// Open the result in a browser when done.
    pub open: bool,
    /// A command run in the target container, recorded from its start to its end
    /// (`duration` is then only a limit).
    pub command: Option<Vec<String>>,
    /// `--repeat K`: the window cut into K back-to-back parts (1: one window, no set).
    pub repeat: u32,
}

/// Longest a command run may take (cpu -- CMD).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(6 * 3600);

/// perf's default frequency for a window, and for a command run (as perf's own examples).
const WINDOW_FREQUENCY: u32 = 999;
const COMMAND_FREQUENCY: u32 = 997;

/// A command after `--`: none, or a non-empty one; a DURATION with it is an error (the
/// command's run is the window).
fn command_of(command: Vec<String>, duration: Option<&str>) -> Result<Option<Vec<String>>> {
    if command.is_empty() {
        return Ok(None);
    }
    if command[0].trim().is_empty() {
        return Err(Error::Usage("the command after `--` is empty".into()));
    }
    if let Some(d) = duration {
        return Err(Error::Usage(format!(
            "DURATION ({d}) and a command after `--` both say when the capture ends: the command's run is the window; drop DURATION"
        )));
    }
    Ok(Some(command))
}

impl CpuSettings {
    pub fn from_args(args: CpuArgs, output_dir: PathBuf) -> Result<Self> {
        let engine = engine_spec_of(&args, !args.command.is_empty())?;
        let command = command_of(args.command, args.duration.as_deref())?;
        let frequency = args.frequency.unwrap_or(if command.is_some() {
            COMMAND_FREQUENCY
        } else {
            WINDOW_FREQUENCY
        });
        if !(1..=100_000).contains(&frequency) {
            return Err(Error::Usage(format!(
                "--frequency {frequency} is out of range (1..=100000 Hz)"
            )));
        }
        if args.keep_script && args.fold == crate::cli::FoldArg::Native {
            return Err(Error::Usage(
                "--keep-script keeps perf script's text, which --fold native does not make (use --fold auto or perf-script)".into(),
            ));
        }
        if command.is_some() && args.placement.mode == crate::cli::ModeArg::Sidecar {
            return Err(Error::Usage(
                "a command runs inside the target container (its files, environment and user): use --mode exec or auto".into(),
            ));
        }
        let repeat = match (args.repeat, &command) {
            (None, _) => 1,
            (Some(0), _) => return Err(Error::Usage("--repeat K: K must be at least 1".into())),
            (Some(k), _) if k > MAX_REPEAT_PARTS => {
                return Err(Error::Usage(format!(
                    "--repeat {k} is over the {} limit",
                    MAX_REPEAT_PARTS
                )))
            }
            (Some(k), Some(_)) if k > 1 => {
                return Err(Error::Usage(
                    "--repeat cuts a window into parts: give a DURATION, not a command after `--`"
                        .into(),
                ))
            }
            (Some(_), _) if engine.records_with_perf() == Some(false) => {
                return Err(Error::Usage(
                    "--repeat cuts the window by sample time, which needs perf's per-sample timeline: use --engine perf or auto".into(),
                ))
            }
            (Some(k), _) => k,
        };
        let duration = match (&command, &args.duration) {
            (Some(_), _) => COMMAND_LIMIT,
            (None, Some(d)) => window_of(d)?,
            (None, None) => window_of(&args.default_duration)?,
        };
        Ok(CpuSettings {
            placement: placement_of(args.placement, duration)?,
            engine,
            target: target_of(args.target)?,
            duration,
            frequency,
            call_graph: call_graph_of(args.call_graph),
            fold: fold_path_of(args.fold, call_graph_of(args.call_graph))?,
            process: selector_of(args.process)?,
            keep_script: args.keep_script,
            inline: args.inline && !args.no_inline,
            output_dir,
            json: args.json,
            open: args.open,
            command,
            repeat,
        })
    }
}

/// What `devprof stat` counts: the running process over a window, or a command run N times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatSource {
    Window(Duration),
    Command { argv: Vec<String>, repeat: u32 },
}

#[derive(Debug, Clone)]
pub struct StatSettings {
    pub placement: Placement,
    pub target: String,
    pub source: StatSource,
    pub events: Vec<String>,
    pub process: ProcessSelector,
    pub output_dir: PathBuf,
    pub json: bool,
}

/// More runs than this is a typo, not a benchmark.
const MAX_REPEAT: u32 = 10_000;

impl StatSettings {
    pub fn from_args(args: StatArgs, output_dir: PathBuf) -> Result<Self> {
        let events = match args.events.as_deref() {
            None => crate::profile::stat::DEFAULT_EVENTS
                .iter()
                .map(|e| e.to_string())
                .collect(),
            Some(text) => stat_events(text)?,
        };
        if !args.command.is_empty() {
            command_of(args.command.clone(), args.duration.as_deref())?;
        }
        let window = window_of(args.duration.as_deref().unwrap_or(&args.default_duration))?;
        let source = match (args.repeat, args.command.is_empty()) {
            (Some(0), _) => return Err(Error::Usage("--repeat N: N must be at least 1".into())),
            (Some(n), _) if n > MAX_REPEAT => {
                return Err(Error::Usage(format!(
                    "--repeat {n} is over the {MAX_REPEAT} limit"
                )))
            }
            (Some(_), true) => {
                return Err(Error::Usage(
                    "--repeat runs a command: give it after `--` (devprof stat TARGET --repeat 5 -- CMD ARGS...); the command after `--` is empty"
                        .into(),
                ))
            }
            (repeat, false) => {
                if args.command[0].trim().is_empty() {
                    return Err(Error::Usage("the command after `--` is empty".into()));
                }
                StatSource::Command {
                    argv: args.command,
                    repeat: repeat.unwrap_or(1),
                }
            }
            (None, true) => StatSource::Window(window),
        };
        Ok(StatSettings {
            placement: placement_of(args.placement, window)?,
            target: target_of(args.target)?,
            source,
            events,
            process: selector_of(args.process)?,
            output_dir,
            json: args.json,
        })
    }
}

/// `-e` names: comma-separated, none empty, each once. Whether perf knows them is for
/// perf to say (the capture asks it before counting).
fn stat_events(text: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split(',') {
        let name = raw.trim();
        if name.is_empty() {
            return Err(Error::Usage(format!(
                "-e {text}: empty event name in the list"
            )));
        }
        if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::Usage(format!("-e: '{name}' is not an event name")));
        }
        if out.iter().any(|n| n == name) {
            return Err(Error::Usage(format!("-e: '{name}' is listed twice")));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// async-profiler's launcher, relative to a release directory.
pub const ASPROF_BIN: &str = "bin/asprof";
/// The agent library the JVM loads, relative to a release directory.
pub const AGENT_LIB: &str = "lib/libasyncProfiler.so";

/// Checks that `dir` on this host is an async-profiler release directory; Err says what
/// is wrong and what was expected.
pub fn asprof_release_dir(dir: &Path) -> Result<PathBuf, String> {
    let expected = "an async-profiler release directory (the unpacked release tarball: bin/asprof and lib/libasyncProfiler.so)";
    if !dir.is_dir() {
        return Err(format!(
            "{} is not a directory; expected {expected}",
            dir.display()
        ));
    }
    for (name, executable) in [(ASPROF_BIN, true), (AGENT_LIB, false)] {
        let path = dir.join(name);
        let meta = std::fs::metadata(&path)
            .map_err(|_| format!("{} has no {name}; expected {expected}", dir.display()))?;
        if !meta.is_file() {
            return Err(format!(
                "{} is not a file; expected {expected}",
                path.display()
            ));
        }
        if !is_elf(&path) {
            return Err(format!(
                "{} is not a Linux (ELF) binary; expected {expected}",
                path.display()
            ));
        }
        if executable && !is_executable(&meta) {
            return Err(format!("{} is not executable", path.display()));
        }
    }
    dir.canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    true
}

/// Whether the summary symbolizes stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryMode {
    /// Fast above `threshold` recorded events, full below.
    Auto {
        threshold: u64,
    },
    Fast,
    Full,
}

#[derive(Debug, Clone)]
pub struct OffcpuSettings {
    pub placement: Placement,
    pub target: String,
    pub duration: Duration,
    pub config: EventConfig,
    pub mode: SummaryMode,
    pub call_graph: CallGraph,
    pub process: ProcessSelector,
    pub keep_script: bool,
    pub output_dir: PathBuf,
    pub json: bool,
    /// Open the result in a browser when done.
    pub open: bool,
}

impl OffcpuSettings {
    pub fn from_args(args: OffcpuArgs, output_dir: PathBuf) -> Result<Self> {
        let config = config::load(args.config.as_deref(), &config_dirs()).map_err(Error::Usage)?;
        if config.events.is_empty() {
            return Err(Error::Usage(format!(
                "event config {} lists no events",
                config.source
            )));
        }
        Ok(OffcpuSettings {
            placement: placement_of(args.placement, window_of(&args.duration)?)?,
            target: target_of(args.target)?,
            duration: window_of(&args.duration)?,
            config,
            mode: match (args.fast, args.full) {
                (true, _) => SummaryMode::Fast,
                (_, true) => SummaryMode::Full,
                _ => SummaryMode::Auto {
                    threshold: args.fast_threshold,
                },
            },
            call_graph: call_graph_of(args.call_graph),
            process: selector_of(args.process)?,
            keep_script: args.keep_script,
            output_dir,
            json: args.json,
            open: args.open,
        })
    }
}

/// What `devprof heap` renders: fresh dumps asked for over a window, or dumps the process
/// already wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeapSource {
    Window(Duration),
    Existing(Selection),
}

#[derive(Debug, Clone)]
pub struct HeapSettings {
    pub target: String,
    /// Go's net/http/pprof endpoint named by the user (`http://host:port`).
    pub pprof_url: Option<String>,
    /// The image of the container that fetches a Go profile (curl).
    pub profiler_image: String,
    pub source: HeapSource,
    pub measure: Measure,
    /// The signal that makes the program write a dump.
    pub signal: Signal,
    pub process: ProcessSelector,
    pub output_dir: PathBuf,
    pub json: bool,
    /// Open the result in a browser when done.
    pub open: bool,
}

impl HeapSettings {
    pub fn from_args(args: HeapArgs, output_dir: PathBuf) -> Result<Self> {
        let selection = match (args.latest, args.all, args.last, args.files.is_empty()) {
            (true, ..) => Some(Selection::Latest),
            (_, true, ..) => Some(Selection::All),
            (_, _, Some(0), _) => {
                return Err(Error::Usage("--last N: N must be at least 1".into()))
            }
            (_, _, Some(n), _) => Some(Selection::Last(n)),
            (_, _, None, false) => Some(Selection::Files(heap_file_names(&args.files)?)),
            _ => None,
        };
        let source = match (selection, args.duration) {
            (Some(_), Some(d)) => {
                return Err(Error::Usage(format!(
                    "DURATION ({d}) asks for fresh dumps; --latest, --all-dumps, --last and --files render dumps \
                     already written: give one or the other"
                )))
            }
            (Some(s), None) => HeapSource::Existing(s),
            (None, Some(d)) => HeapSource::Window(window_of(&d)?),
            (None, None) => HeapSource::Window(window_of(&args.default_duration)?),
        };
        let signal = Signal::parse(&args.signal)
            .map_err(|e| Error::Usage(format!("--signal / DEVPROF_HEAP_DUMP_SIGNAL: {e}")))?;
        Ok(HeapSettings {
            target: target_of(args.target)?,
            pprof_url: pprof_url_of(args.pprof_url)?,
            profiler_image: args.profiler_image,
            source,
            measure: if args.alloc {
                Measure::Allocated
            } else {
                Measure::InUse
            },
            signal,
            process: selector_of(args.process)?,
            output_dir,
            json: args.json,
            open: args.open,
        })
    }
}

/// `--engine` with the options of each engine, checked together: a command run records
/// with perf; async-profiler's flags need async-profiler (named, or auto on a JVM).
fn engine_spec_of(args: &CpuArgs, command_run: bool) -> Result<EngineSpec> {
    use crate::cli::EngineArg;
    // Checked before anything runs: a wrong directory must not cost a capture window.
    let dir = match args.asprof.as_ref().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => Some(
            asprof_release_dir(dir)
                .map_err(|e| Error::Usage(format!("--asprof / DEVPROF_ASPROF: {e}")))?,
        ),
        None => None,
    };
    let jvm = AsprofOptions {
        dir,
        wall: args.wall,
        html: args.asprof_html,
    };
    let python = PythonOptions {
        native: args.native,
        idle: args.idle,
        gil: args.gil,
    };
    if command_run {
        return match args.engine {
            EngineArg::Auto | EngineArg::Perf if jvm.needs_asprof().is_none() => Ok(EngineSpec::Perf),
            _ => Err(Error::Usage(
                "a command run (`-- CMD`) records with perf: drop --engine py-spy/asprof/pprof, --wall and --asprof-html".into(),
            )),
        };
    }
    Ok(match args.engine {
        EngineArg::Auto => EngineSpec::Auto { python, jvm },
        EngineArg::Asprof => EngineSpec::Asprof(jvm),
        _ if jvm.wall => return Err(Error::Usage(
            "--wall needs async-profiler (--engine asprof or auto on a JVM): perf samples on-CPU time only".into(),
        )),
        _ if jvm.html => return Err(Error::Usage(
            "--asprof-html keeps async-profiler's flamegraph: it needs --engine asprof or auto on a JVM".into(),
        )),
        EngineArg::Perf => EngineSpec::Perf,
        EngineArg::PySpy => EngineSpec::PySpy(python),
        EngineArg::Pprof => EngineSpec::Pprof {
            url: pprof_url_of(args.pprof_url.clone())?,
        },
    })
}

/// `--pprof-url`: `http://HOST:PORT`, optionally with `/debug/pprof/...` after it, as the
/// container reaches its own endpoint. Returns the base (`http://HOST:PORT`).
pub fn pprof_url_of(raw: Option<String>) -> Result<Option<String>> {
    let Some(raw) = raw.map(|r| r.trim().to_string()).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let bad = |why: &str| {
        Error::Usage(format!(
            "--pprof-url {raw}: {why}; expected http://HOST:PORT (e.g. http://127.0.0.1:6060), as the container reaches its own endpoint"
        ))
    };
    let rest = raw
        .strip_prefix("http://")
        .ok_or_else(|| bad("only http:// is served by net/http/pprof here"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if !path.is_empty() && !path.trim_end_matches('/').starts_with("debug/pprof") {
        return Err(bad("the path, if any, must be /debug/pprof/"));
    }
    let port_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok {
        return Err(bad("HOST:PORT is missing or the port is not a number"));
    }
    if authority
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || ".-:[]_".contains(c)))
    {
        return Err(bad("the host has characters a host name cannot have"));
    }
    Ok(Some(format!("http://{authority}")))
}

/// `--files` names: dump file names as jemalloc wrote them (looked up in the process's dump
/// directory), or absolute paths in the container (any file the user names), each once.
fn heap_file_names(names: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for raw in names {
        let name = raw.trim();
        if name.is_empty() {
            return Err(Error::Usage("--files: empty name in the list".into()));
        }
        let absolute = name.starts_with('/')
            && name.len() > 1
            && !name.ends_with('/')
            && !name.split('/').any(|part| part == "..");
        if !absolute && (name.contains('/') || name == "." || name == "..") {
            return Err(Error::Usage(format!(
                "--files: '{name}' is a relative path; give dump file names as the process wrote them \
                 (e.g. jeprof.demo-seq.6.0.m0.heap), which devprof looks up in the process's dump directory, \
                 or a file's absolute path in the container (e.g. /tmp/jeprof.7.0.m0.heap)"
            )));
        }
        if !absolute && !name.ends_with(".heap") {
            return Err(Error::Usage(format!(
                "--files: '{name}' is not a jemalloc dump name (<prefix>.<pid>.<seq>.<kind>.heap)"
            )));
        }
        if out.iter().any(|n| n == name) {
            return Err(Error::Usage(format!("--files: '{name}' is listed twice")));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine_of(args: &[&str]) -> Result<EngineSpec> {
        use clap::Parser;
        let line = ["devprof", "cpu"].into_iter().chain(args.iter().copied());
        let crate::cli::Command::Cpu(cpu) = crate::cli::Cli::try_parse_from(line).unwrap().command
        else {
            panic!("{args:?} is not a cpu command line");
        };
        let command_run = !cpu.command.is_empty();
        engine_spec_of(&cpu, command_run)
    }

    #[test]
    fn each_engine_carries_its_own_options_and_a_stray_one_is_named() {
        assert!(
            matches!(engine_of(&["x", "--wall"]), Ok(EngineSpec::Auto { jvm, .. }) if jvm.wall)
        );
        assert!(matches!(
            engine_of(&["x", "--engine", "py-spy", "--gil"]),
            Ok(EngineSpec::PySpy(p)) if p.gil && !p.native
        ));
        assert_eq!(
            engine_of(&["x", "--engine", "perf"]).unwrap(),
            EngineSpec::Perf
        );
        let wall = engine_of(&["x", "--engine", "perf", "--wall"]).unwrap_err();
        assert!(
            wall.to_string().contains("--wall needs async-profiler"),
            "{wall}"
        );
        let html = engine_of(&["x", "--engine", "py-spy", "--asprof-html"]).unwrap_err();
        assert!(html.to_string().contains("--asprof-html"), "{html}");
        assert!(matches!(
            engine_of(&["x", "--engine", "pprof", "--pprof-url", "http://127.0.0.1:6060/debug/pprof/"]),
            Ok(EngineSpec::Pprof { url: Some(u) }) if u == "http://127.0.0.1:6060"
        ));
        // A command run records with perf, and only perf.
        assert_eq!(engine_of(&["x", "--", "true"]).unwrap(), EngineSpec::Perf);
        assert!(engine_of(&["x", "--engine", "py-spy", "--", "true"]).is_err());
        assert!(engine_of(&["x", "--wall", "--", "true"]).is_err());
    }

    #[test]
    fn every_fold_path_works_with_both_call_graphs() {
        use crate::cli::FoldArg;
        assert_eq!(
            fold_path_of(FoldArg::Auto, CallGraph::Dwarf).unwrap(),
            FoldPath::Auto
        );
        assert_eq!(
            fold_path_of(FoldArg::Native, CallGraph::FramePointer).unwrap(),
            FoldPath::Native
        );
        assert_eq!(
            fold_path_of(FoldArg::Native, CallGraph::Dwarf).unwrap(),
            FoldPath::Native
        );
    }

    fn release(dir: &Path, lib: &[u8], exe_mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join(ASPROF_BIN), b"\x7fELF\x02\x01\x01").unwrap();
        std::fs::set_permissions(
            dir.join(ASPROF_BIN),
            std::fs::Permissions::from_mode(exe_mode),
        )
        .unwrap();
        std::fs::write(dir.join(AGENT_LIB), lib).unwrap();
    }

    #[test]
    fn pprof_urls_are_reduced_to_their_base_and_bad_ones_named() {
        let ok = |s: &str| pprof_url_of(Some(s.into())).unwrap().unwrap();
        assert_eq!(ok("http://127.0.0.1:6060"), "http://127.0.0.1:6060");
        assert_eq!(
            ok("http://localhost:6060/debug/pprof/"),
            "http://localhost:6060"
        );
        assert_eq!(ok("http://[::1]:6061/"), "http://[::1]:6061");
        assert_eq!(pprof_url_of(None).unwrap(), None);
        for bad in [
            "https://x:1",
            "127.0.0.1:6060",
            "http://host",
            "http://host:0",
            "http://host:99999",
            "http://host:6060/metrics",
            "http://ho st:1",
        ] {
            let e = pprof_url_of(Some(bad.into())).unwrap_err().to_string();
            assert!(e.contains("--pprof-url"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_release_layout_is_accepted_and_anything_else_named() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("async-profiler-4.5-linux-x64");
        release(&good, b"\x7fELF\x02", 0o755);
        assert!(asprof_release_dir(&good).is_ok());

        let e = asprof_release_dir(&tmp.path().join("missing")).unwrap_err();
        assert!(e.contains("is not a directory") && e.contains("bin/asprof"));

        let no_lib = tmp.path().join("no-lib");
        release(&no_lib, b"", 0o755);
        std::fs::remove_file(no_lib.join(AGENT_LIB)).unwrap();
        let e = asprof_release_dir(&no_lib).unwrap_err();
        assert!(e.contains("has no lib/libasyncProfiler.so"), "{e}");

        let text_lib = tmp.path().join("text-lib");
        release(&text_lib, b"not a library", 0o755);
        assert!(asprof_release_dir(&text_lib)
            .unwrap_err()
            .contains("not a Linux (ELF) binary"));

        let not_exec = tmp.path().join("not-exec");
        release(&not_exec, b"\x7fELF", 0o644);
        assert!(asprof_release_dir(&not_exec)
            .unwrap_err()
            .contains("is not executable"));
    }
}
