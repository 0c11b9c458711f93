"""Timing console pages in-process, with Django's test client, against the login page.

Pages are compared with the login page's render in the same run (a ratio survives a busy
machine better than milliseconds do). Each figure is the median of `repeat` requests after
one warm-up request; the query count is that of the last request.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext


@dataclass(frozen=True)
class PageTiming:
    url: str
    median_ms: float
    queries: int
    size_bytes: int

    def ratio_to(self, other: PageTiming) -> float:
        return self.median_ms / other.median_ms if other.median_ms else float("inf")


def time_page(client: Client, url: str, *, repeat: int = 15, headers: dict | None = None) -> PageTiming:
    """Median wall time of GET `url` (after one warm-up), its queries and its size."""
    headers = headers or {}
    response = client.get(url, headers=headers)
    if response.status_code >= 400:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    times = []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
    return PageTiming(url, statistics.median(times), len(queries), len(response.content))


def login_page(*, repeat: int = 15) -> PageTiming:
    """The login page as an anonymous visitor sees it: the yardstick of every page ratio."""
    return time_page(Client(), "/accounts/login/", repeat=repeat)


def signed_in_client(username: str = "bench-admin") -> Client:
    """A client signed in as a superuser (every role), made once per run."""
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        user = user_model.objects.create_superuser(username, f"{username}@example.invalid", "unused-pass-1")
    client = Client()
    client.force_login(user)
    return client
