"""Every number the sizing readers take from a model's files has a plausible range: a value
outside it, or of the wrong kind, is refused at once with the field and the range named; every
real model (the catalogue, the research configs) sits inside."""

import json
import tracemalloc
from pathlib import Path

import pytest

from diagnostics.sizing import bounds, catalog, quantization
from diagnostics.sizing.architecture import ConfigError, from_hf_config, weight_bytes_from_index
from tests.hang import ends

RESEARCH = Path(catalog.__file__).parent / "research"
LLAMA = {
    "_name_or_path": "acme/Llama-ish-8B", "num_hidden_layers": 32, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 8192, "intermediate_size": 14336,
}  # fmt: skip


def _refusal(config: dict) -> str:
    with pytest.raises(ConfigError) as refused:
        ends(from_hf_config, config)
    return str(refused.value)


def _real_configs() -> list[tuple[str, dict]]:
    found = [(entry.key, entry.config) for entry in catalog.shipped()]
    found += [
        (path.name, json.loads(path.read_text())) for path in sorted((RESEARCH / "configs").glob("*.json"))
    ]
    found += [(c["hf_id"], c) for c in json.loads((RESEARCH / "model_configs.json").read_text())]
    return found


@pytest.mark.parametrize(("name", "config"), _real_configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_real_model_s_numbers_sit_inside_their_ranges(name, config):
    bounds.check_config(config)
    bounds.check_tree(config, what="config.json")


def test_every_shipped_model_still_reads():
    for entry in catalog.shipped():
        assert entry.architecture().num_layers <= 94


@pytest.mark.parametrize("layers", [2**70, 10**7, 10**9])
def test_an_absurd_layer_count_is_refused_naming_the_field_before_anything_is_built(layers):
    tracemalloc.start()
    try:
        message = _refusal({**LLAMA, "num_hidden_layers": layers})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == f"config.json 'num_hidden_layers' must be from 1 to 1,024, not {layers}"
    assert peak < 1 << 20  # a refusal, not millions of layers


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("hidden_size", 2**70, "'hidden_size' must be from 1 to 1,048,576, not 1180591620717411303424"),
        ("num_attention_heads", -32, "'num_attention_heads' must be from 1 to 4,096, not -32"),
        ("num_key_value_heads", 0, "'num_key_value_heads' must be from 1 to 4,096, not 0"),
        ("head_dim", 1 << 20, "'head_dim' must be from 1 to 4,096, not 1048576"),
        ("vocab_size", 10**12, "'vocab_size' must be from 1 to 8,388,608, not 1000000000000"),
        ("intermediate_size", 2**40, "'intermediate_size' must be from 1 to 1,048,576"),
        ("max_position_embeddings", 2**40, "'max_position_embeddings' must be from 1 to 268,435,456"),
        ("sliding_window", 0, "'sliding_window' must be from 1 to 268,435,456, not 0"),
        ("num_experts", 10**6, "'num_experts' must be from 1 to 16,384"),
        ("num_nextn_predict_layers", 10**6, "'num_nextn_predict_layers' must be from 0 to 64"),
        ("interleave_moe_layer_step", 0, "'interleave_moe_layer_step' must be from 1 to 1,024, not 0"),
        ("num_hidden_layers", True, "'num_hidden_layers' must be a whole number, not True"),
        ("num_hidden_layers", 32.0, "'num_hidden_layers' must be a whole number, not 32.0"),
        ("hidden_size", float("nan"), "'hidden_size' must be a whole number, not nan"),
        ("hidden_size", float("inf"), "'hidden_size' must be a whole number, not inf"),
        ("vocab_size", "many", "'vocab_size' must be a whole number, not 'many'"),
        ("mlp_only_layers", 5, "'mlp_only_layers' must be a list of layer numbers"),
        ("mlp_only_layers", [1, 5000], "'mlp_only_layers' must be from 0 to 1,023, not 5000"),
    ],
)
def test_a_number_out_of_its_range_or_of_the_wrong_kind_is_refused_naming_field_and_range(
    field, value, expected
):
    assert expected in _refusal({**LLAMA, field: value})


def test_the_text_and_vision_parts_of_a_multimodal_config_are_bounded_too():
    assert "'text_config.hidden_size' must be from 1" in _refusal(
        {**LLAMA, "text_config": {"hidden_size": -1}}
    )
    vision = {"depth": 2**200, "hidden_size": 1152}
    assert "'vision_config.depth' must be from 0 to 1,024" in _refusal({**LLAMA, "vision_config": vision})


def test_a_long_value_is_quoted_cut_short():
    message = _refusal({**LLAMA, "vocab_size": "x" * 10_000})
    assert message == "config.json 'vocab_size' must be a whole number, not '" + "x" * 38 + "…"


