"""Walking a tree: the path of answers the URL holds, gotos into other trees, answers the
probes give with their evidence, and the engineer's overrides."""

from diagnostics.trees.model import parse_tree
from diagnostics.trees.walk import Facts, walk
from tests.trees.test_tree_model import TREE

OTHER = {
    "id": "other",
    "title": "Another tree",
    "category": "oom.gpu",
    "start": "leaf",
    "nodes": {"leaf": {"cause": "In the other tree.", "fix": "Follow it."}},
}


def trees():
    linked = {**TREE, "nodes": {**TREE["nodes"], "fine": {"question": "Go on?", "how": "Think.", "answers": [
        {"answer": "yes", "goto": "other"}, {"answer": "no", "next": "backlog"}]}}}  # fmt: skip
    return {"mini": parse_tree(linked, source="mini.yaml"), "other": parse_tree(OTHER, source="other.yaml")}


def test_the_path_is_followed_answer_by_answer_to_a_leaf():
    result = walk(trees(), "mini", [0, 0])
    assert [s.answer.answer for s in result.steps] == ["yes", "yes"]
    assert result.finished and result.current.id == "backlog" and result.path() == [0, 0]


def test_an_open_question_waits_for_an_answer():
    result = walk(trees(), "mini", [0])
    assert not result.finished and result.current.id == "queue"


def test_a_goto_continues_in_the_other_tree():
    result = walk(trees(), "mini", [1, 0])
    assert result.tree.id == "other" and result.current.cause == "In the other tree."


def test_the_probes_answer_what_they_can_with_their_evidence():
    facts = Facts(
        findings=[{"category": "timeout.ttft", "evidence": "TTFB 7.2 s > 5 s, so TTFT"}], measured={"health"}
    )
    result = walk(trees(), "mini", [], facts)
    (step,) = result.steps
    assert step.by == "probe" and step.answer.answer == "yes" and step.evidence == "TTFB 7.2 s > 5 s, so TTFT"
    assert result.current.id == "queue"  # no probe condition there: the engineer answers


def test_a_measured_absence_answers_no_and_unmeasured_answers_nothing():
    measured = walk(trees(), "mini", [], Facts(findings=[], measured={"health"}))
    assert measured.steps[0].answer.answer == "no" and "found no sign" in measured.steps[0].evidence
    assert walk(trees(), "mini", [], Facts(findings=[], measured=set())).steps == []


def test_the_engineer_may_override_a_probe_answer():
    facts = Facts(
        findings=[{"category": "timeout.ttft", "evidence": "TTFB 7.2 s > 5 s"}], measured={"health"}
    )
    result = walk(trees(), "mini", [1], facts)
    step = result.steps[0]
    assert step.by == "you" and step.answer.answer == "no" and step.suggested == 0


def test_an_answer_that_does_not_exist_stops_the_walk_with_a_reason():
    result = walk(trees(), "mini", [5])
    assert "has no answer 6" in result.problem and result.current.id == "slow"


def test_probe_conditions_read_the_findings_the_probes_really_make():
    """The probes' findings carry taxonomy categories (a refused port is process.not_started,
    an XID cuda.xid); the trees' conditions still read them right."""
    from diagnostics.trees.evidence import read
    from fleet.probes.classify import classify
    from fleet.probes.findings import Thresholds
    from fleet.probes.gpu import GpuProbeResult
    from fleet.probes.outcomes import Outcome
    from fleet.probes.readiness import ReadinessResult, RouteCheck
    from tests.probes.engines import make_target
    from tests.probes.gpus import gpu, reading

    check = RouteCheck(path="/health", outcome=Outcome.REFUSED, error="refused")
    refused = ReadinessResult(outcome=Outcome.REFUSED, error="refused", checks=(check,))
    xid = GpuProbeResult(outcome=Outcome.OK, reading=reading(gpu(0, xid_errors=(79,))))
    failing = {"requests_per_s": 2.0, "request_errors_per_s": 1.0}
    made = classify(
        readiness=refused, phases=None, stream=None, derived=failing, gpus=xid,
        target=make_target("http://10.0.0.5:8000"), thresholds=Thresholds(), gpu_indices=[0],
    )  # fmt: skip
    findings = [f.to_dict() for f in made.findings]
    measured = {"health", "metrics", "gpu"}
    assert read("reachable", findings=findings, measured=measured).value is False
    assert read("timeout.connect", findings=findings, measured=measured).value is True
    assert read("gpu.xid", findings=findings, measured=measured).value is True
    assert read("errors.requests", findings=findings, measured=measured).value is True
    assert read("gpu.thermal", findings=findings, measured=measured).value is False
