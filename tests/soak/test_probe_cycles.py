"""The probe-cycle check: cycles kept completing, none hung, none abandoned."""

from datetime import UTC, datetime, timedelta

from soak.probe_cycles import CycleRow, judge

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _cycle(start_s, took_s=5, *, kind="health", skipped=False, note="", finished=True):
    started = T0 + timedelta(seconds=start_s)
    return CycleRow(
        kind=kind,
        started_at=started,
        finished_at=started + timedelta(seconds=took_s) if finished else None,
        skipped=skipped,
        note=note,
        instance_count=200,
    )


def _judge(rows, *, until_s=300, interval_s=30):
    now = T0 + timedelta(seconds=until_s)
    return judge(rows, kind="health", interval_s=interval_s, since=T0, now=now, open_limit_s=300)


def test_cycles_every_interval_pass():
    verdict = _judge([_cycle(s) for s in range(0, 300, 30)])
    assert verdict.ok
    assert verdict.completed == 10
    assert verdict.expected_at_least == 5
    assert verdict.max_gap_s == 30


def test_cycles_that_stop_halfway_fail_on_the_gap():
    verdict = _judge([_cycle(s) for s in range(0, 150, 30)], until_s=400)
    assert verdict.max_gap_s == 400 - 125
    assert verdict.gap_bound_s == 150
    assert not verdict.ok


def test_too_few_cycles_fail_even_without_a_long_gap():
    verdict = _judge([_cycle(s) for s in (100, 200)], until_s=300)
    assert verdict.max_gap_s == 105
    assert not verdict.ok


def test_skipped_cycles_do_not_count_as_completed():
    skipped = [_cycle(s + 1, 0, skipped=True) for s in range(0, 300, 60)]
    rows = [_cycle(s) for s in range(0, 300, 30)] + skipped
    verdict = _judge(rows)
    assert (verdict.completed, verdict.skipped) == (10, 5)
    assert verdict.ok


def test_a_cycle_open_past_the_time_limit_is_stuck():
    rows = [_cycle(s) for s in range(0, 600, 30)] + [_cycle(250, finished=False)]
    verdict = _judge(rows, until_s=600)
    assert verdict.open_too_long == 1
    assert not verdict.ok


def test_a_cycle_running_now_is_not_stuck():
    rows = [_cycle(s) for s in range(0, 300, 30)] + [_cycle(295, finished=False)]
    assert _judge(rows).ok


def test_an_abandoned_cycle_fails():
    abandoned = _cycle(10, note="abandoned: its worker never finished it")
    rows = [_cycle(s) for s in range(0, 300, 30)] + [abandoned]
    assert not _judge(rows).ok


def test_a_run_shorter_than_an_interval_expects_no_cycle_yet():
    assert _judge([], until_s=20).ok


def test_other_kinds_and_cycles_finished_before_the_load_are_left_out():
    rows = [_cycle(s) for s in range(0, 300, 30)] + [_cycle(s, kind="stream") for s in range(0, 300, 10)]
    rows.append(_cycle(-100))
    assert _judge(rows).completed == 10
