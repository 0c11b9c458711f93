"""The sizing page, its HTMX results, sharing by URL, comparison, adding a model from a
config.json, sizing an inventory instance, the JSON API and the CLI, all agreeing."""

import io
import json
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from diagnostics.models import ModelSpec
from tests.conftest import HTMX_HEADERS
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db
SETUP = {"model": "qwen3-8b", "gpu": "l40s", "gpus": "1", "max_model_len": "32768", "vllm_version": "0.11"}


@pytest.fixture
def engineer_client(client, cast):
    client.force_login(cast.engineer)
    return client


def test_the_page_sizes_the_default_setup_with_formulas_and_a_chart(engineer_client):
    content = engineer_client.get(reverse("diagnostics:sizing")).content.decode()
    assert "Starts:" in content
    assert "2 (K, V) x 32 layers x 8 KV heads per GPU x 128 head dim x 2 B" in content
    assert 'data-figure-id="concurrency-figure"' in content and "plotly.min.js" in content
    assert 'hx-push-url="true"' in content  # inputs change the URL, so a result can be shared


def test_changing_an_input_swaps_only_the_results(engineer_client):
    response = engineer_client.get(
        reverse("diagnostics:sizing"), SETUP, HTTP_HX_TARGET="results", **HTMX_HEADERS
    )
    content = response.content.decode()
    assert content.startswith('<div id="results"') and "<form" not in content
    assert "Maximum concurrency for 32,768 tokens per request" in content


def test_a_setup_that_cannot_start_shows_vllms_error_and_the_fixes(engineer_client):
    content = engineer_client.get(
        reverse("diagnostics:sizing"), {"model": "gpt-oss-120b", "gpu": "h100-80gb", "vllm_version": "0.10"}
    ).content.decode()
    assert "Will not start" in content and "No available memory for the cache blocks." in content
    assert "--tensor-parallel-size" in content


def test_bad_inputs_are_named_and_nothing_is_sized(engineer_client):
    content = engineer_client.get(
        reverse("diagnostics:sizing"), {**SETUP, "gpus": "0", "model": "nope"}
    ).content.decode()
    assert "Check the inputs" in content and "gpus:" in content and "model:" in content


def test_viewers_cannot_use_the_tools(viewer_client):
    assert viewer_client.get(reverse("diagnostics:sizing")).status_code == 403


def test_the_comparison_puts_up_to_three_setups_side_by_side(engineer_client):
    params = {f"a-{k}": v for k, v in SETUP.items()}
    params.update({"b-model": "qwen3-8b", "b-gpu": "h100-80gb", "b-kv_cache_dtype": "fp8", "c-model": ""})
    content = engineer_client.get(reverse("diagnostics:sizing-compare"), params).content.decode()
    assert content.count('<span class="badge ok">yes</span>') == 2
    assert "— none —" in content


def test_a_pasted_config_joins_the_catalogue_and_opens_its_sizing(engineer_client):
    config = json.dumps({
        "_name_or_path": "acme/tiny-7b", "num_hidden_layers": 28, "hidden_size": 3584,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
        "max_position_embeddings": 32768,
    })  # fmt: skip
    index = SimpleUploadedFile("model.safetensors.index.json", b'{"metadata": {"total_size": 15231233024}}')
    response = engineer_client.post(
        reverse("diagnostics:sizing-upload"), {"config_text": config, "index_file": index}
    )
    assert response.status_code == 302
    spec = ModelSpec.objects.get(key="acme-tiny-7b")
    assert spec.source == "uploaded" and spec.weight_bytes == 15231233024
    assert parse_qs(urlparse(response.url).query)["model"] == ["acme-tiny-7b"]


def test_a_broken_config_upload_says_which_field_and_keeps_the_paste(engineer_client):
    broken = '{"num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "vocab_size": "many"}'
    response = engineer_client.post(reverse("diagnostics:sizing-upload"), {"config_text": broken})
    content = response.content.decode()
    assert response.status_code == 400
    assert "&#x27;vocab_size&#x27; must be a whole number" in content
    assert "&quot;vocab_size&quot;: &quot;many&quot;" in content  # the paste is still in the form


