"""Incidents and what feeds them: alert rules and their per-instance states, alerts received
from Alertmanager, maintenance windows, and notification targets with their deliveries."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.i18n import shown
from core.taxonomy import CATEGORIES, family
from fleet.models import GpuHost, Instance

CATEGORY_CHOICES = [(key, label) for key, label in CATEGORIES.items()] + [("other", _("Other"))]


class Severity(models.TextChoices):
    CRITICAL = "critical", _("critical")
    MAJOR = "major", _("major")
    MINOR = "minor", _("minor")
    INFO = "info", _("info")


class Status(models.TextChoices):
    OPEN = "open", _("open")
    MITIGATED = "mitigated", _("mitigated")
    RESOLVED = "resolved", _("resolved")


class Source(models.TextChoices):
    RULE = "rule", _("alert rule")
    ALERTMANAGER = "alertmanager", _("Alertmanager")
    MANUAL = "manual", _("opened by hand")
    DRILL = "drill", _("drill")


class IncidentQuerySet(models.QuerySet["Incident"]):
    def unresolved(self) -> IncidentQuerySet:
        return self.exclude(status=Status.RESOLVED)


class Incident(models.Model):
    EDITABLE_FIELDS = (
        "title", "category", "severity", "status", "started_at", "detected_at", "acknowledged_at",
        "resolved_at", "root_cause", "resolution", "follow_ups", "owner",
    )  # fmt: skip

    title = models.CharField(max_length=200)
    # An automatic title kept as a message (core.i18n), shown in the reader's language; blank
    # for a title typed by a person, or written before titles were kept so.
    title_message = models.JSONField(default=dict, blank=True)
    category = models.CharField(max_length=40, choices=CATEGORY_CHOICES, default="other")
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.MAJOR)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.MANUAL)
    started_at = models.DateTimeField(default=timezone.now, help_text=_("When the fault began."))
    detected_at = models.DateTimeField(
        default=timezone.now, help_text=_("When an alert or a person noticed it.")
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    mitigated_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    hosts = models.ManyToManyField(GpuHost, blank=True, related_name="incidents")
    instances = models.ManyToManyField(Instance, blank=True, related_name="incidents")
    models_affected = models.JSONField("models", default=list, blank=True)
    root_cause = models.TextField(blank=True)
    resolution = models.TextField(blank=True)
    follow_ups = models.TextField("follow-up actions", blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="incidents"
    )
    dedup_key = models.CharField(
        max_length=200,
        blank=True,
        help_text=_("Alerts with this key join this incident while it is not resolved."),
    )
    evidence = models.JSONField(
        default=dict, blank=True, help_text=_("Snapshot taken when the incident opened.")
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = IncidentQuerySet.as_manager()

    class Meta:
        verbose_name = _("incident")
        verbose_name_plural = _("incidents")
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["dedup_key"],
                condition=~Q(status="resolved") & ~Q(dedup_key=""),
                name="incidents_one_unresolved_per_key",
            )
        ]
        indexes = [models.Index(fields=["status", "started_at"], name="incidents_status_started")]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("incidents:detail", args=[self.pk])

    @property
    def shown_title(self) -> str:
        """The title in the reader's language (an automatic one), or as it was typed."""
        return shown(self.title_message, fallback=self.title)

    @property
    def family(self) -> str:
        return family(self.category)

    @property
    def time_to_acknowledge(self) -> timedelta | None:
        return self.acknowledged_at - self.detected_at if self.acknowledged_at else None

    @property
    def time_to_resolve(self) -> timedelta | None:
        return self.resolved_at - self.started_at if self.resolved_at else None

    @property
    def time_to_mitigate(self) -> timedelta | None:
        return self.mitigated_at - self.started_at if self.mitigated_at else None


