//! One capture: a line of its facts (the whole table folded under it, so that the views
//! start above the fold), then a tab per view it has: flamegraphs, the time heatmap, top
//! tables, plots, the text report, markers (when the manifest lists a `.markers` file), the
//! manifest and its files.

use super::{escape, table, url_encode, Page, Problem, Section};
use crate::profile::top;
use crate::store::catalog::Capture;
use crate::store::{BANDWIDTH_PLOT, HEAP_PLOT, THREADS_PLOT};
use crate::text::truncate;
use crate::ui::table::pct;
use crate::units::{human_bytes, thousands};
use crate::view::library::{CaptureId, Library, Listed, MAX_SERVED_BYTES};
use std::fmt::Write as _;

/// Rows of each top table.
const TOP_ROWS: usize = 25;
/// Text shown inline at most (markers, the report); the file itself is linked.
const TEXT_SHOWN: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Flamegraph,
    Heatmap,
    Top,
    Plots,
    Report,
    Markers,
    Manifest,
    Files,
}

impl Tab {
    const ALL: [Tab; 8] = [
        Tab::Flamegraph,
        Tab::Heatmap,
        Tab::Top,
        Tab::Plots,
        Tab::Report,
        Tab::Markers,
        Tab::Manifest,
        Tab::Files,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            Tab::Flamegraph => "flamegraph",
            Tab::Heatmap => "heatmap",
            Tab::Top => "top",
            Tab::Plots => "plots",
            Tab::Report => "report",
            Tab::Markers => "markers",
            Tab::Manifest => "manifest",
            Tab::Files => "files",
        }
    }

    pub fn parse(slug: &str) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.slug() == slug)
    }

    fn label(self) -> &'static str {
        match self {
            Tab::Flamegraph => "Flamegraph",
            Tab::Heatmap => "Heatmap",
            Tab::Top => "Top",
            Tab::Plots => "Plots",
            Tab::Report => "Report",
            Tab::Markers => "Markers",
            Tab::Manifest => "Manifest",
            Tab::Files => "Files",
        }
    }
}

/// The listed files whose names end with `suffix`.
fn listed_ending<'a>(capture: &'a Capture, suffix: &str) -> Vec<&'a str> {
    capture
        .manifest
        .files
        .iter()
        .map(|f| f.name.as_str())
        .filter(|n| n.ends_with(suffix))
        .collect()
}

fn own_file(capture: &Capture, extension: &str) -> Option<String> {
    let name = format!("{}.{extension}", capture.name());
    capture
        .manifest
        .files
        .iter()
        .any(|f| f.name == name)
        .then_some(name)
}

fn plots(capture: &Capture) -> Vec<String> {
    [HEAP_PLOT, THREADS_PLOT, BANDWIDTH_PLOT]
        .iter()
        .filter_map(|p| own_file(capture, p))
        .collect()
}

fn has(capture: &Capture, tab: Tab) -> bool {
    match tab {
        Tab::Flamegraph => !capture.manifest.flamegraphs().is_empty(),
        Tab::Heatmap => own_file(capture, "html").is_some(),
        Tab::Top => !listed_ending(capture, ".folded").is_empty(),
        Tab::Plots => !plots(capture).is_empty(),
        Tab::Report => own_file(capture, "txt").is_some(),
        Tab::Markers => !listed_ending(capture, ".markers").is_empty(),
        Tab::Manifest | Tab::Files => true,
    }
}

/// The tab a capture's page opens on: its flamegraph, else its report, else the manifest.
pub fn first_tab(capture: &Capture) -> Tab {
    [Tab::Flamegraph, Tab::Report]
        .into_iter()
        .find(|t| has(capture, *t))
        .unwrap_or(Tab::Manifest)
}

pub fn file_href(id: &CaptureId, name: &str) -> String {
    format!("/file/{}/{}/{}", id.container, id.name, url_encode(name))
}

