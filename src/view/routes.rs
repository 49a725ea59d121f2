//! From a request to a response, without the network: the host check, the routes, and
//! which files may be served. Pure over the store, so that every rule is unit-tested.
//! Every route needs the viewer's token, in the query (`?token=`, which also sets a
//! cookie) or in that cookie; a capture's files are served sandboxed.
//!
//! Routes:
//! `/` captures (`?container=&kind=&since=&until=`) · `/capture/C/N[/TAB]` one capture ·
//! `/file/C/N/NAME` a file its manifest lists · `/diff?before=C/N&after=C/N` (or two
//! `capture=`) and `/diff.svg?…` · `/sessions` · `/session/ID[/table.svg]` ·
//! `/static/…` the viewer's own stylesheet, script and icon.

use super::library::{CaptureId, Library, Listed};
use super::pages::capture::{capture_page, Tab};
use super::pages::diff::{diff_page, diff_svg, DiffRequest};
use super::pages::list::{captures_page, Filter};
use super::pages::sessions::{session_page, session_picture, sessions_page};
use super::pages::{document, problem_page, Page, Problem};
use crate::store::valid_container_name;

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");
const ICON: &str = include_str!("assets/icon.svg");

/// What the server passes in.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as sent, still percent-encoded.
    pub path: &'a str,
    pub query: &'a str,
    pub host: Option<&'a str>,
    /// The `Cookie` header(s), joined with `; `.
    pub cookie: Option<&'a str>,
}

/// The query parameter that carries the viewer's token (in the URL `devprof view` prints).
pub const TOKEN_PARAM: &str = "token";

/// The secret of one `devprof view` run: the URL it prints carries it, and a cookie keeps
/// it for the pages that URL leads to. Without it the viewer answers nothing but a 403, so
/// another user of the machine, who can reach 127.0.0.1 too, reads no capture.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// The token of these random bytes (hex).
    pub fn from_bytes(bytes: &[u8]) -> Token {
        Token(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is the token, in a time that does not depend on where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let differ = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
        std::hint::black_box(differ) == 0
    }

    /// The cookie's name: one per port, as cookies are shared by every port of a host and
    /// two viewers may run at once.
    pub fn cookie_name(port: u16) -> String {
        format!("devprof_view_{port}")
    }

    /// Whether a `Cookie` header carries this viewer's cookie with the token.
    pub fn in_cookie(&self, header: &str, port: u16) -> bool {
        let name = Token::cookie_name(port);
        header
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(k, v)| k == name && self.matches(v.trim_matches('"')))
    }

    /// The `Set-Cookie` value given with the first request that carried the token.
    pub fn set_cookie(&self, port: u16) -> String {
        format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            Token::cookie_name(port),
            self.0
        )
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// How a response may be used by the browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The viewer's own pages and assets: only the viewer's script and style run.
    Viewer,
    /// A capture's file as it lies in the store (flamegraph SVG, heatmap page, an
    /// async-profiler page the target's JVM wrote, any listed file) or a drawing made from
    /// the store's stacks: sandboxed to an origin of its own (so it reads nothing of the
    /// viewer's), its inline script runs, and it may load or send nothing.
    Artifact,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    pub policy: Policy,
    /// A `Set-Cookie` header: the token's cookie, on a request whose URL carried the token.
    pub set_cookie: Option<String>,
}

impl Response {
    fn page(library: &Library, page: Page) -> Response {
        let store = library.output_dir().display().to_string();
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: document(&page, &store).into_bytes(),
            policy: Policy::Viewer,
            set_cookie: None,
        }
    }

    fn problem(library: &Library, problem: Problem) -> Response {
        Response {
            status: problem.status,
            ..Response::page(library, problem_page(&problem))
        }
    }

    /// A refusal that says nothing about the store (not even its path).
    fn refusal(status: u16, message: String) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{message}\n").into_bytes(),
            policy: Policy::Viewer,
            set_cookie: None,
        }
    }

    fn asset(content_type: &'static str, text: &str, policy: Policy) -> Response {
        Response {
            status: 200,
            content_type,
            body: text.as_bytes().to_vec(),
            policy,
            set_cookie: None,
        }
    }
}

/// The viewer: the store, the port it answers on (for the host check) and its token.
#[derive(Debug, Clone)]
pub struct Viewer {
    pub library: Library,
    pub port: u16,
    pub token: Token,
}

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    List,
    Asset(&'static str),
    Capture(CaptureId, Option<Tab>),
    File(CaptureId, String),
    Diff,
    DiffSvg,
    Sessions,
    Session(String),
    SessionPicture(String),
}

/// `%XX` sequences decoded; None for a bad sequence or bytes that are not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A query string's pairs, `+` as space, percent-decoded; undecodable pairs are dropped.
pub fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Some((
                percent_decode(&k.replace('+', " "))?,
                percent_decode(&v.replace('+', " "))?,
            ))
        })
        .collect()
}

/// A file name as a manifest may list it: one path component, nothing that walks.
fn file_segment(raw: &str) -> Option<String> {
    let name = percent_decode(raw)?;
    let walks = name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']);
    (!walks).then_some(name)
}

