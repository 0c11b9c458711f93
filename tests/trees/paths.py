"""Paths through the shipped trees, for tests that visit every node of a tree."""

from __future__ import annotations

from diagnostics.trees.model import Tree


def paths_to_every_node(tree: Tree) -> dict[str, list[int]]:
    """node id -> the first path of answer indexes (breadth first) that reaches it in `tree`."""
    paths = {tree.start: []}
    queue = [tree.start]
    while queue:
        node = tree.node(queue.pop(0))
        for index, answer in enumerate(node.answers):
            if answer.next and answer.next not in paths:
                paths[answer.next] = [*paths[node.id], index]
                queue.append(answer.next)
    return paths


def dotted(path: list[int]) -> str:
    return ".".join(str(p) for p in path)
