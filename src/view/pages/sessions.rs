//! The sessions (`devprof profile` runs) and one session: its closing table (the figures
//! `devprof profile` prints, each verdict as a badge that wraps rather than being cut, its
//! reason beside it), and the captures it made, each linked to its page.

use super::{escape, table, Page, Problem, Section};
use crate::render::plot::{seconds_label, session_table};
use crate::store::session::SessionRow;
use crate::units::{human_bytes, thousands};
use crate::view::library::Library;
use std::fmt::Write as _;

pub fn sessions_page(library: &Library) -> Result<Page, Problem> {
    let sessions = library.sessions().map_err(|e| Problem {
        status: 500,
        message: e.to_string(),
    })?;
    let mut body = String::from("<h1>Sessions</h1>\n");
    if sessions.is_empty() {
        body.push_str(
            "<p class=\"empty\">No sessions yet: <code>devprof profile TARGETS 30 --kinds cpu,offcpu</code> records one.</p>",
        );
    } else {
        let rows: Vec<Vec<String>> = sessions
            .iter()
            .rev()
            .map(|(id, r)| {
                let failed = r.captures.iter().filter(|c| c.error.is_some()).count();
                vec![
                    format!(
                        r#"<a class="session-link" href="/session/{id}">{}</a>"#,
                        escape(&r.started_at)
                    ),
                    escape(&r.targets),
                    escape(&r.kinds.join(", ")),
                    seconds_label(r.duration_requested_s),
                    (r.captures.len() - failed).to_string(),
                    failed.to_string(),
                ]
            })
            .collect();
        body.push_str(&table(
            "rows",
            &["started", "targets", "kinds", "window", "written", "failed"],
            &rows,
        ));
    }
    Ok(Page {
        title: "Sessions".into(),
        section: Section::Sessions,
        body,
    })
}

