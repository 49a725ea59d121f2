//! `devprof render FILE`: a flamegraph again, from folded stacks (or perf.data), with
//! another layout, palette or filter.

use crate::cli::RenderArgs;
use crate::error::{Error, Result};
use crate::fold::Folded;
use crate::loader;
use crate::render::{write_svg_lines, Layout};
use crate::store_settings::{RenderSettings, SvgOutput};
use std::io::{self, BufWriter, Write};
use std::path::Path;

pub fn run(args: RenderArgs) -> Result<()> {
    let settings = RenderSettings::from_args(args)?;
    let folded = loader::read(&settings.input)?;
    let shown = settings.filter.apply(&folded);
    if shown.is_empty() {
        return Err(Error::EmptyProfile {
            path: settings.input.display().to_string(),
            reason: Some("after --include/--exclude/--preset".into()),
            hint: "loosen the filters".into(),
        });
    }
    let file_name = settings
        .input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let title = settings
        .svg
        .title
        .clone()
        .unwrap_or_else(|| format!("{file_name}: {} samples", shown.total()));
    let subtitle = (!settings.filter.is_noop()).then(|| {
        format!(
            "{} of {} samples shown ({})",
            shown.total(),
            folded.total(),
            describe_filter(&settings.filter)
        )
    });
    write_svg(
        &settings.svg.output,
        &shown.lines().collect::<Vec<_>>(),
        &title,
        subtitle,
        &settings.svg.layout,
    )?;
    report(&settings.svg.output, &shown);
    Ok(())
}

fn report(output: &SvgOutput, folded: &Folded) {
    let what = format!(
        "{} samples in {} stacks",
        folded.total(),
        folded.stacks.len()
    );
    match output {
        SvgOutput::File(path) => println!("flamegraph: {} ({what})", path.display()),
        SvgOutput::Stdout => eprintln!("{what}"),
    }
}

/// The filters in words, for subtitles.
pub fn describe_filter(filter: &crate::analysis::filter::StackFilter) -> String {
    let mut parts = Vec::new();
    if filter.preset.is_some() {
        parts.push("preset node".to_string());
    }
    if let Some(re) = &filter.include {
        parts.push(format!("include /{re}/"));
    }
    if let Some(re) = &filter.exclude {
        parts.push(format!("exclude /{re}/"));
    }
    parts.join(", ")
}

/// Writes a flamegraph of folded or differential `lines` where the settings say.
pub fn write_svg(
    output: &SvgOutput,
    lines: &[String],
    title: &str,
    subtitle: Option<String>,
    layout: &Layout,
) -> Result<()> {
    match output {
        SvgOutput::Stdout => {
            let mut out = BufWriter::new(io::stdout().lock());
            write_svg_lines(lines, title, subtitle, layout, &mut out)
                .and_then(|()| out.flush())
                .map_err(|e| Error::io("write the SVG to standard output", e))
        }
        SvgOutput::File(path) => write_svg_file(path, lines, title, subtitle, layout),
    }
}

fn write_svg_file(
    path: &Path,
    lines: &[String],
    title: &str,
    subtitle: Option<String>,
    layout: &Layout,
) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
    let mut out = BufWriter::new(file);
    write_svg_lines(lines, title, subtitle, layout, &mut out)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}
