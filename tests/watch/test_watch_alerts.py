"""Into the monitoring stack (issue 39): watch as a Prometheus endpoint scraped for real while the
log grows, a webhook received by a local HTTP server (one POST per change; a failing or hanging
server delays nothing), and scan's textfile parsed by prometheus_client's own parser. Nothing waits
on the wall clock: deliveries are awaited as events, retries sleep on a fake sleep."""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlog.cli import app
from memlog.commands.watch import Alerts
from memlog.watch.notify import RETRIES, Notifier, shown
from memlog.watch.watch import Watcher
from tests.watch.test_watch import flat_lines, leak_lines

text_string_to_metric_families = pytest.importorskip("prometheus_client.parser").text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def test_the_endpoint_serves_the_judgement_in_force_as_the_log_grows(tmp_path):
    log = tmp_path / "train.log"
    lines = leak_lines(300)
    log.write_text("\n".join(lines[:40]) + "\n")
    alerts = Alerts(metrics_port="127.0.0.1:0", run="job-7")
    alerts.start(notice=lambda message: None)
    try:
        port = alerts.server.server_port
        watcher = Watcher([str(log)], interval=0)
        watcher.poll()
        alerts.judged(watcher.judge())
        first = scrape(port)
        with open(log, "a") as handle:
            handle.write("\n".join(lines[40:]) + "\n")
        watcher.poll()
        alerts.judged(watcher.judge())
        second = scrape(port)
    finally:
        alerts.stop()
        watcher.close()
    (step_before,), (step_after,) = first["memlog_last_step"], second["memlog_last_step"]
    assert step_before.value == 39 and step_after.value == 300
    assert step_after.labels["run"] == "job-7" and step_after.labels["rank"] == "0" and step_after.labels["scope"] == "device"
    (level,) = second["memlog_memory_bytes"]
    assert level.value == pytest.approx(float(lines[-1].split("memory: ")[1].split("GiB")[0]) * (1 << 30), rel=1e-3)
    assert [s.labels["verdict"] for s in second["memlog_verdict_info"]] == ["leak"]
    assert second["memlog_projected_oom_step"] and second["memlog_memory_growth_bytes_per_step"][0].value > 0


