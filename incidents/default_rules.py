"""The console's alert rules: the guide's set (core.alert_set, one table shared with the
Prometheus generator and the Alertmanager intake), copied into the database, where
thresholds and durations are edited in the admin."""

from core.alert_set import GUIDE_ALERTS

DEFAULT_RULES = tuple(
    (a.key, a.name, a.signal, "above", a.threshold, a.for_seconds, a.category, a.severity, a.description)
    for a in GUIDE_ALERTS
)  # key, name, signal, comparison, threshold, for_seconds, category, severity, description


def seed_rules(alert_rule) -> int:  # noqa: ANN001  (the model class, or a migration's historical one)
    present = set(alert_rule.objects.values_list("key", flat=True))
    fields = (
        "key",
        "name",
        "signal",
        "comparison",
        "threshold",
        "for_seconds",
        "category",
        "severity",
        "description",
    )
    missing = [
        alert_rule(**dict(zip(fields, row, strict=True))) for row in DEFAULT_RULES if row[0] not in present
    ]
    alert_rule.objects.bulk_create(missing)
    return len(missing)
