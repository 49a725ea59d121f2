//! Validated settings of the store commands (`ls`, `clean`, `render`, `top`, `diff`, `view`),
//! made once from the command line; nothing past this point sees the raw strings.

use crate::cli::{
    CleanArgs, DiffArgs, ExportArgs, ExportFormatArg, FilterArgs, LayoutArgs, LsArgs, MeasureArg,
    PresetArg, RenderArgs, TopArgs, ViewArgs,
};
use crate::error::{Error, Result};
use crate::profile::diff::Measure;
use crate::profile::filter::{Preset, StackFilter};
use crate::render::{Layout, SvgOutput};
use crate::store::loader::ProfileRef;
use crate::store::names::TargetName;
use crate::units::parse_duration;
use inferno::flamegraph::color::Palette;
use regex::Regex;
use std::path::PathBuf;
use std::time::Duration;

fn container(target: Option<String>) -> Result<Option<String>> {
    match target {
        Some(t) if TargetName::parse(&t).is_none() => Err(TargetName::invalid(&t, "TARGET")),
        other => Ok(other),
    }
}

fn regex(text: Option<String>, flag: &str) -> Result<Option<Regex>> {
    text.map(|t| {
        Regex::new(&t).map_err(|e| Error::Usage(format!("{flag}: invalid regex '{t}': {e}")))
    })
    .transpose()
}

fn filter(args: FilterArgs) -> Result<StackFilter> {
    Ok(StackFilter {
        include: regex(args.include, "--include")?,
        exclude: regex(args.exclude, "--exclude")?,
        preset: args.preset.map(|p| match p {
            PresetArg::Node => Preset::Node,
        }),
    })
}

fn limit(n: usize) -> Result<usize> {
    if n == 0 {
        return Err(Error::Usage("--limit must be at least 1".into()));
    }
    Ok(n)
}

/// Layout flags shared by render and diff, with the default output file.
#[derive(Debug, Clone)]
pub struct SvgSettings {
    pub title: Option<String>,
    pub layout: Layout,
    pub output: SvgOutput,
    /// `-o` was given (else `output` is the default name).
    pub output_given: bool,
}

fn svg_settings(args: LayoutArgs, default_output: PathBuf) -> Result<SvgSettings> {
    if !(0.0..100.0).contains(&args.min_width) {
        return Err(Error::Usage(format!(
            "--min-width {} is out of range (0 to 100 percent of the width)",
            args.min_width
        )));
    }
    if let Some(w) = args.width {
        if !(100..=100_000).contains(&w) {
            return Err(Error::Usage(format!(
                "--width {w} is out of range (100..=100000 pixels)"
            )));
        }
    }
    let output_given = args.output.is_some();
    let output = match args.output {
        Some(p) if p.as_os_str() == "-" => SvgOutput::Stdout,
        Some(p) => SvgOutput::File(p),
        None => SvgOutput::File(default_output),
    };
    Ok(SvgSettings {
        title: args.title,
        layout: Layout {
            width: args.width,
            min_width: args.min_width,
            ..Layout::default()
        },
        output,
        output_given,
    })
}

/// The name of a profile for default output names: `perf-20261122-101500` or the container.
fn short_name(profile: &ProfileRef) -> String {
    match profile {
        ProfileRef::File(p) => p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "profile".into()),
        ProfileRef::Newest(c) => c.replace('/', "-"),
    }
}

#[derive(Debug, Clone)]
pub struct LsSettings {
    pub output_dir: PathBuf,
    pub container: Option<String>,
    /// List sessions instead of captures.
    pub sessions: bool,
    pub json: bool,
}

impl LsSettings {
    pub fn from_args(args: LsArgs, output_dir: PathBuf) -> Result<Self> {
        Ok(LsSettings {
            output_dir,
            container: container(args.target)?,
            sessions: args.sessions,
            json: args.json,
        })
    }
}

#[derive(Debug, Clone)]
pub struct CleanSettings {
    pub output_dir: PathBuf,
    pub container: Option<String>,
    pub older: Duration,
    pub keep_last: usize,
    pub dry_run: bool,
    pub json: bool,
}

impl CleanSettings {
    pub fn from_args(args: CleanArgs, output_dir: PathBuf) -> Result<Self> {
        let age = args
            .older
            .as_deref()
            .ok_or_else(|| Error::Usage("clean needs --older AGE (or --containers)".into()))?;
        let older =
            parse_duration(age).map_err(|e| Error::Usage(format!("invalid --older AGE {e}")))?;
        Ok(CleanSettings {
            output_dir,
            container: container(args.target)?,
            older,
            keep_last: args.keep_last,
            dry_run: args.dry_run,
            json: args.json,
        })
    }
}

