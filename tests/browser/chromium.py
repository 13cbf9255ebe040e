"""Headless Chromium driven over the Chrome DevTools Protocol, standard library only.

Chromium is started with `--remote-debugging-pipe`: it reads protocol messages (JSON, each ended
by a NUL byte) from file descriptor 3 and writes its answers and events to descriptor 4, so no port
is opened and no WebSocket client is needed. Enough of the protocol for the browser tests: open a
page, wait for it to load, evaluate JavaScript (awaiting promises), collect console errors and
failed requests, and take a full-page screenshot.

Started with the flags that keep Chromium off the network it has no business reaching
(background networking, component updates, first-run pings) and with a fresh profile folder.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    explicit = os.environ.get("MEMLOG_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class ChromiumError(RuntimeError):
    pass


class Chromium:
    """One browser, one page at a time. Use as a context manager."""

    def __init__(self, executable: str, timeout: float = 60.0, width: int = 1200, height: int = 900):
        self.timeout = timeout
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="memlog-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child sees the pipes as fds 3 and 4, as --remote-debugging-pipe expects.
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            pass_fds=(3, 4),
            preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)) and None,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.session: str | None = None

    # -- protocol ---------------------------------------------------------------------------------

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read_message(self, deadline: float) -> dict:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChromiumError("timed out waiting for Chromium")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise ChromiumError(f"Chromium exited: {self._stderr_tail()}")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = "page", timeout: float | None = None) -> dict:
        """Send a command and wait for its answer; events that arrive meanwhile are kept."""
        target = self.session if session == "page" else session
        wanted = self._send(method, params, target)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            message = self._read_message(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise ChromiumError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, timeout: float | None = None) -> dict:
        for i, event in enumerate(self.events):
            if event["method"] == method:
                return self.events.pop(i)
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            message = self._read_message(deadline)
            if message.get("method") == method:
                return message
            if "method" in message:
                self.events.append(message)

    # -- pages ------------------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """A new page at `url`, loaded (the load event fired)."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=None)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str, timeout: float | None = None):
        """The value of a JavaScript expression (promises awaited); a thrown error raises."""
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise ChromiumError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    def screenshot(self, path: Path) -> bytes:
        """A PNG of the whole page, not only the window."""
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        clip = {"x": 0, "y": 0, "width": max(size["width"], 1), "height": max(size["height"], 1), "scale": 1}
        data = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})["data"])
        Path(path).write_bytes(data)
        return data

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and requests that went out or failed, so far."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("file:", "data:", "about:")):
                    found.append(f"request: {url}")
        return found

    # -- lifetime ---------------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        if self.process.poll() is None or not self.process.stderr:
            return "(still running)"
        return self.process.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                try:
                    self._send("Browser.close")
                    self.process.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.process.kill()
                    self.process.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                with contextlib.suppress(OSError):
                    os.close(fd)
            if self.process.stderr:
                self.process.stderr.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
