//! `devprof view`: a local web viewer over the store, on 127.0.0.1 only. `library` finds
//! captures, their listed files and sessions; `pages` draws the HTML; `routes` maps a
//! request to a response without the network (the rules live there, tested); this file
//! is the server: hyper over tokio, one task per connection, the page work on blocking
//! threads. Everything the pages load is embedded in the binary: no network is needed.
//! Each run draws a token from the OS's random source; the URL it prints carries it, and
//! nothing is served without it (`routes::Token`).

pub mod library;
pub mod pages;
pub mod routes;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::settings::store::ViewSettings;
use crate::signals::Interrupts;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, COOKIE, HOST, SET_COOKIE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use library::Library;
use routes::{Policy, Request, Response, Token, Viewer, TOKEN_PARAM};
use std::convert::Infallible;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

/// The viewer's own pages run its script and style only, and embed only its own files.
const VIEWER_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; frame-src 'self'; connect-src 'none'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'self'";
/// A capture's files (flamegraphs, the heatmap page, an async-profiler page the target's
/// JVM wrote) run sandboxed, in an origin of their own: no reading the viewer's pages, its
/// cookie or other captures, no forms, no popups, no steering the page that shows them.
/// They keep their inline scripts and styles (a flamegraph zooms and searches), and may
/// fetch or send nothing.
const ARTIFACT_POLICY: &str = "sandbox allow-scripts; default-src 'none'; \
     script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; \
     form-action 'none'; base-uri 'none'; frame-ancestors 'self'";
/// Random bytes in a viewer's token.
const TOKEN_BYTES: usize = 32;
/// A client that sends no complete request head in this time is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

fn http_response(response: Response, head_only: bool) -> hyper::Response<Full<Bytes>> {
    let set_cookie = response.set_cookie.clone();
    let policy = match response.policy {
        Policy::Viewer => VIEWER_POLICY,
        Policy::Artifact => ARTIFACT_POLICY,
    };
    let download = response.content_type == "application/octet-stream";
    let body = if head_only {
        Bytes::new()
    } else {
        Bytes::from(response.body)
    };
    let mut out = hyper::Response::new(Full::new(body));
    *out.status_mut() =
        hyper::StatusCode::from_u16(response.status).unwrap_or(hyper::StatusCode::OK);
    let headers = out.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(response.content_type),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("content-security-policy", HeaderValue::from_static(policy));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if download {
        headers.insert(
            "content-disposition",
            HeaderValue::from_static("attachment"),
        );
    }
    if let Some(value) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        headers.insert(SET_COOKIE, value);
    }
    out
}

/// A fresh token for one run of the viewer, from the kernel's random source.
fn fresh_token() -> Result<Token> {
    use std::io::Read;
    let mut bytes = [0u8; TOKEN_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|e| Error::io("read /dev/urandom for the viewer's token", e))?;
    Ok(Token::from_bytes(&bytes))
}

/// The address to open: the start page with the token in its query.
fn url_with_token(port: u16, start: &str, token: &Token) -> String {
    let joint = if start.contains('?') { '&' } else { '?' };
    format!(
        "http://127.0.0.1:{port}{start}{joint}{TOKEN_PARAM}={}",
        token.as_str()
    )
}

async fn handle(
    viewer: Arc<Viewer>,
    request: hyper::Request<Incoming>,
) -> std::result::Result<hyper::Response<Full<Bytes>>, Infallible> {
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or("").to_string();
    let host = request
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let cookies: Vec<&str> = request
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|c| c.to_str().ok())
        .collect();
    let cookie = (!cookies.is_empty()).then(|| cookies.join("; "));
    let head_only = method == "HEAD";
    // Pages read the store (manifests, folded files): off the async threads.
    let response = tokio::task::spawn_blocking(move || {
        routes::respond(
            &viewer,
            &Request {
                method: &method,
                path: &path,
                query: &query,
                host: host.as_deref(),
                cookie: cookie.as_deref(),
            },
        )
    })
    .await
    .unwrap_or_else(|e| Response {
        status: 500,
        content_type: "text/plain; charset=utf-8",
        body: format!("the page failed: {e}").into_bytes(),
        policy: Policy::Viewer,
        set_cookie: None,
    });
    Ok(http_response(response, head_only))
}

/// Serves the store until Ctrl-C.
pub async fn serve(settings: &ViewSettings, interrupts: &mut Interrupts) -> Result<()> {
    let library = Library::new(settings.output_dir.clone());
    let token = fresh_token()?;
    let start = match &settings.start {
        Some(what) => library.start_page(what)?,
        None => "/".to_string(),
    };
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, settings.port))
        .await
        .map_err(|e| {
            Error::io(
                format!(
                    "listen on 127.0.0.1:{} (another program has the port? --port 0 picks a free one)",
                    settings.port
                ),
                e,
            )
        })?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("read the viewer's address", e))?
        .port();
    let url = url_with_token(port, &start, &token);
    let captures = library.captures().map(|c| c.len()).unwrap_or(0);
    crate::ui::output::write_stdout(&format!(
        "devprof view: {} ({captures} captures) at {url}\nCtrl-C stops the viewer.\n",
        settings.output_dir.display()
    ));
    if settings.open {
        match crate::ui::browser::open(&url) {
            Ok(command) => crate::say!("opened {url} with {command}"),
            Err(e) => crate::say!("--open: {e}"),
        }
    }
    let viewer = Arc::new(Viewer {
        library,
        port,
        token,
    });
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors, or a connection reset before it was accepted:
                // wait a little rather than spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = interrupts.next() => return Ok(()),
        };
        let viewer = viewer.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(viewer.clone(), request));
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
