#!/usr/bin/env python3
"""Drives `devprof view` in headless Chromium by clicks and key presses, as a person would.

Usage: view-check.py URL SCREENSHOT_DIR BEFORE_ID AFTER_ID [VISIT_ID...]
  URL        the viewer's address as `devprof view` printed it, with its token (the only
             page typed in: the cookie it sets opens the others)
  BEFORE_ID  AFTER_ID   two captures (CONTAINER/CAPTURE) to tick in the list and diff
  VISIT_ID   captures whose pages are opened from the list, each tab clicked in turn

Prints one JSON object on stdout: the rows the list shows, the rows left by the kind
filter (chosen with the keyboard), the diff page's totals and rows (for capture sets: each
function's verdict, changes and whether it is coloured, and the flamegraph's coloured
frames), the tabs visited, a session's rows and whether each verdict badge shows whole
(in the window's width and in a narrow one), the console errors of every page
(exceptions, console.error, failed loads) and the screenshots written. The Rust test (tests/view.rs) checks it against `devprof ls` and
`devprof diff`.

The flamegraphs and heatmap pages are framed sandboxed (an origin of their own, in a
renderer process of their own), so the page cannot look into them: each frame is reached
through its own DevTools target (auto-attached), where its console is read too.
"""
import base64
import json
import os
import sys
import time

from devtools import Chrome, console_errors

TIMEOUT_S = 60

# Resolves once the document and every image in it have loaded (its frames are checked
# through their own targets: `Viewer.frames`).
SETTLED = """new Promise((resolve, reject) => {
  const started = Date.now();
  (function poll() {
    const images = [...document.querySelectorAll("img")];
    const done = document.readyState === "complete" && images.every((i) => i.complete);
    if (done) setTimeout(() => resolve(location.href), 150);
    else if (Date.now() - started > %d) reject(new Error("the page never finished loading: " + location.href));
    else setTimeout(poll, 25);
  })();
})""" % (TIMEOUT_S * 1000)

# What a frame shows, asked of the frame itself: for a flamegraph, its subtitle and how
# many frames are drawn in a colour other than a differential graph's neutral grey.
FRAME_STATE = """({
  href: location.href,
  complete: document.readyState === "complete",
  drawn: !!document.querySelector("svg, body > *"),
  svg: !!document.querySelector("svg"),
  subtitle: (document.getElementById("subtitle") || {}).textContent || null,
  coloured: [...document.querySelectorAll("g > rect[fill^='rgb(']")]
    .filter((r) => r.getAttribute("fill") !== "rgb(250,250,250)").length,
})"""


class Viewer:
    def __init__(self, chrome, shots):
        self.chrome = chrome
        self.shots = shots
        self.written = []
        # Frame targets attached so far (target id to session id), and how many of the
        # events have been read for them.
        self.frame_sessions = {}
        self.events_read = 0

    def in_frame(self, session, method, params=None):
        """A DevTools call in a frame's own session."""
        page = self.chrome.session
        self.chrome.session = session
        try:
            return self.chrome.call(method, params)
        finally:
            self.chrome.session = page

    def attach_frames(self):
        """Sessions of the frames attached since the last look, with their consoles read
        (enabling the domains replays what they logged before)."""
        events = self.chrome.events
        while self.events_read < len(events):
            event = events[self.events_read]
            self.events_read += 1
            params = event.get("params", {})
            if event.get("method") == "Target.attachedToTarget":
                info = params.get("targetInfo", {})
                if info.get("type") == "iframe":
                    self.frame_sessions[info["targetId"]] = params["sessionId"]
                    for domain in ("Runtime", "Log"):
                        try:
                            self.in_frame(params["sessionId"], f"{domain}.enable")
                        except RuntimeError:
                            pass  # gone already (the page moved on)
            elif event.get("method") == "Target.detachedFromTarget":
                self.frame_sessions = {
                    t: s for t, s in self.frame_sessions.items() if s != params.get("sessionId")
                }

    def frames(self):
        """What each frame of the page shows, in the page's order, once each has loaded."""
        sources = self.chrome.evaluate("[...document.querySelectorAll('iframe')].map((f) => f.src)")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            self.attach_frames()
            targets = self.chrome.call("Target.getTargets", session=False)["targetInfos"]
            states = []
            for source in sources:
                state = None
                for target in targets:
                    session = self.frame_sessions.get(target["targetId"])
                    if target["type"] != "iframe" or target["url"] != source or not session:
                        continue
                    try:
                        reply = self.in_frame(
                            session,
                            "Runtime.evaluate",
                            {"expression": FRAME_STATE, "returnByValue": True},
                        )
                        state = reply["result"].get("value")
                    except RuntimeError:
                        state = None
                    break
                states.append(state)
            if all(s and s["complete"] and s["href"] == src for s, src in zip(states, sources)):
                return states
            if time.monotonic() > deadline:
                raise RuntimeError(f"frames never finished loading on {self.href()}: {sources} {states}")
            time.sleep(0.05)

    def settle(self):
        href = self.chrome.evaluate(SETTLED)
        self.frames()
        return href

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