/// The facts: a line (kind, container, window, count, notes) that unfolds into the table.
fn facts(capture: &Capture) -> String {
    let m = &capture.manifest;
    let window = format!(
        "{:.1} s{}",
        m.duration_recorded_s,
        if m.interrupted {
            " (stopped early)"
        } else {
            ""
        }
    );
    let mut rows: Vec<(&str, String)> = vec![
        ("kind", escape(&m.kind)),
        (
            "container",
            format!(
                "{} <span class=\"faint\">{}</span>",
                escape(&m.container.name),
                escape(&m.container.image)
            ),
        ),
        ("target", escape(&m.target)),
        (
            "created",
            escape(
                &capture
                    .created
                    .with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M:%S")
                    .to_string(),
            ),
        ),
        ("window", window.clone()),
        ("count", escape(&capture.count_text())),
    ];
    if m.process.pid != 0 {
        rows.push((
            "process",
            format!(
                "pid {} <code>{}</code>",
                m.process.pid,
                escape(&truncate(&m.process.command_line, 200))
            ),
        ));
    }
    for (label, value) in [
        ("runtime", &m.runtime),
        ("engine", &m.engine),
        ("events", &m.events.join(", ")),
    ] {
        if !value.is_empty() {
            rows.push((label, escape(value)));
        }
    }
    if let Some(mode) = &m.capture_mode {
        rows.push(("via", escape(mode)));
    }
    let mut line = vec![
        escape(&m.kind),
        escape(&m.container.name),
        window,
        escape(&capture.count_text()),
    ];
    if !m.engine.is_empty() {
        line.push(escape(&m.engine));
    }
    match m.notes.len() {
        0 => {}
        1 => line.push("1 note".into()),
        n => line.push(format!("{n} notes")),
    }
    let mut out = format!(
        "<details class=\"facts\" id=\"facts\"><summary>{} <span class=\"faint\">(details)</span></summary>\n<table class=\"facts\">",
        line.join(" · ")
    );
    for (label, value) in rows {
        let _ = write!(out, "<tr><th>{label}</th><td>{value}</td></tr>");
    }
    out.push_str("</table>\n");
    if !m.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for note in &m.notes {
            let _ = write!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</details>\n");
    out
}

fn tabs(capture: &Capture, id: &CaptureId, current: Tab) -> String {
    let mut out = String::from("<nav class=\"tabs\">");
    for tab in Tab::ALL.into_iter().filter(|t| has(capture, *t)) {
        let current_mark = if tab == current {
            r#" aria-current="page""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<a id="tab-{slug}" href="{}/{slug}"{current_mark}>{}</a>"#,
            id.href(),
            tab.label(),
            slug = tab.slug()
        );
    }
    out.push_str("</nav>\n");
    out
}

/// A capture's file in a frame. The frame is sandboxed as the file's own response is
/// (`allow-scripts` only: an origin of its own), so the page cannot read the drawing's
/// height: an SVG's own `height` goes in `data-height` for the script to size the frame.
fn frame(capture: &Capture, id: &CaptureId, name: &str, class: &str, title: &str) -> String {
    let href = file_href(id, name);
    let height = svg_height(capture, name)
        .map(|h| format!(r#" data-height="{h}""#))
        .unwrap_or_default();
    format!(
        r#"<h2 class="frame-title">{} <a class="note" href="{href}" target="_blank" rel="noopener">open alone</a></h2>
<iframe class="{class}" sandbox="allow-scripts" title="{}" src="{href}"{height}></iframe>
"#,
        escape(title),
        escape(title)
    )
}

/// The pixel height an SVG file's root element declares (`<svg ... height="582" ...>`),
/// read from its first few KiB.
fn svg_height(capture: &Capture, name: &str) -> Option<u32> {
    use std::io::Read;
    if !name.ends_with(".svg") {
        return None;
    }
    let Some(Listed::File(path)) = Library::listed_file(capture, name) else {
        return None;
    };
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    let text = String::from_utf8_lossy(&head);
    let tag = &text[text.find("<svg")?..];
    let tag = &tag[..tag.find('>')?];
    let value = &tag[tag.find(" height=\"")? + 9..];
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|h| (1..=1_000_000).contains(h))
}

fn flamegraphs(capture: &Capture, id: &CaptureId) -> String {
    let mut out = String::new();
    for svg in capture.manifest.flamegraphs() {
        let view = capture
            .manifest
            .graphs
            .iter()
            .find(|g| g.svg == svg)
            .map(|g| format!(" ({})", g.view))
            .unwrap_or_default();
        out.push_str(&frame(
            capture,
            id,
            svg,
            "graph autosize",
            &format!("{svg}{view}"),
        ));
    }
    out
}

fn top_tables(capture: &Capture) -> String {
    let mut out = String::new();
    for name in listed_ending(capture, ".folded") {
        let _ = write!(out, "<h2>{}</h2>", escape(name));
        let Some(Listed::File(path)) = Library::listed_file(capture, name) else {
            out.push_str("<p class=\"empty\">missing, or too large to read here</p>");
            continue;
        };
        // The thread is the root of an off-CPU event stack, never a ranked function (as
        // `devprof top` reads it).
        let folded = match crate::store::loader::read(&path) {
            Ok(f) => crate::store::loader::thread_rooted(
                f,
                Some(capture),
                crate::store::loader::unit_of(&path, Some(capture)),
            ),
            Err(e) => {
                let _ = write!(out, "<p class=\"problem\">{}</p>", escape(&e.to_string()));
                continue;
            }
        };
        let bytes = capture.manifest.kind == "heap";
        let unit = match (bytes, name.ends_with(".offcpu.folded")) {
            (true, _) => "bytes",
            (_, true) => "µs off-CPU",
            _ if capture.manifest.kind == "offcpu" => "events",
            _ => "samples",
        };
        let amount = |n: u64| {
            if bytes {
                human_bytes(n)
            } else {
                thousands(n)
            }
        };
        let _ = write!(
            out,
            "<p class=\"note\">{} {unit} in all</p><div class=\"halves\">",
            amount(folded.total())
        );
        for (heading, rows) in [
            ("self (leaf frame)", top::by_self(&folded, TOP_ROWS)),
            (
                "inclusive (anywhere on the stack)",
                top::by_inclusive(&folded, TOP_ROWS),
            ),
        ] {
            let cells: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        amount(r.samples),
                        pct(r.percent),
                        format!(r#"<span class="fn">{}</span>"#, escape(&r.name)),
                    ]
                })
                .collect();
            let _ = write!(
                out,
                "<section><h3>{heading}</h3>{}</section>",
                table("rows", &[unit, "%", "function"], &cells)
            );
        }
        out.push_str("</div>\n");
    }
    out
}

