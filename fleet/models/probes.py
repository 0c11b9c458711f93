"""What the probes store: runs, metric samples, each instance's state, and probe cycles."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from fleet.models.instances import Instance
from fleet.probes.evidence import evidence_html, shown_evidence
from fleet.probes.parts import ProbeKind


class Verdict(models.TextChoices):
    """The stored verdict. failing: a down finding seen, not yet down_after_failures runs in
    a row (amber, never green). The overview adds two shown states of its own: stale (no
    fresh health result) and maintenance (a window covers the instance)."""

    UNKNOWN = "unknown", _("not probed yet")
    UP = "up", _("up")
    DEGRADED = "degraded", _("degraded")
    FAILING = "failing", _("failing")
    DOWN = "down", _("down")


class ProbeKindChoice(models.TextChoices):
    """What a run measured: one probe kind on its own schedule, or all of them at once."""

    FULL = "full", _("every kind")
    HEALTH = ProbeKind.HEALTH.value, _("health and latency phases")
    STREAM = ProbeKind.STREAM.value, _("streaming")
    METRICS = ProbeKind.METRICS.value, _("engine metrics")
    GPU = ProbeKind.GPU.value, _("GPU state")


class Trigger(models.TextChoices):
    SCHEDULE = "schedule", _("schedule")
    MANUAL = "manual", _("probe now")
    CLI = "cli", _("command line")


class RunStatus(models.TextChoices):
    PENDING = "pending", _("queued")
    RUNNING = "running", _("running")
    DONE = "done", _("done")
    FAILED = "failed", _("failed")


class ProbeSettings(models.Model):
    """The judgement thresholds and probe limits; one row, edited in the admin.

    Defaults are the guide's rules (chapter 2.2), corrected where docs/guide-corrections.md says so.
    """

    connect_s = models.FloatField(_("connect above (s) → network"), default=1.0)
    ttfb_s = models.FloatField(_("TTFB above (s) → TTFT"), default=5.0)
    decode_gap_s = models.FloatField(_("total − TTFB above (s) → TPS"), default=10.0)
    waiting = models.PositiveIntegerField(_("waiting requests above → backlog"), default=10)
    running_fraction = models.FloatField(
        _("running ≥ this share of max_num_seqs → batch full"),
        default=0.95,
        validators=[MinValueValidator(0.1), MaxValueValidator(1.0)],
    )
    kv_cache_usage = models.FloatField(_("KV cache usage above (with waiting or preemptions)"), default=0.9)
    temperature_c = models.PositiveIntegerField(_("GPU temperature hint above (°C)"), default=85)
    sm_utilization_pct = models.PositiveIntegerField(_("SM utilization above (%) → saturated"), default=95)
    ttft_p95_s = models.FloatField(_("TTFT p95 above (s)"), default=5.0)
    tps_drop_ratio = models.FloatField(
        _("tokens/s this share below the instance's usual → TPS"),
        default=0.4,
        validators=[MinValueValidator(0.05), MaxValueValidator(0.95)],
    )
    down_after_failures = models.PositiveSmallIntegerField(
        _("down after this many failed cycles in a row"),
        default=3,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
    )
    connect_timeout_s = models.FloatField(_("connect timeout (s)"), default=3.0)
    read_timeout_s = models.FloatField(_("read timeout (s)"), default=10.0)
    total_deadline_s = models.FloatField(_("total deadline (s)"), default=15.0)
    stream_max_tokens = models.PositiveSmallIntegerField(_("stream probe's max tokens"), default=16)
    concurrency = models.PositiveSmallIntegerField(
        _("probes at once per sweep"), default=100, validators=[MinValueValidator(1)]
    )
    raw_retention_hours = models.PositiveIntegerField(_("raw samples kept (hours)"), default=24)
    sample_retention_days = models.PositiveIntegerField(_("averaged samples kept (days)"), default=30)

    class Meta:
        verbose_name = verbose_name_plural = _("probe settings")

    def __str__(self) -> str:
        return str(_("Probe settings"))

    @classmethod
    def current(cls) -> ProbeSettings:
        return cls.objects.get_or_create(pk=1)[0]


class InstanceState(models.Model):
    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="state")
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.UNKNOWN)
    since = models.DateTimeField(default=timezone.now)
    consecutive_failures = models.PositiveIntegerField(default=0)
    last_probe_at = models.DateTimeField(null=True, blank=True)
    findings = models.JSONField(default=list, blank=True)
    kinds = models.JSONField(
        default=dict,
        blank=True,
        help_text="The latest result of each probe kind: {kind: {at, result}}; the verdict is "
        "judged on all of them together.",
    )
    failures = models.JSONField(
        default=dict, blank=True, help_text="Failed runs in a row of each probe kind that is failing."
    )
    last_scrape = models.JSONField(null=True, blank=True, help_text="For rates between scrapes.")
    baselines = models.JSONField(
        default=dict,
        blank=True,
        help_text="The instance's usual figures (e.g. stream tokens/s), for drops against them.",
    )
    last_run = models.ForeignKey(
        "ProbeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = _("instance state")
        verbose_name_plural = _("instance states")

    def __str__(self) -> str:
        return f"{self.instance} {self.verdict}"

    @property
    def reason(self) -> str:
        """The first finding's evidence in the reader's language (fleet.probes.evidence)."""
        return shown_evidence(self.findings[0]) if self.findings else ""

    @property
    def reason_html(self) -> str:
        """The first finding's evidence as HTML, its raw values in <code translate="no">."""
        return evidence_html(self.findings[0]) if self.findings else ""

    @property
    def shown_findings(self) -> list[dict]:
        """The stored findings, each with "shown": its evidence as HTML in the reader's language."""
        return [{**f, "shown": evidence_html(f)} for f in self.findings]

    def measured_at(self, kind: str) -> datetime | None:
        """When the kind's latest result was measured, None when it never was."""
        stamp = (self.kinds.get(kind) or {}).get("at")
        return datetime.fromisoformat(stamp) if stamp else None

    @property
    def measured_kinds(self) -> list[tuple[str, datetime]]:
        """(kind label, when measured) of each kind measured so far, in ProbeKindChoice order."""
        found = []
        for kind, label in ProbeKindChoice.choices:
            at = self.measured_at(kind) if kind in self.kinds else None
            if at:
                found.append((label, at))
        return found

    def kind_result(self, kind: str) -> dict:
        return (self.kinds.get(kind) or {}).get("result") or {}


