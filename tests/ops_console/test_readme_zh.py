"""README.zh-CN.md keeps up with README.md: the same configuration variables, the same
commands, the same sections people use."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGLISH = (ROOT / "README.md").read_text(encoding="utf-8")
CHINESE = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def test_every_configuration_variable_is_in_the_chinese_readme():
    english = set(re.findall(r"^\| `([A-Z_]+)`", _section(ENGLISH, "## Configuration"), re.M))
    chinese = set(re.findall(r"^\| `([A-Z_]+)`", _section(CHINESE, "## 配置"), re.M))
    assert english and english == chinese


def test_every_command_line_is_in_the_chinese_readme():
    def commands(text: str) -> list[str]:
        return [line.split("#", 1)[0].rstrip() for line in text.splitlines() if line.startswith("python ")]

    english = commands(_section(ENGLISH, "## Command line"))
    chinese = commands(_section(CHINESE, "## 命令行"))
    assert english and english == chinese


def test_the_usage_sections_are_all_there_and_the_readmes_link_each_other():
    english = re.findall(r"^- \*\*([^*]+)\*\*", _section(ENGLISH, "## Using it"), re.M)
    chinese = re.findall(r"^- \*\*([^*]+)\*\*", _section(CHINESE, "## 使用"), re.M)
    assert len(english) == len(chinese) >= 15
    assert "(README.zh-CN.md)" in ENGLISH and "(README.md)" in CHINESE
    assert "make run" in CHINESE and "make test" in CHINESE
