"""The model catalogue: shipped data for 20+ models, in the database after migrate,
editable in the admin, and new models from a config.json with errors that name the field."""

import json

import pytest
from django.core.exceptions import ValidationError

from diagnostics.models import ModelSpec
from diagnostics.sizing import catalog
from diagnostics.sizing.architecture import ConfigError, LayerKind

LLAMA = json.dumps({
    "_name_or_path": "acme/Llama-ish-8B", "num_hidden_layers": 32, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 8192,
})  # fmt: skip


def test_the_shipped_catalogue_covers_the_popular_families_with_every_layer_kind():
    entries = catalog.shipped()
    assert len(entries) >= 20
    families = {e.family for e in entries}
    for family in (
        "Llama 3",
        "Qwen 2.5",
        "Qwen 3",
        "Mistral",
        "Mixtral",
        "Gemma 2",
        "Gemma 3",
        "DeepSeek V3",
        "Phi",
        "gpt-oss",
    ):
        assert any(f.startswith(family) for f in families), family
    kinds = {kind for e in entries for kind in e.architecture().layer_kinds}
    assert kinds == set(LayerKind)
    assert any(e.architecture().is_moe for e in entries)


def test_a_served_model_name_finds_its_entry_by_id_alias_or_local_path():
    entries = catalog.shipped()
    assert catalog.find("Qwen/Qwen3-8B", entries).key == "qwen3-8b"
    assert catalog.find("/models/Qwen3-8B/", entries).key == "qwen3-8b"
    assert catalog.find("META-LLAMA/LLAMA-3.1-8B-INSTRUCT", entries).key == "llama-3.1-8b-instruct"
    assert catalog.find("no-such-model", entries) is None


@pytest.mark.django_db
def test_migrate_puts_the_shipped_catalogue_in_the_database():
    assert ModelSpec.objects.filter(source="shipped").count() == len(catalog.shipped())
    assert ModelSpec.objects.get(key="gpt-oss-20b").architecture().count(LayerKind.SLIDING) == 12


@pytest.mark.django_db
def test_an_admin_edit_that_breaks_the_config_is_refused_naming_the_field():
    spec = ModelSpec.objects.get(key="qwen3-8b")
    spec.config = {**spec.config, "num_key_value_heads": "eight"}
    with pytest.raises(ValidationError, match="num_key_value_heads"):
        spec.full_clean()


def test_an_uploaded_config_becomes_an_entry_and_an_index_gives_exact_weights():
    index = json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}})
    entry = catalog.entry_from_upload(config_text=LLAMA, index_text=index)
    assert entry.key == "acme-llama-ish-8b" and entry.weight_bytes == 16_060_522_496
    assert entry.architecture().num_kv_heads == 8


@pytest.mark.parametrize(
    "config, index, message",
    [
        ("{not json", None, "config.json is not valid JSON: .* at line 1, column 2"),
        ("[1, 2]", None, "config.json must be a JSON object"),
        (LLAMA.replace('"num_hidden_layers": 32, ', ""), None, "no 'num_hidden_layers'"),
        (
            LLAMA.replace('"num_key_value_heads": 8', '"num_key_value_heads": 7'),
            None,
            "not a multiple of num_key_value_heads 7",
        ),
        (LLAMA.replace("4096", '"big"'), None, "'hidden_size' must be a whole number"),
        (LLAMA, '{"metadata": {}}', "metadata 'total_size' is not a size"),
        (LLAMA, None, "give the parameter count or a safetensors index"),
        (b"\xff\xfe{", None, "not UTF-8"),
    ],
)
def test_a_config_the_calculator_cannot_use_gives_an_error_naming_the_field(config, index, message):
    with pytest.raises(ConfigError, match=message):
        catalog.entry_from_upload(config_text=config, index_text=index)


def test_a_huge_upload_is_refused_before_parsing():
    with pytest.raises(ConfigError, match="far under"):
        catalog.entry_from_upload(config_text="{" + " " * 2_000_000 + "}")


NEW_ENTRIES = (
    "qwen3.5-35b-a3b-fp8", "qwen3.5-35b-a3b", "qwen3.5-27b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b",
    "qwen3.6-35b-a3b-nvfp4", "qwen3-32b-fp8", "qwen3-30b-a3b-fp8", "qwen3-235b-a22b-fp8",
    "qwen3-235b-a22b-nvfp4", "llama-3.1-70b-instruct-fp8", "kimi-k2-instruct",
    "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct", "deepseek-r1", "deepseek-v3.2",
    "minimax-m2.5", "glm-5-fp8", "qwen3-coder-480b-a35b-instruct",
)  # fmt: skip


@pytest.mark.parametrize("key", NEW_ENTRIES)
def test_every_new_entry_parses_and_cites_a_published_config(key):
    entry = next(e for e in catalog.shipped() if e.key == key)
    arch = entry.architecture()
    assert arch.num_layers > 0 and entry.params_total
    assert any(s.startswith("https://") for s in entry.sources)
    if "quantization_config" in json.dumps(entry.config):
        assert arch.quantization and arch.weight_bytes_estimate


@pytest.mark.parametrize(
    "typed, key",
    [
        ("qwen3.5-35b-a3b-fp8", "qwen3.5-35b-a3b-fp8"),
        ("Qwen/Qwen3.5-35B-A3B-FP8", "qwen3.5-35b-a3b-fp8"),
        ("/models/Qwen3.5-35B-A3B-FP8/", "qwen3.5-35b-a3b-fp8"),
        ("Qwen/Qwen3.5-35B-A3B", "qwen3.5-35b-a3b"),
        ("nvidia/Qwen3.6-35B-A3B-NVFP4", "qwen3.6-35b-a3b-nvfp4"),
        ("Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b-fp8"),
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2-instruct"),
        ("llama4:scout", "llama-4-scout-17b-16e-instruct"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick-17b-128e-instruct"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-r1"),
        ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"),
        ("zai-org/GLM-5-FP8", "glm-5-fp8"),
    ],
)
def test_the_names_users_type_find_the_new_entries(typed, key):
    assert catalog.find(typed, catalog.shipped()).key == key


def test_the_guides_fp8_checkpoint_is_sized_from_its_own_quantization_config():
    arch = catalog.find("qwen3.5-35b-a3b-fp8", catalog.shipped()).architecture()
    assert arch.quantization == "fp8" and "128x128" in arch.quant_detail
    assert arch.count(LayerKind.LINEAR) == 30 and arch.count(LayerKind.FULL) == 10
    bf16 = catalog.find("qwen3.5-35b-a3b", catalog.shipped()).architecture()
    # Over half the BF16 size: embeddings, head, norms, DeltaNet gates and the vision tower stay BF16.
    assert 0.5 < arch.weight_bytes_estimate / (bf16.params_total * 2) < 0.56


def test_llama_4s_chunked_attention_is_noted_not_guessed():
    arch = catalog.find("llama4:scout", catalog.shipped()).architecture()
    assert arch.count(LayerKind.FULL) == 48 and "chunked local attention" in arch.notes[0]
