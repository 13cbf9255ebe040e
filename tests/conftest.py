"""The suite in two parts: `pytest` (the README's command) runs in a few minutes on a laptop; the
slow part (the accuracy scenarios, properties over random draws, chunk-size sweeps, metamorphic
sweeps over every sample, browser, Ray, torch and MLflow-server tests) is marked `slow` and run
with `pytest -m slow`. CI (`.ci/run`) runs both."""

from __future__ import annotations

import pytest

# Modules whose every test belongs to the slow part (each measured at tens of seconds or more).
SLOW_MODULES = {
    "test_scenarios",
    "test_parallel",
    "test_tables",
    "test_properties",
    "test_verdict_properties",
    "test_metamorphic",
    "test_browser",
    "test_scan_ray",
    "test_guard_distributed",
    "test_guard_hf",
    "test_guard_lightning",
    "test_stores_mlflow",
    "test_rule_declarations",
    "test_engine_parity",
    "test_samplegen",
    "test_thread_fixtures",
    "test_fuzz_commands",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
