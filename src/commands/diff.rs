//! `devprof diff BEFORE AFTER`: a differential flamegraph and the functions whose share
//! of the samples grew or shrank most.

use crate::cli::DiffArgs;
use crate::error::{Error, Result};
use crate::profile::diff::{compare, differential_lines, DiffRow, Measure};
use crate::profile::folded::Folded;
use crate::render::{write_svg_lines_to, SvgOutput};
use crate::settings::store::DiffSettings;
use crate::store::loader::{self, Loaded};
use crate::ui::table::{self, pct, Align};
use crate::units::thousands;
use std::path::PathBuf;

pub fn run(args: DiffArgs, output_dir: PathBuf) -> Result<()> {
    let settings = DiffSettings::from_args(args, output_dir)?;
    let before = loader::load(&settings.before, &settings.output_dir)?;
    let after = loader::load(&settings.after, &settings.output_dir)?;
    let filtered = |l: &Loaded| -> Result<Folded> {
        let f = settings.filter.apply(&l.folded);
        if f.is_empty() {
            return Err(Error::EmptyProfile {
                path: l.path.display().to_string(),
                reason: Some("after --include/--exclude/--preset".into()),
                hint: "loosen the filters".into(),
            });
        }
        Ok(f)
    };
    let (b, a) = (filtered(&before)?, filtered(&after)?);
    let diff = compare(&b, &a, settings.measure);

    let lines = differential_lines(&b, &a).map_err(|e| Error::io("compute the differential", e))?;
    let name = |l: &Loaded| {
        l.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let title = settings
        .svg
        .title
        .clone()
        .unwrap_or_else(|| format!("{} → {}", name(&before), name(&after)));
    let mut subtitle = format!(
        "before scaled to after's {} samples; red grew, blue shrank",
        thousands(a.total())
    );
    if !settings.filter.is_noop() {
        subtitle.push_str(&format!("; {}", settings.filter.describe()));
    }
    write_svg_lines_to(
        &settings.svg.output,
        &lines,
        &title,
        Some(subtitle),
        &settings.svg.layout,
    )?;

    let measure = match settings.measure {
        Measure::SelfTime => "self",
        Measure::Inclusive => "inclusive",
    };
    if settings.json {
        let json = serde_json::json!({
            "before": {"file": before.path, "total": diff.before_total},
            "after": {"file": after.path, "total": diff.after_total},
            "measure": measure,
            "flamegraph": match &settings.svg.output {
                SvgOutput::File(p) => Some(p.clone()),
                SvgOutput::Stdout => None,
            },
            "gains": diff.gains(settings.limit),
            "losses": diff.losses(settings.limit),
        });
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        match settings.svg.output {
            SvgOutput::Stdout => eprintln!("{text}"),
            SvgOutput::File(_) => println!("{text}"),
        }
        return Ok(());
    }

    let mut out = format!(
        "before: {} ({} samples)\nafter:  {} ({} samples)\n\
         shares of each profile's own total, by {measure} samples; change in percentage points\n",
        before.path.display(),
        thousands(diff.before_total),
        after.path.display(),
        thousands(diff.after_total),
    );
    out.push_str(&section("largest gains", &diff.gains(settings.limit)));
    out.push_str(&section("largest losses", &diff.losses(settings.limit)));
    if let SvgOutput::File(path) = &settings.svg.output {
        out.push_str(&format!("\ndifferential flamegraph: {}\n", path.display()));
    }
    match settings.svg.output {
        SvgOutput::Stdout => eprint!("{out}"),
        SvgOutput::File(_) => print!("{out}"),
    }
    Ok(())
}

fn section(heading: &str, rows: &[&DiffRow]) -> String {
    let mut out = format!("\n{heading}\n");
    if rows.is_empty() {
        out.push_str("  none\n");
        return out;
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                pct(r.before_percent),
                pct(r.after_percent),
                format!("{:+.2}", r.delta_points),
                r.name.clone(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["BEFORE %", "AFTER %", "CHANGE", "FUNCTION"],
        &[Align::Right, Align::Right, Align::Right, Align::Left],
        &cells,
        2,
    ));
    out
}
