"""What an agent gathers from a model directory for the pre-deploy checklist: a safetensors index
that is no index (nested past reason, shards named by anything but text) names no missing shards,
and the gathering goes on."""

import json

from fleet.agent.gather import _model_files


def test_an_index_nested_past_reason_names_no_missing_shards(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}"
    )
    assert _model_files(tmp_path).index_json_missing_shards == ()


def test_shards_named_by_anything_but_text_are_not_asked_for(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model-1.safetensors").write_bytes(b"\0" * 8)
    weight_map = {"a": "model-1.safetensors", "b": "model-2.safetensors", "c": [[1]], "d": {"e": 1}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert _model_files(tmp_path).index_json_missing_shards == ("model-2.safetensors",)
