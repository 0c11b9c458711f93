"""Walkthrough pages: each answer swaps in the next step over HTMX with the path in the URL,
back and restart, a leaf with its fix and config link; from an instance the probes answer
with their evidence and the engineer can override; a walkthrough can be saved."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from diagnostics.models import SavedWalkthrough
from diagnostics.trees.model import trees
from diagnostics.trees.walk import walk
from fleet.models import InstanceState
from tests.conftest import HTMX_HEADERS
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db


@pytest.fixture
def engineer(client, cast):
    client.force_login(cast.engineer)
    return client


def url(tree="guide", **params):
    return reverse("diagnostics:walkthrough", args=[tree]), params


def first_leaf_path(tree_id):
    """Answer each question with its first answer until a leaf."""
    path = []
    while True:
        result = walk(trees(), tree_id, path)
        if result.finished:
            return path, result.current
        path.append(0)


def test_the_index_lists_the_trees_and_the_triage(engineer):
    content = engineer.get(reverse("diagnostics:troubleshoot")).content.decode()
    for tree in trees().values():
        assert tree.title in content
    assert reverse("diagnostics:triage") in content


def test_the_start_question_says_how_to_answer_it(engineer):
    start = trees()["guide"].node(trees()["guide"].start)
    content = engineer.get(*url()).content.decode()
    assert start.question in content and "hx-push-url" in content
    assert 'href="/troubleshoot/guide/?path=0"' in content


def test_an_answer_swaps_in_the_next_step_with_back_and_restart(engineer):
    path = reverse("diagnostics:walkthrough", args=["guide"])
    response = engineer.get(path, {"path": "0"}, HTTP_HX_TARGET="walk", **HTMX_HEADERS)
    content = response.content.decode()
    assert content.startswith('<div id="walk">')
    nxt = walk(trees(), "guide", [0]).current
    assert (nxt.question or nxt.cause) in content.replace("&#x27;", "'").replace("&quot;", '"')
    back = re.search(r'<a href="([^"]*)"[^>]*>Back</a>', content)
    assert back and back.group(1) == "/troubleshoot/guide/"  # back to the start question
    assert re.search(r'<a href="/troubleshoot/guide/"[^>]*>Restart</a>', content)


@pytest.mark.parametrize("tree_id", ["guide", "timeouts", "rate_limiting", "oom", "cuda", "model_loading"])
def test_a_finished_walkthrough_shows_the_cause_the_fix_and_the_config_preset(engineer, tree_id):
    path, leaf = first_leaf_path(tree_id)
    content = engineer.get(
        reverse("diagnostics:walkthrough", args=[tree_id]), {"path": ".".join(map(str, path))}
    )
    text = content.content.decode()
    assert "Root cause" in text and "Fix" in text
    if leaf.config:
        assert reverse("diagnostics:config-generator", args=[leaf.config.kind]) in text


def test_a_path_with_an_answer_that_does_not_exist_says_so(engineer):
    content = engineer.get(*url(path="0.99")).content.decode()
    assert "has no answer 100" in content


def test_an_unknown_tree_is_not_found(engineer):
    assert engineer.get(reverse("diagnostics:walkthrough", args=["nope"])).status_code == 404


def instance_with(findings, kinds):
    instance = make_instance(make_host(), name="chat-a")
    now = timezone.now().isoformat()
    InstanceState.objects.create(
        instance=instance,
        verdict="down",
        findings=findings,
        kinds={kind: {"at": now, "result": {}} for kind in kinds},
    )
    return instance


def test_from_an_instance_the_probes_answer_with_their_evidence(engineer):
    instance = instance_with(
        [
            {
                "code": "gone",
                "category": "process.gone",
                "severity": "down",
                "evidence": "no vLLM process on GPU 0",
            }
        ],
        ["gpu", "health"],
    )
    response = engineer.get(reverse("diagnostics:troubleshoot-instance", args=[instance.pk]), follow=True)
    content = response.content.decode()
    assert "for chat-a" in content and "no vLLM process on GPU 0" in content
    assert '<span class="badge ok">probe</span>' in content


def test_the_engineer_can_override_a_probe_answer(engineer):
    instance = instance_with(
        [
            {
                "code": "gone",
                "category": "process.gone",
                "severity": "down",
                "evidence": "no vLLM process on GPU 0",
            }
        ],
        ["gpu"],
    )
    content = engineer.get(*url(path="2", instance=instance.pk)).content.decode()
    assert "the probes suggested another answer" in content


def test_a_walkthrough_is_saved_as_a_diagnosis_path(engineer):
    path, leaf = first_leaf_path("oom")
    response = engineer.post(
        reverse("diagnostics:walkthrough-save", args=["oom"]), {"path": ".".join(map(str, path)), "title": ""}
    )
    saved = SavedWalkthrough.objects.get()
    assert response.status_code == 302 and saved.path == path and saved.outcome.startswith(leaf.cause[:40])
    assert len(saved.steps) == len(path) and saved.created_by == "erin"
    page = engineer.get(reverse("diagnostics:walkthrough-saved", args=[saved.pk])).content.decode()
    assert "Outcome" in page and saved.steps[0]["question"][:30].replace("'", "&#x27;") in page


def test_viewers_may_walk_but_not_save(viewer_client):
    assert viewer_client.get(*url()).status_code == 200
    assert (
        viewer_client.post(reverse("diagnostics:walkthrough-save", args=["guide"]), {"path": "0"}).status_code
        == 403
    )
