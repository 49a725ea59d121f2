//! Capture sets in `top` and `diff`: per-function means and intervals over a set's
//! windows, and the regression gate: per-function verdicts, the differential flamegraph
//! coloured by significant changes only, `--fail-if`.

use crate::error::{Error, Result};
use crate::profile::diff::significant_lines;
use crate::profile::filter::StackFilter;
use crate::profile::folded::Folded;
use crate::profile::stat_diff::functions::{
    compare_sets, summarize, Delta, Direction, Estimate, SetDiff, WindowCounts,
};
use crate::render::{write_svg_lines_to, SvgOutput};
use crate::settings::store::DiffSettings;
use crate::store::loader::LoadedSet;
use crate::ui::table;
use std::collections::HashSet;

fn filtered(filter: &StackFilter, folded: &Folded, path: &std::path::Path) -> Result<Folded> {
    let f = filter.apply(folded);
    if f.is_empty() {
        return Err(Error::EmptyProfile {
            path: path.display().to_string(),
            reason: Some("after --include/--exclude/--preset".into()),
            hint: "loosen the filters".into(),
        });
    }
    Ok(f)
}

fn windows(set: &LoadedSet, filter: &StackFilter) -> Vec<WindowCounts> {
    set.windows
        .iter()
        .map(|(folded, seconds)| WindowCounts::of(&filter.apply(folded), *seconds))
        .collect()
}

fn describe(set: &LoadedSet) -> String {
    if set.is_set {
        format!(
            "{} (a capture set of {} windows)",
            set.whole.path.display(),
            set.windows.len()
        )
    } else {
        format!("{} (one window)", set.whole.path.display())
    }
}

fn est(e: &Estimate, digits: usize) -> String {
    match e.ci {
        Some(ci) => format!("{:.digits$} ±{:.digits$}", e.mean, ci),
        None => format!("{:.digits$}", e.mean),
    }
}

