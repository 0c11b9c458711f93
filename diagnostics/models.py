from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.i18n import shown
from diagnostics.sizing.architecture import Architecture, ConfigError
from diagnostics.sizing.catalog import CatalogEntry
from fleet.models import Instance


class ModelSpecQuerySet(models.QuerySet["ModelSpec"]):
    def entries(self) -> list[CatalogEntry]:
        return [spec.entry() for spec in self]

    def for_hf_id(self, hf_id: str) -> ModelSpec | None:
        """The catalogue's model with this Hugging Face id (ids are case-insensitive on the
        Hub): the copy fetched from the Hub first, being the one "Fetch again" refreshes."""
        fetched_first = models.Case(models.When(source=ModelSpec.Source.HUB, then=0), default=1)
        return self.filter(hf_id__iexact=hf_id.strip()).order_by(fetched_first, "pk").first()


class ModelSpec(models.Model):
    """A model in the sizing catalogue: config.json facts, editable in the admin."""

    class Source(models.TextChoices):
        SHIPPED = "shipped", _("shipped with the console")
        UPLOADED = "uploaded", _("uploaded config.json")
        ADMIN = "admin", _("added in the admin")
        HUB = "hub", _("fetched from the Hugging Face Hub")

    key = models.SlugField(
        max_length=64, unique=True, help_text=_("Used in sizing URLs and `manage.py size --model`.")
    )
    name = models.CharField(max_length=120)
    hf_id = models.CharField(_("Hugging Face id"), max_length=200, blank=True)
    aliases = models.JSONField(default=list, blank=True, help_text=_("Other names it is served under."))
    family = models.CharField(max_length=60, blank=True)
    params_total = models.FloatField(_("parameters"), null=True, blank=True)
    params_active = models.FloatField(_("active parameters"), null=True, blank=True)
    weight_bytes = models.BigIntegerField(
        null=True, blank=True, help_text=_("Exact, from model.safetensors.index.json (metadata.total_size).")
    )
    config = models.JSONField(help_text=_("The config.json keys that change memory."))
    sources = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.ADMIN)
    fetched_at = models.DateTimeField(
        _("fetched at"),
        null=True,
        blank=True,
        help_text=_("When it was last fetched from the Hugging Face Hub."),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ModelSpecQuerySet.as_manager()

    class Meta:
        ordering = ["family", "name"]
        verbose_name = _("model in the sizing catalogue")
        verbose_name_plural = _("sizing catalogue")
        constraints = [
            # A second fetch of an id refreshes its copy: one fetched model per id.
            models.UniqueConstraint(
                Lower("hf_id"),
                condition=models.Q(source="hub"),
                name="diagnostics_one_fetched_model_per_hf_id",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if not isinstance(self.aliases, list) or not all(isinstance(a, str) for a in self.aliases):
            raise ValidationError({"aliases": _("A list of names.")})
        try:
            self.entry().architecture()
        except ConfigError as exc:
            raise ValidationError({"config": shown(exc.args[0])}) from None

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

    def reread(self, entry: CatalogEntry) -> None:
        """Take a new read of the same model (fetched again, read again on its host): its
        config.json facts and sources; a name, aliases or family edited in the admin stay. Unsaved."""
        from diagnostics.catalogue_seed import model_fields

        fields = model_fields(entry)
        for name in ("hf_id", "config", "weight_bytes", "sources"):
            setattr(self, name, fields[name])


class InstanceSizing(models.Model):
    """The latest scheduled sizing of an instance: its flags against its GPUs and load."""

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="sizing")
    checked_at = models.DateTimeField(default=timezone.now)
    model_key = models.CharField(max_length=64, blank=True)
    result = models.JSONField(
        null=True, blank=True, help_text=_("The calculator's JSON, as `manage.py size --json`.")
    )
    problem = models.CharField(
        max_length=300, blank=True, help_text=_("Why it could not be sized, if it could not.")
    )

    class Meta:
        verbose_name = _("instance sizing")
        verbose_name_plural = _("instance sizings")

    def __str__(self) -> str:
        return f"sizing of {self.instance}"

    @property
    def sized(self) -> dict | None:
        """The calculator's JSON, or None when the instance could not be sized."""
        return self.result if self.result and "problem" not in self.result else None

    @property
    def shown_problem(self) -> str:
        """Why it could not be sized, in the reader's language (the check keeps the message
        in result["problem"]; rows from before show the English `problem`)."""
        return shown(self.problem_message, fallback=self.problem)

    @property
    def problem_message(self):  # noqa: ANN201
        """Why it could not be sized as stored: a message (JSON), or the English text of a row
        from before (the `sizing_text` filters show either)."""
        return (self.result or {}).get("problem") or self.problem


class CapacityFindingQuerySet(models.QuerySet["CapacityFinding"]):
    def active(self) -> CapacityFindingQuerySet:
        return self.filter(cleared_at__isnull=True)


class CapacityFinding(models.Model):
    """A capacity problem a scheduled check found on an instance. It stays open while later
    checks find it again and is cleared when one does not; a recurrence opens a new row, so
    the history is kept for incidents."""

    class Severity(models.TextChoices):
        CRITICAL = "critical", _("critical")
        WARNING = "warning", _("warning")
        INFO = "info", _("info")

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
        verbose_name = _("capacity finding")
        verbose_name_plural = _("capacity findings")
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

    # The check keeps the text as messages in numbers["text"] (capacity_service); these show
    # it in the reader's language, and rows from before as they were stored.
    def _text(self, part: str):
        return ((self.numbers or {}).get("text") or {}).get(part)

    @property
    def shown_title(self) -> str:
        return shown(self._text("title"), fallback=self.title)

    @property
    def shown_detail(self) -> str:
        return shown(self._text("detail"), fallback=self.detail)

    @property
    def shown_fixes(self) -> list:
        """Each fix as stored: a message (JSON) or a flag with its value; the English `fix`
        for rows from before. The `sizing_text` filters show them with their flags as code."""
        fixes = self._text("fixes")
        return list(fixes) if fixes is not None else ([self.fix] if self.fix else [])

    @property
    def shown_fix(self) -> str:
        """The fixes as one line of text in the reader's language."""
        return _("; ").join(shown(fix) for fix in self.shown_fixes)

    @property
    def detail_is_vllm_error(self) -> bool:
        """The detail is vLLM's own start-up error, kept in its words (shown as code)."""
        return self.code == "will_not_start"


class SavedWalkthrough(models.Model):
    """A finished (or half-done) troubleshooting walkthrough kept as a diagnosis path, on its
    own until incidents can hold it."""

    tree = models.CharField(max_length=64)
    path = models.JSONField(
        default=list, help_text=_("The answers chosen, as the walkthrough URL holds them.")
    )
    instance = models.ForeignKey(
        Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="walkthroughs"
    )
    title = models.CharField(max_length=200)
    notes = models.TextField(blank=True)
    outcome_category = models.CharField(max_length=64, blank=True)
    outcome = models.TextField(blank=True, help_text=_("The leaf reached: root cause and fix."))
    steps = models.JSONField(
        default=list, help_text=_("Each question, the answer and who gave it, as it was.")
    )
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("saved walkthrough")
        verbose_name_plural = _("saved walkthroughs")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title


class TriageRun(models.Model):
    """An uploaded log being triaged by a worker, with its progress and result."""

    class Status(models.TextChoices):
        PENDING = "pending", _("waiting for a worker")
        RUNNING = "running", _("reading")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

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
        verbose_name = _("triage run")
        verbose_name_plural = _("triage runs")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"triage of {self.filename}"

    @property
    def percent(self) -> int:
        return min(100, int(100 * self.bytes_read / self.size_bytes)) if self.size_bytes else 0

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class PredeployRun(models.Model):
    """The guide's pre-deploy checklist (4.1.1) run against a GPU host: the facts come from
    the host's agent (an AgentRequest), the items are judged here (diagnostics.predeploy_service)."""

    host = models.ForeignKey("fleet.GpuHost", on_delete=models.CASCADE, related_name="predeploy_runs")
    instance = models.ForeignKey(
        "fleet.Instance", on_delete=models.SET_NULL, null=True, blank=True, related_name="predeploy_runs"
    )
    request = models.OneToOneField(
        "fleet.AgentRequest", on_delete=models.SET_NULL, null=True, blank=True, related_name="predeploy_run"
    )
    requested_by = models.CharField(max_length=150, blank=True)
    requirements = models.JSONField(default=dict)
    facts = models.JSONField(null=True, blank=True)
    items = models.JSONField(default=list, blank=True)
    overall = models.CharField(max_length=24, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    judged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("pre-deploy check")
        verbose_name_plural = _("pre-deploy checks")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"pre-deploy check {self.pk} of {self.host_id}"

    @property
    def overall_label(self) -> str:
        from fleet.hostchecks.predeploy import OVERALL_LABELS

        label = OVERALL_LABELS.get(self.overall)
        return label.translated() if label else self.overall
