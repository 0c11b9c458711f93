"""The sizing readers over any config.json, safetensors index and quantization_config: each
ends, and refuses what it cannot use with a ConfigError, never another exception; what they
accept, the calculator sizes (and charts) or refuses with SizingInputError."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.sizing import catalog
from diagnostics.sizing.architecture import ConfigError, from_hf_config, weight_bytes_from_index
from diagnostics.sizing.bounds import CONFIG_INTS, VISION_INTS
from diagnostics.sizing.spec_values import spec_from_values
from diagnostics.sizing_service import SizingInputError, concurrency_chart, size_spec
from fleet.hostchecks.model_dir import ModelDirFiles
from tests.hang import ends

SHIPPED = [entry.config for entry in catalog.shipped()]
QUANTIZED = [c for c in SHIPPED if "quantization_config" in c]
FEWER = settings(max_examples=max(10, settings.default.max_examples // 2))

numbers = (
    st.integers(-(2**70), 2**70)
    | st.sampled_from([0, 1, -1, 2**31, 2**63, 10**7, 10**9, 2**70])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
)
# Inside the ranges, at their edges too: what the calculator must then size without failing.
plausible = st.integers(0, 1 << 20) | st.sampled_from(
    [1, 2, 3, 64, 1023, 1024, 4096, 1 << 20, 1 << 23, 1 << 28]
)
scalars = st.none() | numbers | st.text(max_size=12) | st.sampled_from(["re:(", "re:(a*)*b", "*", "Linear"])
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=16,
)
field_names = st.sampled_from(
    sorted(CONFIG_INTS)
    + sorted(VISION_INTS)
    + ["layer_types", "mlp_only_layers", "architectures", "torch_dtype", "model_type", "text_config",
       "vision_config", "quantization_config", "tie_word_embeddings", "_name_or_path", "use_sliding_window"]
)  # fmt: skip
quant_fields = st.sampled_from(
    ["quant_method", "bits", "w_bit", "group_size", "q_group_size", "weight_block_size", "config_groups",
     "ignore", "modules_to_not_convert", "ignored_layers", "exclude_modules", "format", "quant_algo",
     "quantized_layers", "quantization", "load_in_8bit", "lm_head", "zero_point"]
)  # fmt: skip


def _reads_or_refuses(config: object) -> None:
    try:
        arch = ends(from_hf_config, config)
    except ConfigError as refused:
        assert str(refused)
        return
    spec = spec_from_values({"gpu": "h100-80gb", "gpus": 8}, arch=arch)
    try:
        sizing = ends(size_spec, spec)
    except SizingInputError as refused:
        assert str(refused)
        return
    ends(concurrency_chart, sizing)  # the page draws it beside the figures


@given(config=json_values | st.dictionaries(field_names, json_values, max_size=8))
def test_any_json_is_read_or_refused_with_a_config_error(config):
    _reads_or_refuses(config)


@FEWER
@given(
    base=st.sampled_from(SHIPPED),
    changes=st.dictionaries(field_names, plausible | json_values, min_size=1, max_size=4),
    dropped=st.lists(field_names, max_size=3),
)
def test_a_shipped_config_with_fields_changed_is_read_or_refused(base, changes, dropped):
    config = {key: value for key, value in {**base, **changes}.items() if key not in dropped}
    _reads_or_refuses(config)


@FEWER
@given(
    base=st.sampled_from(QUANTIZED),
    changes=st.dictionaries(quant_fields, plausible | json_values, min_size=1, max_size=3),
    nested=st.dictionaries(st.sampled_from(["weights", "targets", "format"]), json_values, max_size=2),
)
def test_a_shipped_quantization_config_with_fields_changed_is_read_or_refused(base, changes, nested):
    quant = {**base["quantization_config"], **changes}
    if isinstance(quant.get("config_groups"), dict) and nested:
        quant["config_groups"] = {name: {**group, **nested} if isinstance(group, dict) else group
                                  for name, group in quant["config_groups"].items()}  # fmt: skip
    _reads_or_refuses({**base, "quantization_config": quant})


@given(text=st.text(max_size=300) | st.binary(max_size=300) | json_values.map(json.dumps))
def test_any_upload_text_is_an_entry_or_a_config_error(text):
    try:
        ends(catalog.entry_from_upload, config_text=text, index_text=text, params_total=7e9)
    except ConfigError as refused:
        assert str(refused)


@given(
    index=json_values | st.fixed_dictionaries({"metadata": st.dictionaries(st.just("total_size"), numbers)})
)
def test_any_safetensors_index_gives_a_plausible_size_or_a_config_error(index):
    try:
        total = ends(weight_bytes_from_index, index)
    except ConfigError as refused:
        assert str(refused)
        return
    assert 1 <= total <= 1 << 50


answer_fields = st.sampled_from(
    ["model_dir", "config_text", "index_text", "index_cut", "quant_config_text", "safetensors_count",
     "safetensors_bytes"]
)  # fmt: skip


@given(data=json_values | st.dictionaries(answer_fields, json_values | numbers))
def test_any_agent_answer_is_files_or_a_value_error(data):
    try:
        ends(ModelDirFiles.from_dict, data)
    except ValueError as refused:
        assert str(refused)