impl Route {
    pub fn parse(path: &str) -> Option<Route> {
        let rest = path.strip_prefix('/')?;
        let segments: Vec<&str> = if rest.is_empty() {
            Vec::new()
        } else {
            rest.split('/').collect()
        };
        // Names in the store are plain (no `%`, no dots in front): anything else is no route.
        let name = |s: &str| valid_container_name(s).then(|| s.to_string());
        let id = |c: &str, n: &str| {
            Some(CaptureId {
                container: name(c)?,
                name: name(n)?,
            })
        };
        Some(match segments.as_slice() {
            [] => Route::List,
            ["static", "style.css"] => Route::Asset("style.css"),
            ["static", "app.js"] => Route::Asset("app.js"),
            ["static", "icon.svg"] => Route::Asset("icon.svg"),
            ["capture", c, n] => Route::Capture(id(c, n)?, None),
            ["capture", c, n, tab] => Route::Capture(id(c, n)?, Some(Tab::parse(tab)?)),
            ["file", c, n, file] => Route::File(id(c, n)?, file_segment(file)?),
            ["diff"] => Route::Diff,
            ["diff.svg"] => Route::DiffSvg,
            ["sessions"] => Route::Sessions,
            ["session", s] => Route::Session(name(s)?),
            ["session", s, "table.svg"] => Route::SessionPicture(name(s)?),
            _ => return None,
        })
    }
}

/// Only the names this viewer is reached by on this machine: a page elsewhere that points
/// its own host name at 127.0.0.1 (DNS rebinding) gets nothing.
pub fn host_allowed(host: Option<&str>, port: u16) -> bool {
    host.is_some_and(|h| {
        ["127.0.0.1", "localhost"]
            .iter()
            .any(|name| h.eq_ignore_ascii_case(&format!("{name}:{port}")))
    })
}

fn content_type(name: &str) -> &'static str {
    let extension = name.rsplit('.').next().unwrap_or("");
    match extension {
        "svg" => "image/svg+xml",
        "html" => "text/html; charset=utf-8",
        "json" => "application/json",
        "txt" | "folded" | "markers" | "csv" | "script" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn svg(body: Vec<u8>) -> Response {
    Response {
        status: 200,
        content_type: "image/svg+xml",
        body,
        policy: Policy::Artifact,
        set_cookie: None,
    }
}

pub fn respond(viewer: &Viewer, request: &Request) -> Response {
    if !host_allowed(request.host, viewer.port) {
        return Response::refusal(
            403,
            format!(
                "the viewer answers to 127.0.0.1:{0} and localhost:{0} only",
                viewer.port
            ),
        );
    }
    let query = parse_query(request.query);
    let by_query = query
        .iter()
        .any(|(k, v)| k == TOKEN_PARAM && viewer.token.matches(v));
    let by_cookie = request
        .cookie
        .is_some_and(|c| viewer.token.in_cookie(c, viewer.port));
    if !by_query && !by_cookie {
        return Response::refusal(
            403,
            "this viewer needs its token: open the URL `devprof view` printed \
             (http://127.0.0.1:PORT/...?token=...), which carries it"
                .to_string(),
        );
    }
    let mut response = route(viewer, request, &query);
    if by_query {
        response.set_cookie = Some(viewer.token.set_cookie(viewer.port));
    }
    response
}

/// A request that passed the host and token checks.
fn route(viewer: &Viewer, request: &Request, query: &[(String, String)]) -> Response {
    let library = &viewer.library;
    if !matches!(request.method, "GET" | "HEAD") {
        return Response::refusal(
            405,
            format!("{} is not served: the viewer only reads", request.method),
        );
    }
    let Some(route) = Route::parse(request.path) else {
        return Response::problem(library, Problem::not_found("no such page"));
    };
    let get = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let page = |result: Result<Page, Problem>| match result {
        Ok(page) => Response::page(library, page),
        Err(problem) => Response::problem(library, problem),
    };
    match route {
        Route::List => page(Filter::parse(get).and_then(|f| captures_page(library, &f))),
        Route::Asset(name) => match name {
            "style.css" => Response::asset("text/css; charset=utf-8", STYLE, Policy::Viewer),
            "app.js" => Response::asset("text/javascript; charset=utf-8", SCRIPT, Policy::Viewer),
            _ => Response::asset("image/svg+xml", ICON, Policy::Artifact),
        },
        Route::Capture(id, tab) => page(capture_page(library, &id, tab)),
        Route::File(id, name) => serve_file(library, &id, &name),
        Route::Diff => {
            page(DiffRequest::parse(library, query).and_then(|r| diff_page(library, &r)))
        }
        Route::DiffSvg => {
            match DiffRequest::parse(library, query).and_then(|r| diff_svg(library, &r)) {
                Ok(body) => svg(body),
                Err(problem) => Response::problem(library, problem),
            }
        }
        Route::Sessions => page(sessions_page(library)),
        Route::Session(id) => page(session_page(library, &id)),
        Route::SessionPicture(id) => match session_picture(library, &id) {
            Ok(text) => svg(text.into_bytes()),
            Err(problem) => Response::problem(library, problem),
        },
    }
}

/// A file of a capture, only when its manifest lists exactly that name; whatever its
/// kind, sandboxed (`Policy::Artifact`): the store holds what targets wrote.
fn serve_file(library: &Library, id: &CaptureId, name: &str) -> Response {
    let Some(capture) = library.capture(id) else {
        return Response::problem(library, Problem::not_found(format!("no capture {id}")));
    };
    match Library::listed_file(&capture, name) {
        Some(Listed::File(path)) => match std::fs::read(&path) {
            Ok(body) => Response {
                status: 200,
                content_type: content_type(name),
                body,
                policy: Policy::Artifact,
                set_cookie: None,
            },
            Err(e) => Response::problem(
                library,
                Problem::not_found(format!("{} cannot be read: {e}", path.display())),
            ),
        },
        Some(Listed::TooLarge(path, bytes)) => Response::problem(
            library,
            Problem {
                status: 413,
                message: format!(
                    "{name} is {} bytes, more than the viewer serves; it is {}",
                    bytes,
                    path.display()
                ),
            },
        ),
        None => Response::problem(
            library,
            Problem::not_found(format!("{id} lists no file named {name}")),
        ),
    }
}
