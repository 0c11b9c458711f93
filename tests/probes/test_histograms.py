import math

import pytest

from fleet.probes.histograms import bucket_deltas, histogram_quantile

INF = math.inf


def test_it_interpolates_linearly_inside_the_bucket_holding_the_rank():
    # rank 0.5 x 40 = 20 falls in (0.1, 0.5], which holds 20: halfway through it.
    buckets = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.3)


def test_a_rank_in_the_inf_bucket_returns_the_upper_bound_of_the_bucket_below():
    buckets = [(0.1, 10.0), (0.5, 30.0), (INF, 40.0)]
    assert histogram_quantile(0.99, buckets) == 0.5


def test_the_lowest_bucket_interpolates_from_zero_when_its_bound_is_positive():
    assert histogram_quantile(0.5, [(0.2, 10.0), (INF, 10.0)]) == pytest.approx(0.1)


def test_the_lowest_bucket_returns_its_bound_when_that_is_not_positive():
    assert histogram_quantile(0.25, [(0.0, 4.0), (1.0, 8.0), (INF, 8.0)]) == 0.0


@pytest.mark.parametrize(
    "buckets",
    [
        [],
        [(0.1, 0.0), (1.0, 0.0), (INF, 0.0)],  # no observations
        [(0.1, 3.0), (1.0, 5.0)],  # no +Inf bucket
        [(INF, 5.0)],  # fewer than two buckets
    ],
    ids=["empty", "no-observations", "no-inf-bucket", "only-inf"],
)
def test_it_returns_none_where_promql_returns_nan(buckets):
    assert histogram_quantile(0.5, buckets) is None


def test_q_outside_zero_to_one_is_infinite_and_nan_q_is_none():
    buckets = [(1.0, 1.0), (INF, 1.0)]
    assert histogram_quantile(-0.1, buckets) == -INF
    assert histogram_quantile(1.5, buckets) == INF
    assert histogram_quantile(math.nan, buckets) is None


def test_it_forces_decreasing_counts_up_to_the_running_maximum_like_ensure_monotonic():
    # (0.5, 8) is read as 10: rank 10 is reached in the first bucket, at its top.
    buckets = [(0.1, 10.0), (0.5, 8.0), (1.0, 20.0), (INF, 20.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)


def test_it_sorts_the_buckets_and_merges_equal_bounds():
    assert histogram_quantile(0.5, [(INF, 4.0), (1.0, 2.0), (1.0, 2.0)]) == pytest.approx(0.5)


def test_q_zero_over_an_empty_lowest_bucket_is_nan_as_in_go():
    assert histogram_quantile(0.0, [(0.1, 0.0), (1.0, 5.0), (INF, 5.0)]) is None


def test_the_window_between_two_scrapes_is_the_bucket_by_bucket_difference():
    prev = [(0.1, 10.0), (1.0, 20.0), (INF, 20.0)]
    curr = [(0.1, 10.0), (1.0, 30.0), (INF, 40.0)]
    assert bucket_deltas(prev, curr) == [(0.1, 0.0), (1.0, 10.0), (INF, 20.0)]
    # 20 new observations: 10 in (0.1, 1], 10 above 1 → p50 at the top of (0.1, 1].
    assert histogram_quantile(0.5, bucket_deltas(prev, curr)) == pytest.approx(1.0)


def test_a_reset_between_scrapes_uses_the_current_counts_alone():
    prev = [(0.1, 100.0), (1.0, 200.0), (INF, 200.0)]
    curr = [(0.1, 5.0), (1.0, 10.0), (INF, 10.0)]
    assert bucket_deltas(prev, curr) == curr
    assert histogram_quantile(0.5, bucket_deltas(prev, curr)) == pytest.approx(0.1)


def test_a_changed_bucket_layout_counts_as_a_reset():
    assert bucket_deltas([(0.5, 1.0), (INF, 1.0)], [(0.1, 3.0), (INF, 4.0)]) == [(0.1, 3.0), (INF, 4.0)]
