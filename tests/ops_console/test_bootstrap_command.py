import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]


def run(capsys) -> str:
    call_command("bootstrap")
    return capsys.readouterr().out


def test_it_creates_the_admin_with_a_generated_password_shown_once(capsys, monkeypatch):
    monkeypatch.delenv("ADMIN_PASSWORD", raising=False)
    first = run(capsys)
    password = first.split("password: ")[1].split()[0]
    user = authenticate(username="admin", password=password)
    assert user is not None and user.is_superuser
    assert user.groups.filter(name="admin").exists()
    second = run(capsys)
    assert "password unchanged" in second and password not in second


def test_admin_password_from_the_environment_wins(capsys, monkeypatch):
    monkeypatch.setenv("ADMIN_PASSWORD", "from-the-env-123")
    run(capsys)
    assert authenticate(username="admin", password="from-the-env-123") is not None


def test_running_it_twice_is_safe(capsys):
    run(capsys)
    run(capsys)
    from django.contrib.auth.models import User
    from django_celery_beat.models import PeriodicTask

    assert User.objects.filter(username="admin").count() == 1
    assert PeriodicTask.objects.filter(name="worker heartbeat").count() == 1
