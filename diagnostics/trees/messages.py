"""The texts of the decision trees' YAML that people read, for `manage.py makemessages`.

The YAML is written in English, and each text is its own msgid: the tree's title, summary
and corrections, a question node's question, how, note and answers, a leaf's cause, fix and
note. Commands and metric names are identifiers and stay as they are (docs/i18n.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from diagnostics.trees.model import Node, Tree, trees

TREE_FIELDS = ("title", "summary")
NODE_FIELDS = ("question", "how", "note", "cause", "fix")


def tree_texts(tree: Tree) -> Iterator[tuple[str, str]]:
    """(text, where) for each human-readable text of one tree."""
    where = f"{tree.id}.yaml"
    for key in TREE_FIELDS:
        if getattr(tree, key):
            yield getattr(tree, key), f"{where}: {key}"
    for number, correction in enumerate(tree.corrections, start=1):
        yield correction.text, f"{where} correction {number}"
    for node in tree.nodes.values():
        yield from node_texts(node, where=f"{where} node {node.id}")


def node_texts(node: Node, *, where: str) -> Iterator[tuple[str, str]]:
    for key in NODE_FIELDS:
        if getattr(node, key):
            yield getattr(node, key), f"{where}: {key}"
    for number, answer in enumerate(node.answers, start=1):
        yield answer.answer, f"{where}: answer {number}"


def translatable_texts() -> Iterator[tuple[str, str]]:
    """Yield (text, where it is in the YAML) for each text shown to people."""
    for tree in trees().values():
        yield from tree_texts(tree)
