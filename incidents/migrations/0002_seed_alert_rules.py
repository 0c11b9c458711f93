from django.db import migrations


def seed(apps, schema_editor):
    from incidents.default_rules import seed_rules

    seed_rules(apps.get_model("incidents", "AlertRule"))


def unseed(apps, schema_editor):
    from incidents.default_rules import DEFAULT_RULES

    apps.get_model("incidents", "AlertRule").objects.filter(key__in=[r[0] for r in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("incidents", "0001_incidents_alerts_windows_notifications")]

    operations = [migrations.RunPython(seed, unseed)]
