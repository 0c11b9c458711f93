from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from diagnostics.sizing.architecture import Architecture, ConfigError
from diagnostics.sizing.catalog import CatalogEntry
from fleet.models import Instance


class ModelSpecQuerySet(models.QuerySet["ModelSpec"]):
    def entries(self) -> list[CatalogEntry]:
        return [spec.entry() for spec in self]


class ModelSpec(models.Model):
    """A model in the sizing catalogue: config.json facts, editable in the admin."""

    class Source(models.TextChoices):
        SHIPPED = "shipped", "shipped with the console"
        UPLOADED = "uploaded", "uploaded config.json"
        ADMIN = "admin", "added in the admin"

    key = models.SlugField(
        max_length=64, unique=True, help_text="Used in sizing URLs and `manage.py size --model`."
    )
    name = models.CharField(max_length=120)
    hf_id = models.CharField("Hugging Face id", max_length=200, blank=True)
    aliases = models.JSONField(default=list, blank=True, help_text="Other names it is served under.")
    family = models.CharField(max_length=60, blank=True)
    params_total = models.FloatField("parameters", null=True, blank=True)
    params_active = models.FloatField("active parameters", null=True, blank=True)
    weight_bytes = models.BigIntegerField(
        null=True, blank=True, help_text="Exact, from model.safetensors.index.json (metadata.total_size)."
    )
    config = models.JSONField(help_text="The config.json keys that change memory.")
    sources = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.ADMIN)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ModelSpecQuerySet.as_manager()

    class Meta:
        ordering = ["family", "name"]
        verbose_name = "model in the sizing catalogue"
        verbose_name_plural = "sizing catalogue"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not isinstance(self.aliases, list) or not all(isinstance(a, str) for a in self.aliases):
            raise ValidationError({"aliases": "A list of names."})
        try:
            self.entry().architecture()
        except ConfigError as exc:
            raise ValidationError({"config": str(exc)}) from None

    def entry(self) -> CatalogEntry:
        return CatalogEntry(
            key=self.key,
            name=self.name,
            hf_id=self.hf_id,
            aliases=tuple(self.aliases or ()),
            family=self.family,
            params_total=self.params_total,
            params_active=self.params_active,
            weight_bytes=self.weight_bytes,
            config=dict(self.config or {}),
            sources=tuple(self.sources or ()),
        )

    def architecture(self) -> Architecture:
        return self.entry().architecture()

    @classmethod
    def from_entry(cls, entry: CatalogEntry, *, source: str) -> ModelSpec:
        from diagnostics.catalogue_seed import model_fields

        return cls(**model_fields(entry), source=source)


class InstanceSizing(models.Model):
    """The latest scheduled sizing of an instance: its flags against its GPUs and load."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="sizing")
    checked_at = models.DateTimeField(default=timezone.now)
    model_key = models.CharField(max_length=64, blank=True)
    result = models.JSONField(
        null=True, blank=True, help_text="The calculator's JSON, as `manage.py size --json`."
    )
    problem = models.CharField(
        max_length=300, blank=True, help_text="Why it could not be sized, if it could not."
    )

    def __str__(self) -> str:
        return f"sizing of {self.instance}"


class CapacityFindingQuerySet(models.QuerySet["CapacityFinding"]):
    def active(self) -> CapacityFindingQuerySet:
        return self.filter(cleared_at__isnull=True)


class CapacityFinding(models.Model):
    """A capacity problem a scheduled check found on an instance. It stays open while later
    checks find it again and is cleared when one does not; a recurrence opens a new row, so
    the history is kept for incidents."""

    class Severity(models.TextChoices):
        CRITICAL = "critical", "critical"
        WARNING = "warning", "warning"
        INFO = "info", "info"

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="capacity_findings")
    code = models.CharField(max_length=40)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    title = models.CharField(max_length=200)
    detail = models.TextField(blank=True)
    fix = models.TextField(blank=True)
    numbers = models.JSONField(default=dict, blank=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    cleared_at = models.DateTimeField(null=True, blank=True)

    objects = CapacityFindingQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance", "code"],
                condition=models.Q(cleared_at__isnull=True),
                name="diagnostics_one_open_finding_per_code",
            )
        ]
        indexes = [models.Index(fields=["instance", "cleared_at"], name="diagnostics_finding_open")]

    def __str__(self) -> str:
        return f"{self.instance}: {self.title}"


class SavedWalkthrough(models.Model):
    """A finished (or half-done) troubleshooting walkthrough kept as a diagnosis path, on its
    own until incidents can hold it."""

    tree = models.CharField(max_length=64)
    path = models.JSONField(default=list, help_text="The answers chosen, as the walkthrough URL holds them.")
    instance = models.ForeignKey(
        Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="walkthroughs"
    )
    title = models.CharField(max_length=200)
    notes = models.TextField(blank=True)
    outcome_category = models.CharField(max_length=64, blank=True)
    outcome = models.TextField(blank=True, help_text="The leaf reached: root cause and fix.")
    steps = models.JSONField(default=list, help_text="Each question, the answer and who gave it, as it was.")
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title


class TriageRun(models.Model):
    """An uploaded log being triaged by a worker, with its progress and result."""

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for a worker"
        RUNNING = "running", "reading"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    file = models.FileField(upload_to="triage/", blank=True)
    filename = models.CharField(max_length=255)
    size_bytes = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"triage of {self.filename}"

    @property
    def percent(self) -> int:
        return min(100, int(100 * self.bytes_read / self.size_bytes)) if self.size_bytes else 0

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)
