"""The sizing inputs, validated once for the page, the CLI and the API alike.

Field names are the URL's query parameters, so a result can be shared as a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.utils.functional import Promise
from django.utils.safestring import mark_safe
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from core.i18n import shown
from diagnostics.models import ModelSpec
from diagnostics.sizing import hub, versions
from diagnostics.sizing.architecture import ConfigError
from diagnostics.sizing.calculator import SizingSpec
from diagnostics.sizing.catalog import MAX_CONFIG_BYTES, entry_from_upload
from diagnostics.sizing.spec_values import spec_from_values
from fleet import gpu_catalog, gpu_names
from fleet.models import DType

QUANTIZATION_CHOICES = [
    ("", _("the checkpoint's own")),
    ("none", _("none (16-bit)")),
    ("fp8", "fp8"),
    ("awq", "awq"),
    ("gptq", "gptq"),
    ("bitsandbytes", "bitsandbytes"),
    ("mxfp4", "mxfp4"),
    ("gguf", "gguf"),
]
KV_DTYPE_CHOICES = [
    ("auto", _("auto (the model's dtype)")),
    ("fp8", "fp8"),
    ("fp8_e4m3", "fp8_e4m3"),
    ("fp8_e5m2", "fp8_e5m2"),
]
DTYPE_CHOICES = DType.choices
BLOCK_CHOICES = [("", _("engine default")), ("16", "16"), ("32", "32"), ("64", "64"), ("128", "128")]


class NameSelect(forms.Select):
    """A select whose options are identifiers (model and GPU names, flag values): an option
    whose label is a name, or is its value, is marked translate="no" (it reads the same in
    every language); the others ("engine default", a translatable label) are text."""

    def __init__(self, *args: Any, names: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.names = names

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):  # noqa: ANN001
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        if (self.names and value and not isinstance(label, Promise)) or str(label) == str(value):
            option["attrs"]["translate"] = "no"
        return option


class Catalogue(Mapping[str, ModelSpec]):
    """The model catalogue as the sizing form needs it: every model's key and name for the
    choices, a model's whole row (its config.json facts) only when it is asked for. The page
    sizes one model per keystroke; reading every row's JSON cost more than the sizing."""

    def __init__(self, specs: list[ModelSpec] | None = None, *, extra: ModelSpec | None = None) -> None:
        if specs is not None:  # loaded by the caller already (the fleet check)
            self._rows = {spec.key: spec for spec in specs}
            self._names = {key: spec.name for key, spec in self._rows.items()}
        else:
            self._rows = {}
            self._names = dict(ModelSpec.objects.values_list("key", "name"))
        if extra is not None:  # a model outside the catalogue (the CLI's --config)
            self._rows[extra.key] = extra
            self._names[extra.key] = extra.name

    def names(self) -> list[tuple[str, str]]:
        return list(self._names.items())

    def __getitem__(self, key: str) -> ModelSpec:
        if key not in self._names:
            raise KeyError(key)
        if key not in self._rows:
            self._rows[key] = ModelSpec.objects.get(key=key)
        return self._rows[key]

    def __contains__(self, key: object) -> bool:  # without reading the row
        return key in self._names

    def __iter__(self):  # noqa: ANN204
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class CatalogueField(forms.ChoiceField):
    """A catalogue model by key: checked against the catalogue's keys, its options listed
    only when the field is drawn (a partial sizing on each keystroke never lists them)."""

    catalogue: Mapping[str, Any] = {}

    def valid_value(self, value: Any) -> bool:
        return str(value) in self.catalogue


