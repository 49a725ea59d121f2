#!/usr/bin/env python3
"""Drives a heatmap page, and a capture's page in `devprof view`, in headless Chromium at
1400x900 (Debian's chromium, over the DevTools pipe: scripts/devtools.py), by real mouse
clicks and key presses. Used by tests/heatmap.rs.

Usage:
  heatmap_page.py pick PAGE.html INDEX [SCREENSHOT.png]
      Presses ArrowRight (the first marker), clicks row INDEX of the markers list, steps
      with ArrowRight, j, ArrowLeft and k, clicks row 0, then the tick of marker INDEX. Prints what the page showed after each.
  heatmap_page.py fold URL CAPTURE_PATH SCREENSHOT_DIR
      URL is the viewer's address as `devprof view` printed it (with its token);
      CAPTURE_PATH is /capture/CONTAINER/CAPTURE. Opens the capture's page, then its
      heatmap tab, and prints where the flamegraph, the heatmap and the heatmap's own
      flamegraph start (px from the top of the viewport), the viewport's height, and the
      console errors of the page and its frames.
"""
import base64
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from devtools import Chrome, console_errors  # noqa: E402

WIDTH, HEIGHT = 1400, 900
TIMEOUT_S = 60

READY = """new Promise((resolve, reject) => {
  const started = Date.now();
  (function poll() {
    const b = document.body;
    if (b && b.dataset.ready === "1" && b.dataset.loadMs) resolve(true);
    else if (Date.now() - started > %d) reject(new Error("the heatmap never became ready"));
    else setTimeout(poll, 20);
  })();
})""" % (TIMEOUT_S * 1000)

# What the heatmap page shows: its grid, and the selection.
STATE = """(() => {
  const heat = document.getElementById("heatmap"), box = document.getElementById("flame-box");
  const ticks = [...document.querySelectorAll("#markers .marker")];
  const lefts = ticks.map((t) => t.getBoundingClientRect().left).sort((a, b) => a - b);
  let gap = Infinity;
  for (let i = 1; i < lefts.length; i++) gap = Math.min(gap, lefts[i] - lefts[i - 1]);
  const row = document.querySelector("#marker-rows .row.selected");
  return {
    columns: Number(heat.dataset.columns), col_px: Number(heat.dataset.colPx),
    canvas_width: heat.width, wrap_width: document.getElementById("heatmap-wrap").clientWidth,
    ticks: ticks.length, min_tick_gap_px: ticks.length > 1 ? gap : null,
    marker: box.dataset.marker, number: box.dataset.number, range: box.dataset.range,
    total: Number(box.dataset.total), selections: Number(document.body.dataset.selections || 0),
    selected_row: row ? Number(row.dataset.i) : null,
    selected_ticks: [...document.querySelectorAll("#markers .marker.selected")].map((t) => Number(t.dataset.i)),
    hash: location.hash, errors: Number(document.body.dataset.errors),
  };
})()"""


