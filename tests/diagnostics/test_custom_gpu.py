"""A GPU outside the catalogue, given by its total memory (GiB, or MiB as nvidia-smi's
memory.total reports it), is sized on the page, by the CLI and by the API alike; a GPU
named as nvidia-smi prints it is read as its catalogue card everywhere."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.http import QueryDict
from django.urls import reverse

from diagnostics.forms import SizingForm
from diagnostics.sizing.spec_values import gpu_from_values
from fleet import gpu_catalog
from tests.conftest import HTMX_HEADERS

pytestmark = pytest.mark.django_db
SETUP = {"model": "qwen3-8b", "gpus": "1", "max_model_len": "32768", "vllm_version": "0.11"}


@pytest.fixture
def engineer_client(client, cast):
    client.force_login(cast.engineer)
    return client


def _form(**values):
    return SizingForm(QueryDict(mutable=True) | {**SETUP, **values})


def _size(*args):
    out = io.StringIO()
    call_command("size", "--model", "qwen3-8b", "--max-model-len", "32768", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_custom_gpu_is_the_memory_nvml_reports_and_nothing_else():
    gpu = gpu_catalog.custom(memory_mib=46068)
    assert (gpu.key, gpu.memory_mib, gpu.bandwidth_gbps, gpu.fp8) == ("custom", 46068, 0, False)
    with pytest.raises(ValueError, match="outside"):
        gpu_catalog.custom(memory_mib=12)


def test_memory_in_gib_becomes_mib_as_nvml_counts_it():
    assert gpu_from_values({"gpu": "custom", "gpu_memory_gib": 44.99}).memory_mib == 46070
    assert gpu_from_values({"gpu_memory_mib": 46068}).memory_mib == 46068
    assert gpu_from_values({"gpu": "l40s"}) is gpu_catalog.get("l40s")


def test_a_custom_gpu_of_a_catalogue_card_s_memory_sizes_like_that_card():
    custom = _size("--gpu-memory-mib", "46068")
    listed = _size("--gpu", "l40s")
    assert custom["gpu"] == "custom" and custom["gpu_memory_mib"] == 46068
    assert custom["figures"] == listed["figures"]
    assert custom["fits"] == listed["fits"]


def test_the_cli_takes_gpu_custom_with_the_memory_in_gib():
    result = _size("--gpu", "custom", "--gpu-memory-gib", "96")
    assert result["gpu_memory_mib"] == 96 * 1024
    device = next(f for f in result["figures"] if f["key"] == "device_total")
    assert device["formula"].startswith("98,304 MiB (NVML total)")


def test_the_cli_prints_the_custom_gpu_by_its_memory():
    out = io.StringIO()
    call_command("size", "--model", "qwen3-8b", "--gpu-memory-mib", "24576", stdout=out)
    assert "on 1 x GPU of 24,576 MiB" in out.getvalue()


def test_the_cli_reads_a_gpu_as_nvidia_smi_prints_it():
    assert _size("--gpu", "NVIDIA H100 80GB HBM3")["gpu"] == "h100-80gb"
    assert _size("--gpu", "NVIDIA A100-SXM4-40GB")["gpu"] == "a100-40gb"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gpu", "NVIDIA H10"], r"unknown GPU 'NVIDIA H10'; close matches: .*h100-80gb"),
        (["--gpu", "A100"], r"unknown GPU 'A100'; close matches: a100-40gb, a100-80gb"),
        (["--gpu", "l40s", "--gpu-memory-gib", "48"], "has its own memory; use --gpu custom"),
        (["--gpu", "custom"], "give --gpu NAME, or the GPU's memory"),
        ([], "give --gpu NAME, or the GPU's memory"),
        (["--gpu-memory-gib", "0.5"], "gpu_memory_gib"),
        (["--gpu-memory-mib", "99999999"], "gpu_memory_mib"),
    ],
)
def test_the_cli_refuses_a_gpu_it_cannot_size_with_a_clear_error(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("size", "--model", "qwen3-8b", *args, stdout=io.StringIO())


def test_the_form_cleans_a_tool_s_name_to_the_catalogue_key_and_shows_it_selected():
    form = _form(gpu="NVIDIA GeForce RTX 4090 D")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["gpu"] == "rtx-4090d"
    assert 'value="rtx-4090d" selected' in str(form["gpu"])


@pytest.mark.parametrize(
    "values, field, message",
    [
        ({"gpu": "tpu-v5"}, "gpu", "unknown GPU 'tpu-v5'"),
        ({"gpu": "custom"}, "gpu_memory_gib", "Choose a GPU, or give its memory."),
        ({}, "gpu", "Choose a GPU, or give its memory."),
        ({"gpu": "l40s", "gpu_memory_gib": "48"}, "gpu_memory_gib", "A listed GPU has its own memory"),
        ({"gpu_memory_gib": "48", "gpu_memory_mib": "49152"}, "gpu_memory_mib", "not both"),
        ({"gpu": "x" * 5000}, "gpu", "unknown GPU"),
    ],
)
def test_the_form_says_what_is_wrong_with_the_gpu(values, field, message):
    form = _form(**values)
    assert not form.is_valid()
    assert message in " ".join(form.errors[field])


def test_memory_alone_means_a_custom_gpu():
    form = _form(gpu_memory_gib="80")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["gpu"] == "custom"
    assert form.spec().gpu.memory_mib == 81920


def test_the_page_sizes_a_custom_gpu_and_offers_it_in_the_gpu_list(engineer_client):
    query = {**SETUP, "gpu": "custom", "gpu_memory_mib": "97871"}
    response = engineer_client.get(reverse("diagnostics:sizing"), query, headers=HTMX_HEADERS)
    content = response.content.decode()
    assert "97,871 MiB (NVML total)" in content
    page = engineer_client.get(reverse("diagnostics:sizing"), query).content.decode()
    assert 'value="custom"' in page and 'name="gpu_memory_gib"' in page
    assert "gpu_model=custom" not in content  # the launch generator knows catalogue GPUs only


def test_the_api_sizes_a_custom_gpu_posted_as_json(engineer_client):
    payload = {"model": "qwen3-8b", "gpu_memory_gib": 141, "max_model_len": 32768}
    response = engineer_client.post(reverse("api-sizing"), payload, content_type="application/json")
    assert response.status_code == 200, response.json()
    assert response.json()["gpu"] == "custom"
    assert response.json()["gpu_memory_mib"] == 141 * 1024


def test_the_api_reads_a_gpu_as_nvidia_smi_prints_it(engineer_client):
    query = {"model": "qwen3-8b", "gpu": "Tesla V100-SXM2-32GB"}
    response = engineer_client.get(reverse("api-sizing"), query)
    assert response.status_code == 200, response.json()
    assert response.json()["gpu"] == "v100-32gb"


def test_the_api_refuses_an_unknown_gpu_with_close_matches(engineer_client):
    response = engineer_client.get(reverse("api-sizing"), {"model": "qwen3-8b", "gpu": "NVIDIA A100"})
    assert response.status_code == 400
    assert "close matches: a100-40gb, a100-80gb" in response.json()["errors"]["gpu"][0]
