//! `devprof diff BEFORE AFTER`: a differential flamegraph and the functions whose share
//! of the samples grew or shrank most. Both sides are resolved as every store command
//! resolves a name (`store::loader::resolve`), of one kind; two profiles that measure
//! different things (CPU samples, off-CPU events or time, heap bytes) are refused unless
//! `--mixed`. The flamegraph goes beside AFTER's capture in the store unless `-o` says.

use crate::cli::DiffArgs;
use crate::error::{Error, Result};
use crate::profile::diff::{compare, differential_lines, DiffRow, Measure};
use crate::profile::folded::Folded;
use crate::profile::stat_diff::{self, short, Change};
use crate::render::{differential_subtitle, write_svg_lines_to, SvgOutput};
use crate::settings::store::DiffSettings;
use crate::store::catalog::{self, Capture};
use crate::store::loader::{self, Loaded};
use crate::ui::table;
use crate::units::thousands;
use std::path::PathBuf;

pub fn run(args: DiffArgs, output_dir: PathBuf) -> Result<()> {
    let slices = args.slices.clone();
    let kind = args.kind.map(|k| k.name());
    let mixed = args.mixed;
    let mut settings = DiffSettings::from_args(args, output_dir)?;
    if let Some(mark) = &slices.slice {
        let sliced = super::slices::load(&settings.before, &settings.output_dir, mark, kind)?;
        let output = if settings.svg.output_given {
            settings.svg.output.clone()
        } else {
            crate::render::SvgOutput::File(
                sliced
                    .capture
                    .dir
                    .join(format!("diff-{}-{mark}-slowest.svg", sliced.capture.name())),
            )
        };
        super::slices::diff(
            &sliced,
            slices.slowest.unwrap_or(3),
            settings.measure,
            settings.limit,
            &output,
            &settings.svg.layout,
            settings.json,
        )?;
        if !settings.svg.output_given {
            list_beside(&sliced.capture, &output);
        }
        return Ok(());
    }
    match (
        loader::stat_capture(&settings.before, &settings.output_dir, kind),
        loader::stat_capture(&settings.after, &settings.output_dir, kind),
    ) {
        (Some(_), Some(_)) if !settings.fail_if.is_empty() => {
            return Err(Error::Usage(
                "--fail-if judges functions of CPU captures; two stat captures are compared counter by counter without it".into(),
            ))
        }
        (Some(b), Some(a)) => return compare_stat(&b, &a, settings.json),
        (None, None) if kind == Some("stat") => {
            return Err(Error::Usage(
                "--kind stat compares two stat captures: BEFORE and AFTER must each be one, or a target that has one".into(),
            ))
        }
        (None, None) => {}
        (b, _) => {
            let (stat, other) = if b.is_some() {
                ("BEFORE", "AFTER")
            } else {
                ("AFTER", "BEFORE")
            };
            return Err(Error::Usage(format!(
                "{stat} is a stat capture (counters) and {other} is not: diff compares two stat captures, \
                 or two profiles with stacks"
            )));
        }
    }
    // A side the store chooses (a target, a session) is of the kind asked for, else of the
    // kind of a capture named on the other side, else cpu; a capture named is taken as it
    // is (of the kind asked for, if one is).
    let named_before = loader::named_kind(&settings.before, &settings.output_dir);
    let named_after = loader::named_kind(&settings.after, &settings.output_dir);
    let chosen: Option<String> = kind
        .map(str::to_string)
        .or_else(|| named_before.clone())
        .or_else(|| named_after.clone());
    let kind_of = |named: &Option<String>| match named {
        Some(_) => kind,
        None => chosen.as_deref(),
    };
    let before_set = loader::load_set_kind(
        &settings.before,
        &settings.output_dir,
        kind_of(&named_before),
    )?;
    let after_set =
        loader::load_set_kind(&settings.after, &settings.output_dir, kind_of(&named_after))?;
    for (side, set) in [("BEFORE", &before_set), ("AFTER", &after_set)] {
        if let Some(how) = &set.whole.picked {
            crate::say!("diff: {side} is {how}");
        }
    }
    if let Some(why) = loader::mixed_measures(&before_set.whole, &after_set.whole) {
        if !mixed {
            return Err(Error::Usage(format!(
                "{why}: diff compares shares of one measure. Compare captures of one kind (--kind \
                 cpu|offcpu|heap picks a target's newest of that kind), or pass --mixed to compare them anyway"
            )));
        }
        crate::warn!("{why}; compared anyway (--mixed): the shares are of different measures");
    }
    // The flamegraph goes beside AFTER's capture (else BEFORE's) unless -o says.
    let beside = (!settings.svg.output_given)
        .then(|| {
            after_set
                .whole
                .capture
                .clone()
                .or(before_set.whole.capture.clone())
        })
        .flatten();
    if let Some(capture) = &beside {
        let stem = |l: &Loaded| match &l.capture {
            Some(c) => c.name(),
            None => l
                .path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.split('.').next())
                .unwrap_or("profile")
                .to_string(),
        };
        settings.svg.output = SvgOutput::File(capture.dir.join(format!(
            "diff-{}-{}.svg",
            stem(&before_set.whole),
            stem(&after_set.whole)
        )));
    }
    if before_set.is_set || after_set.is_set || !settings.fail_if.is_empty() {
        let outcome = super::sets::diff(&settings, &before_set, &after_set);
        if let Some(capture) = &beside {
            list_beside(capture, &settings.svg.output);
        }
        return outcome;
    }
    let (before, after) = (before_set.whole, after_set.whole);
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
    let unit = after.unit;
    let mut subtitle = differential_subtitle(a.total(), unit);
    if !settings.filter.is_noop() {
        subtitle.push_str(&format!("; {}", settings.filter.describe()));
    }
    write_svg_lines_to(
        &settings.svg.output,
        &lines,
        &title,
        Some(subtitle),
        unit,
        &settings.svg.layout,
    )?;
    if let Some(capture) = &beside {
        list_beside(capture, &settings.svg.output);
    }

    let measure = match settings.measure {
        Measure::SelfTime => "self",
        Measure::Inclusive => "inclusive",
    };
    if settings.json {
        let json = serde_json::json!({
            "before": {"file": before.path, "capture": before.capture.as_ref().map(|c| c.name()), "total": diff.before_total, "unit": before.unit},
            "after": {"file": after.path, "capture": after.capture.as_ref().map(|c| c.name()), "total": diff.after_total, "unit": after.unit},
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
            SvgOutput::Stdout => crate::say!("{text}"),
            SvgOutput::File(_) => crate::outln!("{text}"),
        }
        return Ok(());
    }

    let mut out = format!(
        "before: {} ({} {})\nafter:  {} ({} {unit})\n\
         shares of each profile's own total, by {measure} {unit}; change in percentage points\n",
        before.path.display(),
        thousands(diff.before_total),
        before.unit,
        after.path.display(),
        thousands(diff.after_total),
    );
    out.push_str(&section("largest gains", &diff.gains(settings.limit)));
    out.push_str(&section("largest losses", &diff.losses(settings.limit)));
    if let SvgOutput::File(path) = &settings.svg.output {
        out.push_str(&format!("\ndifferential flamegraph: {}\n", path.display()));
    }
    match settings.svg.output {
        SvgOutput::Stdout => crate::ui::term::eprint(&out),
        SvgOutput::File(_) => crate::out!("{out}"),
    }
    Ok(())
}

