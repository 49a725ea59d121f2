//! The viewer's HTML pages, drawn on the server: `list` (the captures, filters, the diff
//! form), `capture` (one capture's tabs), `diff` (two captures compared), `sessions`. Every
//! string from the store is escaped; pages load only the viewer's own stylesheet and script.

pub mod capture;
pub mod diff;
pub mod list;
pub mod sessions;

pub use crate::text::escape_markup as escape;

use std::fmt::Write as _;

/// What went wrong with a request, as a status and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: u16,
    pub message: String,
}

impl Problem {
    pub fn not_found(message: impl Into<String>) -> Problem {
        Problem {
            status: 404,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Problem {
        Problem {
            status: 400,
            message: message.into(),
        }
    }
}

/// The section of the navigation bar a page belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Captures,
    Sessions,
}

/// A page before it is wrapped in the common layout.
pub struct Page {
    pub title: String,
    pub section: Section,
    pub body: String,
}

/// A query value or path segment, percent-encoded (RFC 3986 unreserved characters stay).
pub fn url_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

/// The whole document: header, navigation, the page, and the store it shows.
pub fn document(page: &Page, store: &str) -> String {
    let nav = |section: Section, href: &str, label: &str| {
        let current = if section == page.section {
            r#" aria-current="page""#
        } else {
            ""
        };
        format!(r#"<a href="{href}"{current}>{label}</a>"#)
    };
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · devprof</title>
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/style.css">
<script src="/static/app.js" defer></script>
</head>
<body>
<header><a class="brand" href="/">devprof</a><nav>{captures}{sessions}</nav><span class="store" title="the store this viewer shows">{store}</span></header>
<main>
{body}
</main>
</body>
</html>
"#,
        title = escape(&page.title),
        captures = nav(Section::Captures, "/", "Captures"),
        sessions = nav(Section::Sessions, "/sessions", "Sessions"),
        store = escape(store),
        body = page.body,
    )
}

/// A page that says what went wrong.
pub fn problem_page(problem: &Problem) -> Page {
    Page {
        title: format!("error {}", problem.status),
        section: Section::Captures,
        body: format!(
            r#"<h1>{}</h1><p class="problem">{}</p><p><a href="/">All captures</a></p>"#,
            match problem.status {
                404 => "Not found",
                400 => "Bad request",
                _ => "Cannot show this",
            },
            escape(&problem.message)
        ),
    }
}

/// An HTML table: header cells, then rows of cells that are already HTML.
pub fn table(class: &str, headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!(r#"<table class="{class}"><thead><tr>"#);
    for h in headers {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_encoding_keeps_unreserved_characters_only() {
        assert_eq!(url_encode("demo-seq/perf_1.2~"), "demo-seq%2Fperf_1.2~");
        assert_eq!(url_encode("a b&c=<d>"), "a%20b%26c%3D%3Cd%3E");
        assert_eq!(url_encode("é"), "%C3%A9");
    }

    #[test]
    fn the_document_escapes_its_title_and_store() {
        let page = Page {
            title: "<x>".into(),
            section: Section::Sessions,
            body: "<p>ok</p>".into(),
        };
        let html = document(&page, "/tmp/<store>");
        assert!(html.contains("<title>&lt;x&gt; · devprof</title>"));
        assert!(html.contains("/tmp/&lt;store&gt;"));
        assert!(html.contains(r#"<a href="/sessions" aria-current="page">"#));
    }
}