/// `top SET`: per function the mean self and inclusive share and rate over the windows.
pub fn top(
    set: &LoadedSet,
    filter: &StackFilter,
    limit: usize,
    confidence: f64,
    json: bool,
) -> Result<()> {
    filtered(filter, &set.whole.folded, &set.whole.path)?;
    let summary = summarize(&windows(set, filter), confidence);
    if json {
        crate::ui::output::print_json(&serde_json::json!({
            "file": set.whole.path,
            "capture": set.whole.capture.as_ref().map(|c| c.name()),
            "set": summary,
            "method": "mean over windows; interval: Student's t over the windows' spread",
        }));
        return Ok(());
    }
    let mut out = format!(
        "{}: samples per window {}\n",
        describe(set),
        summary
            .samples_per_window
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(total) = &summary.total_rate {
        out.push_str(&format!("samples per second: {}\n", est(total, 1)));
    }
    out.push_str(&format!(
        "\ntop {} by mean self share over the windows (± {:.0}% interval, Student's t over {} windows)\n",
        limit.min(summary.functions.len()),
        confidence * 100.0,
        summary.windows
    ));
    let cells: Vec<Vec<String>> = summary
        .functions
        .iter()
        .take(limit)
        .map(|f| {
            vec![
                est(&f.self_share, 2),
                f.self_rate.as_ref().map_or("-".into(), |e| est(e, 1)),
                est(&f.incl_share, 2),
                f.incl_rate.as_ref().map_or("-".into(), |e| est(e, 1)),
                f.name.clone(),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["SELF %", "SELF /s", "INCL %", "INCL /s", "FUNCTION"],
        "RRRRL",
        &cells,
        2,
    ));
    crate::out!("{out}");
    Ok(())
}

fn delta(d: &Delta, digits: usize) -> String {
    match d.ci {
        Some(ci) => format!("{:+.digits$} ±{:.digits$}", d.change, ci),
        None => format!("{:+.digits$}", d.change),
    }
}

/// `diff` with a capture set on either side, or with `--fail-if`.
pub fn diff(settings: &DiffSettings, before: &LoadedSet, after: &LoadedSet) -> Result<()> {
    let b_whole = filtered(&settings.filter, &before.whole.folded, &before.whole.path)?;
    let a_whole = filtered(&settings.filter, &after.whole.folded, &after.whole.path)?;
    let d: SetDiff = compare_sets(
        &windows(before, &settings.filter),
        &windows(after, &settings.filter),
        settings.confidence,
    );
    let significant: HashSet<String> = d
        .functions
        .iter()
        .filter(|f| matches!(f.verdict, Direction::Regressed | Direction::Improved))
        .map(|f| f.name.clone())
        .collect();
    let lines = significant_lines(&b_whole, &a_whole, &significant)
        .map_err(|e| Error::io("compute the differential", e))?;
    let title = settings.svg.title.clone().unwrap_or_else(|| {
        let name = |s: &LoadedSet| {
            s.whole
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        format!("{} → {}", name(before), name(after))
    });
    let subtitle = format!(
        "coloured only where the change is significant at {:.0}% (Holm over {} functions): red regressed, blue improved",
        settings.confidence * 100.0,
        d.functions_compared
    );
    write_svg_lines_to(
        &settings.svg.output,
        &lines,
        &title,
        Some(subtitle),
        after.whole.unit,
        &settings.svg.layout,
    )?;
    let mut tripped = Vec::new();
    for condition in &settings.fail_if {
        if let Some(why) = condition
            .check(&d)
            .map_err(|e| Error::Usage(e.to_string()))?
        {
            tripped.push(why);
        }
    }
    let svg = match &settings.svg.output {
        SvgOutput::File(p) => Some(p.clone()),
        SvgOutput::Stdout => None,
    };
    let emit = |text: String| match settings.svg.output {
        SvgOutput::Stdout => crate::ui::term::eprint(&text),
        SvgOutput::File(_) => crate::out!("{text}"),
    };
    if settings.json {
        let value = serde_json::json!({
            "kind": "functions",
            "before": {"file": before.whole.path, "windows": before.windows.len(), "set": before.is_set},
            "after": {"file": after.whole.path, "windows": after.windows.len(), "set": after.is_set},
            "flamegraph": svg,
            "comparison": d,
            "fail_if": settings.fail_if.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            "tripped": tripped,
        });
        emit(format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        ));
    } else {
        let mut out = format!(
            "before: {}\nafter:  {}\nverdicts at {:.0}% on self samples {}, Holm-corrected over {} functions; intervals (±) at {:.0}%, uncorrected\n",
            describe(before),
            describe(after),
            settings.confidence * 100.0,
            match d.basis {
                crate::profile::stat_diff::functions::VerdictBasis::Rate => "per second",
                crate::profile::stat_diff::functions::VerdictBasis::Share => "as shares",
            },
            d.functions_compared,
            settings.confidence * 100.0,
        );
        if let Some(t) = &d.total_rate {
            out.push_str(&format!(
                "samples per second: {:.1} → {:.1} ({}; {})\n",
                t.before,
                t.after,
                delta(t, 1),
                t.verdict.words()
            ));
        }
        let mut rows: Vec<_> = d
            .functions
            .iter()
            .filter(|f| significant.contains(&f.name))
            .collect();
        for f in &d.functions {
            if rows.len() >= settings.limit.max(significant.len()) {
                break;
            }
            if !significant.contains(&f.name) {
                rows.push(f);
            }
        }
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|f| {
                vec![
                    format!("{:.2}", f.self_share.before),
                    format!("{:.2}", f.self_share.after),
                    delta(&f.self_share, 2),
                    f.self_rate.as_ref().map_or("-".into(), |r| delta(r, 1)),
                    delta(&f.incl_share, 2),
                    f.verdict.words().to_string(),
                    f.name.clone(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table::render(
            &[
                "SELF % BEFORE",
                "AFTER",
                "CHANGE pp",
                "SELF /s CHANGE",
                "INCL pp",
                "VERDICT",
                "FUNCTION",
            ],
            "RRRRRLL",
            &cells,
            2,
        ));
        for note in &d.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        if let Some(path) = &svg {
            out.push_str(&format!("\ndifferential flamegraph: {}\n", path.display()));
        }
        emit(out);
    }
    if tripped.is_empty() {
        Ok(())
    } else {
        Err(Error::GateTripped {
            conditions: tripped,
        })
    }
}
