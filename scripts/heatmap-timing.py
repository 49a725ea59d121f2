#!/usr/bin/env python3
"""Times a heatmap page in real (not virtual) time in headless Chromium.

Used by scripts/bench-timeline.sh. Drives Chromium through the DevTools protocol over
--remote-debugging-pipe (scripts/devtools.py), so nothing beyond the standard library and
Debian's chromium is needed. Headless runs with a virtual time budget
report 0 ms for everything the page measures itself; this one runs on the wall clock.

Usage: heatmap-timing.py PAGE.html SECONDS [SELECTIONS]
Prints: load time (navigation to first heatmap and flamegraph, the page's own figure, and
the wall time seen from here), then for SELECTIONS ranges spread over the capture the time
the page took to recompute and draw each selection (its own figure) and the wall time
until the next frame was painted.
"""
import os
import statistics
import sys
import time

from devtools import Chrome


WAIT_READY = """new Promise((resolve, reject) => {
  const started = Date.now();
  (function poll() {
    const b = document.body;
    if (b && b.dataset.loadMs) resolve({loadMs: Number(b.dataset.loadMs), errors: Number(b.dataset.errors || 0)});
    else if (Date.now() - started > 120000) reject(new Error("the page never became ready"));
    else setTimeout(poll, 10);
  })();
})"""

# Sets the fragment, waits until the page has drawn a new selection, then for the next frame.
SELECT = """new Promise((resolve) => {
  const started = performance.now();
  const before = Number(document.body.dataset.selections || 0);
  location.hash = "#t=%s-%s";
  (function poll() {
    if (Number(document.body.dataset.selections || 0) <= before) { setTimeout(poll, 1); return; }
    const drawn = document.getElementById("flame-box");
    requestAnimationFrame(() => resolve({
      selectMs: Number(document.body.dataset.selectMs),
      wallMs: performance.now() - started,
      total: Number(drawn.dataset.total),
    }));
  })();
})"""


def secs(value):
    """A range bound in the fragment: two decimals, one trailing zero dropped."""
    text = f"{value:.2f}"
    return text[:-1] if text.endswith("0") else text


def main():
    page, seconds = os.path.abspath(sys.argv[1]), float(sys.argv[2])
    selections = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    chrome = Chrome()
    try:
        chrome.attach_to_page()
        chrome.call("Page.enable")
        started = time.monotonic()
        chrome.call("Page.navigate", {"url": f"file://{page}"})
        ready = chrome.evaluate(WAIT_READY)
        wall_load = (time.monotonic() - started) * 1000
        print(f"load: page's own {ready['loadMs']:.0f} ms, wall {wall_load:.0f} ms, errors {ready['errors']}")
        own, wall = [], []
        for i in range(selections):
            # Ranges of 2.5 s spread over the capture, each different from the last.
            start = round((seconds - 3) * (i + 1) / (selections + 1), 1)
            a, b = secs(start), secs(start + 2.5)
            result = chrome.evaluate(SELECT % (a, b))
            own.append(result["selectMs"])
            wall.append(result["wallMs"])
            print(f"selection {a}-{b} s: page's own {result['selectMs']:.0f} ms, "
                  f"wall to next frame {result['wallMs']:.0f} ms, {result['total']:.0f} samples")
        print(f"selection median: page's own {statistics.median(own):.0f} ms, "
              f"wall {statistics.median(wall):.0f} ms (max {max(wall):.0f} ms)")
    finally:
        chrome.close()


if __name__ == "__main__":
    main()
