"""The Celery app. Tasks live in each app's tasks.py; schedules in ops_console/schedules.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")

app = Celery("ops_console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
