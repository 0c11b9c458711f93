"""Citations of the guide's corrections resolve inside the repository.

Comments, docstrings and shipped texts cite the corrections to the operations guide as
"corrections #N" or lists such as "corrections #5, #11" and "corrections #3 and #4"; a
paragraph that names the corrections may also cite bare "(#N)" (docs/guide-corrections.md,
"How citations work"). Every N must have a section "## N." there, and its table "Where each
correction is applied" must list the files that cite it.

No source file may point at what lies beside the checkout: the workspace's other folders
and the files in them are not shipped, so a comment resting on them is written into
docs/ and cites that. Which names those are is read from the checkout's parent folder, not
written here. Plain file reading, no database.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "guide-corrections.md"
THIS = Path(__file__).resolve()

SKIP_DIRS = {
    ".git",
    ".venv",
    "var",
    "node_modules",
    "__pycache__",
    ".ruff_cache",
    ".pytest_cache",
    "test-output",
    "llm_ops_console.egg-info",
}
CITING_SUFFIXES = {".py", ".yaml", ".yml", ".html", ".md"}
SOURCE_SUFFIXES = CITING_SUFFIXES | {".txt", ".toml", ".cfg", ".ini", ".sh", ".js", ".css"}
SOURCE_NAMES = frozenset({"Makefile", "Dockerfile", "Procfile"})

# "corrections #3", "Corrections #3", "corrections #5, #10, #11", "corrections #3 and #4"
CITATION = re.compile(r"\bcorrections'?\s+#(\d+)((?:\s*(?:,|;|/|&|\band\b|\bor\b)\s*#\d+)*)", re.IGNORECASE)
# "the corrections apply: ... (#11); ... (#10)": bare numbers in a paragraph naming them.
# One to three digits only, so "vllm#39863" and "(#25350)" issue numbers never count.
NAMES_THE_NOTES = re.compile(r"\bcorrections\b", re.IGNORECASE)
BARE = re.compile(r"\(#(\d{1,3})\b")
NUMBER = re.compile(r"#(\d+)")


def outside_names() -> list[str]:
    """What lies beside the checkout, as a source file would name it: each sibling folder
    with each of its entries ("<folder>/<entry>") and the files one level inside them; other
    checkouts of this repository are left out."""
    names = []
    siblings = (
        p
        for p in ROOT.parent.iterdir()
        # another checkout of this repository beside it (a CI clone) is not "outside"
        if p.is_dir() and p != ROOT and not p.name.startswith(".") and not (p / "manage.py").exists()
    )
    for sibling in sorted(siblings):
        for entry in sorted(sibling.iterdir()):
            names.append(f"{sibling.name}/{entry.name}")
            if entry.is_dir():
                names += [f.name for f in sorted(entry.iterdir()) if f.is_file()]
    return names


SECTION = re.compile(r"^## (\d+)\. \S", re.MULTILINE)
TABLE_TITLE = "## Where each correction is applied"
TABLE_ROW = re.compile(r"^\|\s*(\d+)\s*\|(.*)\|\s*$", re.MULTILINE)


def source_files(suffixes: set[str], names: frozenset[str] = frozenset()) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        for name in files:
            path = Path(folder, name)
            if (path.suffix in suffixes or name in names) and path.resolve() != THIS:
                found.append(path)
    return sorted(found)


def citations() -> dict[int, dict[str, list[int]]]:
    """{N: {relative path: [line numbers]}} for every citation outside docs/."""
    found: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for path in source_files(CITING_SUFFIXES):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("docs/"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")

        def line_of(offset: int, text: str = text) -> int:
            return text.count("\n", 0, offset) + 1

        for match in CITATION.finditer(text):
            numbers = [match.group(1), *NUMBER.findall(match.group(2))]
            for n in numbers:
                found[int(n)][rel].append(line_of(match.start()))
        for paragraph in re.finditer(r"(?:.+\n?)+", text):
            if NAMES_THE_NOTES.search(paragraph.group(0)):
                for match in BARE.finditer(paragraph.group(0)):
                    found[int(match.group(1))][rel].append(line_of(paragraph.start() + match.start()))
    return found


def doc_text() -> str:
    assert DOC.is_file(), f"{DOC.relative_to(ROOT)} is missing"
    return DOC.read_text(encoding="utf-8")


def table_rows() -> dict[int, str]:
    text = doc_text()
    assert TABLE_TITLE in text, f"{DOC.name} has no table {TABLE_TITLE!r}"
    table = text.split(TABLE_TITLE, 1)[1]
    return {int(n): files for n, files in TABLE_ROW.findall(table)}


def test_the_citation_finder_reads_every_form_in_use():
    sample = (
        "(corrections #5, #10, #11, #14) corrections #3 and #4; Corrections #1: x (corrections #2)\n"
        "the corrections apply: usage alone (#12); vllm#39863 and (#25350) are issues\n"
    )
    numbers = {int(n) for m in CITATION.finditer(sample) for n in [m.group(1), *NUMBER.findall(m.group(2))]}
    numbers |= {int(n) for n in BARE.findall(sample)}
    assert numbers == {1, 2, 3, 4, 5, 10, 11, 12, 14}
    assert citations(), "no citation found at all: the finder is broken"


def test_the_sections_are_numbered_one_to_n():
    numbers = [int(n) for n in SECTION.findall(doc_text())]
    assert numbers == list(range(1, len(numbers) + 1)), numbers


def test_every_citation_has_a_section():
    sections = {int(n) for n in SECTION.findall(doc_text())}
    missing = [
        f"#{n}: {path} line {', '.join(map(str, lines))}"
        for n, files in sorted(citations().items())
        if n not in sections
        for path, lines in sorted(files.items())
    ]
    assert not missing, "cited, but no '## N.' section in docs/guide-corrections.md:\n" + "\n".join(missing)


def test_the_table_lists_the_files_that_cite_each_correction():
    rows = table_rows()
    problems = []
    cited = citations()
    for n, files in sorted(cited.items()):
        for path in sorted(files):
            if f"`{path}`" not in rows.get(n, ""):
                problems.append(f"#{n}: {path} cites it but is not in the table")
    for n, row in sorted(rows.items()):
        for path in re.findall(r"`([^`]+)`", row):
            if path not in cited.get(n, {}):
                problems.append(f"#{n}: {path} is in the table but does not cite it")
    assert not problems, "\n".join(problems)


def test_no_source_file_points_outside_the_repository():
    names = outside_names()
    if not names:
        pytest.skip("nothing lies beside this checkout to be cited")
    outside = re.compile("|".join(rf"(?<![\w.-]){re.escape(name)}(?![\w-])" for name in names))
    found = []
    for path in source_files(SOURCE_SUFFIXES, SOURCE_NAMES):
        rel = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if outside.search(line):
                found.append(f"{rel}:{number}: {line.strip()}")
    assert not found, "paths outside the repository (cite docs/guide-corrections.md instead):\n" + "\n".join(
        found
    )
