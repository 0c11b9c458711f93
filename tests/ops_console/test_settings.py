"""Settings come from the environment, strictly; the embedded default needs no server."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_int, env_list

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args, env_overrides=None, tmp_path=None):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(env_overrides or {})
    if tmp_path is not None:
        env["OPS_VAR_DIR"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_env_bool_refuses_values_it_cannot_read(monkeypatch):
    monkeypatch.setenv("DEBUG", "yes please")
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        env_bool("DEBUG", False)


def test_env_int_refuses_out_of_range_ports(monkeypatch):
    monkeypatch.setenv("PORT", "70000")
    with pytest.raises(ImproperlyConfigured, match="out of range"):
        env_int("PORT", 8000, minimum=1, maximum=65535)


def test_env_list_splits_on_commas(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", "a.example, b.example,")
    assert env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]


def test_env_choice_takes_a_listed_value_and_refuses_others(monkeypatch):
    monkeypatch.setenv("NOTIFICATION_LANGUAGE", "zh-Hans")
    assert env_choice("NOTIFICATION_LANGUAGE", "en", ["en", "zh-hans"]) == "zh-hans"
    monkeypatch.setenv("NOTIFICATION_LANGUAGE", "fr")
    with pytest.raises(ImproperlyConfigured, match="use one of en, zh-hans"):
        env_choice("NOTIFICATION_LANGUAGE", "en", ["en", "zh-hans"])


@pytest.mark.embedded
def test_with_nothing_set_it_uses_sqlite_and_the_filesystem_broker(tmp_path):
    code = (
        "from django.conf import settings; "
        "print(settings.DATABASES['default']['ENGINE'], settings.CELERY_BROKER_URL)"
    )
    result = run_manage("shell", "--no-imports", "-c", code, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.sqlite3", "filesystem://"]


def test_database_url_and_broker_url_select_postgres_and_redis(tmp_path):
    code = (
        "from django.conf import settings; d = settings.DATABASES['default']; "
        "print(d['ENGINE'], d['HOST'], settings.CELERY_BROKER_URL)"
    )
    result = run_manage(
        "shell",
        "--no-imports",
        "-c",
        code,
        tmp_path=tmp_path,
        env_overrides={
            "DATABASE_URL": "postgres://ops@db.internal:5432/console",
            "CELERY_BROKER_URL": "redis://cache.internal:6379/0",
        },
    )
    assert result.stdout.split() == [
        "django.db.backends.postgresql",
        "db.internal",
        "redis://cache.internal:6379/0",
    ]


def test_production_mode_passes_check_deploy_without_warnings(tmp_path):
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        tmp_path=tmp_path,
        env_overrides={
            "PRODUCTION": "true",
            "SECRET_KEY": "k" * 20 + "Zq8#x!pW2v$Lm9@rT4^yB7&nC1*eF6(hJ3)",
            "ALLOWED_HOSTS": "console.example.com",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_mode_refuses_to_start_without_a_secret_key(tmp_path):
    result = run_manage("check", tmp_path=tmp_path, env_overrides={"PRODUCTION": "true"})
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr


def test_migrations_match_the_models():
    result = run_manage("makemigrations", "--check", "--dry-run")
    assert result.returncode == 0, result.stdout