def test_size_this_instance_prefills_its_model_gpus_and_flags(engineer_client):
    host = make_host()
    gpus = [make_gpu(host, model="a100-80gb"), make_gpu(host, model="a100-80gb")]
    instance = make_instance(host, gpus=gpus, tensor_parallel_size=2, gpu_memory_utilization=0.85)
    response = engineer_client.get(reverse("diagnostics:sizing-instance", args=[instance.pk]))
    query = parse_qs(urlparse(response.url).query)
    assert query["model"] == ["qwen3-8b"] and query["gpu"] == ["a100-80gb"]
    assert query["tensor_parallel_size"] == ["2"] and query["gpus"] == ["2"]
    assert query["gpu_memory_utilization"] == ["0.85"] and query["max_model_len"] == ["32768"]
    assert query["vllm_version"] == ["0.11"]


def test_sizing_an_instance_of_an_unknown_model_says_so(engineer_client):
    instance = make_instance(make_host(), served_model_name="acme/secret-model")
    response = engineer_client.get(reverse("diagnostics:sizing-instance", args=[instance.pk]), follow=True)
    assert "is not in the sizing catalogue" in response.content.decode()


def test_the_api_gives_the_json_the_cli_prints(engineer_client):
    api = engineer_client.get(reverse("api-sizing"), SETUP).json()
    out = io.StringIO()
    call_command(
        "size", "--model", "Qwen/Qwen3-8B", "--gpu", "L40S", "--max-model-len", "32768",
        "--vllm-version", "0.11", "--json", stdout=out,
    )  # fmt: skip
    cli = json.loads(out.getvalue())
    assert api == cli
    assert cli["kv_cache_tokens"] > 0 and cli["fits"] is True and cli["error"] is None
    page = engineer_client.get(reverse("diagnostics:sizing"), SETUP).content.decode()
    assert f"{cli['kv_cache_tokens']:,}" in page


