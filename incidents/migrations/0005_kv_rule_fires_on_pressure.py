"""The KV rule fires on the probes' KV pressure (usage high AND requests waiting or
preempted), not on usage alone: the verdict, the console's rule and the generated
Prometheus rule say the same (docs/guide-corrections.md #11). The service-down rule's
category becomes a fallback: its incidents take the down finding's category."""

from django.db import migrations

OLD = {"name": "KV cache above 95 %", "signal": "kv_cache_usage", "threshold": 0.95}
NEW = {
    "name": "KV cache full with requests waiting",
    "signal": "kv_pressure",
    "threshold": 0.5,
    "description": "The probes' KV rule: usage above the threshold and requests waiting or preempted. "
    "High usage alone is the cache doing its job and fires nothing.",
}


def forward(apps, schema_editor):
    rules = apps.get_model("incidents", "AlertRule").objects
    rules.filter(key="kv_cache_high", signal=OLD["signal"]).update(**NEW)


def backward(apps, schema_editor):
    rules = apps.get_model("incidents", "AlertRule").objects
    rules.filter(key="kv_cache_high", signal=NEW["signal"]).update(**OLD)


class Migration(migrations.Migration):
    dependencies = [("incidents", "0004_drillrun")]

    operations = [migrations.RunPython(forward, backward)]
