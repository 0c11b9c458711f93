"""A walkthrough: the steps taken through one or more trees, from the answers an engineer
chose (the path, as answer indexes, which is what the URL holds) and, for an instance, the
answers its latest probes give. A step a probe answered shows its evidence; the engineer
may override it, which puts their answer in the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.i18n import Message, later
from diagnostics.trees.evidence import Reading, read
from diagnostics.trees.model import Answer, Node, Tree

MAX_STEPS = 64  # trees are acyclic, but gotos between trees could chain; a walk is never this long


@dataclass(frozen=True)
class Facts:
    """An instance's latest probe findings and which probe kinds have results."""

    findings: list[dict]
    measured: set[str]
    instance_name: str = ""


@dataclass(frozen=True)
class Step:
    tree: Tree
    node: Node
    chosen: int  # index into node.answers
    by: str  # "you" or "probe"
    evidence: str = ""  # in English
    suggested: int | None = None  # what the probe said, when the engineer chose otherwise
    evidence_message: Message | str = ""  # the evidence, to show in the reader's language

    @property
    def answer(self) -> Answer:
        return self.node.answers[self.chosen]


@dataclass
class Walk:
    steps: list[Step] = field(default_factory=list)
    tree: Tree | None = None
    current: Node | None = None  # the open question, or the leaf reached
    problem: str = ""  # in English
    problem_message: Message | str = ""  # the same, to show in the reader's language

    @property
    def finished(self) -> bool:
        return bool(self.current and self.current.is_leaf)

    def path(self, upto: int | None = None) -> list[int]:
        """The answers of the steps before `upto` (all by default), as the URL holds them."""
        return [s.chosen for s in self.steps[:upto]]


def probe_answer(node: Node, facts: Facts | None) -> tuple[int, Reading] | None:
    """The first answer whose condition the probes confirm."""
    if facts is None:
        return None
    for index, answer in enumerate(node.answers):
        if answer.when:
            reading = read(answer.when, findings=facts.findings, measured=facts.measured)
            if reading.value:
                return index, reading
    return None


def walk(trees: dict[str, Tree], start: str, path: list[int], facts: Facts | None = None) -> Walk:
    """Follow `path` from the start of tree `start`, then the probes' answers while they
    have one; stops at the first open question or at a leaf."""
    result = Walk()
    tree = trees[start]
    node = tree.node(tree.start)
    for position in range(MAX_STEPS):
        if node.is_leaf:
            break
        suggestion = probe_answer(node, facts)
        if position < len(path):
            chosen = path[position]
            if not 0 <= chosen < len(node.answers):
                result.problem_message = later(
                    "step %(step)s: '%(question)s' has no answer %(answer)s",
                    step=position + 1,
                    question=later(node.question),
                    answer=chosen + 1,
                )
                result.problem = str(result.problem_message)
                break
            suggested = suggestion[0] if suggestion and suggestion[0] != chosen else None
            reading = suggestion[1] if suggestion else Reading(None, "")
            step = Step(tree, node, chosen, "you", reading.evidence, suggested, reading.message)
        elif suggestion is not None:
            reading = suggestion[1]
            step = Step(tree, node, suggestion[0], "probe", reading.evidence, None, reading.message)
        else:
            break
        result.steps.append(step)
        if step.answer.goto:
            tree = trees[step.answer.goto]
            node = tree.node(tree.start)
        else:
            node = tree.node(step.answer.next)
    result.tree, result.current = tree, node
    return result
