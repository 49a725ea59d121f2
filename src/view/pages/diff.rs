//! Two captures compared, with the code `devprof diff` runs on their folded files: the
//! totals, the largest gains and losses of each function's share, and the differential
//! flamegraph (red grew, blue shrank).

use super::{escape, table, url_encode, Page, Problem, Section};
use crate::profile::diff::{compare, differential_lines, DiffRow, Measure};
use crate::profile::folded::Folded;
use crate::render::{differential_subtitle, write_svg_lines, Layout};
use crate::store::catalog::Capture;
use crate::store::loader::{self, Loaded, ProfileRef};
use crate::units::thousands;
use crate::view::library::{CaptureId, Library};

/// Rows of gains and of losses: `devprof diff`'s default `--limit`.
pub const ROWS: usize = 15;

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

/// A capture's folded stacks, read as `devprof diff` reads a .folded file.
fn load(library: &Library, id: &CaptureId) -> Result<(Capture, Loaded), Problem> {
    let capture = library
        .capture(id)
        .ok_or_else(|| Problem::not_found(format!("no capture {id} in the store")))?;
    let folded = capture
        .file_with_extension("folded")
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            Problem::bad_request(format!(
                "{id} has no folded stacks to compare (a {} capture)",
                capture.manifest.kind
            ))
        })?;
    let loaded =
        loader::load(&ProfileRef::File(folded), library.output_dir()).map_err(|e| Problem {
            status: 500,
            message: e.to_string(),
        })?;
    if loaded.folded.is_empty() {
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

fn side(label: &str, id: &CaptureId, capture: &Capture, loaded: &Loaded, total: u64) -> String {
    format!(
        r#"<tr><th>{label}</th><td><a href="{}">{}</a> ({})</td><td><code>{}</code></td><td class="num"><span id="{label}-total">{}</span> {}</td></tr>"#,
        id.href(),
        escape(&id.to_string()),
        escape(&capture.manifest.kind),
        escape(&loaded.path.display().to_string()),
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
    let diff = compare(&before.folded, &after.folded, request.measure);
    let mut body = format!(
        "<h1>Diff</h1>\n<table class=\"facts\" id=\"diff-totals\">{}{}</table>\n",
        side("before", &request.before, &bc, &before, diff.before_total),
        side("after", &request.after, &ac, &after, diff.after_total),
    );
    if bc.manifest.kind != ac.manifest.kind {
        body.push_str(&format!(
            r#"<p class="warning">A {} capture compared with a {} capture: their units differ.</p>"#,
            escape(&bc.manifest.kind),
            escape(&ac.manifest.kind)
        ));
    }
    let swapped = DiffRequest {
        before: request.after.clone(),
        after: request.before.clone(),
        measure: request.measure,
    };
    let other = DiffRequest {
        measure: match request.measure {
            Measure::SelfTime => Measure::Inclusive,
            Measure::Inclusive => Measure::SelfTime,
        },
        ..request.clone()
    };
    body.push_str(&format!(
        r#"<p class="note">Shares of each profile's own total, by <b id="measure">{}</b> samples; change in percentage points. <a id="swap" href="/diff?{}">swap</a> · <a href="/diff?{}">by {}</a></p>"#,
        by_name(request.measure),
        swapped.query(),
        other.query(),
        by_name(other.measure),
    ));
    body.push_str("<div class=\"halves\"><section><h2>Largest gains</h2>");
    body.push_str(&rows_table("gains", &diff.gains(ROWS)));
    body.push_str("</section><section><h2>Largest losses</h2>");
    body.push_str(&rows_table("losses", &diff.losses(ROWS)));
    body.push_str("</section></div>\n");
    body.push_str(&format!(
        r#"<h2>Differential flamegraph</h2><p class="note">widths are the after profile; red grew, blue shrank · <a href="/diff.svg?{q}" target="_blank">open alone</a></p>
<iframe class="graph autosize" id="diff-graph" title="differential flamegraph" src="/diff.svg?{q}"></iframe>
"#,
        q = request.query()
    ));
    Ok(Page {
        title: format!("diff {} → {}", request.before, request.after),
        section: Section::Captures,
        body,
    })
}

/// The differential flamegraph SVG, drawn as `devprof diff` draws it.
pub fn diff_svg(library: &Library, request: &DiffRequest) -> Result<Vec<u8>, Problem> {
    let (_, before) = load(library, &request.before)?;
    let (_, after) = load(library, &request.after)?;
    differential_svg(&before, &after)
}

fn differential_svg(before: &Loaded, after: &Loaded) -> Result<Vec<u8>, Problem> {
    let failed = |e: std::io::Error| Problem {
        status: 500,
        message: format!("draw the differential flamegraph: {e}"),
    };
    let (b, a): (&Folded, &Folded) = (&before.folded, &after.folded);
    let lines = differential_lines(b, a).map_err(failed)?;
    let title = format!("{} → {}", file_name(before), file_name(after));
    let mut out = Vec::new();
    write_svg_lines(
        &lines,
        &title,
        Some(differential_subtitle(a.total(), after.unit)),
        after.unit,
        &Layout::default(),
        &mut out,
    )
    .map_err(failed)?;
    Ok(out)
}
