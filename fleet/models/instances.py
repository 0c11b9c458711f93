from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from core.i18n import Message, later
from fleet.models.hosts import Gpu, GpuHost
from fleet.validators import validate_env_var_name, validate_http_url, validate_name, validate_probe_target


class Engine(models.TextChoices):
    VLLM = "vllm", "vLLM"
    TGI = "tgi", "TGI"
    OLLAMA = "ollama", "Ollama"
    SGLANG = "sglang", "SGLang"


class DType(models.TextChoices):
    AUTO = "auto", "auto"
    BFLOAT16 = "bfloat16", "bfloat16"
    FLOAT16 = "float16", "float16"
    FLOAT32 = "float32", "float32"


class KvCacheDType(models.TextChoices):
    AUTO = "auto", _("auto (same as the model)")
    FP8 = "fp8", "fp8"
    FP8_E4M3 = "fp8_e4m3", "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2", "fp8_e5m2"


class Quantization(models.TextChoices):
    NONE = "", _("none")
    FP8 = "fp8", "fp8"
    AWQ = "awq", "awq"
    GPTQ = "gptq", "gptq"
    COMPRESSED_TENSORS = "compressed-tensors", "compressed-tensors"
    BITSANDBYTES = "bitsandbytes", "bitsandbytes"
    GGUF = "gguf", "gguf"
    MXFP4 = "mxfp4", "mxfp4"


# The probes' stored verdicts as the pages word them (fleet.models.probes.Verdict).
VERDICT_WORDS: dict[str, Message] = {
    "up": later("up"),
    "degraded": later("degraded"),
    "failing": later("failing"),
    "down": later("down"),
    "unknown": later("unknown"),
}


class InstanceQuerySet(models.QuerySet["Instance"]):
    def enabled(self) -> InstanceQuerySet:
        return self.filter(enabled=True)

    def monitored(self) -> InstanceQuerySet:
        """What the schedules probe and the alert rules watch: enabled, not a drill's."""
        return self.filter(enabled=True, host__drill=False)


class Instance(models.Model):
    # What people edit through the forms and the API, in the order the forms show it.
    EDITABLE_FIELDS = (
        "name",
        "host",
        "gpus",
        "engine",
        "engine_version",
        "base_url",
        "served_model_name",
        "api_key_env",
        "enabled",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_model_len",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "dtype",
        "quantization",
        "kv_cache_dtype",
        "enable_prefix_caching",
        "extra_args",
    )

    name = models.CharField(max_length=63, unique=True, validators=[validate_name])
    host = models.ForeignKey(GpuHost, on_delete=models.CASCADE, related_name="instances")
    gpus = models.ManyToManyField(Gpu, blank=True, related_name="instances", verbose_name=_("GPUs"))
    engine = models.CharField(max_length=16, choices=Engine.choices, default=Engine.VLLM)
    engine_version = models.CharField(max_length=32, blank=True, help_text=_("For example 0.11.2."))
    base_url = models.CharField(
        _("base URL"),
        max_length=300,
        validators=[validate_http_url, validate_probe_target],
        help_text=_("Where the engine listens, like http://10.0.0.5:8000."),
    )
    served_model_name = models.CharField(max_length=200)
    api_key_env = models.CharField(
        _("API key variable"),
        max_length=100,
        blank=True,
        validators=[validate_env_var_name],
        help_text=_(
            "Name of the environment variable that holds the API key. The key itself is never stored."
        ),
    )
    max_model_len = models.PositiveIntegerField(
        _("max model length"),
        null=True,
        blank=True,
        validators=[MinValueValidator(16), MaxValueValidator(10_000_000)],
    )
    gpu_memory_utilization = models.FloatField(
        _("GPU memory utilization"),
        default=0.9,
        validators=[MinValueValidator(0.05), MaxValueValidator(1.0)],
        help_text=_("Fraction of each GPU's total memory this instance may use, weights included."),
    )
    max_num_seqs = models.PositiveIntegerField(
        _("max sequences"), null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(65536)]
    )
    max_num_batched_tokens = models.PositiveIntegerField(
        _("max batched tokens"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(10_000_000)],
    )
    tensor_parallel_size = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    pipeline_parallel_size = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    dtype = models.CharField(max_length=16, choices=DType.choices, default=DType.AUTO)
    quantization = models.CharField(max_length=32, choices=Quantization.choices, blank=True)
    kv_cache_dtype = models.CharField(
        _("KV cache dtype"), max_length=16, choices=KvCacheDType.choices, default=KvCacheDType.AUTO
    )
    enable_prefix_caching = models.BooleanField(
        default=True, help_text=_("On by default in vLLM's V1 engine.")
    )
    extra_args = models.TextField(blank=True, help_text=_("Other launch flags, as you would type them."))
    enabled = models.BooleanField(default=True, help_text=_("Disabled instances are not probed."))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = InstanceQuerySet.as_manager()

    class Meta:
        verbose_name = _("inference instance")
        verbose_name_plural = _("inference instances")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(gpu_memory_utilization__gt=0, gpu_memory_utilization__lte=1),
                name="fleet_instance_gpu_memory_utilization_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("fleet:instance-detail", args=[self.pk])

    @property
    def verdict(self) -> str:
        """The probes' latest verdict; disabled and never-probed instances are unknown."""
        state = getattr(self, "state", None)  # the reverse one-to-one raises when missing
        return state.verdict if self.enabled and state else "unknown"

    @property
    def state_message(self) -> Message:
        """What the tile and the instance page say: the verdict, and failed cycles that have
        not yet turned the instance down; shown in the reader's language."""
        if not self.enabled:
            return later("disabled")
        state = getattr(self, "state", None)
        if state is None or (state.verdict == "unknown" and not state.consecutive_failures):
            return later("not probed yet")
        if state.verdict == "failing" and state.consecutive_failures:
            return later("failing %(count)s× in a row", count=state.consecutive_failures)
        return VERDICT_WORDS.get(state.verdict) or Message(state.verdict)

    @property
    def state_label(self) -> str:
        """The state in English, for the API, logs and stored text."""
        return str(self.state_message)

    @property
    def state_text(self) -> str:
        """The state in the active language, for the pages."""
        return self.state_message.translated()

    @property
    def parallel_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def clean(self) -> None:
        if self.base_url:
            self.base_url = self.base_url.rstrip("/")

    def clean_gpus(self, gpus: list[Gpu]) -> None:
        """GPUs must sit on the instance's host and match tensor x pipeline parallel size."""
        foreign = [str(g) for g in gpus if g.host_id != self.host_id]
        if foreign:
            message = gettext("%(gpus)s not on host %(host)s.")
            raise ValidationError({"gpus": message % {"gpus": ", ".join(foreign), "host": self.host.name}})
        if gpus and len(gpus) != self.parallel_size:
            message = ngettext(
                "%(count)d GPU(s) chosen but tensor x pipeline parallel size is %(tp)d x %(pp)d = %(size)d.",
                "%(count)d GPU(s) chosen but tensor x pipeline parallel size is %(tp)d x %(pp)d = %(size)d.",
                len(gpus),
            )
            values = {
                "count": len(gpus),
                "tp": self.tensor_parallel_size,
                "pp": self.pipeline_parallel_size,
                "size": self.parallel_size,
            }
            raise ValidationError({"gpus": message % values})
