"""A small budget of scripts/fuzz_commands.py (watch with signals and replaced files, scan beside
special files and links, compare): no crash, hang, unsafe output or watch verdict other than
analyze's. The measured runs are in docs/guarantees.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import fuzz_commands


@pytest.mark.parametrize(("command", "budget"), [("watch", 12), ("scan", 3), ("compare", 6)])
def test_a_small_fuzz_budget_finds_nothing(command, budget, capsys):
    assert fuzz_commands.main(["--command", command, "--budget", str(budget), "--seed", "7"]) == 0, capsys.readouterr().out
