from django.db import migrations


def seed(apps, schema_editor):
    from diagnostics.catalogue_seed import seed_shipped

    seed_shipped(apps.get_model("diagnostics", "ModelSpec"))


def unseed(apps, schema_editor):
    apps.get_model("diagnostics", "ModelSpec").objects.filter(source="shipped").delete()


class Migration(migrations.Migration):
    dependencies = [("diagnostics", "0001_catalogue_and_capacity")]

    operations = [migrations.RunPython(seed, unseed)]
