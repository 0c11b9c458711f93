"""The alert check: every accepted fingerprint stored, with the status last sent."""

from soak.stored_alerts import drain, tally


def test_every_alert_stored_as_last_sent_is_complete():
    result = tally({"a": "firing", "b": "resolved"}, {"a": "firing", "b": "resolved", "other": "firing"})
    assert result.complete
    assert (result.sent, result.stored) == (2, 2)


def test_a_missing_fingerprint_is_a_lost_alert():
    result = tally({"a": "firing", "b": "resolved"}, {"a": "firing"})
    assert result.missing == ["b"]
    assert not result.complete


def test_an_alert_stored_with_an_older_status_is_a_lost_update():
    result = tally({"a": "resolved"}, {"a": "firing"})
    assert result.wrong_status == [("a", "resolved", "firing")]
    assert not result.complete


def test_the_drain_waits_for_the_worker_to_catch_up():
    reads = iter([{}, {"a": "firing"}, {"a": "resolved"}])
    result, _ = drain({"a": "resolved"}, timeout_s=10, read=lambda fps: next(reads), every_s=0)
    assert result.complete


def test_the_drain_gives_up_after_its_timeout():
    result, waited = drain({"a": "firing"}, timeout_s=0, read=lambda fps: {}, every_s=0)
    assert result.missing == ["a"]
    assert waited >= 0
