//! Two captures compared, with the code `devprof diff` runs on their folded files: each
//! read and computed as `devprof diff BEFORE.json AFTER.json` reads and computes it, by the
//! same functions. Two single captures: the totals, the largest gains and losses of each
//! function's share, and the differential flamegraph (red grew, blue shrank). A capture set (`--repeat K`) on either side: per function the change with
//! its interval and the verdict of Welch's test over the windows, Holm-corrected
//! (`stat_diff::functions::compare_sets`), and the flamegraph coloured only where a verdict
//! is regressed or improved; within noise has no colour.

use super::{escape, table, url_encode, Page, Problem, Section};
use crate::profile::diff::{compare, differential_lines, significant_lines, DiffRow, Measure};
use crate::profile::folded::Folded;
use crate::profile::stat_diff::functions::{
    compare_sets, Delta, Direction, FunctionChange, SetDiff, VerdictBasis, WindowCounts,
};
use crate::render::{differential_subtitle, write_svg_lines, Layout};
use crate::store::catalog::Capture;
use crate::store::loader::{self, Loaded, LoadedSet, ProfileRef};
use crate::units::thousands;
use crate::view::library::{CaptureId, Library};
use std::collections::HashSet;

/// Rows of gains and of losses: `devprof diff`'s default `--limit`.
pub const ROWS: usize = 15;
/// The confidence of intervals and verdicts over capture sets: `devprof diff`'s default
/// `--confidence`.
pub const CONFIDENCE: f64 = 0.95;

/// The two captures of a comparison and how functions are weighed.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRequest {
    pub before: CaptureId,
    pub after: CaptureId,
    pub measure: Measure,
}

impl DiffRequest {
    /// `before=ID&after=ID`, or two `capture=ID` (ticked in the list; the older is before).
    pub fn parse(library: &Library, query: &[(String, String)]) -> Result<DiffRequest, Problem> {
        let values = |key: &str| -> Vec<&str> {
            query
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        let id = |text: &str| {
            CaptureId::parse(text)
                .ok_or_else(|| Problem::bad_request(format!("'{text}' is not a capture id")))
        };
        let measure = match values("by").first().copied() {
            None | Some("self") => Measure::SelfTime,
            Some("inclusive") => Measure::Inclusive,
            Some(other) => {
                return Err(Problem::bad_request(format!(
                    "by={other}: expected self or inclusive"
                )))
            }
        };
        let (before, after) = match (values("before").as_slice(), values("after").as_slice()) {
            ([b], [a]) => (id(b)?, id(a)?),
            ([], []) => match values("capture").as_slice() {
                [x, y] => {
                    let (x, y) = (id(x)?, id(y)?);
                    let created = |i: &CaptureId| library.capture(i).map(|c| c.created);
                    if created(&y) < created(&x) {
                        (y, x)
                    } else {
                        (x, y)
                    }
                }
                ticked => {
                    return Err(Problem::bad_request(format!(
                        "tick exactly two captures to compare ({} ticked)",
                        ticked.len()
                    )))
                }
            },
            _ => {
                return Err(Problem::bad_request(
                    "name one capture as before= and one as after=",
                ))
            }
        };
        Ok(DiffRequest {
            before,
            after,
            measure,
        })
    }

    fn query(&self) -> String {
        format!(
            "before={}&after={}&by={}",
            url_encode(&self.before.to_string()),
            url_encode(&self.after.to_string()),
            by_name(self.measure)
        )
    }
}

fn by_name(measure: Measure) -> &'static str {
    match measure {
        Measure::SelfTime => "self",
        Measure::Inclusive => "inclusive",
    }
}

