"""Model forms for the inventory pages. Lists are typed as comma-separated text."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from fleet import inventory_io, sharing
from fleet.models import Gateway, Gpu, GpuHost, Instance


class CommaListField(forms.CharField):
    def __init__(self, *, item_type: type = str, **kwargs):
        self.item_type = item_type
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value) -> list:
        text = super().to_python(value) or ""
        items = [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]
        try:
            return [self.item_type(item) for item in items]
        except ValueError:
            raise ValidationError(
                _("Enter a comma-separated list of numbers."), code="invalid_list"
            ) from None


class HostForm(forms.ModelForm):
    tags = CommaListField(label=_("Tags"), help_text=_("Comma-separated, like prod, a100, team-search."))

    class Meta:
        model = GpuHost
        fields = GpuHost.EDITABLE_FIELDS
        widgets = {"notes": forms.Textarea(attrs={"rows": 3, "translate": "no"})}
        # Fields whose model has no verbose name of its own (a label there would be a migration).
        labels = {
            "name": _("Name"),
            "address": _("Address"),
            "datacenter": _("Datacenter"),
            "rack": _("Rack"),
            "driver_version": _("Driver version"),
            "notes": _("Notes"),
        }


class GpuForm(forms.ModelForm):
    nvlink_peers = CommaListField(
        item_type=int,
        label=_("NVLink peers"),
        help_text=_("Indexes of the GPUs this one has NVLink to, like 1, 2, 3."),
    )

    class Meta:
        model = Gpu
        fields = Gpu.EDITABLE_FIELDS
        labels = {
            "host": _("Host"),
            "index": _("Index"),
            "model": pgettext_lazy("GPU", "Model"),
            "form_factor": _("Form factor"),
        }
        widgets = {"model": forms.Select(attrs={"translate": "no"})}  # product names

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["memory_mib"].required = False


class InstanceForm(forms.ModelForm):
    allow_shared = forms.BooleanField(
        required=False,
        label=_("Save anyway (shared on purpose)"),
        help_text=_("Another instance serves the same base URL or uses the same GPUs, and that is intended."),
    )
    # What saving would newly share; the form offers allow_shared only when there is some.
    new_sharing = sharing.Sharing()

    class Meta:
        model = Instance
        fields = Instance.EDITABLE_FIELDS
        widgets = {
            "gpus": forms.SelectMultiple(attrs={"size": 6}),
            "extra_args": forms.Textarea(attrs={"rows": 2, "translate": "no"}),
            "gpu_memory_utilization": forms.NumberInput(attrs={"step": "0.01"}),
            # The options are the flags' own values (auto, bfloat16, fp8...): identifiers.
            "dtype": forms.Select(attrs={"translate": "no"}),
            "quantization": forms.Select(attrs={"translate": "no"}),
            "kv_cache_dtype": forms.Select(attrs={"translate": "no"}),
        }

        labels = {
            "name": _("Name"),
            "host": _("Host"),
            "engine": _("Engine"),
            "engine_version": _("Engine version"),
            "served_model_name": _("Served model name"),
            "enabled": _("Enabled"),
            "tensor_parallel_size": _("Tensor parallel size (--tensor-parallel-size)"),
            "pipeline_parallel_size": _("Pipeline parallel size (--pipeline-parallel-size)"),
            "max_model_len": _("Max model length (--max-model-len)"),
            "gpu_memory_utilization": _("GPU memory utilization (--gpu-memory-utilization)"),
            "max_num_seqs": _("Max sequences (--max-num-seqs)"),
            "max_num_batched_tokens": _("Max batched tokens (--max-num-batched-tokens)"),
            "dtype": _("dtype (--dtype)"),
            "quantization": _("Quantization (--quantization)"),
            "kv_cache_dtype": _("KV cache dtype (--kv-cache-dtype)"),
            "enable_prefix_caching": _("Prefix caching"),
            "extra_args": _("Extra args"),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Only the chosen host's GPUs; inline validation re-renders this list when the host changes.
        host_id = (
            self.data.get("host") if self.is_bound else (self.initial.get("host") or self.instance.host_id)
        )
        try:
            gpus = Gpu.objects.filter(host_id=int(host_id))
        except (TypeError, ValueError):
            gpus = Gpu.objects.none()
        self.fields["gpus"].queryset = gpus.select_related("host")
        self.fields["gpus"].help_text = (
            _("As many as tensor x pipeline parallel size.") if host_id else _("Choose the host first.")
        )

    def _post_clean(self):
        # The GPU rules need the instance's host, which ModelForm sets only here.
        super()._post_clean()
        gpus = list(self.cleaned_data.get("gpus") or [])
        if gpus and self.instance.host_id:
            try:
                self.instance.clean_gpus(gpus)
            except ValidationError as exc:
                self._update_errors(exc)
        self._refuse_new_sharing(gpus)

    def _refuse_new_sharing(self, gpus: list[Gpu]) -> None:
        """Name the instances this one would newly share a base URL or a GPU with; refuse
        unless allow_shared is ticked. `new_sharing` tells the template to offer the box."""
        base_url = "" if self.has_error("base_url") else self.instance.base_url
        if self.has_error("gpus"):
            gpus = []
        after = sharing.sharing_of(base_url=base_url, gpus=gpus, exclude_pk=self.instance.pk)
        before = sharing.sharing_by_instance([self._saved()])[self.instance.pk] if self.instance.pk else None
        self.new_sharing = sharing.added_sharing(before=before, after=after) if before else after
        if not self.new_sharing or self.cleaned_data.get("allow_shared"):
            return
        for field, messages in sharing.conflict_messages(self.new_sharing).items():
            self.add_error(field, messages)
        self.add_error(None, _("Tick “Save anyway (shared on purpose)” below to save it shared."))

    def _saved(self) -> Instance:
        # self.instance already holds the edited values; the sharing it had is the stored row's.
        return Instance.objects.get(pk=self.instance.pk)


class GatewayForm(forms.ModelForm):
    class Meta:
        model = Gateway
        fields = Gateway.EDITABLE_FIELDS
        widgets = {
            "kind": forms.Select(attrs={"translate": "no"}),  # product names
            "instances": forms.SelectMultiple(attrs={"size": 6}),
            "notes": forms.Textarea(attrs={"rows": 3, "translate": "no"}),
        }
        labels = {"name": _("Name"), "kind": _("Kind"), "instances": _("Instances"), "notes": _("Notes")}


class ImportForm(forms.Form):
    MAX_BYTES = 5 * 1024 * 1024

    file = forms.FileField(
        required=False, label=_("File"), help_text=_("A .yaml, .yml or .csv inventory file.")
    )
    text = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false", "translate": "no"}),
        label=_("Or paste"),
        help_text=_("YAML or CSV, as exported."),
    )
    format = forms.ChoiceField(
        choices=[("auto", _("Detect")), ("yaml", "YAML"), ("csv", "CSV")], initial="auto", label=_("Format")
    )

    def clean(self):
        cleaned = super().clean()
        upload = cleaned.get("file")
        if upload:
            if upload.size > self.MAX_BYTES:
                raise ValidationError(_("The file is larger than 5 MB."))
            try:
                cleaned["text"] = inventory_io.text_of(upload.read())
            except inventory_io.UnreadableFile as exc:
                raise ValidationError(str(exc)) from None
            cleaned["filename"] = upload.name
        elif not (cleaned.get("text") or "").strip():
            raise ValidationError(_("Choose a file or paste the inventory."))
        return cleaned