class Browser:
    def __init__(self):
        self.chrome = Chrome(width=WIDTH, height=HEIGHT)
        self.chrome.attach_to_page()
        for domain in ("Page", "Runtime", "Log"):
            self.chrome.call(f"{domain}.enable")
        # The viewport exactly, whatever the window's frame takes.
        self.chrome.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )

    def close(self):
        self.chrome.close()

    def evaluate(self, expression):
        return self.chrome.evaluate(expression)

    def navigate(self, url):
        self.chrome.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                if self.evaluate("document.readyState === 'complete' && location.href") == url:
                    return
            except RuntimeError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} never loaded")
            time.sleep(0.05)

    def click_at(self, x, y):
        self.chrome.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        for kind in ("mousePressed", "mouseReleased"):
            self.chrome.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def click(self, prepare):
        """Runs `prepare` (an expression that scrolls an element into view and returns it),
        then clicks the middle of that element as a person would."""
        point = self.evaluate(
            """(() => {
              const el = (%s);
              if (!el) return null;
              const r = el.getBoundingClientRect();
              return [r.left + r.width / 2, r.top + r.height / 2];
            })()""" % prepare
        )
        if point is None:
            raise RuntimeError(f"nothing to click: {prepare}")
        self.click_at(*point)

    def key(self, key, code, key_code, text=None):
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": key_code}
        if text:
            down["text"] = text
        self.chrome.call("Input.dispatchKeyEvent", down)
        self.chrome.call(
            "Input.dispatchKeyEvent",
            {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": key_code},
        )

    def state_after(self, before):
        """The page's state once a selection after the `before`th one was drawn."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            state = self.evaluate(STATE)
            if state["selections"] > before:
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(f"no selection was drawn: {state}")
            time.sleep(0.02)

    def screenshot(self, path):
        shot = self.chrome.call("Page.captureScreenshot", {"format": "png"})
        with open(path, "wb") as out:
            out.write(base64.b64decode(shot["data"]))


def pick(page, index, screenshot):
    browser = Browser()
    try:
        browser.navigate(f"file://{os.path.abspath(page)}")
        browser.evaluate(READY)
        result = {"initial": browser.evaluate(STATE), "steps": []}

        def act(name, action):
            before = browser.evaluate(STATE)["selections"]
            action()
            result["steps"].append(dict(browser.state_after(before), action=name))

        row = """(() => {
          const list = document.getElementById("marker-list");
          list.scrollTop = Math.max(0, %d * 18 - list.clientHeight / 2);
          list.dispatchEvent(new Event("scroll"));
          return document.querySelector('#marker-rows .row[data-i="%d"]');
        })()"""
        # From the whole capture (no marker yet), the first marker.
        act("ArrowRight from the whole capture", lambda: browser.key("ArrowRight", "ArrowRight", 39))
        act(f"row {index}", lambda: browser.click(row % (index, index)))
        act("ArrowRight", lambda: browser.key("ArrowRight", "ArrowRight", 39))
        act("j", lambda: browser.key("j", "KeyJ", 74, "j"))
        act("ArrowLeft", lambda: browser.key("ArrowLeft", "ArrowLeft", 37))
        act("k", lambda: browser.key("k", "KeyK", 75, "k"))
        act("row 0", lambda: browser.click(row % (0, 0)))
        tick = """(() => {
          const tick = document.querySelector('#markers .marker[data-i="%d"]');
          tick.scrollIntoView({inline: "center", block: "nearest"});
          return tick;
        })()""" % index
        act(f"tick {index}", lambda: browser.click(tick))
        if screenshot:
            browser.evaluate("window.scrollTo(0, 0)")
            browser.screenshot(screenshot)
        result["errors"] = console_errors(browser.chrome.events)
    finally:
        browser.close()
    return result


def frame_session(browser, source):
    """The DevTools session of the frame showing `source`, once it is attached (a frame
    attaches before it loads: its target's URL says what it shows now)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        sessions = {}
        for event in browser.chrome.events:
            params = event.get("params", {})
            if event.get("method") == "Target.attachedToTarget":
                sessions[params["targetInfo"]["targetId"]] = params["sessionId"]
            elif event.get("method") == "Target.detachedFromTarget":
                sessions = {t: s for t, s in sessions.items() if s != params.get("sessionId")}
        targets = browser.chrome.call("Target.getTargets", session=False)["targetInfos"]
        for target in targets:
            if target["type"] == "iframe" and target["url"] == source and target["targetId"] in sessions:
                return sessions[target["targetId"]]
        if time.monotonic() > deadline:
            raise RuntimeError(f"the frame {source} never attached: {targets}")
        time.sleep(0.05)


def in_frame(browser, session, expression):
    page = browser.chrome.session
    browser.chrome.session = session
    try:
        return browser.chrome.evaluate(expression)
    finally:
        browser.chrome.session = page


def fold(url, capture, shots):
    os.makedirs(shots, exist_ok=True)
    browser = Browser()
    result = {"viewport": [WIDTH, HEIGHT]}
    try:
        browser.chrome.call(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
        )
        browser.navigate(url)  # the token: the cookie it sets opens the other pages
        origin = url.split("/?")[0].split("?")[0].rstrip("/")
        browser.navigate(f"{origin}{capture}")
        page = browser.evaluate(
            """(() => {
              const frame = document.querySelector("iframe.graph");
              const facts = document.querySelector("details.facts");
              return {
                inner_height: window.innerHeight,
                graph_top: frame ? frame.getBoundingClientRect().top : null,
                graph_src: frame ? frame.src : null,
                facts_open: facts ? facts.open : null,
                facts_summary: facts ? facts.querySelector("summary").textContent : null,
                tabs_top: document.querySelector("nav.tabs").getBoundingClientRect().top,
              };
            })()"""
        )
        if page["graph_src"]:
            session = frame_session(browser, page["graph_src"])
            deadline = time.monotonic() + TIMEOUT_S
            while not in_frame(browser, session, "document.readyState === 'complete' && !!document.querySelector('svg')"):
                if time.monotonic() > deadline:
                    raise RuntimeError("the flamegraph never loaded")
                time.sleep(0.05)
        result["flamegraph_tab"] = page
        browser.screenshot(os.path.join(shots, "capture-page.png"))

        browser.navigate(f"{origin}{capture}/heatmap")
        page = browser.evaluate(
            """(() => {
              const frame = document.querySelector("iframe.heatmap");
              return {
                inner_height: window.innerHeight,
                frame_top: frame.getBoundingClientRect().top,
                frame_src: frame.src,
              };
            })()"""
        )
        session = frame_session(browser, page["frame_src"])
        for domain in ("Runtime", "Log"):
            browser.chrome.session, saved = session, browser.chrome.session
            try:
                browser.chrome.call(f"{domain}.enable")
            finally:
                browser.chrome.session = saved
        in_frame(browser, session, READY)
        inside = in_frame(
            browser,
            session,
            """(() => ({
              heatmap_top: document.getElementById("heatmap").getBoundingClientRect().top,
              flame_top: document.getElementById("flame").getBoundingClientRect().top,
              list_top: document.getElementById("marker-list").getBoundingClientRect().top,
              columns: Number(document.getElementById("heatmap").dataset.columns),
              errors: Number(document.body.dataset.errors),
            }))()""",
        )
        page["heatmap_top"] = page["frame_top"] + inside["heatmap_top"]
        page["flame_top"] = page["frame_top"] + inside["flame_top"]
        page["list_top"] = page["frame_top"] + inside["list_top"]
        page["columns"] = inside["columns"]
        page["frame_errors"] = inside["errors"]
        result["heatmap_tab"] = page
        browser.screenshot(os.path.join(shots, "capture-heatmap.png"))
        result["errors"] = console_errors(browser.chrome.events)
    finally:
        browser.close()
    return result


def main():
    mode = sys.argv[1]
    if mode == "pick":
        result = pick(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "fold":
        result = fold(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
