"""The generator forms: each shows its own fields in fieldsets (rare ones folded under
Advanced), submitting just those renders what every field did, values it does not show
travel on from the link, and "Fill from instance" on the page agrees with the instance
page's "Launch config" link."""

from __future__ import annotations

import io
import re
import tarfile
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from diagnostics import configgen_fill
from diagnostics.configgen import launch, registry
from diagnostics.configgen_forms import inline_code, shown_names
from tests.conftest import HTMX_HEADERS
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db


class _ConfigForm(HTMLParser):
    """The names and values the config form would submit, and the fieldset legends."""

    def __init__(self, form_class: str = "config-form"):
        super().__init__()
        self.form_class, self.inside, self.values, self.legends = form_class, False, {}, []
        self._select = self._textarea = self._legend = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.inside = self.form_class in (a.get("class") or "").split()
        elif not self.inside:
            return
        elif tag == "input" and a.get("type") not in ("submit", "button"):
            self.values[a["name"]] = a.get("value") or ""
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select:
            if "selected" in a or self._select not in self.values:
                self.values[self._select] = a.get("value") or ""
        elif tag == "textarea":
            self._textarea = a["name"]
            self.values[a["name"]] = ""
        elif tag == "legend":
            self._legend = ""

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "legend" and self._legend is not None:
            self.legends.append(self._legend.strip())
            self._legend = None

    def handle_data(self, data):
        if self._textarea:
            self.values[self._textarea] += data.removeprefix("\n")
        if self._legend is not None:
            self._legend += data


def parse(content: str, form_class: str = "config-form") -> _ConfigForm:
    parser = _ConfigForm(form_class)
    parser.feed(content)
    return parser


def page(client, kind, **params):
    return client.get(reverse("diagnostics:config-generator", args=[kind]), params)


@pytest.mark.parametrize(
    "kind, own, others",
    [
        ("vllm", {"model", "max_model_len", "port", "api_key_env"}, {"namespace", "replicas", "image"}),
        ("docker", {"image", "shm_size_gib", "docker_ipc", "memory_limit_gib"}, {"namespace", "venv"}),
        ("k8s", {"namespace", "replicas", "model_pvc", "memory_request_gib"}, {"gpu_devices", "docker_ipc"}),
        ("systemd", {"service_user", "venv", "health_interval_s", "alert_webhook"}, {"namespace", "image"}),
    ],
)
def test_each_launch_form_shows_its_own_fields_and_not_the_others(engineer, kind, own, others):
    form = parse(page(engineer, kind).content.decode())
    assert own <= set(form.values)
    assert not others & set(form.values)
    assert form.values.keys() == set(shown_names(registry.get(kind)))


def test_only_the_systemd_form_has_the_watchdog_and_only_kubernetes_its_namespace(engineer):
    legends = {kind: parse(page(engineer, kind).content.decode()).legends for kind in registry.DEPLOYMENT}
    assert legends["vllm"][:3] == ["Model & engine", "GPUs", "Memory & batching"]
    assert [kind for kind, names in legends.items() if "Watchdog" in names] == ["systemd"]
    assert [kind for kind, names in legends.items() if "Kubernetes" in names] == ["k8s"]
    assert [kind for kind, names in legends.items() if "Container" in names] == ["docker"]


def test_rare_settings_are_folded_under_advanced_and_the_first_field_has_the_focus(engineer):
    content = page(engineer, "vllm").content.decode()
    advanced = content[content.index('<details class="advanced"') : content.index("</details>")]
    assert "<summary>Advanced</summary>" in advanced and 'name="enforce_eager"' in advanced
    assert 'name="max_model_len"' not in advanced and "open" not in advanced.split(">")[0]
    assert re.search(r'<input[^>]*name="model"[^>]*autofocus|<input[^>]*autofocus[^>]*name="model"', content)
    assert content.count("autofocus") == 1


def test_advanced_opens_when_one_of_its_settings_is_wrong(engineer):
    content = page(engineer, "vllm", enforce_eager="maybe").content.decode()
    assert '<details class="advanced" open>' in content and "Fix these first" in content


def test_every_shown_field_is_a_field_of_its_generator_and_shown_once():
    for generator in registry.GENERATORS.values():
        names = shown_names(generator)
        assert len(names) == len(set(names)), generator.key
        assert set(names) <= {f.name for f in generator.fields}, generator.key
        if not generator.sections:  # the others show every field, by group
            assert set(names) == {f.name for f in generator.fields}, generator.key


@pytest.mark.parametrize("kind", registry.DEPLOYMENT)
@pytest.mark.parametrize(
    "changes",
    [{}, {"max_num_seqs": "77", "tensor_parallel_size": "2", "model": "meta-llama/Llama-3.1-70B"}],
)
@pytest.mark.parametrize("preset", ["", "large_model"])
def test_submitting_only_the_forms_fields_renders_what_every_field_did(engineer, kind, changes, preset):
    generator = registry.get(kind)
    form = parse(page(engineer, kind, **({"preset": preset} if preset else {})).content.decode()).values
    if changes and "gpu_devices" in form:
        changes = changes | {"gpu_devices": "0,1"}
    form.update(changes)
    url = reverse("diagnostics:config-generator", args=[kind])
    preview = engineer.get(url, form, HTTP_HX_TARGET="preview", **HTMX_HEADERS).content.decode()
    # What the old form sent: all 42 launch fields, defaults and preset, with the same changes.
    every = generator.values({}, preset=preset) | changes
    files = generator.render(generator.spec(every))
    shown = re.findall(r'<pre id="file-\d+" class="config"[^>]*>(.*?)</pre>', preview, re.S)
    assert shown == [_escaped(f.content) for f in files]
    assert "Fix these first" not in preview


