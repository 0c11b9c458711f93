"""What the console shows for an instance: the stored verdict, or one of two states the
overview adds at read time. The tile, the counts and the filter all use this one answer.

  up, degraded      the probes' verdict
  failing           a down finding seen, not yet down_after_failures runs in a row (amber)
  down              failing that many runs in a row
  unknown           never probed (or disabled)
  stale             enabled and probed once, but no health result for longer than its
                    staleness window: the verdict shown would be old news
  maintenance       a maintenance window covers it now (alerts are silenced)
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

STATES = ("up", "degraded", "failing", "down", "stale", "maintenance", "unknown")

# Each shown state as the pages word it (the glossary's 正常 / 降级 / 宕机 / 过期 / 未知).
STATE_LABELS = {
    "up": _("up"),
    "degraded": _("degraded"),
    "failing": _("failing"),
    "down": _("down"),
    "stale": _("stale"),
    "maintenance": _("maintenance"),
    "unknown": _("unknown"),
}
# The other words of an instance's state label (Instance.state_message keeps them as
# messages); marked here so the probes' catalogue translates them too.
LABEL_WORDS = (
    gettext_noop("not probed yet"),
    gettext_noop("disabled"),
    gettext_noop("failing %(count)s× in a row"),
)


def state_label(state: str) -> str:
    """A shown state (STATES) in the active language; an unknown one as it is."""
    label = STATE_LABELS.get(state)
    return str(label) if label is not None else state


def shown_state(
    *,
    verdict: str,
    last_probe_at: datetime | None,
    now: datetime,
    stale_after: timedelta,
    in_maintenance: bool = False,
) -> str:
    if in_maintenance:
        return "maintenance"
    if verdict != "unknown" and last_probe_at is not None and now - last_probe_at > stale_after:
        return "stale"
    return verdict if verdict in STATES else "unknown"
