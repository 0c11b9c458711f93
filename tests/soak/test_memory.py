"""The memory check: flat means the last third's median is within the bound of the first's."""

import os

from soak.memory import MemoryLog, Sample, judge, rss_kib, simulator_allowance_mib

MIB = 1024


def _samples(mib, *, every_s=5.0, processes=3):
    return [Sample(at=i * every_s, rss_kib=int(v * MIB), processes=processes) for i, v in enumerate(mib)]


def test_a_process_that_holds_its_size_is_flat():
    verdict = judge(_samples([200, 205, 199, 202, 201, 204, 200, 203, 202]), role="web", warmup_s=0)
    assert verdict.ok
    assert abs(verdict.growth_mib) < 5


def test_a_process_that_grows_past_30_mib_fails():
    verdict = judge(_samples([100, 101, 102, 115, 120, 125, 135, 140, 145]), role="worker", warmup_s=0)
    assert verdict.bound_mib == 30
    assert verdict.growth_mib == 39
    assert not verdict.ok


def test_a_large_process_may_grow_by_a_fifth():
    verdict = judge(_samples([500, 500, 500, 560, 560, 560, 590, 590, 590]), role="sim", warmup_s=0)
    assert verdict.bound_mib == 100
    assert verdict.ok


def test_growth_known_by_design_is_allowed_on_top_of_the_bound():
    samples = _samples([120, 120, 120, 140, 140, 140, 165, 165, 165])
    assert not judge(samples, role="sim", warmup_s=0).ok
    assert judge(samples, role="sim", warmup_s=0, allowance_mib=simulator_allowance_mib(200)).ok


def test_the_simulator_may_grow_by_what_its_access_logs_hold():
    # 2,000 lines an instance at 176 bytes each
    assert round(simulator_allowance_mib(200)) == 67


def test_one_swollen_sample_is_not_growth():
    verdict = judge(_samples([100, 100, 100, 100, 400, 100, 100, 100, 100]), role="web", warmup_s=0)
    assert verdict.ok
    assert verdict.peak_mib == 400


def test_the_warm_up_is_left_out():
    # start-up fills caches: 50 MiB more after the first two samples, then flat
    verdict = judge(_samples([50, 60, 110, 110, 111, 110, 111, 110]), role="worker", warmup_s=10)
    assert verdict.samples == 6
    assert verdict.ok


def test_too_few_samples_after_the_warm_up_judge_nothing():
    assert judge(_samples([100, 100, 100]), role="beat", warmup_s=10) is None


def test_a_tree_whose_process_count_changed_says_so():
    samples = _samples([100] * 3, processes=2) + _samples([100] * 3, processes=3)
    samples = [Sample(at=i, rss_kib=s.rss_kib, processes=s.processes) for i, s in enumerate(samples)]
    assert judge(samples, role="worker", warmup_s=0).processes == "2-3"


def test_the_log_sums_each_tree_and_counts_only_living_processes():
    log = MemoryLog()
    log.take({"web": [os.getpid(), 2**22 + 1]})  # the second pid cannot exist
    (sample,) = log.samples["web"]
    assert sample.processes == 1
    assert abs(sample.rss_kib - rss_kib(os.getpid())) < 4 * MIB