#[derive(Debug, Clone)]
pub struct RenderSettings {
    pub input: PathBuf,
    pub svg: SvgSettings,
    pub filter: StackFilter,
}

impl RenderSettings {
    pub fn from_args(args: RenderArgs) -> Result<Self> {
        let palette: Palette = args.colors.parse().map_err(|_| {
            Error::Usage(format!(
                "--colors '{}' is not a palette; use one of: {}",
                args.colors,
                Palette::VARIANTS.join(", ")
            ))
        })?;
        let stem = short_name(&ProfileRef::File(args.file.clone()));
        let mut svg = svg_settings(args.layout, PathBuf::from(format!("{stem}.svg")))?;
        svg.layout.palette = palette;
        svg.layout.inverted = args.inverted;
        svg.layout.reverse = args.reverse;
        Ok(RenderSettings {
            input: args.file,
            svg,
            filter: filter(args.filter)?,
        })
    }
}

/// What `top` computes besides the self and inclusive rankings.
#[derive(Debug, Clone)]
pub struct CallersQuery {
    pub pattern: Regex,
    pub module: Option<Regex>,
}

#[derive(Debug, Clone)]
pub struct TopSettings {
    pub output_dir: PathBuf,
    pub profile: ProfileRef,
    pub limit: usize,
    pub callers: Option<CallersQuery>,
    pub modules: Option<Regex>,
    pub json: bool,
    pub filter: StackFilter,
    pub confidence: f64,
}

impl TopSettings {
    pub fn from_args(args: TopArgs, output_dir: PathBuf) -> Result<Self> {
        let callers = match regex(args.callers, "--callers")? {
            Some(pattern) => Some(CallersQuery {
                pattern,
                module: regex(args.module, "--module")?,
            }),
            None => None,
        };
        Ok(TopSettings {
            output_dir,
            profile: ProfileRef::parse(&args.profile, "FILE|TARGET")?,
            limit: limit(args.limit)?,
            callers,
            modules: regex(args.modules, "--modules")?,
            json: args.json,
            filter: filter(args.filter)?,
            confidence: confidence(&args.confidence)?,
        })
    }
}

#[derive(Debug, Clone)]
pub struct DiffSettings {
    pub output_dir: PathBuf,
    pub before: ProfileRef,
    pub after: ProfileRef,
    pub limit: usize,
    pub measure: Measure,
    pub svg: SvgSettings,
    pub json: bool,
    pub filter: StackFilter,
    /// Conditions that fail the run (`--fail-if`), parsed.
    pub fail_if: Vec<crate::profile::stat_diff::fail_if::FailIf>,
    /// Confidence of intervals and verdicts over capture sets (0.95).
    pub confidence: f64,
}

impl DiffSettings {
    pub fn from_args(args: DiffArgs, output_dir: PathBuf) -> Result<Self> {
        let before = ProfileRef::parse(&args.before, "BEFORE")?;
        // With --slice there is one capture: it stands for both.
        let after = ProfileRef::parse(args.after.as_deref().unwrap_or(&args.before), "AFTER")?;
        let default_output = PathBuf::from(format!(
            "diff-{}-{}.svg",
            short_name(&before),
            short_name(&after)
        ));
        Ok(DiffSettings {
            output_dir,
            before,
            after,
            limit: limit(args.limit)?,
            measure: match args.by {
                MeasureArg::SelfTime => Measure::SelfTime,
                MeasureArg::Inclusive => Measure::Inclusive,
            },
            svg: svg_settings(args.layout, default_output)?,
            json: args.json,
            filter: filter(args.filter)?,
            fail_if: args
                .fail_if
                .iter()
                .map(|t| {
                    crate::profile::stat_diff::fail_if::FailIf::parse(t)
                        .map_err(|e| Error::Usage(e.to_string()))
                })
                .collect::<Result<_>>()?,
            confidence: confidence(&args.confidence)?,
        })
    }
}

/// `--confidence 95`, `95%` or `0.95`: a level between 50% and 99.99%.
pub fn confidence(text: &str) -> Result<f64> {
    let t = text.trim();
    let value: Option<f64> = t.trim_end_matches('%').trim().parse().ok();
    let level = match value {
        Some(v) if t.ends_with('%') || v > 1.0 => v / 100.0,
        Some(v) => v,
        None => -1.0,
    };
    if !(0.5..=0.9999).contains(&level) {
        return Err(Error::Usage(format!(
            "--confidence '{text}': give a level from 50 to 99.99 (95, 95% or 0.95)"
        )));
    }
    Ok(level)
}

