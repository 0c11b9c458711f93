"""Timing console pages in-process, with Django's test client, against the login page.

Pages are compared with the login page's render in the same run (a ratio survives a busy
machine better than milliseconds do). Each figure is the median of `repeat` requests after
one warm-up request; the query count is that of the last request. Each request of a page is
paired with a request of the login page just before it, and the ratio is taken between the
two medians of those pairs: a slow moment of the machine falls on both.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

LOGIN_URL = "/accounts/login/"


@dataclass(frozen=True)
class PageTiming:
    url: str
    median_ms: float
    queries: int
    size_bytes: int
    paired_login_ms: float | None = None  # the login page's median, timed beside this page's

    def ratio_to(self, other: PageTiming) -> float:
        """To the login page: the one timed beside it when there is one, else `other`."""
        login_ms = self.paired_login_ms or other.median_ms
        return self.median_ms / login_ms if login_ms else float("inf")


def time_page(client: Client, url: str, *, repeat: int = 15, headers: dict | None = None) -> PageTiming:
    """Median wall time of GET `url` (after one warm-up), its queries and its size."""
    _allow_test_client()
    headers = headers or {}
    response = client.get(url, headers=headers)
    if response.status_code >= 400:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    anonymous = Client()
    anonymous.get(LOGIN_URL)
    times, logins = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        anonymous.get(LOGIN_URL)
        logins.append((time.perf_counter() - started) * 1000)
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url, headers=headers)
            times.append((time.perf_counter() - started) * 1000)
    return PageTiming(
        url, statistics.median(times), len(queries), len(response.content), statistics.median(logins)
    )


def _allow_test_client() -> None:
    """Let Django's test client's host ("testserver") in, as the tests' settings do."""
    from django.conf import settings

    if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def login_page(*, repeat: int = 15) -> PageTiming:
    """The login page as an anonymous visitor sees it: the yardstick of every page ratio."""
    return time_page(Client(), LOGIN_URL, repeat=repeat)


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