/// A capture read as `devprof diff` reads its manifest: the windows of a capture set (its
/// parts, each with its length), or one window.
fn load(library: &Library, id: &CaptureId) -> Result<(Capture, LoadedSet), Problem> {
    let capture = library
        .capture(id)
        .ok_or_else(|| Problem::not_found(format!("no capture {id} in the store")))?;
    if capture
        .file_with_extension("folded")
        .filter(|p| p.is_file())
        .is_none()
    {
        return Err(Problem::bad_request(format!(
            "{id} has no folded stacks to compare (a {} capture)",
            capture.manifest.kind
        )));
    }
    let loaded = loader::load_set(
        &ProfileRef::File(capture.manifest_path.clone()),
        library.output_dir(),
    )
    .map_err(|e| Problem {
        status: 500,
        message: e.to_string(),
    })?;
    if loaded.whole.folded.is_empty() {
        return Err(Problem::bad_request(format!("{id} has no samples")));
    }
    Ok((capture, loaded))
}

fn file_name(loaded: &Loaded) -> String {
    loaded
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn rows_table(id: &str, rows: &[&DiffRow]) -> String {
    if rows.is_empty() {
        return format!(r#"<p id="{id}" class="empty">none</p>"#);
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let [before, after, change] = r.shown();
            let change = format!(r#"<span class="delta">{change}</span>"#);
            let name = format!(r#"<span class="fn">{}</span>"#, escape(&r.name));
            vec![before, after, change, name]
        })
        .collect();
    table(
        "rows",
        &["before %", "after %", "change", "function"],
        &cells,
    )
    .replacen("<table", &format!(r#"<table id="{id}""#), 1)
}

fn side(label: &str, id: &CaptureId, capture: &Capture, set: &LoadedSet, total: u64) -> String {
    // What the sides are, as `devprof diff` describes them when a set is compared.
    let windows = if set.is_set {
        format!(" · a capture set of {} windows", set.windows.len())
    } else {
        " · one window".to_string()
    };
    format!(
        r#"<tr><th>{label}</th><td><a href="{}">{}</a> ({}<span id="{label}-windows" data-windows="{}">{}</span>)</td><td><code>{}</code></td><td class="num"><span id="{label}-total">{}</span> {}</td></tr>"#,
        id.href(),
        escape(&id.to_string()),
        escape(&capture.manifest.kind),
        set.windows.len(),
        escape(&windows),
        escape(&set.whole.path.display().to_string()),
        thousands(total),
        if capture.manifest.kind == "heap" {
            "bytes"
        } else {
            "samples"
        },
    )
}

pub fn diff_page(library: &Library, request: &DiffRequest) -> Result<Page, Problem> {
    let (bc, before) = load(library, &request.before)?;
    let (ac, after) = load(library, &request.after)?;
    let mut body = format!(
        "<h1>Diff</h1>\n<table class=\"facts\" id=\"diff-totals\">{}{}</table>\n",
        side(
            "before",
            &request.before,
            &bc,
            &before,
            before.whole.folded.total()
        ),
        side(
            "after",
            &request.after,
            &ac,
            &after,
            after.whole.folded.total()
        ),
    );
    // The CLI's test of the measures (it refuses without --mixed; the viewer says it).
    if let Some(mixed) = crate::store::loader::mixed_measures(&before.whole, &after.whole) {
        body.push_str(&format!(
            r#"<p class="warning">Different measures: {}; their shares do not compare.</p>"#,
            escape(&mixed)
        ));
    }
    let swapped = DiffRequest {
        before: request.after.clone(),
        after: request.before.clone(),
        measure: request.measure,
    };
    if before.is_set || after.is_set {
        body.push_str(&set_comparison(&before, &after, &swapped));
    } else {
        body.push_str(&share_comparison(
            &before.whole,
            &after.whole,
            request,
            &swapped,
        ));
    }
    let graph_note = if before.is_set || after.is_set {
        "widths are the after profile; coloured only where the verdict is regressed (red) or improved (blue)"
    } else {
        "widths are the after profile; red grew, blue shrank"
    };
    body.push_str(&format!(
        r#"<h2>Differential flamegraph</h2><p class="note">{graph_note} · <a href="/diff.svg?{q}" target="_blank" rel="noopener">open alone</a></p>
<iframe class="graph autosize" id="diff-graph" sandbox="allow-scripts" title="differential flamegraph" src="/diff.svg?{q}"></iframe>
"#,
        q = request.query()
    ));
    Ok(Page {
        title: format!("diff {} → {}", request.before, request.after),
        section: Section::Captures,
        body,
    })
}

/// Two single captures: the largest gains and losses of each function's share, as
/// `devprof diff` prints them.
fn share_comparison(
    before: &Loaded,
    after: &Loaded,
    request: &DiffRequest,
    swapped: &DiffRequest,
) -> String {
    let diff = compare(&before.folded, &after.folded, request.measure);
    let other = DiffRequest {
        measure: match request.measure {
            Measure::SelfTime => Measure::Inclusive,
            Measure::Inclusive => Measure::SelfTime,
        },
        ..request.clone()
    };
    let mut body = format!(
        r#"<p class="note">Shares of each profile's own total, by <b id="measure">{}</b> samples; change in percentage points. <a id="swap" href="/diff?{}">swap</a> · <a href="/diff?{}">by {}</a></p>"#,
        by_name(request.measure),
        swapped.query(),
        other.query(),
        by_name(other.measure),
    );
    body.push_str("<div class=\"halves\"><section><h2>Largest gains</h2>");
    body.push_str(&rows_table("gains", &diff.gains(ROWS)));
    body.push_str("</section><section><h2>Largest losses</h2>");
    body.push_str(&rows_table("losses", &diff.losses(ROWS)));
    body.push_str("</section></div>\n");
    body
}

/// Each window of a set as `devprof diff` counts it (no filter: the viewer has none).
fn window_counts(set: &LoadedSet) -> Vec<WindowCounts> {
    set.windows
        .iter()
        .map(|(folded, seconds)| WindowCounts::of(folded, *seconds))
        .collect()
}

/// The comparison `devprof diff` makes when a side is a capture set.
fn compare_windows(before: &LoadedSet, after: &LoadedSet) -> SetDiff {
    compare_sets(&window_counts(before), &window_counts(after), CONFIDENCE)
}

/// The functions whose verdict stands out of the noise (regressed or improved).
fn significant(d: &SetDiff) -> HashSet<String> {
    d.functions
        .iter()
        .filter(|f| matches!(f.verdict, Direction::Regressed | Direction::Improved))
        .map(|f| f.name.clone())
        .collect()
}

/// The rows `devprof diff` prints: every significant function, then the largest other
/// changes, up to `ROWS` in all.
fn shown_rows<'a>(d: &'a SetDiff, significant: &HashSet<String>) -> Vec<&'a FunctionChange> {
    let mut rows: Vec<&FunctionChange> = d
        .functions
        .iter()
        .filter(|f| significant.contains(&f.name))
        .collect();
    for f in &d.functions {
        if rows.len() >= ROWS.max(significant.len()) {
            break;
        }
        if !significant.contains(&f.name) {
            rows.push(f);
        }
    }
    rows
}

/// A change with its interval, as `devprof diff` prints it: `+1.23 ±0.45`.
fn delta(d: &Delta, digits: usize) -> String {
    match d.ci {
        Some(ci) => format!("{:+.digits$} ±{:.digits$}", d.change, ci),
        None => format!("{:+.digits$}", d.change),
    }
}

/// A verdict's name as `devprof diff --json` gives it (`within_noise`), and the class that
/// colours it: none unless it stands out of the noise.
fn verdict_class(verdict: Direction) -> (&'static str, &'static str) {
    match verdict {
        Direction::Regressed => ("regressed", "regressed"),
        Direction::Improved => ("improved", "improved"),
        Direction::WithinNoise => ("within_noise", ""),
        Direction::NoiseUnknown => ("noise_unknown", ""),
    }
}

fn set_comparison(before: &LoadedSet, after: &LoadedSet, swapped: &DiffRequest) -> String {
    let d = compare_windows(before, after);
    let significant = significant(&d);
    let mut body = format!(
        r#"<p class="note" id="method">verdicts at {:.0}% on self samples {}, Holm-corrected over {} functions; intervals (±) at {:.0}%, uncorrected. The same comparison as <code>devprof diff</code> of these captures. <a id="swap" href="/diff?{}">swap</a></p>"#,
        d.confidence * 100.0,
        match d.basis {
            VerdictBasis::Rate => "per second",
            VerdictBasis::Share => "as shares",
        },
        d.functions_compared,
        d.confidence * 100.0,
        swapped.query(),
    );
    if let Some(t) = &d.total_rate {
        let (name, class) = verdict_class(t.verdict);
        body.push_str(&format!(
            r#"<p id="total-rate" class="{class}" data-verdict="{name}">samples per second: {:.1} → {:.1} (<span class="delta">{}</span>; <span class="verdict">{}</span>)</p>"#,
            t.before,
            t.after,
            delta(t, 1),
            t.verdict.words()
        ));
    }
    body.push_str(
        r#"<table class="rows set-functions" id="set-functions"><thead><tr><th>self % before</th><th>after</th><th>change pp</th><th>self /s change</th><th>incl pp</th><th>verdict</th><th>function</th></tr></thead><tbody>
"#,
    );
    for f in shown_rows(&d, &significant) {
        let (name, class) = verdict_class(f.verdict);
        body.push_str(&format!(
            r#"<tr class="{class}" data-verdict="{name}"><td>{:.2}</td><td>{:.2}</td><td class="self-change"><span class="delta">{}</span></td><td class="rate-change">{}</td><td class="incl-change">{}</td><td class="verdict">{}</td><td><span class="fn">{}</span></td></tr>
"#,
            f.self_share.before,
            f.self_share.after,
            delta(&f.self_share, 2),
            f.self_rate.as_ref().map_or("-".into(), |r| delta(r, 1)),
            delta(&f.incl_share, 2),
            f.verdict.words(),
            escape(&f.name),
        ));
    }
    body.push_str("</tbody></table>\n");
    if !d.notes.is_empty() {
        body.push_str("<ul class=\"notes\" id=\"diff-notes\">");
        for note in &d.notes {
            body.push_str(&format!("<li>note: {}</li>", escape(note)));
        }
        body.push_str("</ul>\n");
    }
    body
}

/// The differential flamegraph SVG, drawn as `devprof diff` draws it.
pub fn diff_svg(library: &Library, request: &DiffRequest) -> Result<Vec<u8>, Problem> {
    let (_, before) = load(library, &request.before)?;
    let (_, after) = load(library, &request.after)?;
    let failed = |e: std::io::Error| Problem {
        status: 500,
        message: format!("draw the differential flamegraph: {e}"),
    };
    let (b, a): (&Folded, &Folded) = (&before.whole.folded, &after.whole.folded);
    let (lines, subtitle) = if before.is_set || after.is_set {
        let d = compare_windows(&before, &after);
        let lines = significant_lines(b, a, &significant(&d)).map_err(failed)?;
        let subtitle = format!(
            "coloured only where the change is significant at {:.0}% (Holm over {} functions): red regressed, blue improved",
            d.confidence * 100.0,
            d.functions_compared
        );
        (lines, subtitle)
    } else {
        let lines = differential_lines(b, a).map_err(failed)?;
        (lines, differential_subtitle(a.total(), after.whole.unit))
    };
    let title = format!("{} → {}", file_name(&before.whole), file_name(&after.whole));
    let mut out = Vec::new();
    write_svg_lines(
        &lines,
        &title,
        Some(subtitle),
        after.whole.unit,
        &Layout::default(),
        &mut out,
    )
    .map_err(failed)?;
    Ok(out)
}