def test_the_api_takes_a_json_body_and_names_bad_inputs(engineer_client):
    ok = engineer_client.post(reverse("api-sizing"), {**SETUP, "gpus": 1}, content_type="application/json")
    assert ok.status_code == 200 and ok.json()["model"] == "Qwen3 8B"
    bad = engineer_client.post(
        reverse("api-sizing"),
        {"model": "qwen3-8b", "gpu": "l40s", "gpus": 3, "tensor_parallel_size": 5},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "needs 5 GPUs" in bad.json()["errors"]["__all__"][0]
    junk = engineer_client.post(reverse("api-sizing"), "[1]", content_type="application/json")
    assert junk.status_code == 400


def test_the_api_needs_the_engineer_role(viewer_client):
    assert viewer_client.get(reverse("api-sizing"), SETUP).status_code == 403


def test_the_cli_prints_figures_recommendations_and_sizes_a_config_file(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
        "vocab_size": 152064, "max_position_embeddings": 32768,
    }))  # fmt: skip
    out = io.StringIO()
    call_command("size", "--config", str(config), "--params-billions", "7.6", "--gpu", "a10g", stdout=out)
    text = out.getvalue()
    assert "starts" in text and "GPU KV cache size" in text and "Short chat" in text
    assert not ModelSpec.objects.filter(source="uploaded").exists()  # --config sizes without saving


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "nope", "--gpu", "l4"], "no model 'nope' in the sizing catalogue"),
        (["--model", "qwen3-8b", "--gpu", "tpu-v5"], "unknown GPU 'tpu-v5'"),
        (["--model", "qwen3-8b", "--gpu", "l4", "--gpus", "2", "--tp", "4"], "needs 4 GPUs"),
        (["--config", "/no/such/config.json", "--gpu", "l4"], "cannot read /no/such/config.json"),
        (["--model", "qwen3-8b", "--gpu", "l4", "--kv-cache-dtype", "fp4"], "kv_cache_dtype"),
    ],
)
def test_the_cli_refuses_bad_input_with_a_clear_error(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("size", *args, stdout=io.StringIO())


def test_the_api_needs_only_the_model_and_the_gpu_as_the_readme_shows(engineer_client):
    response = engineer_client.get(reverse("api-sizing"), {"model": "qwen3-8b", "gpu": "l40s"})
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["kv_cache_tokens"] > 0
    defaults = engineer_client.get(reverse("api-sizing"), {"model": "qwen3-8b", "gpu": "l40s", "gpus": "1"})
    assert defaults.json() == answer


_TINY = {
    "_name_or_path": "acme/tiny-7b", "num_hidden_layers": 28, "hidden_size": 3584,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
    "max_position_embeddings": 32768,
}  # fmt: skip


def _tiny(**fields) -> str:
    return json.dumps({**_TINY, **fields})


@pytest.mark.parametrize(
    ("config_text", "said"),
    [
        (
            json.dumps({**_TINY, "num_hidden_layers": 2**70}),
            "must be from 1 to 1,024, not 1180591620717411303424",
        ),
        (json.dumps({**_TINY, "num_hidden_layers": 10**7}), "must be from 1 to 1,024, not 10000000"),
        (json.dumps({**_TINY, "num_hidden_layers": 10**9}), "must be from 1 to 1,024, not 1000000000"),
        (
            json.dumps({**_TINY, "hidden_size": float("nan")}),
            "&#x27;hidden_size&#x27; must be a whole number",
        ),
        ("[" * 200_000 + "]" * 200_000, "config.json nests more than 32 levels deep"),
        (json.dumps(_TINY)[:-1] + ', "head_dim": ' + "9" * 5000 + "}", "is not JSON the calculator can read"),
        (json.dumps({**_TINY, "model_type": "a\u0000b"}), "holds the character U+0000"),
        (
            json.dumps(
                {**_TINY, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 10**12}}
            ),
            "expected a group size from 1 to 65,536, or -1",
        ),
    ],
)
def test_an_implausible_config_upload_is_a_form_error_naming_the_field_and_saves_nothing(
    engineer_client, config_text, said
):
    response = engineer_client.post(
        reverse("diagnostics:sizing-upload"), {"config_text": config_text, "params_billions": "7"}
    )
    assert response.status_code == 400 and said in response.content.decode()
    assert not ModelSpec.objects.filter(source="uploaded").exists()


@pytest.mark.parametrize(
    ("index", "said"),
    [
        (b'{"metadata": {"total_size": NaN}}', "&#x27;total_size&#x27; is not a size: nan"),
        (b'{"metadata": {"total_size": 1e300}}', "must be at most 1,125,899,906,842,624 bytes"),
        (b"\xff\xfe{}", "is not UTF-8 text (byte 0)"),
    ],
)
def test_an_implausible_safetensors_index_upload_is_a_form_error_and_saves_nothing(
    engineer_client, index, said
):
    upload = SimpleUploadedFile("model.safetensors.index.json", index)
    response = engineer_client.post(
        reverse("diagnostics:sizing-upload"), {"config_text": json.dumps(_TINY), "index_file": upload}
    )
    assert response.status_code == 400 and said in response.content.decode()
    assert not ModelSpec.objects.filter(source="uploaded").exists()


def test_a_config_named_at_length_joins_the_catalogue_under_a_name_cut_to_fit(engineer_client):
    config = {**_TINY, "_name_or_path": "/models/" + "very-long-" * 60}
    response = engineer_client.post(
        reverse("diagnostics:sizing-upload"), {"config_text": json.dumps(config), "params_billions": "7"}
    )
    assert response.status_code == 302
    spec = ModelSpec.objects.get(source="uploaded")
    assert len(spec.name) == 120 and spec.name.endswith("…") and spec.hf_id == ""
