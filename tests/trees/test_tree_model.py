"""Trees are data checked against their schema when loaded: unknown nodes and keys,
unreachable nodes, cycles and dead ends are clear errors naming the file and the node."""

import copy

import pytest
import yaml

from diagnostics.trees.model import TreeError, load, parse_tree

TREE = {
    "id": "mini",
    "title": "A small tree",
    "category": "timeout.ttft",
    "start": "slow",
    "nodes": {
        "slow": {
            "question": "Is TTFB above 5 s?",
            "how": "Read time_starttransfer from curl -w.",
            "answers": [
                {"answer": "yes", "next": "queue", "when": "timeout.ttft"},
                {"answer": "no", "next": "fine", "when": "not timeout.ttft"},
            ],
        },
        "queue": {
            "question": "Are requests waiting?",
            "how": "vllm:num_requests_waiting",
            "answers": [{"answer": "yes", "next": "backlog"}, {"answer": "no", "next": "fine"}],
        },
        "backlog": {
            "cause": "A queue in front of the engine.",
            "fix": "Lower max_num_seqs per client or add replicas.",
            "category": "rate_limit.queue",
            "config": {"kind": "nginx", "preset": "balanced", "set": {"rate_per_ip": "10"}},
        },
        "fine": {"cause": "Not a TTFT problem.", "fix": "Look at TPS instead."},
    },
}


def variant(change):
    tree = copy.deepcopy(TREE)
    change(tree)
    return tree


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda t: t["nodes"]["slow"]["answers"][0].update(next="nowhere"),
            "leads to unknown node 'nowhere'",
        ),
        (lambda t: t["nodes"].update(orphan={"cause": "x", "fix": "y"}), "unreachable node(s) orphan"),
        (lambda t: t["nodes"]["queue"]["answers"][1].update(next="slow"), "cycle: slow -> queue -> slow"),
        (
            lambda t: t["nodes"]["queue"].update(answers=[{"answer": "yes", "next": "backlog"}]),
            "at least two",
        ),
        (lambda t: t["nodes"]["fine"].pop("fix"), "'fix' is missing"),
        (lambda t: t["nodes"]["slow"].update(colour="red"), "unknown key(s) colour"),
        (
            lambda t: t["nodes"]["slow"]["answers"][0].update(when="gpu.melted"),
            "unknown condition 'gpu.melted'",
        ),
        (
            lambda t: t["nodes"]["backlog"]["config"].update(kind="helm"),
            "config kind 'helm' is not a generator",
        ),
        (lambda t: t["nodes"]["backlog"]["config"].update(preset="turbo"), "nginx has no preset 'turbo'"),
        (lambda t: t["nodes"]["backlog"]["config"]["set"].update(colour="1"), "nginx has no field(s) colour"),
        (lambda t: t.update(start="begin"), "start 'begin' is not a node"),
        (lambda t: t.update(category="misc"), "unknown category 'misc'"),
        (lambda t: t["nodes"]["slow"]["answers"][1].update(goto="other"), "exactly one of 'next' or 'goto'"),
    ],
)
def test_a_broken_tree_is_refused_naming_what_is_wrong(change, message):
    with pytest.raises(TreeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_tree(variant(change), source="mini.yaml")


def test_a_good_tree_parses_with_its_leaves_and_config_links():
    tree = parse_tree(TREE, source="mini.yaml")
    assert tree.node("backlog").is_leaf and tree.node("backlog").config.values == {"rate_per_ip": "10"}
    assert not tree.node("slow").is_leaf


def test_a_goto_to_a_missing_tree_and_a_file_named_unlike_its_id_are_refused(tmp_path):
    linked = variant(lambda t: t["nodes"]["queue"]["answers"][1].update(next=None, goto="absent"))
    linked["nodes"]["queue"]["answers"][1].pop("next")
    (tmp_path / "mini.yaml").write_text(yaml.safe_dump(linked))
    with pytest.raises(TreeError, match="no tree 'absent'"):
        load(tmp_path)
    (tmp_path / "mini.yaml").write_text(yaml.safe_dump(TREE))
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(TREE))
    with pytest.raises(TreeError, match="other.yaml: id 'mini' must match the file name"):
        load(tmp_path)


def test_yaml_that_does_not_parse_names_the_file(tmp_path):
    (tmp_path / "bad.yaml").write_text("id: [unclosed\n")
    with pytest.raises(TreeError, match="bad.yaml: not valid YAML"):
        load(tmp_path)


def test_the_shipped_trees_load():
    trees = load()
    assert {"guide", "timeouts", "rate_limiting", "oom", "cuda", "model_loading"} <= set(trees)


def test_a_broken_tree_is_an_error_at_start_up(tmp_path, monkeypatch):
    from diagnostics import checks
    from diagnostics.trees import model

    (tmp_path / "mini.yaml").write_text("id: mini\n")
    monkeypatch.setattr(model, "DATA", tmp_path)
    errors = checks.troubleshooting_data(None)
    assert errors and errors[0].id == "diagnostics.E001" and "mini.yaml" in errors[0].msg
