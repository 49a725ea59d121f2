#!/usr/bin/env python3
"""Times a heatmap page in real (not virtual) time in headless Chromium.

Used by scripts/bench-timeline.sh. Drives Chromium through the DevTools protocol over
--remote-debugging-pipe (fd 3 in, fd 4 out, NUL-terminated JSON), so nothing beyond the
standard library and Debian's chromium is needed. Headless runs with a virtual time budget
report 0 ms for everything the page measures itself; this one runs on the wall clock.

Usage: heatmap-timing.py PAGE.html SECONDS [SELECTIONS]
Prints: load time (navigation to first heatmap and flamegraph, the page's own figure, and
the wall time seen from here), then for SELECTIONS ranges spread over the capture the time
the page took to recompute and draw each selection (its own figure) and the wall time
until the next frame was painted.
"""
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


class Chrome:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="devprof-bench-chrome-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4.
        def child_fds():
            # Move both ends out of the way first: either may already be fd 3 or 4.
            read_end = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.proc = subprocess.Popen(
            [
                "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "about:blank",
            ],
            preexec_fn=child_fds, pass_fds=(3, 4),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def read(self):
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def attach_to_page(self):
        targets = self.call("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call(
            "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True}, session=False
        )["sessionId"]

    def evaluate(self, expression):
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page error: {result['exceptionDetails']}")
        return result["result"].get("value")


WAIT_READY = """new Promise((resolve, reject) => {
  const started = Date.now();
  (function poll() {
    const b = document.body;
    if (b && b.dataset.loadMs) resolve({loadMs: Number(b.dataset.loadMs), errors: Number(b.dataset.errors || 0)});
    else if (Date.now() - started > 120000) reject(new Error("the page never became ready"));
    else setTimeout(poll, 10);
  })();
})"""

# Sets the fragment, waits until the page has drawn that range, then for the next frame.
SELECT = """new Promise((resolve) => {
  const started = performance.now();
  location.hash = "#t=%s-%s";
  (function poll() {
    const drawn = document.querySelector('[data-range="%s-%s"]');
    if (!drawn) { setTimeout(poll, 1); return; }
    requestAnimationFrame(() => resolve({
      selectMs: Number(document.body.dataset.selectMs),
      wallMs: performance.now() - started,
      total: Number(drawn.dataset.total),
    }));
  })();
})"""


def secs(value):
    """The page's own spelling of a range bound: two decimals, one trailing zero dropped."""
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
            result = chrome.evaluate(SELECT % (a, b, a, b))
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
