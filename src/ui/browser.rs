//! Opening a result in the user's browser (`--open`): `$BROWSER` first (a `:`-separated
//! list of commands, `%s` standing for the page, as xdg-utils and Python's webbrowser read
//! it), then `xdg-open` when there is a display to show it on. Without a display xdg-open
//! would fall back to a text-mode browser in this terminal, so it is not tried then. The
//! browser runs detached; devprof does not wait for it.

use std::path::Path;
use std::process::{Command, Stdio};

/// Why nothing was opened, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoBrowser(pub String);

impl std::fmt::Display for NoBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The commands to try for `page`, in order, from the environment as given.
pub fn candidates(
    page: &str,
    browser_var: Option<&str>,
    has_display: bool,
    xdg_open: Option<&Path>,
) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for entry in browser_var.unwrap_or("").split(':') {
        let words: Vec<&str> = entry.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let mut argv: Vec<String> = words.iter().map(|w| w.replace("%s", page)).collect();
        if !entry.contains("%s") {
            argv.push(page.to_string());
        }
        out.push(argv);
    }
    if let (true, Some(xdg)) = (has_display, xdg_open) {
        out.push(vec![xdg.display().to_string(), page.to_string()]);
    }
    out
}

/// A program on PATH.
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// Opens `page` (a URL or a file path); returns the command that took it.
pub fn open(page: &str) -> Result<String, NoBrowser> {
    let browser = std::env::var("BROWSER").ok();
    let has_display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    let xdg = on_path("xdg-open");
    let tried = candidates(page, browser.as_deref(), has_display, xdg.as_deref());
    let mut failures = Vec::new();
    for argv in &tried {
        let spawned = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(mut child) => {
                // Reaped in the background: the browser (or xdg-open) may outlive devprof.
                std::thread::spawn(move || child.wait());
                return Ok(argv[0].clone());
            }
            Err(e) => failures.push(format!("{}: {e}", argv[0])),
        }
    }
    let why = if !failures.is_empty() {
        format!("no browser could be started ({})", failures.join("; "))
    } else if xdg.is_some() {
        "no browser found: $BROWSER is not set and there is no display (DISPLAY/WAYLAND_DISPLAY) for xdg-open".to_string()
    } else {
        "no browser found: $BROWSER is not set and xdg-open is not installed (xdg-utils)"
            .to_string()
    };
    Err(NoBrowser(format!("{why}; open {page} yourself")))
}

/// `--open` after a capture: opens `path` and says on stderr what happened (stdout may
/// carry --json).
pub fn open_result(path: &Path) {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let page = absolute.display().to_string();
    match open(&page) {
        Ok(command) => crate::say!("opened {page} with {command}"),
        Err(e) => crate::say!("--open: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browser_variable_entries_are_tried_in_order_with_the_page() {
        let xdg = Path::new("/usr/bin/xdg-open");
        let got = candidates(
            "http://127.0.0.1:1/",
            Some("firefox --new-tab:chromium %s --incognito::"),
            true,
            Some(xdg),
        );
        assert_eq!(
            got,
            vec![
                vec!["firefox", "--new-tab", "http://127.0.0.1:1/"],
                vec!["chromium", "http://127.0.0.1:1/", "--incognito"],
                vec!["/usr/bin/xdg-open", "http://127.0.0.1:1/"],
            ]
        );
    }

    #[test]
    fn xdg_open_is_not_tried_without_a_display() {
        let xdg = Path::new("/usr/bin/xdg-open");
        assert!(candidates("p", None, false, Some(xdg)).is_empty());
        assert!(candidates("p", Some(""), true, None).is_empty());
    }
}
