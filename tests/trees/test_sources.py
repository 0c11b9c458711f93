"""The guide is cited by section title, never by a bare number: trees, nodes and corrections
name their sections in `source`, pages show "Guide §2.2.4 — Connection timeouts", and no text
an engineer reads says "guide 5.1" or "(2.5.3)"."""

from __future__ import annotations

import copy
import html
import re

import pytest
from django.urls import reverse

from diagnostics.trees.model import TreeError, load, parse_tree
from diagnostics.trees.sources import SECTIONS, section
from tests.trees.paths import dotted, paths_to_every_node
from tests.trees.test_tree_model import TREE

_NUMBER = r"[1-6]\.[1-5](?:\.[1-5])?"
BARE_CITATION = re.compile(
    rf"\b(?:guide(?:'s)?|chapter|section|case|appendix)\s+(?:{_NUMBER}|[AB]\b)(?! —)"  # guide 5.1, appendix A
    rf"|\({_NUMBER}(?:[,;)]|\s+(?:and|to|with)\b)"  # (2.5.2), (2.3.3 to 2.3.5)
    r"|(?<![\w./§-])[1-6]\.[1-5]\.[1-5](?![\w.]*\d)"  # 2.2.1 anywhere
    rf"|(?:^|[.\"] ){_NUMBER} (?:says|names|quotes)\b"  # 2.5.1 says
    rf"|\b(?:of|in|from) {_NUMBER}\b(?! ?(?:GiB|GB|s\b|x\b|%))",  # the check of 4.1.1
    re.I | re.M,
)


def bare_citations(text: str) -> list[str]:
    return [m.group(0) for m in BARE_CITATION.finditer(text)]


def every_text(tree):
    yield f"{tree.id} title", tree.title
    yield f"{tree.id} summary", tree.summary
    for i, correction in enumerate(tree.corrections):
        yield f"{tree.id} correction {i + 1}", correction.text
    for node in tree.nodes.values():
        fields = (node.question, node.how, node.command, node.metric, node.note, node.cause, node.fix)
        yield f"{tree.id}.{node.id}", "\n".join([*fields, *(a.answer for a in node.answers)])


def test_the_citation_checker_catches_the_bare_numbers_the_trees_used_to_have():
    for text in (
        "the decision tree of guide 5.1",
        "It is the guide's chapter 5.1, corrected.",
        "device-side assert triggered (2.5.2), NCCL",
        "per IP and for batch workers (2.3.3 to 2.3.5)",
        "2.5.1 says vLLM usually catches it",
        "The pre-deployment driver check of 4.1.1 compares",
        "Run the 2.5.5 checks: nvidia-smi",
        "the guide's case 3.4: 30K-token prompts",
        "The guide's appendix A answers",
    ):
        assert bare_citations(text), text
    for text in ("vLLM 0.8 and later", "about 1.5 x the weight files", "HTTP/1.1", "§2.2.4", "up to 0.10"):
        assert not bare_citations(text), text


def test_no_text_of_any_tree_cites_the_guide_by_a_bare_number():
    found = [f"{where}: {hit}" for tree in load().values() for where, text in every_text(tree)
             for hit in bare_citations(text)]  # fmt: skip
    assert not found, "\n".join(found)


def test_every_tree_names_its_sections_and_they_read_as_titles():
    for tree in load().values():
        assert tree.sources, tree.id
        for source in tree.sources:
            assert source.label == f"Guide §{source.number} — {SECTIONS[source.number]}"
    assert section("5.1").label == "Guide §5.1 — Systematic troubleshooting decision tree"
    assert section("A").label == "Guide appendix A — Error quick reference"


def test_corrections_that_argue_with_a_section_name_it():
    sourced = [c for tree in load().values() for c in tree.corrections if c.sources]
    assert len(sourced) >= 20
    assert {s.number for c in sourced for s in c.sources} >= {"2.2.1", "2.3.4", "2.5.1", "3.4", "A", "B"}


@pytest.mark.parametrize(
    ("where", "source", "message"),
    [
        ("tree", ["9.9"], "the guide has no section '9.9'"),
        ("node", [2.2], "quote the section number 2.2"),
        ("node", "7", "the guide has no section '7'"),
    ],
)
def test_a_source_the_guide_does_not_have_is_refused_by_name(where, source, message):
    data = copy.deepcopy(TREE)
    target = data if where == "tree" else data["nodes"]["slow"]
    target["source"] = source
    with pytest.raises(TreeError, match=re.escape(message)):
        parse_tree(data, source="mini.yaml")


def test_a_correction_may_be_text_or_text_with_its_sources():
    data = {**copy.deepcopy(TREE), "corrections": ["Plain.", {"text": "Sourced.", "source": ["2.2.2"]}]}
    plain, sourced = parse_tree(data, source="mini.yaml").corrections
    assert (plain.text, plain.sources) == ("Plain.", ())
    assert sourced.text == "Sourced." and [s.number for s in sourced.sources] == ["2.2.2"]


def _page_text(content: bytes) -> str:
    text = re.sub(r"<script.*?</script>|<style.*?</style>", " ", content.decode(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


@pytest.mark.django_db
@pytest.mark.parametrize("tree_id", ["guide", "timeouts", "rate_limiting", "oom", "cuda", "model_loading"])
def test_every_node_renders_without_bare_citations_and_with_its_source_titles(client, cast, tree_id):
    client.force_login(cast.viewer)
    tree = load()[tree_id]
    url = reverse("diagnostics:walkthrough", args=[tree_id])
    for node_id, path in paths_to_every_node(tree).items():
        text = _page_text(client.get(url, {"path": dotted(path)} if path else {}).content)
        node = tree.node(node_id)
        assert (node.question or node.cause)[:40] in text, node_id
        assert not bare_citations(text), f"{tree_id}.{node_id}: {bare_citations(text)}"
        for source in (*tree.sources, *node.sources):
            assert source.label in text, f"{tree_id}.{node_id}: {source.label}"
        assert "Source:" in text


@pytest.mark.django_db
def test_the_corrections_show_their_sections(client, cast):
    client.force_login(cast.viewer)
    text = _page_text(client.get(reverse("diagnostics:walkthrough", args=["rate_limiting"])).content)
    assert "Guide §2.3.4 — How the token bucket works" in text
    assert "Guide §3.2 — Rate-limit configuration templates" in text
