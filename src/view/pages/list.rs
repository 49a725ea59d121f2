//! The captures page: every capture `devprof ls` lists, filters by container, kind and
//! time (applied here, and live in the page by app.js), and the form that compares two.

use super::{escape, table, url_encode, Page, Problem, Section};
use crate::store::catalog::Capture;
use crate::units::human_bytes;
use crate::view::library::{CaptureId, Library};
use chrono::{Local, NaiveDateTime};
use std::collections::BTreeSet;

/// Which captures the list shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub container: Option<String>,
    pub kind: Option<String>,
    /// Local times, as a datetime-local input sends them.
    pub since: Option<NaiveDateTime>,
    pub until: Option<NaiveDateTime>,
}

/// `2026-11-22T10:15` or `2026-11-22T10:15:30` (what a datetime-local input sends).
fn local_time(text: &str) -> Option<NaiveDateTime> {
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
}

impl Filter {
    /// From the query's values; an empty value is no filter.
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Filter, Problem> {
        let value = |key: &str| get(key).filter(|v| !v.is_empty());
        let time = |key: &str| -> Result<Option<NaiveDateTime>, Problem> {
            value(key)
                .map(|v| {
                    local_time(&v).ok_or_else(|| {
                        Problem::bad_request(format!(
                            "{key}={v} is not a time (expected YYYY-MM-DDTHH:MM[:SS], local time)"
                        ))
                    })
                })
                .transpose()
        };
        Ok(Filter {
            container: value("container"),
            kind: value("kind"),
            since: time("since")?,
            until: time("until")?,
        })
    }

    pub fn admits(&self, capture: &Capture) -> bool {
        let local = capture.created.with_timezone(&Local).naive_local();
        self.container
            .as_ref()
            .is_none_or(|c| *c == capture.container)
            && self
                .kind
                .as_ref()
                .is_none_or(|k| *k == capture.manifest.kind)
            && self.since.is_none_or(|s| local >= s)
            && self.until.is_none_or(|u| local <= u)
    }
}

fn option(value: &str, selected: Option<&String>, label: &str) -> String {
    let mark = if selected.is_some_and(|s| s == value) {
        " selected"
    } else {
        ""
    };
    format!(
        r#"<option value="{}"{mark}>{}</option>"#,
        escape(value),
        escape(label)
    )
}