class TimelineEntry(models.Model):
    class Kind(models.TextChoices):
        OPENED = "opened", _("opened")
        ALERT_FIRED = "alert_fired", _("alert fired")
        ALERT_RESOLVED = "alert_resolved", _("alert resolved")
        STATUS = "status", _("status changed")
        EDIT = "edit", _("edited")
        NOTE = "note", _("note")
        PROBE = "probe", _("probe result changed")
        RESTART = "restart", _("instance restarted")
        WALKTHROUGH = "walkthrough", _("walkthrough attached")
        TRIAGE = "triage", _("triage attached")
        NOTIFICATION = "notification", _("notification")

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="timeline")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    text = models.TextField(blank=True, help_text="Markdown for notes; shown sanitized.")
    # An automatic entry's text kept as a message (core.i18n): `text` holds it in English.
    text_message = models.JSONField(default=dict, blank=True)
    author = models.CharField(max_length=150, blank=True, help_text="Blank for automatic entries.")
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = _("timeline entry")
        verbose_name_plural = _("timeline entries")
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} at {self.at:%Y-%m-%d %H:%M}"

    @property
    def shown_text(self) -> str:
        """The text in the reader's language (an automatic entry), or as it was written."""
        return shown(self.text_message, fallback=self.text)


class AlertRule(models.Model):
    """A rule the console evaluates after each probe cycle over the stored probe data."""

    class Comparison(models.TextChoices):
        ABOVE = "above", ">"
        BELOW = "below", "<"

    key = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    signal = models.CharField(max_length=64, help_text="What is compared: a sample name or a derived signal.")
    comparison = models.CharField(max_length=5, choices=Comparison.choices, default=Comparison.ABOVE)
    threshold = models.FloatField()
    for_seconds = models.PositiveIntegerField(help_text="How long the condition must hold before it fires.")
    category = models.CharField(max_length=40, choices=CATEGORY_CHOICES)
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.MAJOR)
    enabled = models.BooleanField(default=True)
    description = models.TextField(blank=True)

    class Meta:
        verbose_name = _("alert rule")
        verbose_name_plural = _("alert rules")
        ordering = ["key"]

    def __str__(self) -> str:
        return self.name


class AlertState(models.Model):
    """A rule's state for one instance: inactive, pending (holding, not yet for long enough) or
    firing, like Prometheus's `for`."""

    class State(models.TextChoices):
        INACTIVE = "inactive", _("inactive")
        PENDING = "pending", _("pending")
        FIRING = "firing", _("firing")

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="states")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="alert_states")
    state = models.CharField(max_length=10, choices=State.choices, default=State.INACTIVE)
    active_since = models.DateTimeField(null=True, blank=True)
    fired_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    incident = models.ForeignKey(Incident, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        verbose_name = _("alert state")
        verbose_name_plural = _("alert states")
        constraints = [
            models.UniqueConstraint(fields=["rule", "instance"], name="incidents_one_state_per_rule")
        ]

    def __str__(self) -> str:
        return f"{self.rule.key} on {self.instance}: {self.state}"


class ReceivedAlert(models.Model):
    """An alert from Alertmanager's webhook, kept by fingerprint."""

    fingerprint = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=10)
    alertname = models.CharField(max_length=200, blank=True)
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict)
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    generator_url = models.CharField(max_length=1000, blank=True)
    receiver = models.CharField(max_length=200, blank=True)
    first_received = models.DateTimeField(default=timezone.now)
    last_received = models.DateTimeField(default=timezone.now)
    times_received = models.PositiveIntegerField(default=1)
    incident = models.ForeignKey(
        Incident, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )

    class Meta:
        verbose_name = _("received alert")
        verbose_name_plural = _("received alerts")
        ordering = ["-last_received"]

    def __str__(self) -> str:
        return f"{self.alertname} ({self.status})"


class AlertDeliveryQuerySet(models.QuerySet["AlertDelivery"]):
    def unprocessed(self) -> AlertDeliveryQuerySet:
        """In arrival order: a later notification of a group must not be undone by an earlier one."""
        return self.filter(processed_at__isnull=True).order_by("received_at", "pk")


