from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.utils.translation import gettext_lazy as _


class ChangeAction(models.TextChoices):
    CREATE = "create", _("created")
    UPDATE = "update", _("updated")
    DELETE = "delete", _("deleted")


class ChangeLogEntryQuerySet(models.QuerySet["ChangeLogEntry"]):
    def for_object(self, obj: models.Model) -> ChangeLogEntryQuerySet:
        return self.filter(content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk)


class ChangeLogEntry(models.Model):
    """One create, edit or delete of an inventory object: who, when, through what, and what changed.

    `changes` maps each changed field to [before, after]; deleted objects keep their last
    state here, so the record outlives the row.
    """

    content_type = models.ForeignKey(ContentType, on_delete=models.PROTECT)
    object_id = models.PositiveBigIntegerField(_("object ID"))
    object_repr = models.CharField(max_length=200)
    action = models.CharField(max_length=8, choices=ChangeAction.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text=_("Kept when the user is deleted."))
    source = models.CharField(max_length=16, default="web", help_text=_("web, api, import or cli."))
    changes = models.JSONField(default=dict)
    timestamp = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = ChangeLogEntryQuerySet.as_manager()

    class Meta:
        verbose_name = _("change log entry")
        ordering = ["-timestamp", "-id"]
        verbose_name_plural = _("change log entries")
        indexes = [models.Index(fields=["content_type", "object_id"], name="fleet_changelog_object")]

    def __str__(self) -> str:
        return f"{self.object_repr} {self.get_action_display()} by {self.actor_name}"