class ProbeRunQuerySet(models.QuerySet["ProbeRun"]):
    def latest_first(self) -> ProbeRunQuerySet:
        return self.order_by("-started_at", "-id")


class ProbeRun(models.Model):
    """One probe of one instance: its phases, stream, metrics, GPU state and verdict."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="probe_runs")
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    kind = models.CharField(max_length=10, choices=ProbeKindChoice.choices, default=ProbeKindChoice.FULL)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.PENDING)
    requested_by = models.CharField(max_length=150, blank=True)
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.UNKNOWN)
    outcome = models.CharField(max_length=20, blank=True, help_text="The health request's outcome.")
    result = models.JSONField(default=dict, blank=True)
    findings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    objects = ProbeRunQuerySet.as_manager()

    class Meta:
        verbose_name = _("probe run")
        verbose_name_plural = _("probe runs")
        indexes = [models.Index(fields=["instance", "-started_at"], name="fleet_probrun_inst_time")]

    def __str__(self) -> str:
        return f"{self.instance} probe at {self.started_at:%H:%M:%S}"

    @property
    def is_finished(self) -> bool:
        return self.status in (RunStatus.DONE, RunStatus.FAILED)


class MetricSampleQuerySet(models.QuerySet["MetricSample"]):
    """Stored series through the ORM: the latest value of some series for some instances,
    or their points over a time range. Alert signals, incident evidence, the capacity check
    and the host agent's RSS trend read through these; the instance charts read by their
    own SQL (fleet.chart_series), written once per database for speed."""

    def _of(self, instances, names, since, until=None) -> MetricSampleQuerySet:  # noqa: ANN001
        chosen = self.filter(instance__in=instances, name__in=list(names), ts__gte=since)
        return chosen.filter(ts__lte=until) if until is not None else chosen

    def latest_values(self, *, instances, names, since, until=None) -> dict[tuple[int, str], float]:  # noqa: ANN001
        """{(instance id, name): the latest value} of each series seen since `since`."""
        latest: dict[tuple[int, str], float] = {}
        rows = self._of(instances, names, since, until).order_by("ts", "id")
        for instance_id, name, value in rows.values_list("instance_id", "name", "value"):
            latest[(instance_id, name)] = value  # in time order: the last one wins
        return latest

    def points(self, *, instances, names, since, until=None) -> dict[int, dict[str, list]]:  # noqa: ANN001
        """{instance id: {name: [(ts, value), ...]}} in time order."""
        found: dict[int, dict[str, list]] = {}
        rows = self._of(instances, names, since, until).order_by("ts", "id")
        for instance_id, name, ts, value in rows.values_list("instance_id", "name", "ts", "value"):
            found.setdefault(instance_id, {}).setdefault(name, []).append((ts, value))
        return found


class MetricSample(models.Model):
    """One value of one canonical metric of an instance at one time.

    resolution is 0 for raw samples; the retention task replaces old raw samples with
    averages over `resolution` seconds.
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="samples")
    name = models.CharField(max_length=64)
    ts = models.DateTimeField(_("time"))
    value = models.FloatField()
    resolution = models.PositiveIntegerField(default=0)

    objects = MetricSampleQuerySet.as_manager()

    class Meta:
        verbose_name = _("metric sample")
        verbose_name_plural = _("metric samples")
        indexes = [
            models.Index(fields=["instance", "name", "ts"], name="fleet_sample_series"),
            models.Index(fields=["resolution", "ts"], name="fleet_sample_age"),
        ]

    def __str__(self) -> str:
        return f"{self.instance_id} {self.name}={self.value}"


class ProbeCycle(models.Model):
    """One scheduled sweep over the fleet. At most one open cycle per kind: a cycle that
    would overlap the previous one is skipped, not stacked.

    A sweep is sent out in chunks, each probed by whichever prober worker takes it; each
    chunk adds its counts as it ends, and the last one closes the cycle. A chunk that never
    ends (its worker died) leaves the cycle open until STALE_AFTER, when the next sweep of
    its kind closes it as abandoned."""

    STALE_AFTER = timedelta(minutes=10)

    kind = models.CharField(max_length=32, default="instances", help_text="The probe kind swept.")
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    instance_count = models.PositiveIntegerField(default=0)
    failed_count = models.PositiveIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0, help_text="The chunks the sweep was sent out in.")
    chunks_done = models.PositiveIntegerField(default=0, help_text="The chunks that have ended.")
    chunks_failed = models.PositiveIntegerField(
        default=0, help_text="The chunks that ended in an error (their instances were not stored)."
    )
    skipped = models.BooleanField(default=False)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = _("probe cycle")
        verbose_name_plural = _("probe cycles")
        constraints = [
            models.UniqueConstraint(
                fields=["kind"],
                condition=models.Q(finished_at=None),
                name="fleet_probecycle_one_open_per_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} cycle at {self.started_at:%H:%M:%S}"