class AlertDelivery(models.Model):
    """One webhook payload from Alertmanager, kept whole in one write before the receiver
    answers; a worker then turns it into received alerts and incidents
    (incidents.alert_deliveries). The bytes are kept as they came, so a payload the worker
    could not process yet is processed again later, never lost."""

    body = models.BinaryField()
    group_key = models.TextField(blank=True)
    alert_count = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    outcome = models.JSONField(default=dict, blank=True)

    objects = AlertDeliveryQuerySet.as_manager()

    class Meta:
        verbose_name = _("alert delivery")
        verbose_name_plural = _("alert deliveries")
        ordering = ["-received_at", "-pk"]
        indexes = [
            models.Index(
                fields=["received_at"],
                condition=Q(processed_at__isnull=True),
                name="incidents_delivery_unprocessed",
            )
        ]

    def __str__(self) -> str:
        return f"{self.alert_count} alert(s) received {self.received_at:%Y-%m-%d %H:%M:%S}"


class MaintenanceWindowQuerySet(models.QuerySet["MaintenanceWindow"]):
    def covering(self, *, instance: Instance, at: datetime) -> list[MaintenanceWindow]:
        candidates = self.filter(Q(instance=instance) | Q(host_id=instance.host_id))
        return [w for w in candidates if w.active_at(at)]


class MaintenanceWindow(models.Model):
    """Silences alerts for a host or an instance: once, or every day or week at the same time."""

    class Recurrence(models.TextChoices):
        NONE = "none", _("once")
        DAILY = "daily", _("every day")
        WEEKLY = "weekly", _("every week")

    name = models.CharField(max_length=120)
    host = models.ForeignKey(
        GpuHost, null=True, blank=True, on_delete=models.CASCADE, related_name="maintenance"
    )
    instance = models.ForeignKey(
        Instance, null=True, blank=True, on_delete=models.CASCADE, related_name="maintenance"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    recurrence = models.CharField(max_length=8, choices=Recurrence.choices, default=Recurrence.NONE)
    reason = models.TextField(blank=True)
    created_by = models.CharField(max_length=150, blank=True)

    objects = MaintenanceWindowQuerySet.as_manager()

    class Meta:
        verbose_name = _("maintenance window")
        verbose_name_plural = _("maintenance windows")
        ordering = ["starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(host__isnull=False) | Q(instance__isnull=False),
                name="incidents_window_has_target",
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="incidents_window_ends_after"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def active_at(self, at: datetime) -> bool:
        if self.recurrence == self.Recurrence.NONE:
            return self.starts_at <= at < self.ends_at
        if at < self.starts_at:
            return False
        period = timedelta(days=1 if self.recurrence == self.Recurrence.DAILY else 7)
        offset = (at - self.starts_at) % period
        return offset < (self.ends_at - self.starts_at)


class NotificationTarget(models.Model):
    class Kind(models.TextChoices):
        WEBHOOK = "webhook", _("generic JSON webhook")
        SLACK = "slack", _("Slack-compatible webhook")

    name = models.CharField(max_length=120, unique=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.WEBHOOK)
    url = models.URLField(max_length=500)
    enabled = models.BooleanField(default=True)
    min_severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.MAJOR)

    class Meta:
        verbose_name = _("notification target")
        verbose_name_plural = _("notification targets")

    def __str__(self) -> str:
        return self.name


class NotificationDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        SENT = "sent", _("sent")
        FAILED = "failed", _("failed")

    target = models.ForeignKey(NotificationTarget, on_delete=models.CASCADE, related_name="deliveries")
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("notification delivery")
        verbose_name_plural = _("notification deliveries")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.event} to {self.target}"


class DrillRun(models.Model):
    """A drill started from the Drills page: a worker replays the scenario and records its
    progress (in scenario seconds) and, at the end, the report."""

    class Status(models.TextChoices):
        PENDING = "pending", _("waiting for a worker")
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

    scenario = models.CharField(max_length=200, help_text="The shipped scenario's file name.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    elapsed_s = models.FloatField(default=0, help_text="Scenario seconds played so far.")
    total_s = models.FloatField(default=0, help_text="Scenario seconds the drill runs for.")
    passed = models.BooleanField(null=True, blank=True)
    report = models.JSONField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("drill run")
        verbose_name_plural = _("drill runs")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"drill {self.scenario} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def percent(self) -> int:
        return min(100, int(100 * self.elapsed_s / self.total_s)) if self.total_s else 0