def diff_page(viewer):
    """What the diff page shows: two single captures' gains and losses, or, when a side is
    a capture set, each function's verdict and changes as the page prints them, and
    whether it is drawn in a colour of its own (compared with the function's cell)."""
    page = viewer.chrome.evaluate(
        """(() => {
          const rows = (id) => [...document.querySelectorAll(`#${id} tbody tr`)].map((tr) => ({
            name: tr.querySelector(".fn").textContent,
            delta: Number(tr.querySelector(".delta").textContent),
          }));
          const number = (id) => Number(document.getElementById(id).textContent.replace(/,/g, ""));
          const colour = (el) => getComputedStyle(el).color;
          const set = document.getElementById("set-functions");
          const functions = set && [...set.querySelectorAll("tbody tr")].map((tr) => {
            const text = (selector) => tr.querySelector(selector).textContent;
            const plain = colour(tr.querySelector(".fn").parentElement);
            return {
              name: text(".fn"),
              verdict: tr.dataset.verdict,
              words: text(".verdict"),
              before: tr.cells[0].textContent,
              after: tr.cells[1].textContent,
              change: text(".self-change"),
              rate_change: text(".rate-change"),
              incl_change: text(".incl-change"),
              coloured: colour(tr.querySelector(".verdict")) !== plain
                || colour(tr.querySelector(".self-change")) !== plain,
            };
          });
          const windows = (side) => {
            const el = document.getElementById(`${side}-windows`);
            return el ? Number(el.dataset.windows) : null;
          };
          const rate = document.getElementById("total-rate");
          return {
            before_total: number("before-total"),
            after_total: number("after-total"),
            before_windows: windows("before"),
            after_windows: windows("after"),
            measure: (document.getElementById("measure") || {}).textContent || null,
            gains: rows("gains"),
            losses: rows("losses"),
            functions: functions,
            total_rate: rate ? rate.dataset.verdict : null,
            graph: document.getElementById("diff-graph").src,
          };
        })()"""
    )
    sources = viewer.chrome.evaluate("[...document.querySelectorAll('iframe')].map((f) => f.src)")
    graph = viewer.frames()[sources.index(page.pop("graph"))]
    page["graph_loaded"] = graph["svg"]
    page["graph_subtitle"] = graph["subtitle"]
    page["graph_coloured"] = graph["coloured"]
    return page


# Each verdict badge of a session's table: its text, and whether all of it shows (no
# overflow inside it, and within its cell and the window).
BADGES = """[...document.querySelectorAll(".verdict-badge")].map((badge) => {
  const box = badge.getBoundingClientRect();
  const cell = badge.closest("td").getBoundingClientRect();
  return {
    text: badge.textContent,
    fits: badge.scrollWidth <= badge.clientWidth + 1
      && box.right <= cell.right + 0.5
      && box.right <= document.documentElement.clientWidth,
  };
})"""


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
        # The sandboxed frames run in processes of their own: attach to each as it comes.
        chrome.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
        )
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
                    "frames": [f["drawn"] for f in viewer.frames()],
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
            result["session_rows"] = chrome.evaluate(
                "document.querySelectorAll('#session-rows tbody tr[data-container]').length"
            )
            result["badges"] = chrome.evaluate(BADGES)
            # A narrow window: the badges wrap, they are not cut.
            chrome.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": 560, "height": 1200, "deviceScaleFactor": 1, "mobile": False},
            )
            time.sleep(0.2)
            result["badges_narrow"] = chrome.evaluate(BADGES)
            viewer.screenshot("session-narrow")
            chrome.call("Emulation.clearDeviceMetricsOverride")

        result["errors"] = console_errors(chrome.events)
        result["screenshots"] = viewer.written
    finally:
        chrome.close()
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
