#!/usr/bin/env python3
"""Drives `devprof view` in headless Chromium by clicks and key presses, as a person would.

Usage: view-check.py URL SCREENSHOT_DIR BEFORE_ID AFTER_ID [VISIT_ID...]
  URL        the viewer's address as `devprof view` printed it (the only page typed in)
  BEFORE_ID  AFTER_ID   two captures (CONTAINER/CAPTURE) to tick in the list and diff
  VISIT_ID   captures whose pages are opened from the list, each tab clicked in turn

Prints one JSON object on stdout: the rows the list shows, the rows left by the kind
filter (chosen with the keyboard), the diff page's totals and rows, the tabs visited, the
console errors of every page (exceptions, console.error, failed loads) and the
screenshots written. The Rust test (tests/view.rs) checks it against `devprof ls` and
`devprof diff`.
"""
import base64
import json
import os
import sys
import time

from devtools import Chrome

TIMEOUT_S = 60

# Resolves once the document (and every frame and image in it) has loaded.
SETTLED = """new Promise((resolve, reject) => {
  const started = Date.now();
  (function poll() {
    const frames = [...document.querySelectorAll("iframe")];
    const images = [...document.querySelectorAll("img")];
    const done = document.readyState === "complete"
      && frames.every((f) => f.contentDocument && f.contentDocument.readyState === "complete"
                              && f.contentDocument.location.href !== "about:blank")
      && images.every((i) => i.complete);
    if (done) setTimeout(() => resolve(location.href), 150);
    else if (Date.now() - started > %d) reject(new Error("the page never finished loading: " + location.href));
    else setTimeout(poll, 25);
  })();
})""" % (TIMEOUT_S * 1000)


