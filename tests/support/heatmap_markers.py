#!/usr/bin/env python3
"""Opens a heatmap page in headless Chromium (Debian's chromium, over the DevTools pipe as
scripts/heatmap-timing.py does), clicks marker ticks and reports what the page shows.

Usage: heatmap_markers.py PAGE.html INDEX...
Prints one JSON object: the ticks on the page, the page's own error count, the console
errors and exceptions Chromium reported, and for each INDEX the flamegraph total and range
the page shows after a click on that tick.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
timing = __import__("heatmap-timing")


class Chrome(timing.Chrome):
    """Keeps the events that arrive between replies (console messages, exceptions)."""

    def __init__(self):
        super().__init__()
        self.events = []

    def read(self):
        message = super().read()
        if "method" in message:
            self.events.append(message)
        return message


CLICK = """new Promise((resolve) => {
  const tick = document.querySelectorAll('#markers .marker')[%d];
  tick.click();
  requestAnimationFrame(() => {
    const box = document.getElementById('flame-box');
    resolve({range: box.dataset.range, total: Number(box.dataset.total),
             selected: tick.classList.contains('selected'), title: tick.title});
  });
})"""


def main():
    page, indexes = os.path.abspath(sys.argv[1]), [int(i) for i in sys.argv[2:]]
    chrome = Chrome()
    try:
        chrome.attach_to_page()
        chrome.call("Page.enable")
        chrome.call("Runtime.enable")
        chrome.call("Log.enable")
        chrome.call("Page.navigate", {"url": f"file://{page}"})
        ready = chrome.evaluate(timing.WAIT_READY)
        ticks = chrome.evaluate("document.querySelectorAll('#markers .marker').length")
        count = chrome.evaluate("Number(document.getElementById('markers').dataset.count)")
        clicks = [dict(chrome.evaluate(CLICK % i), index=i) for i in indexes]
        errors = chrome.evaluate("Number(document.body.dataset.errors)")
        console = [
            e for e in chrome.events
            if e["method"] == "Runtime.exceptionThrown"
            or (e["method"] == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")
            or (e["method"] == "Log.entryAdded" and e["params"]["entry"].get("level") == "error")
        ]
        print(json.dumps({"ticks": ticks, "count": count, "errors": errors + ready["errors"],
                          "console": console, "clicks": clicks}))
    finally:
        chrome.close()


if __name__ == "__main__":
    main()