def _escaped(text: str) -> str:
    from django.utils.html import escape

    return escape(text)


def test_a_value_from_the_link_the_form_does_not_show_travels_on(engineer):
    content = page(engineer, "vllm", namespace="prod", max_num_seqs="64").content.decode()
    form = parse(content)
    assert form.values["namespace"] == "prod" and 'type="hidden" name="namespace"' in content
    assert "archive=deployment" in content and "namespace=prod" in content


def test_a_wrong_value_the_form_does_not_show_is_shown_to_be_fixed(engineer):
    content = page(engineer, "vllm", namespace="Bad_Name").content.decode()
    assert "Other settings in the link" in parse(content).legends
    assert 'id="id_namespace"' in content and 'href="#id_namespace"' in content


def test_blank_gpu_devices_mean_the_first_gpus_of_the_parallelism():
    defaults = {f.name: f.default for f in launch.LAUNCH_FIELDS}
    spec = launch.build(
        defaults | {"tensor_parallel_size": "2", "pipeline_parallel_size": "2", "gpu_devices": ""}
    )
    assert spec.gpu_devices == (0, 1, 2, 3)


def test_kubernetes_counts_gpus_so_a_device_list_never_stands_in_its_way(engineer):
    content = page(engineer, "k8s", preset="large_model", tensor_parallel_size="4").content.decode()
    assert "Fix these first" not in content and "nvidia.com/gpu: 4" in content
    url = reverse("diagnostics:config-download", args=["k8s"])
    bundle = engineer.get(url, {"archive": "deployment", "tensor_parallel_size": "4"})
    with tarfile.open(fileobj=io.BytesIO(bundle.content)) as archive:
        serve = archive.extractfile("vllm-serve.sh").read().decode()
    assert "export CUDA_VISIBLE_DEVICES=0,1,2,3" in serve and "--tensor-parallel-size 4" in serve


def test_the_instance_picker_fills_the_form_like_the_instance_pages_launch_link(engineer):
    host = make_host()
    instance = make_instance(
        host,
        gpus=[make_gpu(host, index=4), make_gpu(host, index=5)],
        name="chat-b",
        tensor_parallel_size=2,
        max_num_seqs=96,
        base_url="http://10.0.0.7:8044",
    )
    make_instance(host, name="batch-a")
    picker = parse(page(engineer, "docker").content.decode(), form_class="instance-picker")
    assert picker.values == {"from_instance": ""}
    content = page(engineer, "docker").content.decode()
    assert f'<option value="{instance.pk}"' in content and "chat-b · Qwen/Qwen3-8B" in content

    detail = engineer.get(reverse("fleet:instance-detail", args=[instance.pk])).content.decode()
    link = re.search(r'href="(/configs/vllm/\?from_instance=\d+)">Launch config', detail).group(1)
    assert link == reverse("diagnostics:config-generator", args=["vllm"]) + f"?from_instance={instance.pk}"

    filled = engineer.get(link).content.decode()
    form = parse(filled).values
    assert form["from_instance"] == str(instance.pk) and form["name"] == "chat-b"
    assert form["max_num_seqs"] == "96" and form["port"] == "8044" and form["gpu_devices"] == "4,5"
    assert f'<option value="{instance.pk}" selected>' in filled
    assert "export CUDA_VISIBLE_DEVICES=4,5" in filled and "Filled from instance chat-b." in filled


def test_the_picker_keeps_the_preset_and_an_edit_keeps_the_instance(engineer):
    instance = make_instance(make_host(), name="chat-c", max_model_len=8192)
    content = page(engineer, "k8s", preset="balanced", from_instance=instance.pk).content.decode()
    picker = parse(content, form_class="instance-picker").values
    assert picker == {"from_instance": str(instance.pk), "preset": "balanced"}
    assert f"?preset=low_latency&amp;from_instance={instance.pk}" in content
    form = parse(content).values | {"replicas": "3"}
    url = reverse("diagnostics:config-generator", args=["k8s"])
    preview = engineer.get(url, form, HTTP_HX_TARGET="preview", **HTMX_HEADERS).content.decode()
    assert "replicas: 3" in preview and "- --max-model-len\n        - &#x27;8192&#x27;" in preview


def test_the_picker_is_offered_only_where_an_instance_fills_something(engineer):
    make_instance(make_host(), name="chat-d")
    for kind, generator in registry.GENERATORS.items():
        fills = bool(configgen_fill.INSTANCE_FIELDS & {f.name for f in generator.fields})
        assert ('id="id_from_instance"' in page(engineer, kind).content.decode()) is fills, kind
    assert 'id="id_from_instance"' not in page(engineer, "nginx").content.decode()


def test_instance_fields_name_everything_an_instance_fills():
    instance = make_instance(make_host(), api_key_env="CHAT_KEY", dtype="bfloat16", quantization="fp8")
    assert set(configgen_fill.from_instance(instance)) <= configgen_fill.INSTANCE_FIELDS


def test_an_instance_that_is_not_a_number_is_not_found(engineer):
    assert page(engineer, "vllm", from_instance="x").status_code == 404


def test_backticks_in_descriptions_and_checks_show_as_code(engineer):
    index = engineer.get(reverse("diagnostics:configs")).content.decode()
    assert "<code>vllm serve</code> for a chosen version" in index and "`" not in index
    assert "<code>vllm serve</code>" in page(engineer, "vllm").content.decode()
    alerts = page(engineer, "alerts", kv_for="15s").content.decode()
    assert "<code>for</code> 15s is shorter than two scrapes" in alerts


def test_inline_code_escapes_everything_else():
    assert inline_code("`<b>` & `x`") == "<code>&lt;b&gt;</code> &amp; <code>x</code>"
    assert inline_code("a ` b <i>") == "a  b &lt;i&gt;"
