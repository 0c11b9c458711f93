"""Fetching a model's sizing facts from the Hugging Face Hub (or a mirror) by its id, against a
real local hub server: weights exact from the safetensors index or the single file's size, the
quantization carried through, and every way it can fail told apart, none of them retried."""

import pytest

from diagnostics.sizing import hub
from diagnostics.sizing.architecture import LayerKind
from diagnostics.sizing.hub import HubError, Problem
from tests.diagnostics.hub_server import COMMIT, closed_port_url, serving

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 16,
    "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
    "vocab_size": 128256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip
SINGLE_FILE_BYTES = 2_471_645_608
INDEX = {"metadata": {"total_size": 16_060_522_496}, "weight_map": {"lm_head.weight": "model-4.safetensors"}}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


@pytest.fixture
def hub_server(monkeypatch, tmp_path):
    yield from serving(monkeypatch, tmp_path)


def fetch(server, hf_id, **kwargs):
    return hub.fetch(hf_id, endpoint=server.url, timeout=kwargs.pop("timeout", 5), **kwargs)


def failure(server, hf_id, **kwargs) -> HubError:
    with pytest.raises(HubError) as caught:
        fetch(server, hf_id, **kwargs)
    return caught.value


def test_a_plain_model_is_sized_by_its_config_and_the_size_of_its_safetensors_file(hub_server):
    hub_server.add("acme/plain-1b", config=CONFIG, large={"model.safetensors": SINGLE_FILE_BYTES})
    entry = fetch(hub_server, "acme/plain-1b")
    assert entry.hf_id == entry.name == "acme/plain-1b" and entry.key == "acme-plain-1b"
    assert entry.weight_bytes == SINGLE_FILE_BYTES  # from X-Linked-Size: the file is not downloaded
    arch = entry.architecture()
    assert arch.num_layers == 16 and arch.num_kv_heads == 8 and arch.head_dim == 64
    assert set(arch.layer_kinds) == {LayerKind.FULL}
    assert entry.sources == (f"{hub_server.url}/acme/plain-1b/resolve/{COMMIT}/config.json",)
    assert [(seen.method, seen.path) for seen in hub_server.requests] == [
        ("GET", "/acme/plain-1b/resolve/main/config.json"),
        ("GET", f"/acme/plain-1b/resolve/{COMMIT}/model.safetensors.index.json"),  # the same commit
        ("HEAD", f"/acme/plain-1b/resolve/{COMMIT}/model.safetensors"),
    ]


def test_a_sharded_model_gets_its_exact_weight_bytes_from_the_safetensors_index(hub_server):
    hub_server.add("acme/sharded-8b", config=CONFIG, index=INDEX, large={"model.safetensors": 1})
    entry = fetch(hub_server, "acme/sharded-8b")
    assert entry.weight_bytes == 16_060_522_496
    index_url = f"{hub_server.url}/acme/sharded-8b/resolve/{COMMIT}/model.safetensors.index.json"
    assert entry.sources[1] == index_url
    assert not [seen for seen in hub_server.requests if seen.method == "HEAD"]


def test_a_quantized_models_quantization_config_is_carried_through(hub_server):
    hub_server.add("acme/tiny-awq", config={**CONFIG, "quantization_config": AWQ}, index=INDEX)
    entry = fetch(hub_server, "acme/tiny-awq")
    assert entry.config["quantization_config"] == AWQ
    assert entry.architecture().quantization == "awq"


def test_a_revision_other_than_main_is_asked_for_by_name(hub_server):
    hub_server.add("acme/plain-1b", config=CONFIG, index=INDEX)
    assert fetch(hub_server, "acme/plain-1b", revision=COMMIT).weight_bytes == INDEX["metadata"]["total_size"]
    error = failure(hub_server, "acme/plain-1b", revision="v9")
    assert error.problem == Problem.NOT_FOUND and "has no revision 'v9'" in str(error)


def test_a_model_without_safetensors_needs_its_parameter_count(hub_server):
    hub_server.add("acme/bin-only", config=CONFIG)
    error = failure(hub_server, "acme/bin-only")
    assert error.problem == Problem.NO_WEIGHTS and error.offers_upload
    assert "neither model.safetensors.index.json nor model.safetensors" in str(error)
    assert fetch(hub_server, "acme/bin-only", params_total=1.24e9).architecture().params_total == 1.24e9


@pytest.mark.parametrize("hf_id", ["gpt2", "acme/models/x", "acme/bad--name", "../etc/passwd", "acme/ x", ""])
def test_an_id_not_in_owner_name_form_is_refused_before_any_request(hub_server, hf_id):
    error = failure(hub_server, hf_id)
    assert error.problem == Problem.INVALID_ID and "give it as owner/name" in str(error)
    assert hub_server.requests == []


def test_a_repository_the_hub_does_not_have_is_not_found(hub_server):
    error = failure(hub_server, "acme/nothing-here", token="hf_reader")
    assert error.problem == Problem.NOT_FOUND
    assert str(error) == f"{hub_server.url} has no model acme/nothing-here (HTTP 404): check the id"


def test_without_a_token_a_missing_repository_may_be_private_so_hf_token_is_named(hub_server):
    error = failure(hub_server, "acme/nothing-here")
    assert error.problem == Problem.NEEDS_TOKEN
    assert "private or does not exist (HTTP 401 without a token)" in str(error) and "HF_TOKEN" in str(error)


def test_a_repository_without_config_json_is_no_model_the_calculator_can_size(hub_server):
    hub_server.add("acme/gguf-only")
    error = failure(hub_server, "acme/gguf-only")
    assert error.problem == Problem.NOT_FOUND and "acme/gguf-only has no config.json" in str(error)


