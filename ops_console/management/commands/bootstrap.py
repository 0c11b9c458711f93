"""Idempotent set-up after migrate: the admin user, the shipped sizing catalogue and the
periodic tasks.

`make run` calls it every time; a second run changes nothing it does not have to.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from core.roles import Role
from diagnostics.catalogue_seed import seed_shipped
from diagnostics.models import ModelSpec
from ops_console.schedules import sync_periodic_tasks


def ensure_admin(*, username: str, password: str | None) -> tuple[User, str | None]:
    """Create the admin user, or reset its password when one is given.

    Returns the user and the password to show: the generated one on first creation,
    the given one when set, or None when an existing password was left alone.
    """
    user = User.objects.filter(username=username).first()
    shown = None
    if user is None:
        shown = password or secrets.token_urlsafe(12)
        user = User.objects.create_superuser(username=username, email="", password=shown)
    elif password:
        user.set_password(password)
        user.save(update_fields=["password"])
        shown = password
    user.groups.add(Group.objects.get(name=Role.ADMIN.group_name))
    return user, shown


class Command(BaseCommand):
    help = "Create the admin user (password from ADMIN_PASSWORD or generated) and register periodic tasks."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    @transaction.atomic
    def handle(self, *args, username: str, **options):
        user, shown = ensure_admin(username=username, password=os.environ.get("ADMIN_PASSWORD") or None)
        if shown:
            self.stdout.write(f"Admin user: {user.username}  password: {shown}")
            if not os.environ.get("ADMIN_PASSWORD"):
                self.stdout.write("  (generated; shown only this once - set ADMIN_PASSWORD to choose one)")
        else:
            self.stdout.write(f"Admin user: {user.username}  (exists; password unchanged)")
        added = seed_shipped(ModelSpec)
        self.stdout.write(f"Sizing catalogue: {ModelSpec.objects.count()} models ({added} added)")
        tasks = sync_periodic_tasks()
        self.stdout.write(f"Periodic tasks registered: {', '.join(t.name for t in tasks)}")
