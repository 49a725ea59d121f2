//! `devprof render FILE`: a flamegraph again, from folded stacks (or perf.data), with
//! another layout, palette or filter.

use crate::cli::RenderArgs;
use crate::error::{Error, Result};
use crate::profile::folded::Folded;
use crate::render::{write_svg_lines_to, SvgOutput};
use crate::settings::store::RenderSettings;
use crate::store::loader;

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
            settings.filter.describe()
        )
    });
    write_svg_lines_to(
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
