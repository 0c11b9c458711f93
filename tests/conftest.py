"""Shared fixtures: a fixed cast of users, one per role, and real-service guards.

OPS_REQUIRE_SERVICES=1 (set by .ci/run) turns a missing Redis or browser into a
failure instead of a skip.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Group, User

from core.roles import Role

REQUIRE_SERVICES = os.environ.get("OPS_REQUIRE_SERVICES") == "1"

pytest_plugins = ["tests.browser"]  # the `page` fixture of the browser tests


def require_service(what: str, reachable: bool, hint: str) -> None:
    if reachable:
        return
    message = f"{what} is not available: {hint}"
    if REQUIRE_SERVICES:
        pytest.fail(message + " (OPS_REQUIRE_SERVICES=1 makes this a failure)", pytrace=False)
    pytest.skip(message)


def tcp_reachable(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@pytest.fixture
def celery_worker_thread():
    """A real Celery worker (solo pool, in a thread) on the configured broker: Redis in the
    main run, the filesystem transport in the embedded run."""
    from celery.contrib.testing.worker import start_worker
    from django.conf import settings

    from ops_console.celery import app

    if settings.CELERY_BROKER_URL.startswith("redis://"):
        require_service("Redis", tcp_reachable("127.0.0.1", 6379), "start redis-server on 127.0.0.1:6379")
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30) as worker:
        yield worker


def wait_for(predicate, timeout: float = 20.0) -> bool:
    """Poll until predicate() is true; False when the timeout passes first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@dataclass
class Cast:
    viewer: User
    engineer: User
    sre: User
    admin: User
    outsider: User  # logged in, but in no role group

    def for_role(self, role: str) -> User:
        return getattr(self, role)


PASSWORD = "correct-horse-battery-staple"


def _user(username: str, role: Role | None) -> User:
    user = User.objects.create_user(username=username, password=PASSWORD)
    if role is not None:
        user.groups.add(Group.objects.get(name=role.group_name))
    return user


@pytest.fixture
def cast(db) -> Cast:
    return Cast(
        viewer=_user("vera", Role.VIEWER),
        engineer=_user("erin", Role.ENGINEER),
        sre=_user("sam", Role.SRE),
        admin=_user("ada", Role.ADMIN),
        outsider=_user("otto", None),
    )


@pytest.fixture
def sre_client(client, cast):
    client.force_login(cast.sre)
    return client


@pytest.fixture
def viewer_client(client, cast):
    client.force_login(cast.viewer)
    return client


HTMX_HEADERS = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # PBKDF2's deliberate slowness would dominate the suite; login behaviour is unchanged.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _default_language():
    # A request the test client makes in Chinese leaves Chinese active in the thread (Django's
    # LocaleMiddleware activates, nothing deactivates); the next test starts in the default.
    yield
    from django.utils import translation

    translation.deactivate()


@pytest.fixture(autouse=True)
def _migrated_data(request):
    """The rows migrate seeds (role groups, the sizing catalogue, the alert rules): a
    transactional test flushes every table afterwards, so put them back for each test that
    uses the database."""
    uses_db = request.node.get_closest_marker("django_db") is not None
    if not uses_db and "db" in request.fixturenames:
        request.getfixturevalue("db")
        uses_db = True
    if not uses_db:
        return
    from diagnostics.catalogue_seed import seed_shipped
    from diagnostics.models import ModelSpec
    from incidents.default_rules import seed_rules
    from incidents.models import AlertRule

    for role in Role:
        Group.objects.get_or_create(name=role.group_name)
    seed_shipped(ModelSpec)
    seed_rules(AlertRule)
