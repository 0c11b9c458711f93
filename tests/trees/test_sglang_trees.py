"""The SGLang leaves of the troubleshooting trees: where they hang (after the answers that were
there, so saved walkthrough paths keep their meaning), what they say (the flags SGLang's own
docs and messages name for each failure), that every flag they name is one SGLang defines,
and that their config links render an SGLang command with the fix."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from diagnostics.configgen import registry, sglang_launch
from diagnostics.trees.model import Node, load
from tests.trees.paths import dotted, paths_to_every_node

# (tree, the question node, the SGLang leaf its new answer leads to)
LEAVES = (
    ("oom", "gpu_startup_msg", "sglang_startup_pool"),
    ("oom", "gpu_startup_msg", "sglang_startup_graphs"),
    ("oom", "gpu_when", "sglang_prefill_oom"),
    ("oom", "gpu_when", "sglang_decode_oom"),
    ("oom", "kv_what", "sglang_kv_retract"),
    ("timeouts", "ttft_waiting_why", "sglang_queue_admission"),
    ("timeouts", "ttft_waiting_why", "sglang_ttft_kv_full"),
    ("timeouts", "ttft_prompt_len", "sglang_ttft_prefill"),
    ("timeouts", "ttft_outside_engine", "sglang_scheduler_stuck"),
    ("rate_limiting", "engine_queue", "sglang_running_cap"),
    ("rate_limiting", "engine_queue", "sglang_queue_kv"),
    ("guide", "health_status", "g_sglang_scheduler_stuck"),
)
# Flags the leaves quote from SGLang's messages and docs that the launch generator does not
# write (so they are not in the recorded flag file): the CUDA graph capture error's own advice
# and the tuning guide's scheduling policy.
QUOTED_FLAGS = {"--cuda-graph-max-bs", "--disable-cuda-graph", "--schedule-policy"}
OTHER_TOOLS = {"--pid"}  # py-spy dump --pid


@pytest.fixture(scope="module")
def trees():
    return load()


def text(node: Node) -> str:
    return " ".join(
        [node.question, node.how, node.cause, node.fix, node.command, *(a.answer for a in node.answers)]
    )


@pytest.mark.parametrize(("tree_id", "parent", "leaf"), LEAVES, ids=[leaf for *_, leaf in LEAVES])
def test_each_sglang_leaf_follows_the_answers_that_were_there(trees, tree_id, parent, leaf):
    tree = trees[tree_id]
    answers = tree.node(parent).answers
    index = [a.next for a in answers].index(leaf)
    assert answers[index].answer.startswith("SGLang")
    assert all(a.answer.startswith("SGLang") for a in answers[index:]), "SGLang answers come last"
    assert not any(a.answer.startswith("SGLang") for a in answers[: len(answers) - _sglang_count(answers)])
    assert tree.node(leaf).is_leaf and leaf in paths_to_every_node(tree)


def _sglang_count(answers) -> int:
    return sum(1 for a in answers if a.answer.startswith("SGLang"))


def test_the_startup_oom_leaves_name_the_four_flags(trees):
    oom = " ".join(text(trees["oom"].node(n)) for _, _, n in LEAVES[:4])
    for name in (
        "--mem-fraction-static",
        "--max-running-requests",
        "--context-length",
        "--chunked-prefill-size",
    ):
        assert name in oom, name
    assert "Not enough memory. Please try to increase --mem-fraction-static" in text(
        trees["oom"].node("gpu_startup_msg")
    )


def test_the_queue_leaves_name_the_batch_cap_and_token_usage(trees):
    for tree_id, leaf in (("timeouts", "sglang_queue_admission"), ("rate_limiting", "sglang_running_cap")):
        node = trees[tree_id].node(leaf)
        assert "--max-running-requests" in node.cause + node.fix and node.category == "rate_limit.queue"
        assert "--schedule-conservativeness" in node.fix
    parent = text(trees["timeouts"].node("ttft_waiting_why"))
    assert "sglang:token_usage" in parent and "sglang:num_queue_reqs" in parent
    for tree_id, leaf in (
        ("oom", "sglang_kv_retract"),
        ("timeouts", "sglang_ttft_kv_full"),
        ("rate_limiting", "sglang_queue_kv"),
    ):
        node = trees[tree_id].node(leaf)
        assert "KV cache pool is full. Retract requests." in node.cause and node.category == "oom.kv_pressure"


def test_the_ttft_leaf_names_the_chunked_prefill_size_and_the_cache_hit_rate(trees):
    node = trees["timeouts"].node("sglang_ttft_prefill")
    assert "--chunked-prefill-size" in node.cause + node.fix and "sglang:cache_hit_rate" in node.cause


def test_a_stuck_scheduler_is_health_generate_failing_while_health_answers(trees):
    for tree_id, leaf in (("timeouts", "sglang_scheduler_stuck"), ("guide", "g_sglang_scheduler_stuck")):
        node = trees[tree_id].node(leaf)
        assert node.category == "process.hung" and "/health_generate" in node.cause + node.command
        assert "http://HOST:8000/health_generate" in node.command
    # One text in both trees: one translation.
    a, b = trees["timeouts"].node("sglang_scheduler_stuck"), trees["guide"].node("g_sglang_scheduler_stuck")
    assert (a.cause, a.fix) == (b.cause, b.fix)


def test_every_flag_a_sglang_leaf_names_is_one_sglang_defines(trees):
    recorded = set(sglang_launch.server_args()["flags"])
    for tree_id, parent, leaf in LEAVES:
        tree = trees[tree_id]
        words = text(tree.node(leaf)) + " ".join(
            a.answer for a in tree.node(parent).answers if "SGLang" in a.answer
        )
        for name in re.findall(r"--[a-z][a-z-]+[a-z]", words):
            assert name in recorded | QUOTED_FLAGS | OTHER_TOOLS, f"{tree_id}.{leaf}: {name}"


@pytest.mark.parametrize(("tree_id", "parent", "leaf"), LEAVES, ids=[leaf for *_, leaf in LEAVES])
def test_the_config_links_render_the_fix(trees, tree_id, parent, leaf):
    node = trees[tree_id].node(leaf)
    assert node.config is not None
    generator = registry.get(node.config.kind)
    files = generator.render(generator.spec(node.config.values, preset=node.config.preset))
    if node.config.kind == "sglang":
        script = files[0].content
        for name, value in node.config.values.items():
            flag_name = {"kv_dtype": "--kv-cache-dtype"}.get(name, "--" + name.replace("_", "-"))
            assert f"{flag_name} {value}" in script, (leaf, flag_name)
    else:
        assert [f.name for f in files] == ["sglang-alerts.yml"]


@pytest.mark.django_db
def test_the_walk_to_each_sglang_leaf_renders_it(client, cast, trees):
    client.force_login(cast.viewer)
    for tree_id, _parent, leaf in LEAVES:
        path = paths_to_every_node(trees[tree_id])[leaf]
        response = client.get(reverse("diagnostics:walkthrough", args=[tree_id]), {"path": dotted(path)})
        assert response.status_code == 200
        assert trees[tree_id].node(leaf).cause[:40] in response.content.decode().replace("&#x27;", "'"), leaf
