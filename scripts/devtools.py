"""Headless Chromium driven through the DevTools protocol, standard library only.

Chromium runs with --remote-debugging-pipe: it reads commands on fd 3 and writes replies
and events on fd 4, each a NUL-terminated JSON message. Used by scripts/heatmap-timing.py
(page timings) and scripts/view-check.py (the viewer, driven by clicks).
"""
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time


class Chrome:
    def __init__(self, width=1280, height=900):
        self.profile = tempfile.mkdtemp(prefix="devprof-chrome-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # Move both ends out of the way first: either may already be fd 3 or 4.
            read_end = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            write_end = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.proc = subprocess.Popen(
            [
                "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check",
                f"--window-size={width},{height}",
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
        # Events (messages without an id) seen while waiting for replies, in order.
        self.events = []

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
            if "method" in reply:
                self.events.append(reply)

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

    def evaluate(self, expression, attempts=20):
        # A navigation that starts while an expression runs destroys its context; every
        # expression the scripts evaluate only reads (or scrolls), so it is asked again
        # of the page that replaced it.
        for attempt in range(attempts):
            try:
                result = self.call(
                    "Runtime.evaluate",
                    {"expression": expression, "awaitPromise": True, "returnByValue": True},
                )
                break
            except RuntimeError as error:
                if "navigated or closed" not in str(error) or attempt + 1 == attempts:
                    raise
                time.sleep(0.05)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page error: {result['exceptionDetails']}")
        return result["result"].get("value")


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