pub fn session_page(library: &Library, id: &str) -> Result<Page, Problem> {
    let record = library
        .session(id)
        .ok_or_else(|| Problem::not_found(format!("no session {id} in the store")))?;
    let mut body = format!(
        r#"<h1>Session <span class="faint">{}</span></h1>
<p class="note">{} · kinds {} · window {}{} · <a href="/session/{id}/table.svg" target="_blank" rel="noopener">the table as a picture</a></p>
{}<p class="note" id="thresholds">{}</p>
<h2>Captures</h2>
"#,
        escape(id),
        escape(&record.started_at),
        escape(&record.kinds.join(", ")),
        seconds_label(record.duration_requested_s),
        if record.interrupted {
            " (stopped early)"
        } else {
            ""
        },
        rows_table(&record.rows),
        escape(&record.thresholds)
    );
    let rows: Vec<Vec<String>> = record
        .captures
        .iter()
        .map(|c| {
            let link = c
                .manifest
                .as_deref()
                .and_then(|m| library.capture_of_session_manifest(m))
                .map(|cid| format!(r#"<a href="{}">{}</a>"#, cid.href(), escape(&cid.name)))
                .unwrap_or_else(|| match &c.manifest {
                    Some(m) => format!("{} <span class=\"faint\">(gone)</span>", escape(m)),
                    None => "-".into(),
                });
            vec![
                escape(&c.container),
                escape(&c.kind),
                link,
                c.error.as_deref().map(escape).unwrap_or_default(),
            ]
        })
        .collect();
    body.push_str(&table(
        "rows",
        &["container", "kind", "capture", "error"],
        &rows,
    ));
    Ok(Page {
        title: format!("session {id}"),
        section: Section::Sessions,
        body,
    })
}

pub fn session_picture(library: &Library, id: &str) -> Result<String, Problem> {
    let record = library
        .session(id)
        .ok_or_else(|| Problem::not_found(format!("no session {id} in the store")))?;
    Ok(session_table(&record))
}

/// A verdict's class, by its bound's name in the record (`cpu-bound`, `waiting-other`).
fn bound_class(row: &SessionRow) -> String {
    row.verdict
        .as_ref()
        .and_then(|v| serde_json::to_value(v.bound).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The closing table, one row per container, with the figures as `devprof profile` prints
/// them; the verdict is a badge that wraps within its cell (never cut), its reason below.
fn rows_table(rows: &[SessionRow]) -> String {
    let mut out = String::from(
        r#"<table class="session-rows" id="session-rows"><thead><tr><th>container</th><th>CPU (of a core)</th><th>samples</th><th>heap growth</th><th>off-CPU (summed over threads)</th><th>verdict</th></tr></thead><tbody>
"#,
    );
    let dash = || "-".to_string();
    for r in rows {
        let cpu = r.cpu_cores.map_or_else(dash, |c| {
            format!(
                r#"<meter min="0" max="1" value="{c}"></meter> {:.0}%"#,
                c * 100.0
            )
        });
        let growth = r.heap_growth_bytes.map_or_else(dash, |b| {
            let sign = if b < 0 { "-" } else { "+" };
            format!("{sign}{}", human_bytes(b.unsigned_abs()))
        });
        let offcpu = r.offcpu_s.map_or_else(dash, |s| format!("{s:.1} thread-s"));
        let verdict = match (&r.verdict, r.errors.is_empty()) {
            (_, false) => format!(
                r#"<span class="verdict-badge failed">failed</span><div class="because problem">{}</div>"#,
                escape(&r.errors.join("; "))
            ),
            (Some(v), true) => format!(
                r#"<span class="verdict-badge {}">{}</span><div class="because">{}</div>"#,
                bound_class(r),
                escape(v.bound.label()),
                escape(&v.because)
            ),
            (None, true) => dash(),
        };
        let _ = writeln!(
            out,
            r#"<tr data-container="{c}"><td>{c}</td><td class="num">{cpu}</td><td class="num">{}</td><td class="num">{growth}</td><td class="num">{offcpu}</td><td class="verdict-cell">{verdict}</td></tr>"#,
            r.samples.map_or_else(dash, thousands),
            c = escape(&r.container),
        );
    }
    if rows.is_empty() {
        out.push_str("<tr><td colspan=\"6\" class=\"empty\">no rows</td></tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::verdict::{judge_given, Given, Measured};

    /// A session's table in the viewer: the figures and verdict of its record, the verdict
    /// a badge whose text wraps within its cell (the picture's fixed-width badge cut
    /// `mostly waiting (add --kinds offcpu to see on what)` off).
    #[test]
    fn a_sessions_verdict_badge_wraps_rather_than_being_cut_off() {
        let measured = Measured {
            cpu_cores: Some(0.2),
            window_s: 5.0,
            offcpu_s: Some(43.7),
            ..Default::default()
        };
        let given = Given {
            heap: false,
            offcpu: true,
        };
        let verdict = judge_given(&measured, given).unwrap();
        let row = SessionRow {
            container: "demo-<jvm>".into(),
            cpu_cores: measured.cpu_cores,
            pid: Some(7),
            samples: Some(12_345),
            heap_growth_bytes: Some(-2048),
            offcpu_s: measured.offcpu_s,
            verdict: Some(verdict.clone()),
            errors: Vec::new(),
        };
        let failed = SessionRow {
            container: "demo-seq".into(),
            verdict: None,
            errors: vec!["cpu: <denied>".into()],
            ..row.clone()
        };
        let html = rows_table(&[row, failed]);
        assert!(html.contains(&format!(
            r#"<span class="verdict-badge waiting-unrecorded">{}</span><div class="because">{}</div>"#,
            escape(verdict.bound.label()),
            escape(&verdict.because)
        )));
        assert!(html.contains("<td>demo-&lt;jvm&gt;</td>") && !html.contains("<jvm>"));
        for figure in ["20%</td>", ">12,345<", ">-2.0 KiB<", ">43.7 thread-s<"] {
            assert!(html.contains(figure), "{figure}: {html}");
        }
        assert!(html.contains("verdict-badge failed") && html.contains("cpu: &lt;denied&gt;"));
        let css = include_str!("../assets/style.css");
        let rule = &css[css.find(".verdict-badge {").unwrap()..];
        let rule = &rule[..rule.find('}').unwrap()];
        assert!(
            rule.contains("white-space: normal") && rule.contains("max-width: 100%"),
            "{rule}"
        );
        assert!(!rule.contains("overflow: hidden") && !rule.contains("nowrap"));
    }
}
