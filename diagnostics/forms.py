"""The sizing inputs, validated once for the page, the CLI and the API alike.

Field names are the URL's query parameters, so a result can be shared as a link.
"""

from __future__ import annotations

from typing import Any

from django import forms

from diagnostics.models import ModelSpec
from diagnostics.sizing import versions
from diagnostics.sizing.architecture import ConfigError
from diagnostics.sizing.calculator import SizingSpec
from diagnostics.sizing.catalog import MAX_CONFIG_BYTES, entry_from_upload
from diagnostics.sizing.spec_values import spec_from_values
from fleet import gpu_catalog
from fleet.models import DType

QUANTIZATION_CHOICES = [
    ("", "the checkpoint's own"),
    ("none", "none (16-bit)"),
    ("fp8", "fp8"),
    ("awq", "awq"),
    ("gptq", "gptq"),
    ("bitsandbytes", "bitsandbytes"),
    ("mxfp4", "mxfp4"),
    ("gguf", "gguf"),
]
KV_DTYPE_CHOICES = [
    ("auto", "auto (the model's dtype)"),
    ("fp8", "fp8"),
    ("fp8_e4m3", "fp8_e4m3"),
    ("fp8_e5m2", "fp8_e5m2"),
]
DTYPE_CHOICES = DType.choices
BLOCK_CHOICES = [("", "engine default"), ("16", "16"), ("32", "32"), ("64", "64"), ("128", "128")]


def _int(label: str, *, minimum: int = 1, maximum: int = 10_000_000, required: bool = False, **kw: Any):
    return forms.IntegerField(label=label, min_value=minimum, max_value=maximum, required=required, **kw)


class SizingForm(forms.Form):
    model = forms.ChoiceField(help_text="From the sizing catalogue; upload a config.json to add one.")
    gpu = forms.ChoiceField(label="GPU", choices=gpu_catalog.choices)
    gpus = _int("GPUs", maximum=64, initial=1, required=True)
    tensor_parallel_size = _int(
        "--tensor-parallel-size", maximum=64, help_text="Blank: all GPUs of one replica."
    )
    pipeline_parallel_size = _int("--pipeline-parallel-size", maximum=64, initial=1)
    gpu_memory_utilization = forms.FloatField(
        label="--gpu-memory-utilization",
        min_value=0.05,
        max_value=1.0,
        required=False,
        help_text="Blank: the version's default (0.9; 0.92 from 0.20).",
    )
    max_model_len = _int(
        "--max-model-len", minimum=16, help_text="Blank: the model's max_position_embeddings."
    )
    max_num_seqs = _int("--max-num-seqs", maximum=65536, help_text="Blank: vLLM's default for the GPU.")
    max_num_batched_tokens = _int("--max-num-batched-tokens", minimum=16, help_text="Blank: vLLM's default.")
    dtype = forms.ChoiceField(label="--dtype", choices=DTYPE_CHOICES, initial="auto", required=False)
    quantization = forms.ChoiceField(label="--quantization", choices=QUANTIZATION_CHOICES, required=False)
    kv_cache_dtype = forms.ChoiceField(
        label="--kv-cache-dtype", choices=KV_DTYPE_CHOICES, initial="auto", required=False
    )
    block_size = forms.TypedChoiceField(
        label="--block-size", choices=BLOCK_CHOICES, coerce=int, empty_value=None, required=False
    )
    avg_prompt_tokens = _int("Average prompt tokens", minimum=0, initial=1500)
    avg_output_tokens = _int("Average output tokens", minimum=0, initial=500)
    vllm_version = forms.ChoiceField(
        label="vLLM version",
        choices=versions.VERSION_CHOICES,
        initial=versions.DEFAULT_VERSION,
        required=False,
    )
    other_used_gib = forms.FloatField(
        label="Memory other processes hold (GiB)",
        min_value=0,
        max_value=1024,
        required=False,
        help_text="Per GPU, at start-up (nvidia-smi).",
    )
    enforce_eager = forms.BooleanField(label="--enforce-eager", required=False)

    def __init__(
        self, *args: Any, extra: ModelSpec | None = None, specs: list[ModelSpec] | None = None, **kwargs: Any
    ) -> None:
        """`extra`: a model outside the catalogue (the CLI's --config), sized without saving.
        `specs`: the catalogue, when the caller has loaded it already (the fleet check)."""
        super().__init__(*args, **kwargs)
        self.specs = {spec.key: spec for spec in (specs if specs is not None else ModelSpec.objects.all())}
        if extra is not None:
            self.specs[extra.key] = extra
        self.fields["model"].choices = [(key, spec.name) for key, spec in self.specs.items()]

    def clean_vllm_version(self) -> str:
        return self.cleaned_data.get("vllm_version") or versions.DEFAULT_VERSION

    def spec(self) -> SizingSpec:
        """The calculator's input; call after is_valid()."""
        data = self.cleaned_data
        return spec_from_values(data, arch=self.specs[data["model"]].architecture())


class ConfigUploadForm(forms.Form):
    """A new catalogue model from a Hugging Face config.json, pasted or uploaded."""

    name = forms.CharField(max_length=120, required=False, help_text="Blank: the config's _name_or_path.")
    config_text = forms.CharField(
        label="config.json (paste)", widget=forms.Textarea(attrs={"rows": 8}), required=False
    )
    config_file = forms.FileField(label="or upload config.json", required=False)
    index_file = forms.FileField(
        label="model.safetensors.index.json (optional)",
        required=False,
        help_text="Gives the exact weight bytes (metadata.total_size).",
    )
    params_billions = forms.FloatField(
        label="Parameters (billions)",
        min_value=0.01,
        max_value=10_000,
        required=False,
        help_text="Needed unless the safetensors index is given.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        config = data.get("config_text") or _read(data.get("config_file"))
        if not config:
            raise forms.ValidationError("Paste a config.json or choose the file.")
        params = data.get("params_billions")
        try:
            self.entry = entry_from_upload(
                config_text=config,
                index_text=_read(data.get("index_file")),
                name=data.get("name", ""),
                params_total=params * 1e9 if params else None,
            )
        except ConfigError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data


def _read(upload: Any) -> bytes | None:
    if not upload:
        return None
    if upload.size > MAX_CONFIG_BYTES:
        raise forms.ValidationError(
            f"{upload.name} is {upload.size:,} bytes; a real one is far under {MAX_CONFIG_BYTES:,}."
        )
    return upload.read()