class GpuField(forms.ChoiceField):
    """A catalogue GPU by key, by its catalogue name or by the name nvidia-smi, NVML or
    rocm-smi prints ("NVIDIA H100 80GB HBM3"): cleaned to the key; "custom" (or blank)
    means a GPU given by its memory. An unknown name is refused with the close matches."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=self._choices, required=False, **kwargs)

    @staticmethod
    def _choices() -> list[tuple[str, Any]]:
        return [*gpu_catalog.choices(), (gpu_catalog.CUSTOM_KEY, _("another GPU (give its memory)"))]

    def to_python(self, value: Any) -> str:
        text = super().to_python(value).strip()
        if not text or text == gpu_catalog.CUSTOM_KEY:
            return text
        gpu = gpu_names.find_gpu(text)
        if gpu is None:
            raise forms.ValidationError(shown(gpu_names.unknown_gpu(text)), code="unknown_gpu")
        return gpu.key

    def bound_data(self, data: Any, initial: Any) -> Any:
        # The select shows the card a tool's name ("NVIDIA A100-SXM4-80GB") was read as.
        gpu = gpu_names.find_gpu(data) if isinstance(data, str) else None
        return gpu.key if gpu else data


def flag(name: str) -> str:
    """A flag as a field label: the flag itself, shown as code in every language."""
    return mark_safe(f"<code>{name}</code>")  # noqa: S308 - our own constant flag names


def _int(label: Any, *, minimum: int = 1, maximum: int = 10_000_000, required: bool = False, **kw: Any):
    return forms.IntegerField(label=label, min_value=minimum, max_value=maximum, required=required, **kw)


class SizingForm(forms.Form):
    model = CatalogueField(
        label=_("Model"),
        help_text=_("From the sizing catalogue; upload a config.json to add one."),
        widget=NameSelect(names=True),
    )
    gpu = GpuField(label="GPU", widget=NameSelect(names=True))
    gpu_memory_gib = forms.FloatField(
        label=_("GPU memory (GiB)"),
        min_value=1,
        max_value=gpu_catalog.MAX_CUSTOM_MIB / 1024,
        required=False,
        help_text=_("For another GPU: its total memory per GPU."),
    )
    gpu_memory_mib = _int(
        _("or GPU memory (MiB)"),
        minimum=gpu_catalog.MIN_CUSTOM_MIB,
        maximum=gpu_catalog.MAX_CUSTOM_MIB,
        help_text=mark_safe(_("As <code>nvidia-smi</code> reports memory.total, like 81559.")),
    )
    gpus = _int(pgettext_lazy("sizing: how many", "GPUs"), maximum=64, initial=1, required=True)
    tensor_parallel_size = _int(
        flag("--tensor-parallel-size"), maximum=64, help_text=_("Blank: all GPUs of one replica.")
    )
    pipeline_parallel_size = _int(flag("--pipeline-parallel-size"), maximum=64, initial=1)
    gpu_memory_utilization = forms.FloatField(
        label=flag("--gpu-memory-utilization"),
        min_value=0.05,
        max_value=1.0,
        required=False,
        help_text=_("Blank: the version's default (0.9; 0.92 from 0.20)."),
    )
    max_model_len = _int(
        flag("--max-model-len"), minimum=16, help_text=_("Blank: the model's max_position_embeddings.")
    )
    max_num_seqs = _int(
        flag("--max-num-seqs"), maximum=65536, help_text=_("Blank: vLLM's default for the GPU.")
    )
    max_num_batched_tokens = _int(
        flag("--max-num-batched-tokens"), minimum=16, help_text=_("Blank: vLLM's default.")
    )
    dtype = forms.ChoiceField(
        label=flag("--dtype"), choices=DTYPE_CHOICES, initial="auto", required=False, widget=NameSelect
    )
    quantization = forms.ChoiceField(
        label=flag("--quantization"), choices=QUANTIZATION_CHOICES, required=False, widget=NameSelect
    )
    kv_cache_dtype = forms.ChoiceField(
        label=flag("--kv-cache-dtype"),
        choices=KV_DTYPE_CHOICES,
        initial="auto",
        required=False,
        widget=NameSelect,
    )
    block_size = forms.TypedChoiceField(
        label=flag("--block-size"),
        choices=BLOCK_CHOICES,
        coerce=int,
        empty_value=None,
        required=False,
        widget=NameSelect,
    )
    avg_prompt_tokens = _int(_("Average prompt tokens"), minimum=0, initial=1500)
    avg_output_tokens = _int(_("Average output tokens"), minimum=0, initial=500)
    vllm_version = forms.ChoiceField(
        label=_("vLLM version"),
        choices=versions.VERSION_CHOICES,
        initial=versions.DEFAULT_VERSION,
        required=False,
        widget=NameSelect,
    )
    other_used_gib = forms.FloatField(
        label=_("Memory other processes hold (GiB)"),
        min_value=0,
        max_value=1024,
        required=False,
        help_text=mark_safe(_("Per GPU, at start-up (<code>nvidia-smi</code>).")),
    )
    enforce_eager = forms.BooleanField(label=flag("--enforce-eager"), required=False)

    def __init__(
        self, *args: Any, extra: ModelSpec | None = None, specs: list[ModelSpec] | None = None, **kwargs: Any
    ) -> None:
        """`extra`: a model outside the catalogue (the CLI's --config), sized without saving.
        `specs`: the catalogue, when the caller has loaded it already (the fleet check)."""
        super().__init__(*args, **kwargs)
        self.specs = Catalogue(specs, extra=extra)
        self.fields["model"].catalogue = self.specs
        self.fields["model"].choices = self.specs.names  # called when the options are drawn

    def clean(self) -> dict[str, Any]:
        """A GPU is a catalogue card or "custom" with its memory (GiB or MiB, not both);
        memory alone means "custom"."""
        data = super().clean()
        gib, mib = data.get("gpu_memory_gib"), data.get("gpu_memory_mib")
        gpu = data.get("gpu")
        if gpu is None:  # refused by the field already
            return data
        if gib is not None and mib is not None:
            self.add_error("gpu_memory_mib", gettext("Give the memory in GiB or in MiB, not both."))
        elif gib is None and mib is None:
            if gpu in ("", gpu_catalog.CUSTOM_KEY):
                self.add_error(
                    "gpu" if not gpu else "gpu_memory_gib",
                    gettext("Choose a GPU, or give its memory."),
                )
        elif gpu not in ("", gpu_catalog.CUSTOM_KEY):
            self.add_error(
                "gpu_memory_gib",
                gettext("A listed GPU has its own memory: choose “another GPU” to give it."),
            )
        else:
            data["gpu"] = gpu_catalog.CUSTOM_KEY
        return data

    def clean_vllm_version(self) -> str:
        return self.cleaned_data.get("vllm_version") or versions.DEFAULT_VERSION

    def spec(self) -> SizingSpec:
        """The calculator's input; call after is_valid()."""
        data = self.cleaned_data
        return spec_from_values(data, arch=self.specs[data["model"]].architecture())

    def hub_id_offered(self) -> str:
        """The model typed, when the catalogue lacks it but it looks like a Hugging Face id (the
        page and the API offer to fetch it); else ""."""
        typed = str(self.data.get("model", "")).strip()
        return typed if "model" in self.errors and hub.looks_like_id(typed) else ""


def sizing_inputs(data: Mapping[str, Any]) -> dict[str, Any]:
    """The sizing page's inputs that `data` carries, blanks left out: the page's other forms
    (the Hugging Face and host cards) post them along, so that the sizing they open keeps them."""
    return {name: data[name] for name in SizingForm.base_fields if data.get(name)}


class ConfigUploadForm(forms.Form):
    """A new catalogue model from a Hugging Face config.json, pasted or uploaded."""

    name = forms.CharField(
        label=_("Name"),
        max_length=120,
        required=False,
        help_text=_("Blank: the config's _name_or_path."),
    )
    config_text = forms.CharField(
        label=_("config.json (paste)"), widget=forms.Textarea(attrs={"rows": 8}), required=False
    )
    config_file = forms.FileField(label=_("or upload config.json"), required=False)
    index_file = forms.FileField(
        label=_("model.safetensors.index.json (optional)"),
        required=False,
        help_text=_("Gives the exact weight bytes (metadata.total_size)."),
    )
    params_billions = forms.FloatField(
        label=_("Parameters (billions)"),
        min_value=0.01,
        max_value=10_000,
        required=False,
        help_text=_("Needed unless the safetensors index is given."),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        config = data.get("config_text") or _read(data.get("config_file"))
        if not config:
            raise forms.ValidationError(gettext("Paste a config.json or choose the file."))
        params = data.get("params_billions")
        try:
            self.entry = entry_from_upload(
                config_text=config,
                index_text=_read(data.get("index_file")),
                name=data.get("name", ""),
                params_total=params * 1e9 if params else None,
            )
        except ConfigError as exc:
            raise forms.ValidationError(shown(exc.args[0])) from None
        return data


def _name_input(placeholder: str) -> forms.TextInput:
    """A field for an id or a path: never translated, completed or spell-checked."""
    return forms.TextInput(
        attrs={"placeholder": placeholder, "translate": "no", "autocomplete": "off", "spellcheck": "false"}
    )


class HubFetchForm(forms.Form):
    """A model to fetch from the Hugging Face Hub (or the mirror HF_ENDPOINT names) by its id."""

    hf_id = forms.CharField(
        label=_("Hugging Face id"),
        max_length=96,
        help_text=_("owner/name, as on the model's page; its config.json is fetched once and kept."),
        widget=_name_input("Qwen/Qwen3-8B"),
    )
    refresh = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def clean_hf_id(self) -> str:
        try:
            return hub.parse_id(self.cleaned_data["hf_id"])
        except hub.HubError as exc:
            raise forms.ValidationError(shown(exc.message)) from None


class HostModelForm(forms.Form):
    """A model directory on a GPU host, to be read by the host's agent: the hosts offered are
    those whose agent is live."""

    host = forms.ChoiceField(label=_("GPU host"), widget=NameSelect(names=True))
    model_dir = forms.CharField(
        label=_("Model directory on the host"),
        max_length=1024,
        help_text=mark_safe(
            _(
                "Where <code>config.json</code> is; in a Hugging Face cache, "
                "<code>snapshots/&lt;revision&gt;/</code>."
            )
        ),
        widget=_name_input("/models/<name>"),
    )

    def __init__(self, *args: Any, hosts: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["host"].choices = [(name, name) for name in hosts]

    def clean_model_dir(self) -> str:
        value = self.cleaned_data["model_dir"].strip()
        if not value.startswith("/") or "\x00" in value:
            raise forms.ValidationError(gettext("Give an absolute path, like /models/Qwen3-8B."))
        return value.rstrip("/") or "/"


def _read(upload: Any) -> bytes | None:
    if not upload:
        return None
    if upload.size > MAX_CONFIG_BYTES:
        raise forms.ValidationError(
            gettext("%(file)s is %(size)s bytes; a real one is far under %(limit)s.")
            % {"file": upload.name, "size": f"{upload.size:,}", "limit": f"{MAX_CONFIG_BYTES:,}"}
        )
    return upload.read()
