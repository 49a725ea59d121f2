//! The sessions (`devprof profile` runs) and one session: its table as a picture and the
//! captures it made, each linked to its page.

use super::{escape, table, Page, Problem, Section};
use crate::render::plot::{seconds_label, session_table};
use crate::view::library::Library;

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
<img class="plot" id="session-table" src="/session/{id}/table.svg" alt="the session's table">
<p class="note">{}</p>
<h2>Captures</h2>
"#,
        escape(id),
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
