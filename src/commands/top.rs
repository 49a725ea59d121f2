//! `devprof top FILE|CAPTURE|TARGET`: the heaviest functions of a profile, who calls a
//! family of frames, and how the samples split between modules. A name in the store is
//! resolved as every store command resolves it (`store::loader::resolve`); a target's
//! capture is its newest of `--kind` (cpu by default), and a line on stderr says which.

use crate::cli::TopArgs;
use crate::error::{Error, Result};
use crate::profile::top::{self, Callers, Row};
use crate::settings::store::TopSettings;
use crate::store::loader;
use crate::ui::table::{self, pct};
use crate::units::thousands;
use std::path::PathBuf;

pub fn run(args: TopArgs, output_dir: PathBuf) -> Result<()> {
    let slices = args.slices.clone();
    let kind = args.kind.map(|k| k.name());
    let settings = TopSettings::from_args(args, output_dir)?;
    if let Some(mark) = &slices.slice {
        let sliced = super::slices::load(&settings.profile, &settings.output_dir, mark, kind)?;
        return super::slices::top(&sliced, slices.slowest, settings.limit, settings.json);
    }
    let set = loader::load_set_kind(&settings.profile, &settings.output_dir, kind)?;
    say_picked("top", &set.whole);
    if set.is_set && settings.callers.is_none() && settings.modules.is_none() {
        return super::sets::top(
            &set,
            &settings.filter,
            settings.limit,
            settings.confidence,
            settings.json,
        );
    }
    let loaded = set.whole;
    let folded = settings.filter.apply(&loaded.folded);
    if folded.is_empty() {
        return Err(Error::EmptyProfile {
            path: loaded.path.display().to_string(),
            reason: Some("after --include/--exclude/--preset".into()),
            hint: "loosen the filters".into(),
        });
    }
    let total = folded.total();
    let rankings = settings.callers.is_none() && settings.modules.is_none();
    let by_self = rankings.then(|| top::by_self(&folded, settings.limit));
    let by_inclusive = rankings.then(|| top::by_inclusive(&folded, settings.limit));
    let callers = settings
        .callers
        .as_ref()
        .map(|q| top::callers(&folded, &q.pattern, q.module.as_ref(), settings.limit));
    let modules = settings
        .modules
        .as_ref()
        .map(|re| top::modules(&folded, re));

    if settings.json {
        let json = serde_json::json!({
            "file": loaded.path,
            "capture": loaded.capture.as_ref().map(|c| c.name()),
            "kind": loaded.capture.as_ref().map(|c| c.manifest.kind.as_str()),
            "total": total,
            "unit": loaded.unit,
            "self": by_self,
            "inclusive": by_inclusive,
            "callers": callers.as_ref().map(|c| serde_json::json!({
                "pattern": settings.callers.as_ref().map(|q| q.pattern.as_str()),
                "module": settings.callers.as_ref().and_then(|q| q.module.as_ref().map(|m| m.as_str())),
                "matched": c.matched,
                "matched_percent": c.matched_percent,
                "rows": c.rows,
            })),
            "modules": modules.as_ref().map(|rows| serde_json::json!({
                "regex": settings.modules.as_ref().map(|m| m.as_str()),
                "rows": rows,
            })),
        });
        crate::ui::output::print_json(&json);
        return Ok(());
    }

    let unit = loaded.unit;
    let mut out = format!("{}: {} {unit}\n", loaded.path.display(), thousands(total));
    if let Some(rows) = &by_self {
        out.push_str(&format!(
            "\ntop {} by self {unit} (leaf frame)\n",
            rows.len()
        ));
        out.push_str(&rows_table(rows, unit, "FUNCTION"));
    }
    if let Some(rows) = &by_inclusive {
        out.push_str(&format!(
            "\ntop {} by inclusive {unit} (anywhere on the stack)\n",
            rows.len()
        ));
        out.push_str(&rows_table(rows, unit, "FUNCTION"));
    }
    if let (Some(c), Some(q)) = (&callers, &settings.callers) {
        out.push_str(&callers_text(
            c,
            unit,
            q.pattern.as_str(),
            q.module.as_ref().map(|m| m.as_str()),
        ));
    }
    if let (Some(rows), Some(re)) = (&modules, &settings.modules) {
        out.push_str(&format!(
            "\nmodules /{re}/ (innermost matching frame; % of all {unit})\n"
        ));
        out.push_str(&rows_table(rows, unit, "MODULE"));
    }
    crate::out!("{out}");
    Ok(())
}

/// The line that says which capture a name in the store stood for, on stderr (nothing
/// when the command was given the capture itself).
pub fn say_picked(command: &str, loaded: &loader::Loaded) {
    if let Some(how) = &loaded.picked {
        crate::say!("{command}: {how}");
    }
}

fn callers_text(c: &Callers, unit: &str, pattern: &str, module: Option<&str>) -> String {
    let nearest = match module {
        Some(m) => format!("nearest caller matching /{m}/"),
        None => "immediate caller".to_string(),
    };
    let mut out = format!(
        "\ncallers of /{pattern}/ ({nearest}): {} {unit}, {}% of all\n",
        thousands(c.matched),
        pct(c.matched_percent)
    );
    if c.matched == 0 {
        out.push_str("  no frame matches the pattern\n");
    } else {
        out.push_str(&rows_table(&c.rows, unit, "CALLER (% of matched)"));
    }
    out
}

fn rows_table(rows: &[Row], unit: &str, what: &str) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| vec![thousands(r.samples), pct(r.percent), r.name.clone()])
        .collect();
    table::render(&[&unit.to_uppercase(), "%", what], "RRL", &cells, 2)
}