def test_a_gated_model_without_a_token_says_to_accept_the_licence_and_set_hf_token(hub_server):
    hub_server.add("acme/gated-8b", config=CONFIG, index=INDEX, gated_token="hf_granted")
    error = failure(hub_server, "acme/gated-8b")
    assert error.problem == Problem.NEEDS_TOKEN and not error.offers_upload
    assert f"accept its licence at {hub_server.url}/acme/gated-8b, then set HF_TOKEN" in str(error)
    assert "(HTTP 401 without a token)" in str(error)
    assert hub_server.requests[0].authorization is None


def test_a_gated_model_with_a_token_without_access_says_the_token_has_none(hub_server):
    hub_server.add("acme/gated-8b", config=CONFIG, index=INDEX, gated_token="hf_granted")
    error = failure(hub_server, "acme/gated-8b", token="hf_someone_else")
    assert error.problem == Problem.NO_ACCESS
    assert "the token in HF_TOKEN has no access (HTTP 403)" in str(error)
    assert hub_server.requests[0].authorization == "Bearer hf_someone_else"


def test_the_token_reaches_the_hub_as_a_bearer_token_on_every_request(hub_server):
    hub_server.add("acme/gated-1b", config=CONFIG, large={"model.safetensors": 5}, gated_token="hf_granted")
    entry = fetch(hub_server, "acme/gated-1b", token="hf_granted")
    assert entry.weight_bytes == 5
    assert {seen.authorization for seen in hub_server.requests} == {"Bearer hf_granted"}
    assert len(hub_server.requests) == 3


def test_a_hub_that_hangs_is_given_up_at_the_timeout_without_retrying(hub_server):
    hub_server.add("acme/plain-1b", config=CONFIG, index=INDEX)
    hub_server.hang = True
    error = failure(hub_server, "acme/plain-1b", timeout=0.5)
    assert error.problem == Problem.TIMEOUT and error.offers_upload
    assert str(error).startswith(f"{hub_server.url} did not answer within 0.5 s")
    assert "Upload the model's config.json instead" in str(error)
    assert len(hub_server.requests) == 1  # no retry


def test_an_unreachable_hub_says_the_console_is_offline_and_offers_the_upload():
    endpoint = closed_port_url()
    with pytest.raises(HubError) as caught:
        hub.fetch("acme/plain-1b", endpoint=endpoint, timeout=5)
    error = caught.value
    assert error.problem == Problem.UNREACHABLE and error.offers_upload
    assert str(error).startswith(f"Cannot reach {endpoint} (")
    assert "the console is offline or the hub is blocked" in str(error) and "HF_ENDPOINT" in str(error)


def test_a_hub_error_is_told_apart_from_a_missing_model(hub_server):
    hub_server.status_override = 503
    error = failure(hub_server, "acme/plain-1b")
    assert error.problem == Problem.HUB_ERROR and "answered HTTP 503 for config.json" in str(error)
    assert len(hub_server.requests) == 1


@pytest.mark.parametrize(
    "body, problem",
    [
        (b"<html><body>Please sign in to the proxy</body></html>", "config.json is not valid JSON"),
        (b"[1, 2, 3]", "config.json must be a JSON object"),
        (b'{"hidden_size": 2048}', "config.json has no 'num_hidden_layers'"),
        (b'{"num_hidden_layers": "16"}', "'num_hidden_layers' must be a whole number"),
        (b" " * 1_000_001, "config.json is 1,000,001 bytes"),
    ],
)
def test_an_answer_that_is_no_config_is_refused_naming_the_file_and_field(hub_server, body, problem):
    hub_server.add("acme/garbage", config=body, index=INDEX)
    error = failure(hub_server, "acme/garbage")
    assert error.problem == Problem.NOT_A_CONFIG and not error.offers_upload
    assert f"{hub_server.url}/acme/garbage/resolve/{COMMIT}/config.json is not a config" in str(error)
    assert problem in str(error)
    assert len(hub_server.requests) == 1  # nothing more is asked of a hub whose config is refused


def test_a_broken_safetensors_index_is_refused_naming_it(hub_server):
    hub_server.add("acme/bad-index", config=CONFIG, index={"metadata": {"total_size": "lots"}})
    error = failure(hub_server, "acme/bad-index")
    assert error.problem == Problem.NOT_A_CONFIG
    assert "metadata 'total_size' is not a size: 'lots'" in str(error)


@pytest.mark.parametrize(
    "name, expected",
    [("Qwen/Qwen3-8B", True), ("meta-llama/Llama-3.1-8B-Instruct", True), ("qwen3-8b", False),
     ("/models/qwen3-8b", False), ("a/b/c", False), ("org/na me", False)],
)  # fmt: skip
def test_a_served_model_name_looks_like_a_hub_id_only_in_owner_name_form(name, expected):
    assert hub.looks_like_id(name) is expected


@pytest.mark.parametrize("size", [-5, 2**60])
def test_a_single_file_size_no_model_has_is_refused_naming_it(hub_server, size):
    hub_server.add("acme/odd-size", config=CONFIG, large={"model.safetensors": size})
    error = failure(hub_server, "acme/odd-size")
    assert error.problem == Problem.NOT_A_CONFIG
    assert f"model.safetensors has a size of {size} bytes, which no model has" in str(error)


def test_a_safetensors_index_total_no_model_has_is_refused_naming_it(hub_server):
    hub_server.add("acme/huge-index", config=CONFIG, index={"metadata": {"total_size": 2**60}})
    error = failure(hub_server, "acme/huge-index")
    assert error.problem == Problem.NOT_A_CONFIG
    assert (
        "metadata 'total_size' must be at most 1,125,899,906,842,624 bytes, not 1152921504606846976"
        in str(error)
    )
