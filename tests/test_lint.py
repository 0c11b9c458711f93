"""The suite enforces the house style: ruff (lint and format) and djlint on the templates."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "."],
        ["ruff", "format", "--check", "."],
        ["djlint", "templates", "--lint", "--profile=django"],
    ],
    ids=["ruff-check", "ruff-format", "djlint"],
)
def test_the_code_passes(command):
    result = subprocess.run(
        [str(BIN / command[0]), *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
