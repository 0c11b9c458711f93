"""The arrows point downward: core imports no app; fleet imports neither diagnostics nor
incidents nor the project; incidents are opened and edited only through incidents.lifecycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "core": ("fleet", "diagnostics", "incidents", "ops_console"),
    "fleet": ("diagnostics", "incidents", "ops_console"),
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _sources(package: str) -> list[Path]:
    return [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_lower_package_imports_nothing_above_it(package):
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _sources(package)
        for name in sorted(_imports(path))
        if name.split(".")[0] in FORBIDDEN[package]
    ]
    assert not wrong, "\n".join(wrong)


def test_incidents_are_created_only_by_the_lifecycle_module():
    wrong = []
    for path in _sources("incidents"):
        if path.name == "lifecycle.py":
            continue
        text = path.read_text(encoding="utf-8")
        made = re.search(r"(?<![\w.])Incident(?:\.objects\.create)?\((?!models\.)", text)
        saved = re.search(r"\bincident\.save\(|form\.save\(", text) and "IncidentForm" in text
        if made or saved:
            wrong.append(str(path.relative_to(ROOT)))
    assert not wrong, wrong