/// A listed text file, escaped, at most `limit` bytes of it.
fn text_of(capture: &Capture, name: &str, limit: usize) -> String {
    match Library::listed_file(capture, name) {
        Some(Listed::File(path)) => match std::fs::read(&path) {
            Ok(bytes) => {
                let shown = &bytes[..bytes.len().min(limit)];
                let mut text = escape(&String::from_utf8_lossy(shown));
                if bytes.len() > limit {
                    let _ = write!(text, "\n… ({} more bytes)", bytes.len() - limit);
                }
                format!("<pre>{text}</pre>")
            }
            Err(e) => format!("<p class=\"problem\">cannot read {}: {e}</p>", escape(name)),
        },
        Some(Listed::TooLarge(path, bytes)) => format!(
            "<p class=\"note\">{} is {} (too large to show): {}</p>",
            escape(name),
            human_bytes(bytes),
            escape(&path.display().to_string())
        ),
        None => format!("<p class=\"empty\">{} is gone</p>", escape(name)),
    }
}

fn manifest_text(capture: &Capture) -> String {
    // The file as written (a newer devprof's fields included), pretty-printed.
    let text = std::fs::read_to_string(&capture.manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| serde_json::to_string_pretty(&capture.manifest).unwrap_or_default());
    format!(
        r#"<p class="note"><code>{}</code></p><pre id="manifest" class="json">{}</pre>"#,
        escape(&capture.manifest_path.display().to_string()),
        escape(&text)
    )
}

fn files(capture: &Capture, id: &CaptureId) -> String {
    let rows: Vec<Vec<String>> = capture
        .manifest
        .files
        .iter()
        .map(|f| match Library::listed_file(capture, &f.name) {
            Some(Listed::File(path)) => vec![
                format!(
                    r#"<a href="{}">{}</a>"#,
                    file_href(id, &f.name),
                    escape(&f.name)
                ),
                human_bytes(crate::store::file_size(&path)),
            ],
            Some(Listed::TooLarge(path, bytes)) => vec![
                format!(
                    "{} <span class=\"faint\">(over {}: {})</span>",
                    escape(&f.name),
                    human_bytes(MAX_SERVED_BYTES),
                    escape(&path.display().to_string())
                ),
                human_bytes(bytes),
            ],
            None => vec![
                format!("{} <span class=\"faint\">(gone)</span>", escape(&f.name)),
                "-".into(),
            ],
        })
        .collect();
    table("rows", &["file", "size"], &rows)
}

pub fn capture_page(library: &Library, id: &CaptureId, tab: Option<Tab>) -> Result<Page, Problem> {
    let capture = library
        .capture(id)
        .ok_or_else(|| Problem::not_found(format!("no capture {id} in the store")))?;
    let tab = tab.unwrap_or_else(|| first_tab(&capture));
    if !has(&capture, tab) {
        return Err(Problem::not_found(format!(
            "{id} has no {}",
            tab.label().to_lowercase()
        )));
    }
    let mut body = format!(
        "<h1>{} <span class=\"faint\">{}</span></h1>\n{}{}",
        escape(&id.name),
        escape(&capture.container),
        facts(&capture),
        tabs(&capture, id, tab)
    );
    body.push_str(&match tab {
        Tab::Flamegraph => flamegraphs(&capture, id),
        Tab::Heatmap => {
            let name = format!("{}.html", id.name);
            frame(
                &capture,
                id,
                &name,
                "heatmap",
                "time heatmap (drag over the cells to draw that range)",
            )
        }
        Tab::Top => top_tables(&capture),
        Tab::Plots => plots(&capture)
            .iter()
            .map(|p| {
                format!(
                    r#"<figure><img class="plot" src="{}" alt="{}"><figcaption>{}</figcaption></figure>"#,
                    file_href(id, p),
                    escape(p),
                    escape(p)
                )
            })
            .collect(),
        Tab::Report => text_of(&capture, &format!("{}.txt", id.name), TEXT_SHOWN),
        Tab::Markers => listed_ending(&capture, ".markers")
            .iter()
            .map(|m| format!("<h2>{}</h2>{}", escape(m), text_of(&capture, m, TEXT_SHOWN)))
            .collect(),
        Tab::Manifest => manifest_text(&capture),
        Tab::Files => files(&capture, id),
    });
    Ok(Page {
        title: format!("{} · {}", id.name, tab.label()),
        section: Section::Captures,
        body,
    })
}
