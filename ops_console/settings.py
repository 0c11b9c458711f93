"""Settings for LLM Ops Console, all read from environment variables.

With nothing set the console runs on the embedded default: SQLite and Celery's
filesystem broker under ./var, so a machine with only Python runs everything.
PRODUCTION=true switches on the hardening that `manage.py check --deploy` asks for.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("OPS_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

PRODUCTION = env_bool("PRODUCTION", False)
DEBUG = env_bool("DEBUG", False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG=true is not allowed with PRODUCTION=true.")


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        if PRODUCTION and (len(key) < 50 or key.startswith("django-insecure")):
            raise ImproperlyConfigured("SECRET_KEY must be at least 50 random characters.")
        return key
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY must be set when PRODUCTION=true.")
    # Development: one key per checkout, kept so sessions survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
PORT = env_int("PORT", 8000, minimum=1, maximum=65535)
# Where probes may not go (fleet/target_policy.py; docs/probe-targets.md): networks refused
# besides the metadata service, link-local addresses and the console itself, and, when
# set, the only networks probes may reach. Comma-separated addresses or CIDRs.
PROBE_DENY_NETWORKS = env_list("PROBE_DENY_NETWORKS", [])
PROBE_ALLOW_NETWORKS = env_list("PROBE_ALLOW_NETWORKS", [])
# Instances per probe chunk: a scheduled sweep is sent out in chunks of this many, each a
# task on the "probes" queue that any prober worker takes (docs/multi-machine-prober.md).
PROBE_CHUNK_SIZE = env_int("PROBE_CHUNK_SIZE", 250, minimum=1, maximum=5000)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "django_filters",
    "django_celery_beat",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "ops_console",
    "fleet",
    "diagnostics",
    "incidents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "ops_console.urls"
WSGI_APPLICATION = "ops_console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "ops_console.context_processors.console",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'console.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
if DATABASES["default"]["ENGINE"].endswith(("postgresql", "postgis")):
    # libpq waits forever for a server that accepts and never answers; a connect_timeout in
    # DATABASE_URL (?connect_timeout=N) wins. No statement timeout here: migrations and the
    # review's queries may rightly run long (/healthz bounds its own queries).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("DB_CONNECT_TIMEOUT_S", 5, minimum=2, maximum=300)
    )
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and IMMEDIATE transactions let the web server, worker and beat share one file.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A test database in a file, not Django's shared-cache memory database: a worker thread
    # and the test then wait on each other's locks (busy timeout) instead of failing at once
    # with "database table is locked".
    # Named by process, so two test runs in one checkout do not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-console-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
# The console speaks English and Simplified Chinese (the guide's readers). The language
# follows the browser's Accept-Language until the header's switcher stores a choice.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
# One catalogue per area (docs/i18n.md); `manage.py makemessages` routes each source file
# to its area's catalogue (ops_console/management/commands/makemessages.py).
LOCALE_PATHS = [BASE_DIR / path for path in (
    "locale",
    "fleet/locale",
    "fleet/probes/locale",
    "diagnostics/locale",
    "diagnostics/configgen/locale",
    "diagnostics/trees/locale",
    "diagnostics/triage/locale",
    "incidents/locale",
)]  # fmt: skip
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

MEDIA_ROOT = VAR_DIR / "media"  # uploaded logs wait here for triage, then go
MEDIA_URL = "media/"
# Uploads above this go to a temporary file in chunks, never whole into memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
TRIAGE_MAX_UPLOAD_BYTES = env_int("TRIAGE_MAX_UPLOAD_BYTES", 2 << 30)
# Alertmanager's webhook sends it as "Authorization: Bearer <token>"; blank turns the receiver off.
ALERTMANAGER_TOKEN = env_str("ALERTMANAGER_TOKEN", "")
# The console's public base URL, so links in notifications are absolute (e.g. https://console.example.com).
CONSOLE_URL = env_str("CONSOLE_URL", "")
NOTIFY_RETRY_BACKOFF_S = 5.0  # first retry of a failed notification; doubles up to 300 s
# A fault that fires again within this many seconds of its incident being mitigated reopens
# that incident (a flapping alert is one story); later, the old incident is resolved and a new
# one opens (it stayed clear: what fires now is another occurrence). 0: never reopen.
INCIDENT_REOPEN_WINDOW_S = env_int("INCIDENT_REOPEN_WINDOW_S", 1800, minimum=0, maximum=7 * 86400)
# The simulator's control port (`make run` serves it on $SIM_CONTROL_PORT), for `manage.py fault`.
SIMULATOR_CONTROL_URL = env_str(
    "SIMULATOR_CONTROL_URL",
    f"http://127.0.0.1:{env_int('SIM_CONTROL_PORT', 8199, minimum=1, maximum=65535)}",
)

# Sizing a model by its Hugging Face id: the Hub or a mirror of it (the same HF_ENDPOINT that
# huggingface_hub reads, e.g. https://hf-mirror.com), and the token sent for gated and private
# models (blank: none is sent, not even one saved by `hf auth login`).
HF_ENDPOINT = (env_str("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
HF_TOKEN = env_str("HF_TOKEN", "")
# Seconds one fetch from the hub may take, all its requests together, before it counts as unreachable.
HUB_FETCH_TIMEOUT_S = env_int("HUB_FETCH_TIMEOUT_S", 10, minimum=1, maximum=120)

# Notifications have no reader to follow: they are written in this language.
NOTIFICATION_LANGUAGE = env_choice("NOTIFICATION_LANGUAGE", "en", [code for code, _ in LANGUAGES])
# How often the fleet overview's tiles and counts refresh in the browser.
OVERVIEW_POLL_S = env_int("OVERVIEW_POLL_S", 10, minimum=1, maximum=3600)

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "ops_console.static_finders.VendorFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Serve straight from the finders in development, so a fresh checkout needs no collectstatic.
WHITENOISE_USE_FINDERS = not PRODUCTION

# Celery: Redis in production; the filesystem transport as the embedded default.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "processed_folder": str(BROKER_DIR),
        "control_folder": str(BROKER_DIR / "control"),  # kombu's default is ./control
        "store_processed": False,
        # kombu reads the folder every polling_interval seconds (1 by default) once the
        # worker holds its prefetched tasks: at most two tasks a second, so a stream of
        # Alertmanager deliveries queued the probe cycles minutes behind it (make soak).
        "polling_interval": 0.1,
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The broker URL as the GPU hosts' agents reach it (shown in their set-up on the host page):
# usually the broker's network address with a Redis user of its own, not 127.0.0.1.
AGENT_BROKER_URL = env_str("AGENT_BROKER_URL", CELERY_BROKER_URL)
CELERY_TASK_IGNORE_RESULT = True  # the UI reads our own run rows, never a result backend
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "console"
# Checks that must run on a GPU host go to that host's queues (host.<name>), where its
# agent consumes them (docs/host-agent.md); everything else stays on "console".
CELERY_TASK_ROUTES = ("fleet.agent.routing.route_agent_tasks",)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE

REST_FRAMEWORK = {
    # Token first, so an anonymous API call gets 401 with WWW-Authenticate rather than 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.roles.InventoryPermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "LLM Ops Console API",
    "DESCRIPTION": "Fleet inventory of GPU hosts, GPUs, inference instances and gateways.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["core.roles.InventoryPermission"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # one line per probe request would drown everything else
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"