class Hook(BaseHTTPRequestHandler):
    """A webhook receiver: records each POST body, answers `status`, or holds the request until released."""

    received: list[dict]
    arrived: threading.Event
    status = 200
    hold: threading.Event | None = None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).authorization = self.headers.get("Authorization")
        if self.hold is not None:
            self.hold.wait(60)
        type(self).received.append(body)
        self.send_response(self.status)
        self.end_headers()
        type(self).arrived.set()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def hook():
    handler = type("H", (Hook,), {"received": [], "arrived": threading.Event(), "status": 200, "hold": None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, handler
    if handler.hold is not None:
        handler.hold.set()
    server.shutdown()
    server.server_close()


def judged(tmp_path: Path, lines: list[str]):
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    watcher = Watcher([str(log)], interval=0)
    watcher.poll()
    watcher.finish()
    report = watcher.judge()
    watcher.close()
    return report


def test_one_post_per_change_to_an_alerting_verdict_and_per_series_entering_the_horizon(tmp_path, hook):
    server, handler = hook
    url = f"http://user:secret@127.0.0.1:{server.server_port}/services/T000/B000/XXXX"
    notifier = Notifier(url, "job-7", horizon_seconds=3600)
    stable, leak = judged(tmp_path, flat_lines(80)), judged(tmp_path, leak_lines(300))
    notifier.consider(stable, {})  # nothing to tell
    notifier.consider(leak, {"rank0": 1200.0})  # the verdict turns, and the OOM is 20 min away
    notifier.consider(leak, {"rank0": 1100.0})  # the same news again: no storm
    notifier.close(wait=60)
    assert [m["event"] for m in handler.received] == ["verdict", "oom-horizon"]
    first, second = handler.received
    assert handler.authorization == "Basic dXNlcjpzZWNyZXQ="  # user:secret, sent as a header, never printed
    assert first["verdict"] == "leak" and first["text"].startswith("memlog: job-7: LEAK")
    assert second["series"] == "rank0" and second["seconds_to_oom"] == 1200 and "~20 min" in second["text"]
    assert shown(url) == "http://127.0.0.1" and "secret" not in shown(url) and "XXXX" not in shown(url)


def test_a_failing_webhook_is_retried_then_dropped_with_one_line_never_blocking(tmp_path, hook):
    server, handler = hook
    handler.status = 500
    slept, notices = [], []
    notifier = Notifier(f"http://127.0.0.1:{server.server_port}/hook", "job-7", notice=notices.append, sleep=slept.append)
    notifier.consider(judged(tmp_path, leak_lines(300)), {})
    notifier.close(wait=60)
    assert len(handler.received) == RETRIES and slept == [2.0, 4.0][: RETRIES - 1]
    assert notices == [f"notify: POST to http://127.0.0.1 failed {RETRIES} times (HTTP 500); message dropped"]


def test_a_hanging_webhook_delays_nothing(tmp_path, hook):
    server, handler = hook
    handler.hold = threading.Event()
    notifier = Notifier(f"http://127.0.0.1:{server.server_port}/hook", "job-7")
    report = judged(tmp_path, leak_lines(300))
    notifier.consider(report, {})  # queued: the request hangs on the notifier's own thread
    notifier.consider(judged(tmp_path, flat_lines(80)), {})
    notifier.consider(report, {})  # a second change to leak, queued behind the first
    assert not handler.received  # (consider returned while the server still holds the first)
    handler.hold.set()
    notifier.close(wait=60)
    assert [m["verdict"] for m in handler.received] == ["leak", "leak"]


def test_scan_writes_a_textfile_prometheus_reads(tmp_path):
    for name, lines in (("leaky", leak_lines(300)), ("calm", flat_lines(200))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "train.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "memlog.prom"
    result = runner.invoke(app, ["scan", str(tmp_path), "--jobs", "1", "--prometheus-textfile", str(out), "-o", "json"])
    assert result.exit_code == 1, result.output
    families = {f.name: f.samples for f in text_string_to_metric_families(out.read_text())}
    folder = lambda sample: "leaky" if "leaky" in sample.labels["run"] else "calm"
    assert {folder(s): s.labels["verdict"] for s in families["memlog_verdict_info"]} == {"leaky": "leak", "calm": "stable"}
    assert [folder(s) for s in families["memlog_projected_oom_step"]] == ["leaky"]
    assert not list(tmp_path.glob(".memlog.prom.partial"))


def test_the_alert_rules_and_the_dashboard_use_the_metrics_memlog_exports():
    """promtool is not installable here: the rule file is parsed and every memlog_ metric that the
    rules and the dashboard name must be one memlog exports (a renamed metric breaks this)."""
    import re

    exported = {
        "memlog_memory_bytes",
        "memlog_memory_growth_bytes_per_step",
        "memlog_memory_capacity_bytes",
        "memlog_last_step",
        "memlog_projected_oom_step",
        "memlog_projected_oom_seconds",
        "memlog_verdict_info",
        "memlog_findings",
    }
    rules = yaml.safe_load((ROOT / "docs" / "monitoring" / "memlog-alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert exprs and all(rule.get("alert") and rule.get("annotations") for group in rules["groups"] for rule in group["rules"])
    dashboard = json.loads((ROOT / "docs" / "monitoring" / "grafana-dashboard.json").read_text())
    targets = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    named = {m for text in exprs + targets for m in re.findall(r"memlog_[a-z_]+", text)}
    assert named and named <= exported
    # and the families a scrape serves are exactly those
    from memlog.render.prometheus import ReportCollector

    assert {family.name for family in ReportCollector(list).collect()} == exported


@pytest.mark.parametrize("option", [["--metrics-port", "127.0.0.1:nope"], ["--notify", "ftp://user:pw@example.com/x"]])
def test_a_bad_alert_option_is_one_line_and_exit_2(tmp_path, option):
    log = tmp_path / "train.log"
    log.write_text("\n".join(flat_lines(20)) + "\n")
    result = runner.invoke(app, ["watch", str(log), *option])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "memlog: error:" in result.stderr
    assert "pw" not in result.stderr