fn time_value(time: Option<NaiveDateTime>) -> String {
    time.map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

fn filter_form(captures: &[Capture], filter: &Filter) -> String {
    let containers: BTreeSet<&str> = captures.iter().map(|c| c.container.as_str()).collect();
    let kinds: BTreeSet<&str> = captures.iter().map(|c| c.manifest.kind.as_str()).collect();
    let mut container_options = option("", None, "all");
    for c in containers {
        container_options.push_str(&option(c, filter.container.as_ref(), c));
    }
    let mut kind_options = option("", None, "all");
    for k in kinds {
        kind_options.push_str(&option(k, filter.kind.as_ref(), k));
    }
    format!(
        r#"<form id="filter" class="filter" action="/" method="get">
<label>container <select name="container" id="filter-container">{container_options}</select></label>
<label>kind <select name="kind" id="filter-kind">{kind_options}</select></label>
<label>since <input type="datetime-local" step="1" name="since" id="filter-since" value="{since}"></label>
<label>until <input type="datetime-local" step="1" name="until" id="filter-until" value="{until}"></label>
<button type="submit">Filter</button> <a href="/">clear</a>
</form>
"#,
        since = time_value(filter.since),
        until = time_value(filter.until),
    )
}

/// Whether the capture has stacks that can be compared (a folded file).
pub fn comparable(capture: &Capture) -> bool {
    capture
        .file_with_extension("folded")
        .is_some_and(|p| p.is_file())
}

fn row(capture: &Capture, shown: bool) -> String {
    let id = CaptureId::of(capture);
    let created = capture.created.with_timezone(&Local);
    let check = if comparable(capture) {
        format!(
            r#"<input type="checkbox" name="capture" value="{v}" form="diff-form" aria-label="compare {v}">"#,
            v = escape(&id.to_string())
        )
    } else {
        String::new()
    };
    let cells = [
        check,
        created.format("%Y-%m-%d %H:%M:%S").to_string(),
        escape(&capture.manifest.kind),
        format!(
            r#"<a href="/?container={}">{}</a>"#,
            url_encode(&capture.container),
            escape(&capture.container)
        ),
        format!("{:.1} s", capture.manifest.duration_recorded_s),
        escape(&capture.count_text()),
        capture.manifest.files.len().to_string(),
        human_bytes(capture.bytes_on_disk()),
        format!(
            r#"<a class="capture-link" href="{}">{}</a>"#,
            id.href(),
            escape(&id.name)
        ),
    ];
    let mut out = format!(
        r#"<tr data-id="{}" data-container="{}" data-kind="{}" data-created="{}"{}>"#,
        escape(&id.to_string()),
        escape(&capture.container),
        escape(&capture.manifest.kind),
        created.format("%Y-%m-%dT%H:%M:%S"),
        if shown { "" } else { " hidden" }
    );
    for cell in cells {
        out.push_str(&format!("<td>{cell}</td>"));
    }
    out.push_str("</tr>\n");
    out
}

pub fn captures_page(library: &Library, filter: &Filter) -> Result<Page, Problem> {
    let captures = library.captures().map_err(|e| Problem {
        status: 500,
        message: e.to_string(),
    })?;
    let shown = captures.iter().filter(|c| filter.admits(c)).count();
    let mut body = String::from("<h1>Captures</h1>\n");
    if captures.is_empty() {
        body.push_str(&format!(
            "<p class=\"empty\">No captures in {} yet: <code>devprof cpu TARGET 30</code> makes one.</p>",
            escape(&library.output_dir().display().to_string())
        ));
        return Ok(Page {
            title: "Captures".into(),
            section: Section::Captures,
            body,
        });
    }
    body.push_str(&filter_form(&captures, filter));
    body.push_str(
        r#"<form id="diff-form" class="diff-form" action="/diff" method="get">
<button type="submit" id="diff-button">Diff the two selected</button>
<span id="diff-hint">tick two captures with stacks (before: the older)</span>
</form>
"#,
    );
    let rows: String = captures
        .iter()
        .rev()
        .map(|c| row(c, filter.admits(c)))
        .collect();
    let head = table(
        "captures",
        &[
            "",
            "time",
            "kind",
            "container",
            "duration",
            "count",
            "files",
            "size",
            "capture",
        ],
        &[],
    );
    body.push_str(&head.replace("<tbody>\n", &format!("<tbody id=\"capture-rows\">\n{rows}")));
    let total: u64 = captures.iter().map(Capture::bytes_on_disk).sum();
    body.push_str(&format!(
        r#"<p class="count"><span id="shown-count">{shown}</span> of {} captures shown · {} on disk</p>"#,
        captures.len(),
        human_bytes(total)
    ));
    Ok(Page {
        title: "Captures".into(),
        section: Section::Captures,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_as_a_datetime_input_sends_them() {
        let f = Filter::parse(|k| match k {
            "since" => Some("2026-11-22T10:15".into()),
            "until" => Some("2026-11-22T10:16:30".into()),
            "kind" => Some(String::new()),
            _ => None,
        })
        .unwrap();
        assert_eq!(f.kind, None);
        assert_eq!(f.since.unwrap().to_string(), "2026-11-22 10:15:00");
        assert_eq!(f.until.unwrap().to_string(), "2026-11-22 10:16:30");
        assert_eq!(
            Filter::parse(|k| (k == "since").then(|| "yesterday".to_string()))
                .unwrap_err()
                .status,
            400
        );
    }
}
