"""Host agents: this project's Celery worker on a GPU host, consuming that host's queues.

Central side: `routing` (which queue a task goes to), `credentials` (the per-host token and
the reports' signatures), `dispatch` (sending fixed checks to hosts), `reports` (receiving
what agents send back). Agent side: `worker` (the agent's own Celery app, which knows only
the fixed, read-only checks) and `heartbeat`. docs/host-agent.md tells the whole story.
"""