@pytest.mark.parametrize(
    ("total", "expected"),
    [
        (float("nan"), "'total_size' is not a size: nan"),
        (float("inf"), "'total_size' is not a size: inf"),
        (True, "'total_size' is not a size: True"),
        (-5, "'total_size' is not a size: -5"),
        (2**200, "'total_size' must be at most 1,125,899,906,842,624 bytes"),
        (1e300, "'total_size' must be at most 1,125,899,906,842,624 bytes, not 1e+300"),
    ],
)
def test_a_safetensors_index_total_that_is_no_plausible_size_is_refused(total, expected):
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace("+", r"\+")):
        weight_bytes_from_index({"metadata": {"total_size": total}})


def test_a_safetensors_index_total_written_as_a_float_is_read():
    assert weight_bytes_from_index({"metadata": {"total_size": 16060522496.0}}) == 16060522496


def _quantized(q: dict) -> dict:
    return {**LLAMA, "quantization_config": q}


def _ct(weights: dict, **more) -> dict:
    return _quantized(
        {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": weights}}, **more}
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            _quantized({"quant_method": "gptq", "bits": 4, "group_size": 2**70}),
            "'group_size' is 1180591620717411303424; expected a group size from 1 to 65,536, or -1",
        ),
        (
            _quantized({"quant_method": "fp8", "weight_block_size": [0, 128]}),
            "'weight_block_size' is [0, 128]; expected two positive whole numbers",
        ),
        (
            _quantized({"quant_method": "fp8", "weight_block_size": [True, 128]}),
            "'weight_block_size' is [True, 128]",
        ),
        (
            _ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": ["a", "b"]}),
            "'config_groups.g.weights.block_structure' is ['a', 'b']; strategy 'block' needs [rows, cols]",
        ),
        (
            _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 10**9}),
            "'config_groups.g.weights.group_size' is 1000000000; strategy 'group' needs a group size",
        ),
        (
            _ct({"num_bits": 8, "type": "float"}, ignore=["re:("]),
            "has a module pattern 're:(' that cannot be read (missing ): ()",
        ),
        (
            _ct({"num_bits": 8, "type": "float"}, ignore=["re:^(?!.*lm_head).*"]),
            "regular expressions without lookarounds or backreferences are read",
        ),
        (
            _quantized({"quant_method": "fp8", "ignored_layers": [f"model.*.mlp.x{n}*" for n in range(33)]}),
            "lists 33 module patterns (wildcards or 're:' expressions); at most 32 are read",
        ),
        (
            _quantized(
                {
                    "quant_method": "compressed-tensors",
                    "config_groups": {
                        f"g{n}": {"weights": {"num_bits": 8, "type": "float"}} for n in range(65)
                    },
                }
            ),
            "'config_groups' is '{65 groups}'; expected at most 64",
        ),
        (
            _quantized(
                {
                    "quant_method": "compressed-tensors",
                    "config_groups": {
                        "g": {"targets": "Linear", "weights": {"num_bits": 8, "type": "float"}}
                    },
                }
            ),
            "'config_groups.g.targets' is 'Linear'; it must be a list of module names",
        ),
    ],
)
def test_an_implausible_quantization_config_is_refused_naming_the_field(config, expected):
    assert expected in _refusal(config)


def test_a_regular_expression_that_backtracks_forever_in_python_runs_in_linear_time():
    config = _quantized({"quant_method": "fp8", "ignored_layers": ["re:(a*)*b$", "re:(.*.*)*x$"]})
    assert ends(from_hf_config, {**config, "num_hidden_layers": 1024}).quantization == "fp8"


def test_thousands_of_plain_module_names_are_matched_as_before():
    names = [f"model.layers.{n}.mlp.down_proj" for n in range(32)] + ["lm_head"]
    plain = quantization.estimate(_quantized({"quant_method": "fp8"}))
    skipped = quantization.estimate(_quantized({"quant_method": "fp8", "modules_to_not_convert": names}))
    assert skipped.unquantized_elements - plain.unquantized_elements == 32 * 14336 * 4096


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "config.json nests more than 32 levels deep"),
        ('{"a": ' * 40 + "1" + "}" * 40, "config.json nests more than 32 levels deep"),
        (
            '{"num_hidden_layers": ' + "9" * 5000 + "}",
            "config.json is not JSON the calculator can read: Exceeds",
        ),
        (
            '{"_name_or_path": "a\\u0000b"}',
            "config.json holds the character U+0000, which a config cannot hold",
        ),
        ('{"model_type": "\\ud800"}', "config.json holds the character U+D800"),
    ],
)
def test_json_the_catalogue_cannot_keep_is_refused_before_it_is_read(text, expected):
    with pytest.raises(ConfigError) as refused:
        ends(catalog.parse_json, text, what="config.json")
    assert str(refused.value).startswith(expected)
