"""Decision trees as data: YAML files in diagnostics/trees/data/, loaded and checked against
their schema before anything walks them.

A tree has a start node and nodes. A question node asks one thing, says how to answer it
(`how`, an optional `command` and `metric`) and lists answers, each leading to another node
(`next`) or into another tree (`goto`); an answer may carry `when`, a probe condition that
answers it from live data. A leaf gives the root cause, the fix, and optionally the config
generator preset that applies it. A tree, a node and a correction may name the guide's
sections they follow (`source`, see sources.py). Loading refuses unknown keys, nodes and
sections, unreachable nodes, cycles and dead ends, naming the file and the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from core.taxonomy import CATEGORIES
from diagnostics.trees.sources import SECTIONS, Section

DATA = Path(__file__).parent / "data"

_TREE_KEYS = {"id", "title", "category", "summary", "start", "nodes", "corrections", "source"}
_QUESTION_KEYS = {"question", "how", "command", "metric", "answers", "note", "source"}
_LEAF_KEYS = {"cause", "fix", "category", "config", "command", "note", "see", "source"}
_CORRECTION_KEYS = {"text", "source"}
_ANSWER_KEYS = {"answer", "next", "goto", "when"}
_CONFIG_KEYS = {"kind", "preset", "set"}


class TreeError(ValueError):
    """A tree file that breaks the schema; the message names the file and the node."""


@dataclass(frozen=True)
class Answer:
    answer: str
    next: str = ""  # a node of this tree
    goto: str = ""  # or another tree
    when: str = ""  # a probe condition ("timeout.ttft", "not timeout.ttft", "reachable")


@dataclass(frozen=True)
class ConfigLink:
    kind: str
    preset: str = ""
    values: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Correction:
    """Where a tree departs from the guide, and the guide's sections it departs from."""

    text: str
    sources: tuple[Section, ...] = ()

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Node:
    id: str
    question: str = ""
    how: str = ""
    command: str = ""
    metric: str = ""
    note: str = ""
    answers: tuple[Answer, ...] = ()
    cause: str = ""
    fix: str = ""
    category: str = ""
    config: ConfigLink | None = None
    see: tuple[str, ...] = ()
    sources: tuple[Section, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return bool(self.cause)


@dataclass(frozen=True)
class Tree:
    id: str
    title: str
    category: str
    summary: str
    start: str
    nodes: dict[str, Node]
    corrections: tuple[Correction, ...] = ()
    sources: tuple[Section, ...] = ()

    def node(self, node_id: str) -> Node:
        return self.nodes[node_id]


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise TreeError(f"{where}: {message}")


def _unknown(data: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    _require(not extra, where, f"unknown key(s) {', '.join(extra)} (allowed: {', '.join(sorted(allowed))})")


def _text(data: dict, key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key, "")
    _require(isinstance(value, str), where, f"{key!r} must be text")
    _require(bool(value.strip()) or not required, where, f"{key!r} is missing")
    return value.strip()


def parse_tree(data: Any, *, source: str) -> Tree:
    """A Tree from parsed YAML; TreeError for anything the schema does not allow."""
    _require(isinstance(data, dict), source, "a tree is a mapping")
    _unknown(data, _TREE_KEYS, source)
    tree_id = _text(data, "id", source, required=True)
    category = _text(data, "category", source, required=True)
    _require(category in CATEGORIES or category == "any", source, f"unknown category {category!r}")
    raw_nodes = data.get("nodes")
    _require(isinstance(raw_nodes, dict) and raw_nodes, source, "'nodes' must be a non-empty mapping")
    nodes = {
        str(node_id): _node(str(node_id), raw, f"{source} node {node_id!r}")
        for node_id, raw in raw_nodes.items()
    }
    corrections = data.get("corrections", [])
    _require(isinstance(corrections, list), source, "'corrections' must be a list")
    tree = Tree(
        id=tree_id,
        title=_text(data, "title", source, required=True),
        category=category,
        summary=_text(data, "summary", source),
        start=_text(data, "start", source, required=True),
        nodes=nodes,
        corrections=tuple(_correction(c, f"{source} correction {i + 1}") for i, c in enumerate(corrections)),
        sources=_sources(data, source),
    )
    _check_graph(tree, source)
    return tree


def _node(node_id: str, raw: Any, where: str) -> Node:
    _require(isinstance(raw, dict), where, "a node is a mapping")
    if "cause" in raw:
        _unknown(raw, _LEAF_KEYS, where)
        category = _text(raw, "category", where)
        _require(not category or category in CATEGORIES, where, f"unknown category {category!r}")
        see = raw.get("see", [])
        _require(isinstance(see, list), where, "'see' must be a list of tree ids")
        return Node(
            id=node_id,
            cause=_text(raw, "cause", where, required=True),
            fix=_text(raw, "fix", where, required=True),
            category=category,
            command=_text(raw, "command", where),
            note=_text(raw, "note", where),
            config=_config(raw.get("config"), where),
            see=tuple(str(s) for s in see),
            sources=_sources(raw, where),
        )
    _require("question" in raw, where, "a node needs a 'question' (or a 'cause' for a leaf)")
    _unknown(raw, _QUESTION_KEYS, where)
    answers = raw.get("answers")
    _require(isinstance(answers, list) and len(answers) >= 2, where, "a question needs at least two answers")
    return Node(
        id=node_id,
        question=_text(raw, "question", where, required=True),
        how=_text(raw, "how", where, required=True),
        command=_text(raw, "command", where),
        metric=_text(raw, "metric", where),
        note=_text(raw, "note", where),
        answers=tuple(_answer(a, f"{where} answer {i + 1}") for i, a in enumerate(answers)),
        sources=_sources(raw, where),
    )


def _sources(data: dict, where: str) -> tuple[Section, ...]:
    """The guide's sections, by number; written as text ("2.2", not 2.2, which YAML reads as a float)."""
    raw = data.get("source", [])
    raw = [raw] if isinstance(raw, str) else raw
    _require(isinstance(raw, list), where, "'source' must be a section number or a list of them")
    for number in raw:
        _require(isinstance(number, str), where, f"quote the section number {number!r} in 'source'")
        _require(number in SECTIONS, where, f"the guide has no section {number!r}")
    return tuple(Section(number) for number in raw)


def _correction(raw: Any, where: str) -> Correction:
    if isinstance(raw, str):
        return Correction(text=raw.strip())
    _require(isinstance(raw, dict), where, "a correction is text or a mapping with 'text' and 'source'")
    _unknown(raw, _CORRECTION_KEYS, where)
    return Correction(text=_text(raw, "text", where, required=True), sources=_sources(raw, where))


def _answer(raw: Any, where: str) -> Answer:
    _require(isinstance(raw, dict), where, "an answer is a mapping")
    _unknown(raw, _ANSWER_KEYS, where)
    answer = Answer(
        answer=_text(raw, "answer", where, required=True),
        next=_text(raw, "next", where),
        goto=_text(raw, "goto", where),
        when=_text(raw, "when", where),
    )
    _require(bool(answer.next) != bool(answer.goto), where, "an answer needs exactly one of 'next' or 'goto'")
    if answer.when:
        from diagnostics.trees.evidence import CONDITIONS

        name = answer.when.removeprefix("not ").strip()
        _require(
            name in CONDITIONS, where, f"unknown condition {name!r} (known: {', '.join(sorted(CONDITIONS))})"
        )
    return answer


def _config(raw: Any, where: str) -> ConfigLink | None:
    if raw is None:
        return None
    _require(isinstance(raw, dict), where, "'config' must be a mapping")
    _unknown(raw, _CONFIG_KEYS, where)
    from diagnostics.configgen.registry import GENERATORS

    kind = str(raw.get("kind", ""))
    _require(kind in GENERATORS, where, f"config kind {kind!r} is not a generator ({', '.join(GENERATORS)})")
    generator = GENERATORS[kind]
    preset = str(raw.get("preset", ""))
    _require(not preset or preset in generator.presets, where, f"{kind} has no preset {preset!r}")
    values = raw.get("set", {}) or {}
    _require(isinstance(values, dict), where, "'config.set' must be a mapping")
    names = {f.name for f in generator.fields}
    bad = sorted(set(values) - names)
    _require(not bad, where, f"{kind} has no field(s) {', '.join(bad)}")
    return ConfigLink(kind=kind, preset=preset, values={str(k): str(v) for k, v in values.items()})


def _check_graph(tree: Tree, source: str) -> None:
    _require(tree.start in tree.nodes, source, f"start {tree.start!r} is not a node")
    for node in tree.nodes.values():
        for answer in node.answers:
            _require(
                not answer.next or answer.next in tree.nodes,
                f"{source} node {node.id!r}",
                f"answer {answer.answer!r} leads to unknown node {answer.next!r}",
            )
    reached: set[str] = set()
    _walk(tree, tree.start, (), reached, source)
    unreachable = sorted(set(tree.nodes) - reached)
    _require(not unreachable, source, f"unreachable node(s) {', '.join(unreachable)}")


def _walk(tree: Tree, node_id: str, path: tuple[str, ...], reached: set[str], source: str) -> None:
    _require(node_id not in path, source, f"cycle: {' -> '.join((*path, node_id))}")
    if node_id in reached:
        return
    reached.add(node_id)
    node = tree.nodes[node_id]
    for answer in node.answers:
        if answer.next:
            _walk(tree, answer.next, (*path, node_id), reached, source)


def check_links(trees: dict[str, Tree]) -> None:
    """Every goto and see names a tree that exists."""
    for tree in trees.values():
        for node in tree.nodes.values():
            for target in (*(a.goto for a in node.answers if a.goto), *node.see):
                _require(target in trees, f"{tree.id}.yaml node {node.id!r}", f"no tree {target!r}")


def load(folder: Path | None = None) -> dict[str, Tree]:
    """Every tree in `folder` (the shipped ones by default), checked; TreeError on the first problem."""
    folder = folder or DATA
    trees: dict[str, Tree] = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise TreeError(f"{path.name}: not valid YAML: {exc}") from None
        tree = parse_tree(data, source=path.name)
        _require(tree.id == path.stem, path.name, f"id {tree.id!r} must match the file name")
        trees[tree.id] = tree
    _require(bool(trees), str(folder), "no trees")
    check_links(trees)
    return trees


@cache
def trees() -> dict[str, Tree]:
    return load()