/// Lists a flamegraph written beside a capture in its manifest (`catalog::list_beside`):
/// `clean` removes it with the capture. A manifest that cannot be written again (a store
/// shared read-only) only loses that.
fn list_beside(capture: &Capture, output: &SvgOutput) {
    if let SvgOutput::File(path) = output {
        if let Err(e) = catalog::list_beside(capture, path) {
            crate::note!(
                "{} is not listed in {}: {e}",
                path.display(),
                capture.manifest_path.display()
            );
        }
    }
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
            let mut cells = r.shown().to_vec();
            cells.push(r.name.clone());
            cells
        })
        .collect();
    out.push_str(&table::render(
        &["BEFORE %", "AFTER %", "CHANGE", "FUNCTION"],
        "RRRL",
        &cells,
        2,
    ));
    out
}

/// Two stat captures: per counter the change and, with repeats, the noise and a verdict.
fn compare_stat(before: &Capture, after: &Capture, json: bool) -> Result<()> {
    let record = |c: &Capture| {
        c.manifest.stat.clone().ok_or_else(|| {
            Error::Usage(format!(
                "{} is a stat capture without counters (an unfinished capture?)",
                c.manifest_path.display()
            ))
        })
    };
    let (b, a) = (record(before)?, record(after)?);
    let diff = stat_diff::compare(
        &b,
        before.manifest.duration_recorded_s,
        &a,
        after.manifest.duration_recorded_s,
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    if json {
        let value = serde_json::json!({
            "kind": "stat",
            "before": {"file": before.manifest_path, "runs": b.runs.len(), "duration_s": before.manifest.duration_recorded_s},
            "after": {"file": after.manifest_path, "runs": a.runs.len(), "duration_s": after.manifest.duration_recorded_s},
            "basis": diff.basis,
            "counters": diff.changes,
            "notes": diff.notes,
        });
        crate::ui::output::print_json(&value);
        return Ok(());
    }
    let side = |c: &Capture, r: &crate::profile::stat::StatRecord| {
        if r.command.is_empty() {
            format!(
                "{} (window of {:.1} s)",
                c.manifest_path.display(),
                c.manifest.duration_recorded_s
            )
        } else {
            format!(
                "{} ({} runs of `{}`)",
                c.manifest_path.display(),
                r.runs.len(),
                crate::capture::command::display(&r.command)
            )
        }
    };
    let mut out = format!(
        "before: {}\nafter:  {}\nvalues: {}; the verdict weighs the change against the noise of the runs (95% interval, Welch)\n\n",
        side(before, &b),
        side(after, &a),
        diff.basis.words()
    );
    let value = |s: Option<stat_diff::Side>| match s {
        None => "-".to_string(),
        Some(s) => match s.stddev {
            Some(sd) => format!("{} ±{}", short(s.mean), short(sd)),
            None => short(s.mean),
        },
    };
    let cells: Vec<Vec<String>> = diff
        .changes
        .iter()
        .map(|c: &Change| {
            vec![
                c.event.clone(),
                c.unit.clone(),
                value(c.before),
                value(c.after),
                c.change.map_or("-".into(), |d| {
                    if d >= 0.0 {
                        format!("+{}", short(d))
                    } else {
                        short(d)
                    }
                }),
                c.change_pct.map_or("-".into(), |p| format!("{p:+.1}%")),
                c.verdict_text(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "COUNTER", "UNIT", "BEFORE", "AFTER", "CHANGE", "%", "VERDICT",
        ],
        "LLRRRRL",
        &cells,
        2,
    ));
    for note in &diff.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    crate::out!("{out}");
    Ok(())
}
