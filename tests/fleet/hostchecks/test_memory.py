"""The memory check reads the host's RAM and swap (`free -h`) and judges an engine's RSS trend
against the guide's slow tokenizer leak (2.4.2)."""

import json
import math

import pytest

from fleet.hostchecks.memory import LEAK_MIN_SPAN_S, read_meminfo, rss_trend
from tests.fleet.host_trees import build_host_tree, call_unprivileged, world_traversable_tmp

GB_KIB = 1_000_000  # the guide's GB, in KiB near enough for a trend


def test_a_512_gib_host_without_swap_reads_in_bytes(tmp_path):
    info = read_meminfo(root=build_host_tree(tmp_path))

    assert info.total_bytes == 528_279_552 * 1024
    assert info.available_bytes == 487_325_696 * 1024
    assert (info.swap_total_bytes, info.swap_free_bytes, info.has_swap) == (0, 0, False)
    assert info.available_fraction == pytest.approx(0.9225, abs=1e-4)
    assert (info.malformed, info.unreadable) == (0, None)


def test_a_host_with_swap_says_so(tmp_path):
    info = read_meminfo(
        root=build_host_tree(tmp_path, meminfo={"SwapTotal": 33_554_428, "SwapFree": 30_000_000})
    )

    assert info.has_swap and info.swap_free_bytes == 30_000_000 * 1024


def test_a_kernel_older_than_3_14_has_no_available_figure(tmp_path):
    root = build_host_tree(tmp_path, meminfo="MemTotal:       16331476 kB\nMemFree:         1433128 kB\n")

    info = read_meminfo(root=root)

    assert (info.total_bytes, info.available_bytes, info.available_fraction) == (
        16_331_476 * 1024,
        None,
        None,
    )
    assert info.has_swap is None


def test_junk_lines_are_counted_and_the_rest_is_read(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/meminfo").write_bytes(
        b"\x00\xff\xfe\nMemTotal:  1024 kB\nMemAvailable: many kB\nSwapTotal:"
    )

    info = read_meminfo(root=root)

    assert (info.total_bytes, info.available_bytes, info.malformed) == (1024 * 1024, None, 3)


def test_a_file_without_memtotal_says_so(tmp_path):
    root = build_host_tree(tmp_path, meminfo="garbage\n")

    info = read_meminfo(root=root)

    assert info.total_bytes is None
    assert str(info.unreadable) == "/proc/meminfo has no MemTotal line"


def test_a_10_mib_file_is_read_up_to_the_bound(tmp_path):
    root = build_host_tree(tmp_path)
    (root / "proc/meminfo").write_text("MemTotal:  2048 kB\n" + "Junk: x\n" * (10 << 17))

    info = read_meminfo(root=root)

    assert info.total_bytes == 2048 * 1024
    assert info.malformed < 150_000  # only the first MiB was looked at


def test_a_file_the_agent_may_not_read_says_so():
    with world_traversable_tmp() as tmp:
        root = build_host_tree(tmp)
        (root / "proc/meminfo").chmod(0)

        info = call_unprivileged(read_meminfo, root=root)

    assert str(info.unreadable) == (
        "/proc/meminfo could not be read: permission denied (the agent needs to run as root)"
    )


def minutely(minutes, rss_at):
    return [(60.0 * m, rss_at(m)) for m in range(minutes + 1)]


def test_the_guide_s_leak_20_to_45_gb_in_3_days_is_seen_within_an_hour():
    per_minute = 25 * GB_KIB / (3 * 24 * 60)
    samples = minutely(60, lambda m: 20 * GB_KIB + per_minute * m + (3000 if m % 2 else -3000))

    trend = rss_trend(samples)

    assert trend.leak_suspected
    assert trend.growth_pct_per_h == pytest.approx(1.74, abs=0.05)
    assert trend.growth_kib_per_h == pytest.approx(25 * GB_KIB / 72, rel=0.02)
    assert str(trend.reason).startswith("RSS grows steadily by 1.7 %/h (over 1.0 %/h)")


def test_a_flat_rss_with_noise_is_no_leak():
    trend = rss_trend(minutely(90, lambda m: 20 * GB_KIB + (50_000 if m % 3 else -50_000)))

    assert not trend.leak_suspected
    assert abs(trend.growth_pct_per_h) < 1
    assert str(trend.reason).startswith("RSS changes by")


def test_a_warm_up_that_levels_off_is_no_leak():
    trend = rss_trend(minutely(60, lambda m: 20 * GB_KIB + min(m, 5) * 400_000))

    assert not trend.leak_suspected
    assert trend.growth_pct_per_h > 1 and trend.r_squared < 0.9
    assert "not steadily" in str(trend.reason)


def test_too_short_a_window_is_not_judged():
    trend = rss_trend(minutely(20, lambda m: 20 * GB_KIB * (1 + m / 100)))

    assert not trend.leak_suspected and trend.growth_pct_per_h is None
    assert str(trend.reason) == "too few samples to judge: 21 over 20 min (needs 5 and 30 min)"


def test_the_threshold_and_window_are_the_caller_s_to_choose():
    samples = minutely(60, lambda m: 20 * GB_KIB * (1 + 0.03 * m / 60))

    assert rss_trend(samples).leak_suspected
    assert not rss_trend(samples, threshold_pct_per_h=5.0).leak_suspected
    assert not rss_trend(samples, min_span_s=3 * LEAK_MIN_SPAN_S).leak_suspected


def test_unusable_samples_are_dropped():
    good = minutely(40, lambda m: 1000.0 + m)
    junk = [(math.nan, 5.0), (7.0, -1.0), ("x", 3), (8.0,), (math.inf, 1.0), None]

    trend = rss_trend(good + junk + [(0.0, 1000.0)])

    assert trend.samples == 41


def test_a_trend_is_json_ready():
    data = json.loads(json.dumps(rss_trend(minutely(60, lambda m: 1000.0 + m)).to_dict()))

    assert data["leak_suspected"] is True and data["reason"]["msgid"].startswith("RSS grows steadily")