#[derive(Debug, Clone)]
pub struct ViewSettings {
    pub output_dir: PathBuf,
    /// What the first page shows (a capture, a container, a session), as typed.
    pub start: Option<String>,
    /// 0: any free port.
    pub port: u16,
    pub open: bool,
}

impl ViewSettings {
    pub fn from_args(args: ViewArgs, output_dir: PathBuf) -> Result<Self> {
        let start = match args.start {
            Some(s) if s.trim().is_empty() => {
                return Err(Error::Usage(
                    "the page to start on is empty: name a capture, a container or a session, or leave it out"
                        .into(),
                ))
            }
            other => other,
        };
        Ok(ViewSettings {
            output_dir,
            start,
            port: args.port.unwrap_or(0),
            open: args.open,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_refs_are_files_or_container_names() {
        assert_eq!(
            ProfileRef::parse("demo-seq", "X").unwrap(),
            ProfileRef::Newest("demo-seq".into())
        );
        assert_eq!(
            ProfileRef::parse("perf-1.folded", "X").unwrap(),
            ProfileRef::File("perf-1.folded".into())
        );
        assert_eq!(
            ProfileRef::parse("devnet/op-reth-seq", "X").unwrap(),
            ProfileRef::Newest("devnet/op-reth-seq".into())
        );
        assert_eq!(
            ProfileRef::parse("profiling/demo-seq/perf-1.folded", "X").unwrap(),
            ProfileRef::File("profiling/demo-seq/perf-1.folded".into())
        );
        let store = tempfile::tempdir().unwrap();
        let existing = store.path().join("demo-seq");
        std::fs::create_dir(&existing).unwrap();
        let text = existing.display().to_string();
        assert_eq!(
            ProfileRef::parse(&text, "X").unwrap(),
            ProfileRef::File(existing)
        );
        assert!(ProfileRef::parse("", "X").is_err());
        assert!(ProfileRef::parse("a b", "X").is_err());
    }

    #[test]
    fn clean_age_uses_the_duration_grammar() {
        let args = |older: &str| CleanArgs {
            target: None,
            older: Some(older.into()),
            containers: false,
            keep_last: 0,
            dry_run: false,
            json: false,
        };
        let s = CleanSettings::from_args(args("7d"), "p".into()).unwrap();
        assert_eq!(s.older, Duration::from_secs(7 * 86_400));
        assert_eq!(
            CleanSettings::from_args(args("12h"), "p".into())
                .unwrap()
                .older,
            Duration::from_secs(12 * 3_600)
        );
        let err = CleanSettings::from_args(args("7x"), "p".into()).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::USAGE);
        let bad_target = CleanArgs {
            target: Some("../etc".into()),
            ..args("7d")
        };
        assert!(CleanSettings::from_args(bad_target, "p".into()).is_err());
    }
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Pprof,
    Speedscope,
    Firefox,
    Collapsed,
}

impl ExportFormat {
    /// The default file's extension.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Pprof => "pb.gz",
            ExportFormat::Speedscope => "speedscope.json",
            ExportFormat::Firefox => "firefox.json",
            ExportFormat::Collapsed => "collapsed",
        }
    }
}

/// Where an export goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportOutput {
    Stdout,
    File(PathBuf),
    /// `./<capture>.<extension>`, named once the capture is known.
    Default,
}

#[derive(Debug, Clone)]
pub struct ExportSettings {
    pub output_dir: PathBuf,
    pub capture: ProfileRef,
    pub format: ExportFormat,
    pub output: ExportOutput,
}

impl ExportSettings {
    pub fn from_args(args: ExportArgs, output_dir: PathBuf) -> Result<Self> {
        let output = match args.output {
            Some(p) if p.as_os_str() == "-" => ExportOutput::Stdout,
            Some(p) if p.is_dir() => {
                return Err(Error::Usage(format!(
                    "--output {} is a directory; give a file name",
                    p.display()
                )))
            }
            Some(p) => ExportOutput::File(p),
            None => ExportOutput::Default,
        };
        Ok(ExportSettings {
            output_dir,
            capture: ProfileRef::parse(&args.capture, "CAPTURE")?,
            format: match args.format {
                ExportFormatArg::Pprof => ExportFormat::Pprof,
                ExportFormatArg::Speedscope => ExportFormat::Speedscope,
                ExportFormatArg::Firefox => ExportFormat::Firefox,
                ExportFormatArg::Collapsed => ExportFormat::Collapsed,
            },
            output,
        })
    }
}
