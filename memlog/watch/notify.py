"""`memlog watch --notify URL`: a JSON message POSTed when the verdict turns to one that needs a
person (one an error finding implies: a leak, an out-of-memory error, a dead run) and when a leaking series' projected OOM comes within
the horizon: once per change, never a storm. Messages go through a queue to a thread of their own,
with a timeout and a few retries, so a webhook that hangs or fails never delays watching. The body
carries a Slack-compatible `text`; the URL (whose path or user part is often the secret, as in
Slack's hooks) is never printed: only its scheme and host.
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import unquote, urlsplit, urlunsplit

from memlog.report.report import Report

TIMEOUT_SECONDS = 10.0
RETRIES = 3  # attempts per message
BACKOFF_SECONDS = 2.0  # before the second attempt; doubled before each next one


def shown(url: str) -> str:
    """The URL as it may be printed: scheme and host only."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}"


def _without_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """`https://user:token@host/...` as urllib can send it: the URL without its user part, and
    that part as a Basic Authorization header."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, {}
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{parts.port}" if parts.port else ""
    token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
    return urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


class Notifier:
    """Decides what is news (`consider`) and sends it on its own thread (`messages`)."""

    def __init__(
        self,
        url: str,
        run: str,
        *,
        horizon_seconds: float = 3600.0,
        notice: Callable[[str], None] = lambda m: None,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"--notify: not an http(s) URL: {shown(url)}")
        self.url, self.headers = _without_userinfo(url)
        self.run, self.horizon, self.notice, self.sleep, self.timeout = run, horizon_seconds, notice, sleep, timeout
        self.verdict: str | None = None
        self.near: set[str] = set()  # series already said to be within the horizon
        self.messages: queue.Queue[dict | None] = queue.Queue()
        self.sent = 0
        self.thread = threading.Thread(target=self._send_all, daemon=True, name="memlog-notify")
        self.thread.start()

    def consider(self, report: Report, seconds_to_oom: dict[str, float]) -> None:
        """Queue what is news in `report`: a verdict turned alerting, series newly within the horizon."""
        if report.verdict != self.verdict:
            if report.fails("error"):  # (the verdict is read from the rules' declarations, never named here)
                self._queue(report, f"memlog: {self.run}: {report.headline.headline}", "verdict")
            self.verdict = report.verdict
        near = {series: seconds for series, seconds in seconds_to_oom.items() if seconds is not None and seconds <= self.horizon}
        for series in sorted(set(near) - self.near):
            minutes = near[series] / 60
            self._queue(
                report,
                f"memlog: {self.run}: {series} is projected to run out of memory in ~{minutes:.0f} min",
                "oom-horizon",
                series=series,
                seconds_to_oom=round(near[series]),
            )
        self.near = set(near) | (self.near & set(seconds_to_oom))

    def _queue(self, report: Report, text: str, why: str, **more) -> None:
        self.messages.put({"text": text, "run": self.run, "event": why, "verdict": report.verdict, "headline": report.headline.headline, **more})

    def close(self, wait: float = 0.0) -> None:
        """No more messages; wait up to `wait` seconds for those queued (watch's end)."""
        self.messages.put(None)
        self.thread.join(wait)

    def _send_all(self) -> None:
        while (message := self.messages.get()) is not None:
            self._send(message)

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        delay = BACKOFF_SECONDS
        for attempt in range(1, RETRIES + 1):
            request = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json", **self.headers}, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    if response.status < 300:
                        self.sent += 1
                        return
                    why = f"HTTP {response.status}"
            except urllib.error.HTTPError as exc:
                why = f"HTTP {exc.code}"
            except (OSError, ValueError) as exc:  # refused, timed out, reset
                why = type(exc).__name__
            if attempt < RETRIES:
                self.sleep(delay)
                delay *= 2
        self.notice(f"notify: POST to {shown(self.url)} failed {RETRIES} times ({why}); message dropped")
