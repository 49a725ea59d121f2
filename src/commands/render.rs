//! `devprof render FILE`: a flamegraph again, from folded stacks (or perf.data), with
//! another layout, palette or filter; `devprof render --heatmap CAPTURE`: the capture's
//! time heatmap page again. A name in the store is resolved as every store command
//! resolves it (`store::loader::resolve`: a target's newest capture of `--kind`, cpu by
//! default, said on stderr).

use crate::cli::RenderArgs;
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::render::{write_svg_lines_to, SvgOutput};
use crate::settings::store::RenderSettings;
use crate::store::loader::{self, ProfileRef};
use std::path::PathBuf;

pub fn run(mut args: RenderArgs, output_dir: PathBuf) -> Result<()> {
    let kind = args.kind.map(|k| k.name());
    if args.heatmap {
        return heatmap(args, output_dir, kind);
    }
    // A name in the store (not a file) means a capture's folded stacks.
    let text = args.file.to_string_lossy().into_owned();
    if args.slices.slice.is_none() {
        if let Ok(name @ ProfileRef::Newest(_)) = ProfileRef::parse(&text, "FILE") {
            let resolved = loader::resolve(&name, &output_dir, kind)?;
            if let Some(how) = &resolved.picked {
                crate::say!("render: {how}");
            }
            args.file = resolved.path;
        }
    }
    let slices = args.slices.clone();
    let settings = RenderSettings::from_args(args)?;
    if let Some(mark) = &slices.slice {
        let text = settings.input.to_string_lossy().into_owned();
        let sliced = super::slices::load(
            &ProfileRef::parse(&text, "CAPTURE")?,
            &output_dir,
            mark,
            kind,
        )?;
        let dir = match &settings.svg.output {
            SvgOutput::File(p) if settings.svg.output_given => Some(p.clone()),
            SvgOutput::File(_) => None,
            SvgOutput::Stdout => {
                return Err(Error::Usage(
                    "--slice writes one SVG per interval: give -o DIR, not -".into(),
                ))
            }
        };
        return super::slices::render(&sliced, slices.slowest, dir, &settings.svg.layout);
    }
    let folded = loader::read(&settings.input)?;
    let unit = loader::unit_of(
        &settings.input,
        loader::capture_of_file(&settings.input).as_ref(),
    );
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
        .unwrap_or_else(|| format!("{file_name}: {} {unit}", shown.total()));
    let subtitle = (!settings.filter.is_noop()).then(|| {
        format!(
            "{} of {} {unit} shown ({})",
            shown.total(),
            folded.total(),
            settings.filter.describe()
        )
    });
    write_svg_lines_to(
        &settings.svg.output,
        &shown.lines().collect::<Vec<_>>(),
        &title,
        subtitle,
        unit,
        &settings.svg.layout,
    )?;
    report(&settings.svg.output, &shown, unit);
    Ok(())
}

fn report(output: &SvgOutput, folded: &Folded, unit: &str) {
    let what = format!(
        "{} {unit} in {} stacks",
        folded.total(),
        folded.stacks.len()
    );
    match output {
        SvgOutput::File(path) => crate::outln!("flamegraph: {} ({what})", path.display()),
        SvgOutput::Stdout => crate::say!("{what}"),
    }
}

fn heatmap(args: RenderArgs, output_dir: PathBuf, kind: Option<&str>) -> Result<()> {
    let text = args.file.to_string_lossy().into_owned();
    let resolved = loader::resolve(&ProfileRef::parse(&text, "CAPTURE")?, &output_dir, kind)?;
    if let Some(how) = &resolved.picked {
        crate::say!("render: {how}");
    }
    let (folded, capture) = (resolved.path, resolved.capture);
    let capture = capture.ok_or_else(|| {
        Error::Usage(format!(
            "{} is not part of a capture devprof wrote (no manifest beside it): the heatmap needs the capture's .timeline",
            folded.display()
        ))
    })?;
    let timeline = capture
        .file_with_extension("timeline")
        .filter(|p| p.is_file())
        .ok_or_else(|| Error::EmptyProfile {
            path: capture.manifest_path.display().to_string(),
            reason: Some("the capture has no .timeline".into()),
            hint: "heatmaps need a cpu or offcpu capture made by this version of devprof".into(),
        })?;
    let output = match args.layout.output {
        Some(path) if path.as_os_str() != "-" => path,
        Some(_) => {
            return Err(Error::Usage(
                "--heatmap writes a file; give -o FILE.html".into(),
            ))
        }
        None => PathBuf::from(format!("{}.html", capture.name())),
    };
    let unit = if capture.manifest.kind == "offcpu" {
        "events"
    } else {
        "samples"
    };
    let title = format!(
        "{} — {} — {}",
        capture.container,
        capture.name(),
        capture.manifest.kind
    );
    let samples = crate::render::write_heatmap_file(&timeline, &title, unit, &output)?;
    crate::outln!("heatmap: {} ({samples} {unit})", output.display());
    Ok(())
}
