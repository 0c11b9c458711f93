"""The Celery app. Tasks live in each app's tasks.py; schedules in ops_console/schedules.py.

Queues: "console" for the central work (the default), "probes" for the chunks of the
scheduled probe sweeps, which any number of prober workers on any number of machines share
(docs/multi-machine-prober.md), and each GPU host's own queues, which only its agent
consumes (fleet.agent.routing). A worker started without --queues takes console and probes.
"""

import os

from celery import Celery
from kombu import Exchange, Queue

from fleet.agent.routing import CENTRAL_QUEUE, PROBE_QUEUE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ops_console.settings")

app = Celery("ops_console")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Declared as Celery declares a queue it was not told of (a direct exchange of the queue's
# name), so senders and workers on either side of this change agree.
app.conf.task_queues = tuple(
    Queue(name, Exchange(name), routing_key=name) for name in (CENTRAL_QUEUE, PROBE_QUEUE)
)
app.autodiscover_tasks()