class Viewer:
    def __init__(self, chrome, shots):
        self.chrome = chrome
        self.shots = shots
        self.written = []

    def settle(self):
        return self.chrome.evaluate(SETTLED)

    def href(self):
        return self.chrome.evaluate("location.href")

    def click(self, selector):
        """A left click at the middle of the element, through the input pipeline."""
        point = self.chrome.evaluate(
            """(() => {
              const el = document.querySelector(%s);
              if (!el) return null;
              el.scrollIntoView({block: "center"});
              const r = el.getBoundingClientRect();
              return [r.left + r.width / 2, r.top + r.height / 2];
            })()""" % json.dumps(selector)
        )
        if point is None:
            raise RuntimeError(f"nothing to click: {selector} on {self.href()}")
        x, y = point
        self.chrome.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.chrome.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def click_and_load(self, selector):
        before = self.href()
        self.click(selector)
        deadline = time.monotonic() + TIMEOUT_S
        while self.href() == before:
            if time.monotonic() > deadline:
                raise RuntimeError(f"clicking {selector} on {before} led nowhere")
            time.sleep(0.05)
        return self.settle()

    def key(self, key, code, key_code):
        for kind in ("keyDown", "keyUp"):
            self.chrome.call(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code},
            )

    def screenshot(self, name):
        # The viewport as it is: capturing beyond it resizes the page for a moment, which
        # a fluid flamegraph answers with an error of its own.
        shot = self.chrome.call("Page.captureScreenshot", {"format": "png"})
        path = os.path.join(self.shots, f"{name}.png")
        with open(path, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
        self.written.append(path)

    def visible_rows(self):
        return self.chrome.evaluate(
            "[...document.querySelectorAll('#capture-rows tr')]"
            ".filter((r) => !r.hidden).map((r) => ({id: r.dataset.id, kind: r.dataset.kind}))"
        )


def console_errors(events):
    """Every error a page reported: exceptions, console.error, failed loads, CSP refusals."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(details.get("exception", {}).get("description") or details.get("text"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            errors.append(f"{entry.get('text')} ({entry.get('url', '')})")
    return errors


def diff_page(viewer):
    return viewer.chrome.evaluate(
        """(() => {
          const rows = (id) => [...document.querySelectorAll(`#${id} tbody tr`)].map((tr) => ({
            name: tr.querySelector(".fn").textContent,
            delta: Number(tr.querySelector(".delta").textContent),
          }));
          const number = (id) => Number(document.getElementById(id).textContent.replace(/,/g, ""));
          return {
            before_total: number("before-total"),
            after_total: number("after-total"),
            measure: document.getElementById("measure").textContent,
            gains: rows("gains"),
            losses: rows("losses"),
            graph_loaded: !!document.getElementById("diff-graph").contentDocument.querySelector("svg"),
          };
        })()"""
    )


def main():
    url, shots, before, after = sys.argv[1:5]
    visits = sys.argv[5:]
    os.makedirs(shots, exist_ok=True)
    # A tall window, so that a page fits one screenshot without resizing it.
    chrome = Chrome(width=1280, height=1800)
    result = {}
    try:
        chrome.attach_to_page()
        for domain in ("Page", "Runtime", "Log"):
            chrome.call(f"{domain}.enable")
        viewer = Viewer(chrome, shots)
        chrome.call("Page.navigate", {"url": url})
        viewer.settle()
        result["rows"] = viewer.visible_rows()
        viewer.screenshot("list")

        # The kind filter, chosen with the keyboard: the first kind after "all".
        viewer.click("#filter-kind")
        viewer.key("Escape", "Escape", 27)  # a click may open the option list
        viewer.key("ArrowDown", "ArrowDown", 40)
        time.sleep(0.2)
        result["filter_kind"] = chrome.evaluate("document.getElementById('filter-kind').value")
        result["filtered"] = viewer.visible_rows()
        result["shown_count"] = chrome.evaluate("document.getElementById('shown-count').textContent")
        viewer.screenshot("list-filtered")
        viewer.key("ArrowUp", "ArrowUp", 38)
        time.sleep(0.2)

        # The diff: tick the two captures, press the button.
        result["diff_button_before"] = chrome.evaluate("document.getElementById('diff-button').disabled")
        for capture in (before, after):
            viewer.click(f'#capture-rows input[value="{capture}"]')
        result["diff_button_ticked"] = chrome.evaluate("document.getElementById('diff-button').disabled")
        result["diff_url"] = viewer.click_and_load("#diff-button")
        result["diff"] = diff_page(viewer)
        viewer.screenshot("diff")

        # Each capture's page, reached from the list, and every tab it has.
        result["visited"] = []
        for capture in visits:
            viewer.click_and_load('header nav a[href="/"]')
            viewer.click_and_load(f'#capture-rows tr[data-id="{capture}"] a.capture-link')
            tabs = chrome.evaluate("[...document.querySelectorAll('nav.tabs a')].map((a) => a.id)")
            for tab in tabs:
                if chrome.evaluate(f"document.getElementById('{tab}').hasAttribute('aria-current')"):
                    viewer.settle()
                else:
                    viewer.click_and_load(f"#{tab}")
                name = capture.split("/")[-1]
                viewer.screenshot(f"{name}-{tab.removeprefix('tab-')}")
                result["visited"].append({
                    "capture": capture,
                    "tab": tab,
                    "frames": chrome.evaluate(
                        "[...document.querySelectorAll('iframe')].map((f) => !!f.contentDocument.querySelector('svg, body > *'))"
                    ),
                    "images": chrome.evaluate(
                        "[...document.querySelectorAll('img.plot')].map((i) => i.naturalWidth)"
                    ),
                })

        viewer.click_and_load('header nav a[href="/sessions"]')
        viewer.screenshot("sessions")
        result["sessions"] = chrome.evaluate("document.querySelectorAll('a.session-link').length")
        if result["sessions"]:
            viewer.click_and_load("a.session-link")
            viewer.screenshot("session")
            result["session_picture"] = chrome.evaluate(
                "document.getElementById('session-table').naturalWidth"
            )

        result["errors"] = console_errors(chrome.events)
        result["screenshots"] = viewer.written
    finally:
        chrome.close()
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
