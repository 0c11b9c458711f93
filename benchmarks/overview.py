"""The fleet overview (/fleet/) at 1,000 and 10,000 instances, against the login page.

Seeds a fleet with bulk_create (hosts of 8 instances; InstanceState rows with a ~3 KB
last_scrape and ~1 KB kinds, as the probes store them; findings on a few percent; some
down, failing, degraded and stale; one host down with its agent silent; a few open
capacity findings) and prints, for each size: the queries, the median time and the bytes
of the full page, of a state filter's first page, of the poll when nothing changed and of
the poll after a few instances changed, each time as a ratio to the login page's render
measured in the same run. Aims at 1,000 instances: at most 15 queries and at most 10x the
login page, for the page and for the poll (docs/fleet-overview.md).
"""

from __future__ import annotations

import random
import re
from datetime import timedelta

from benchmarks import aims
from benchmarks.page_timing import PageTiming, login_page, signed_in_client, time_page

SIZES = (1000, 10000)
PER_HOST = 8
MAX_QUERIES = 15
MAX_RATIO = 10.0
POLL = {"HX-Request": "true", "HX-Target": "overview-poll"}

# Of each 100 instances: 2 down, 1 failing, 2 degraded, 1 stale, 3 up with a finding.
MIX = ["down"] * 2 + ["failing"] + ["degraded"] * 2 + ["stale"] + ["noted"] * 3 + ["up"] * 91


def _scrape(rng: random.Random) -> dict:
    """About 3 KB of counters, as the metrics probe keeps them for rates between scrapes."""
    names = [f"vllm:metric_{n}_total" for n in range(70)]
    return {"at": "2026-01-01T00:00:00+00:00", "values": {n: rng.random() * 1e6 for n in names}}


def _kinds(rng: random.Random, at: str) -> dict:
    """About 1 KB: the latest result of each probe kind."""
    phases = {"dns_s": 0.0, "connect_s": rng.random() / 100, "ttfb_s": rng.random(), "total_s": 1.0}
    return {
        "health": {"at": at, "result": {"phases": phases, "status": 200, "body": "ok" * 40}},
        "metrics": {"at": at, "result": {"running": 12, "waiting": 0, "kv_cache_usage": rng.random()}},
        "stream": {"at": at, "result": {"tokens_per_s": rng.random() * 100, "ttft_s": rng.random()}},
        "gpu": {"at": at, "result": {"gpus": [{"index": i, "util": rng.random()} for i in range(8)]}},
    }


def _finding(severity: str, code: str, evidence: str) -> dict:
    return {"code": code, "category": code, "severity": severity, "evidence": evidence, "source": "readiness"}


FINDINGS = {
    "down": [_finding("down", "connect.refused", "GET /health: connection refused (port closed)")],
    "failing": [_finding("down", "connect.refused", "GET /health: connection refused (port closed)")],
    "degraded": [_finding("degraded", "timeout.ttft", "TTFB 7.2 s > 5 s, so TTFT is slow")],
    "noted": [_finding("info", "metrics.missing", "no prefix-cache hit rate in /metrics")],
    "unreachable": [_finding("down", "connect.timeout", "GET /health: connect timeout after 5 s")],
}


