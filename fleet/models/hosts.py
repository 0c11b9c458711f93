from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from fleet import gpu_catalog
from fleet.gpu_catalog import FORM_FACTOR_CHOICES
from fleet.validators import (
    validate_address,
    validate_gpu_uuid,
    validate_http_url,
    validate_name,
    validate_pci_bus_id,
    validate_probe_target,
)


class GpuHostQuerySet(models.QuerySet["GpuHost"]):
    def with_counts(self) -> GpuHostQuerySet:
        return self.annotate(
            gpu_count=models.Count("gpus", distinct=True),
            instance_count=models.Count("instances", distinct=True),
        ).order_by("name")  # Meta.ordering does not apply to aggregate queries


class GpuTelemetry(models.TextChoices):
    OFF = "off", _("none")
    SIMULATED = "simulated", _("fleet simulator")
    NVML = "nvml", _("NVML, read by the host's agent")
    DCGM = "dcgm", _("NVIDIA dcgm-exporter")


class GpuHost(models.Model):
    # What people edit through the forms and the API, in the order the forms show it.
    EDITABLE_FIELDS = (
        "name",
        "address",
        "datacenter",
        "rack",
        "tags",
        "cpu_cores",
        "ram_gb",
        "numa_nodes",
        "os",
        "driver_version",
        "cuda_version",
        "gpu_telemetry",
        "dcgm_exporter_url",
        "notes",
    )

    name = models.CharField(max_length=63, unique=True, validators=[validate_name])
    address = models.CharField(
        max_length=253,
        validators=[validate_address],
        help_text=_("IP address or DNS name the console reaches the host on."),
    )
    datacenter = models.CharField(max_length=63, blank=True)
    rack = models.CharField(max_length=63, blank=True)
    tags = models.JSONField(default=list, blank=True, help_text=_("Free-form labels."))
    cpu_cores = models.PositiveIntegerField(
        _("CPU cores"), null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(4096)]
    )
    ram_gb = models.PositiveIntegerField(
        _("RAM (GB)"), null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(65536)]
    )
    numa_nodes = models.PositiveSmallIntegerField(
        _("NUMA nodes"), default=1, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    os = models.CharField(_("OS"), max_length=100, blank=True)
    driver_version = models.CharField(max_length=32, blank=True)
    cuda_version = models.CharField(_("CUDA version"), max_length=16, blank=True)
    gpu_telemetry = models.CharField(
        _("GPU telemetry"),
        max_length=10,
        choices=GpuTelemetry.choices,
        default=GpuTelemetry.OFF,
        help_text=_("Where the GPU probe reads NVML state from."),
    )
    dcgm_exporter_url = models.CharField(
        _("dcgm-exporter URL"),
        max_length=300,
        blank=True,
        validators=[validate_http_url, validate_probe_target],
        help_text=_("The host's dcgm-exporter metrics, for example http://10.0.0.5:9400/metrics."),
    )
    notes = models.TextField(blank=True)
    drill = models.BooleanField(
        default=False,
        editable=False,
        help_text=_("A scratch host made by a drill: the schedules and the overview leave it out."),
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = GpuHostQuerySet.as_manager()

    class Meta:
        verbose_name_plural = _("GPU hosts")
        ordering = ["name"]
        verbose_name = _("GPU host")

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("fleet:host-detail", args=[self.pk])

    def clean(self) -> None:
        if not isinstance(self.tags, list) or not all(isinstance(t, str) for t in self.tags):
            raise ValidationError({"tags": gettext("Tags must be a list of strings.")})
        self.tags = sorted({t.strip() for t in self.tags if t.strip()})
        if self.gpu_telemetry == GpuTelemetry.DCGM and not self.dcgm_exporter_url:
            raise ValidationError(
                {"dcgm_exporter_url": gettext("GPU telemetry from dcgm-exporter needs the exporter's URL.")}
            )


class MigMode(models.TextChoices):
    DISABLED = "disabled", _("Disabled")
    ENABLED = "enabled", _("Enabled")
    UNSUPPORTED = "unsupported", _("Not supported")


class Gpu(models.Model):
    # What people edit through the forms and the API, in the order the forms show it.
    EDITABLE_FIELDS = (
        "host",
        "index",
        "model",
        "form_factor",
        "memory_mib",
        "uuid",
        "numa_node",
        "pci_bus_id",
        "nvlink_peers",
        "mig_mode",
    )

    host = models.ForeignKey(GpuHost, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField(validators=[MaxValueValidator(63)])
    uuid = models.CharField(_("UUID"), max_length=64, blank=True, validators=[validate_gpu_uuid])
    model = models.CharField(max_length=32, choices=gpu_catalog.choices)
    form_factor = models.CharField(max_length=8, choices=FORM_FACTOR_CHOICES)
    memory_mib = models.PositiveIntegerField(
        _("memory (MiB)"), blank=True, help_text=_("Blank: the catalogue's figure for the model.")
    )
    numa_node = models.PositiveSmallIntegerField(_("NUMA node"), null=True, blank=True)
    pci_bus_id = models.CharField(
        _("PCI bus ID"), max_length=16, blank=True, validators=[validate_pci_bus_id]
    )
    nvlink_peers = models.JSONField(
        _("NVLink peers"),
        default=list,
        blank=True,
        help_text=_("Indexes of the GPUs on the same host this one has NVLink to."),
    )
    mig_mode = models.CharField(
        _("MIG mode"), max_length=12, choices=MigMode.choices, default=MigMode.DISABLED
    )

    class Meta:
        verbose_name_plural = _("GPUs")
        ordering = ["host__name", "index"]
        verbose_name = _("GPU")
        constraints = [
            models.UniqueConstraint(
                fields=["host", "index"],
                name="fleet_gpu_unique_index_per_host",
                violation_error_message=_("This host already has a GPU with this index."),
            ),
            models.UniqueConstraint(
                fields=["uuid"],
                condition=~models.Q(uuid=""),
                name="fleet_gpu_unique_uuid",
                violation_error_message=_("Another GPU already has this UUID."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.host.name}/gpu{self.index}" if self.host_id else f"gpu{self.index}"

    def get_absolute_url(self) -> str:
        return reverse("fleet:gpu-detail", args=[self.pk])

    @property
    def catalogue_entry(self) -> gpu_catalog.GpuModel:
        return gpu_catalog.get(self.model)

    @property
    def memory_gib(self) -> float:
        return round(self.memory_mib / 1024, 1)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.model in gpu_catalog.CATALOGUE:
            entry = gpu_catalog.get(self.model)
            if not self.memory_mib:
                self.memory_mib = entry.memory_mib
            if self.form_factor and self.form_factor not in entry.form_factors:
                allowed = ", ".join(f.value for f in entry.form_factors)
                errors["form_factor"] = gettext("%(model)s comes as %(allowed)s, not %(form_factor)s.") % {
                    "model": entry.name,
                    "allowed": allowed,
                    "form_factor": self.form_factor,
                }
        if self.host_id and self.numa_node is not None and self.numa_node >= self.host.numa_nodes:
            errors["numa_node"] = ngettext(
                "Host %(host)s has %(count)d NUMA node(s): use 0..%(last)d.",
                "Host %(host)s has %(count)d NUMA node(s): use 0..%(last)d.",
                self.host.numa_nodes,
            ) % {"host": self.host.name, "count": self.host.numa_nodes, "last": self.host.numa_nodes - 1}
        peers = self.nvlink_peers
        if not isinstance(peers, list) or not all(isinstance(p, int) and p >= 0 for p in peers):
            errors["nvlink_peers"] = gettext("NVLink peers must be a list of GPU indexes.")
        elif self.index in peers:
            errors["nvlink_peers"] = gettext("A GPU cannot be its own NVLink peer.")
        else:
            self.nvlink_peers = sorted(set(peers))
        if errors:
            raise ValidationError(errors)