def _seed(size: int, *, prefix: str) -> None:
    from django.utils import timezone

    from diagnostics.models import CapacityFinding
    from fleet.models import GpuHost, HostAgent, Instance, InstanceState

    rng = random.Random(size)
    now = timezone.now()
    hosts = GpuHost.objects.bulk_create(
        GpuHost(name=f"{prefix}-node-{h:05d}", address=f"10.{h // 65536}.{h // 256 % 256}.{h % 256}",
                datacenter=f"dc{h % 3 + 1}", rack=f"r{h % 40:02d}")
        for h in range(size // PER_HOST)
    )  # fmt: skip
    hosts = list(GpuHost.objects.filter(name__startswith=f"{prefix}-node-").order_by("name"))
    dead = hosts[len(hosts) // 2]  # its agent silent, none of its instances answers: host down
    snapshot = {
        "engines": [{"pid": 1000 + i, "rss_kib": 2**24, "cmdline": "vllm serve " * 20} for i in range(8)]
    }
    agents = [HostAgent(host=h, last_heartbeat_at=now, snapshot=snapshot) for h in hosts]
    agents[len(hosts) // 2].last_heartbeat_at = now - timedelta(minutes=10)
    agents[len(hosts) // 3].last_heartbeat_at = now - timedelta(minutes=10)  # agent missing
    HostAgent.objects.bulk_create(agents)
    Instance.objects.bulk_create(
        Instance(host=h, name=f"{prefix}-{h.pk}-{i}", base_url=f"http://{h.address}:{8000 + i}",
                 served_model_name="Qwen/Qwen3-8B", engine_version="0.11.2", max_model_len=32768)
        for h in hosts for i in range(PER_HOST)
    )  # fmt: skip
    instances = list(Instance.objects.filter(name__startswith=f"{prefix}-").select_related("host"))
    states, capacity = [], []
    for index, instance in enumerate(instances):
        kind = "unreachable" if instance.host_id == dead.pk else rng.choice(MIX)
        verdict = {"noted": "up", "stale": "up", "unreachable": "down"}.get(kind, kind)
        probed = now - timedelta(hours=1) if kind == "stale" else now - timedelta(seconds=rng.randint(1, 30))
        states.append(
            InstanceState(instance=instance, verdict=verdict, last_probe_at=probed,
                          consecutive_failures=1 if kind == "failing" else 0,
                          findings=FINDINGS.get(kind, []), kinds=_kinds(rng, probed.isoformat()),
                          last_scrape=_scrape(rng), baselines={"tokens_per_s": 80.0})
        )  # fmt: skip
        if index % 97 == 5:
            capacity.append(
                CapacityFinding(instance=instance, code="kv.pressure", severity="warning",
                                title="KV cache above 95 % at the p99 prompt length")
            )  # fmt: skip
    InstanceState.objects.bulk_create(states, batch_size=500)
    CapacityFinding.objects.bulk_create(capacity)


def _change_a_few(prefix: str, count: int = 3) -> None:
    """A few instances change state as a probe cycle would: one goes down, others recover."""
    from fleet.models import InstanceState

    states = InstanceState.objects.filter(instance__name__startswith=f"{prefix}-").order_by("pk")
    up = list(states.filter(verdict="up", findings=[]).values_list("pk", flat=True)[:count])
    InstanceState.objects.filter(pk=up[0]).update(verdict="down", findings=FINDINGS["down"])
    InstanceState.objects.filter(pk__in=up[1:]).update(verdict="degraded", findings=FINDINGS["degraded"])


def _version(client, url: str) -> str:
    """The version the page's poller carries (what the tab shows)."""
    found = re.search(r'data-version="([^"]+)"', client.get(url).content.decode())
    return found.group(1) if found else ""


def _line(label: str, timing: PageTiming, login: PageTiming, *, aim: bool) -> bool:
    ratio = timing.ratio_to(login)
    ok = timing.queries <= MAX_QUERIES and ratio <= MAX_RATIO
    verdict = ("ok" if ok else "OVER") if aim else ""
    kib = timing.size_bytes / 1024
    figures = f"{timing.queries:>3} q {timing.median_ms:>8.1f} ms {kib:>8.1f} KB {ratio:>6.1f}x"
    print(f"    {label:<34} {figures}  {verdict}")
    if aim:
        aims.note(f"overview 1,000: {label} / login", ratio, MAX_RATIO)
        aims.note(f"overview 1,000: {label}, queries", timing.queries, MAX_QUERIES, unit="")
    return ok or not aim


def _measure(size: int, client, login: PageTiming, repeat: int) -> bool:
    from fleet.models import GpuHost

    prefix = f"b{size}"
    GpuHost.objects.all().delete()
    _seed(size, prefix=prefix)
    aim = size <= 1000
    print(f"  {size:,} instances on {size // PER_HOST:,} hosts (aims{'' if aim else ' not applied'}:"
          f" <= {MAX_QUERIES} queries, <= {MAX_RATIO:g}x login)")  # fmt: skip
    ok = _line("full page /fleet/", time_page(client, "/fleet/", repeat=repeat), login, aim=aim)
    ok &= _line(
        "filter ?state=up (page 1)", time_page(client, "/fleet/?state=up", repeat=repeat), login, aim=aim
    )
    since = _version(client, "/fleet/")
    quiet = time_page(client, f"/fleet/?since={since}", repeat=repeat, headers=POLL)
    ok &= _line("poll, nothing changed", quiet, login, aim=aim)
    _change_a_few(prefix)
    changed = time_page(client, f"/fleet/?since={since}", repeat=repeat, headers=POLL)
    ok &= _line("poll after 3 instances changed", changed, login, aim=aim)
    return ok


def run(*, sizes: tuple[int, ...] = SIZES, repeat: int = 9) -> int:
    """Prints the figures; returns 1 when an aim at 1,000 instances is missed, else 0."""
    client = signed_in_client()
    login = login_page(repeat=repeat)
    print(
        f"fleet overview benchmark (login page: {login.median_ms:.1f} ms, {login.size_bytes / 1024:.1f} KB)"
    )
    print(f"    {'':<34} {'queries':>5} {'median':>11} {'bytes':>11} {'ratio':>7}")
    ok = True
    for size in sizes:
        ok &= _measure(size, client, login, repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    import sys
    import tempfile

    from benchmarks.services import setup_django

    with tempfile.TemporaryDirectory(prefix="ops-bench-overview-") as var_dir:
        setup_django(var_dir)
        sys.exit(run(sizes=tuple(int(a) for a in sys.argv[1:]) or SIZES))
