"""Reading a model directory on a host for sizing (what the agent's `agent.model_config` sends):
config.json, the safetensors index, hf_quant_config.json and the shards' count and bytes, under
the agent's root, links followed as the host follows them (a Hugging Face cache snapshot is a
directory of links into its blobs) but never out of the root, with an error that says what is
wrong, and an answer that always fits one report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.i18n import Message
from fleet.hostchecks.model_dir import (
    ANSWER_CHARS,
    MAX_INDEX_BYTES,
    ModelDirError,
    ModelDirFiles,
    read_model_dir,
)
from tests.fleet.host_trees import call_unprivileged, world_traversable_tmp

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 16}
INDEX = {
    "metadata": {"total_size": 3_000},
    "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"},
}
QUANT = {"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": {"quant_algo": "NVFP4"}}
SHARDS = {"model-00001-of-00002.safetensors": 2_000, "model-00002-of-00002.safetensors": 1_000}


def write_model(folder: Path, *, index: object = INDEX, quant: object = None, shards=SHARDS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    if index is not None:
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    if quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    for name, size in shards.items():
        (folder / name).write_bytes(b"\0" * size)
    return folder


def hf_cache(root: Path, *, repo: str = "models--acme--tiny-1b", revision: str = "0123abcd") -> Path:
    """A Hugging Face cache repository as huggingface_hub lays it out: the files are blobs named
    by their hash, the snapshot a directory of relative links to them."""
    base = root / "root/.cache/huggingface/hub" / repo
    snapshot = base / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (base / "blobs").mkdir()
    (base / "refs").mkdir()
    (base / "refs/main").write_text(revision)
    files = {
        "config.json": json.dumps(CONFIG).encode(),
        "model.safetensors.index.json": json.dumps(INDEX).encode(),
    }
    files |= {name: b"\0" * size for name, size in SHARDS.items()}
    for n, (name, content) in enumerate(files.items()):
        (base / "blobs" / f"blob{n}").write_bytes(content)
        (snapshot / name).symlink_to(f"../../blobs/blob{n}")
    return snapshot


def problem(model_dir: str, root: Path) -> str:
    with pytest.raises(ModelDirError) as caught:
        read_model_dir(model_dir, root=root)
    assert isinstance(caught.value.message, Message)  # shown in the reader's language
    return str(caught.value)


def test_it_reads_the_config_the_index_and_the_shards_sizes(tmp_path):
    write_model(tmp_path / "models/tiny-1b", quant=QUANT)

    files = read_model_dir("/models/tiny-1b", root=tmp_path)

    assert files.model_dir == "/models/tiny-1b"
    assert json.loads(files.config_text) == CONFIG and json.loads(files.index_text) == INDEX
    assert json.loads(files.quant_config_text) == QUANT and not files.index_cut
    assert (files.safetensors_count, files.safetensors_bytes) == (2, 3_000)


def test_a_directory_without_an_index_or_quantization_file_has_none(tmp_path):
    write_model(tmp_path / "models/one", index=None, shards={"model.safetensors": 1_234})
    files = read_model_dir("/models/one/", root=tmp_path)
    assert files.index_text is None and files.quant_config_text is None
    assert (files.safetensors_count, files.safetensors_bytes) == (1, 1_234)


def test_a_hugging_face_cache_snapshot_is_read_through_its_links_into_the_blobs(tmp_path):
    snapshot = hf_cache(tmp_path)
    files = read_model_dir("/" + str(snapshot.relative_to(tmp_path)), root=tmp_path)
    assert json.loads(files.config_text) == CONFIG and json.loads(files.index_text) == INDEX
    assert (files.safetensors_count, files.safetensors_bytes) == (
        2,
        3_000,
    )  # the blobs' sizes, not the links'


def test_the_cache_repository_itself_is_not_the_snapshot_and_the_error_says_where_to_look(tmp_path):
    hf_cache(tmp_path)
    said = problem("/root/.cache/huggingface/hub/models--acme--tiny-1b", tmp_path)
    assert "has no config.json: is this the model's snapshot directory?" in said
    assert "snapshots/<revision>/" in said


def test_an_absolute_link_is_followed_from_the_agents_root_as_the_host_sees_it(tmp_path):
    write_model(tmp_path / "data/models/tiny-1b")
    (tmp_path / "models").mkdir()
    (tmp_path / "models/current").symlink_to("/data/models/tiny-1b")  # absolute on the host
    files = read_model_dir("/models/current", root=tmp_path)
    assert files.safetensors_bytes == 3_000


def test_a_link_out_of_the_root_is_refused_and_what_lies_outside_is_never_read(tmp_path):
    root, outside = tmp_path / "host", tmp_path / "outside"
    write_model(outside / "secret-model")
    (root / "models/tiny-1b").mkdir(parents=True)
    (root / "models/tiny-1b/config.json").symlink_to("../../../outside/secret-model/config.json")
    said = problem("/models/tiny-1b", root)
    assert "/models/tiny-1b/config.json leads outside the agent's root" in said


def test_a_directory_linked_out_of_the_root_is_refused(tmp_path):
    root = tmp_path / "host"
    write_model(tmp_path / "outside/model")
    (root / "models").mkdir(parents=True)
    (root / "models/escape").symlink_to("../../outside/model")
    assert "leads outside the agent's root" in problem("/models/escape", root)
    assert "leads outside the agent's root" in problem("/../outside/model", root)


def test_a_shard_linked_out_of_the_root_is_refused(tmp_path):
    root = tmp_path / "host"
    write_model(root / "models/tiny-1b", shards={})
    (tmp_path / "big.safetensors").write_bytes(b"\0" * 10)
    (root / "models/tiny-1b/model.safetensors").symlink_to("../../../big.safetensors")
    assert "model.safetensors leads outside the agent's root" in problem("/models/tiny-1b", root)


def test_a_dangling_shard_link_an_unfinished_download_is_not_counted(tmp_path):
    snapshot = hf_cache(tmp_path)
    (snapshot / "model-00003-of-00003.safetensors").symlink_to("../../blobs/not-downloaded-yet")
    files = read_model_dir("/" + str(snapshot.relative_to(tmp_path)), root=tmp_path)
    assert files.safetensors_count == 2


@pytest.mark.parametrize(
    "model_dir, said",
    [
        ("models/tiny-1b", "'models/tiny-1b' is not an absolute path"),
        ("/models/nowhere", "/models/nowhere does not exist on the host"),
        ("/models/tiny-1b/config.json", "/models/tiny-1b/config.json is not a directory"),
        ("/models/tiny-1b/config.json/x", "/models/tiny-1b/config.json/x is not a directory"),
    ],
)
def test_a_path_that_is_no_model_directory_is_refused_saying_why(tmp_path, model_dir, said):
    write_model(tmp_path / "models/tiny-1b")
    assert said in problem(model_dir, tmp_path)


def test_a_directory_without_config_json_is_refused(tmp_path):
    (tmp_path / "models/weights-only").mkdir(parents=True)
    said = problem("/models/weights-only", tmp_path)
    assert said.startswith("/models/weights-only has no config.json")


def test_a_config_the_agent_may_not_read_says_so():
    with world_traversable_tmp() as root:
        write_model(root / "models/tiny-1b")
        (root / "models/tiny-1b/config.json").chmod(0)
        said = call_unprivileged(_problem_text, "/models/tiny-1b", root)
    assert said == "/models/tiny-1b/config.json could not be read: permission denied for the agent's user"


def _problem_text(model_dir: str, root: Path) -> str:
    try:
        read_model_dir(model_dir, root=root)
    except ModelDirError as exc:
        return str(exc)
    return "read"


def test_files_bigger_than_any_real_one_are_refused_unread(tmp_path):
    folder = write_model(tmp_path / "models/big")
    (folder / "config.json").write_bytes(b" " * 1_000_001)
    assert "/models/big/config.json is 1,000,001 bytes; a real one is far under 1,000,000" in problem(
        "/models/big", tmp_path
    )
    write_model(folder, quant={"padding": "x" * 300_000})
    assert "hf_quant_config.json is 300," in problem("/models/big", tmp_path)


def test_a_config_that_is_not_utf8_text_is_refused(tmp_path):
    folder = write_model(tmp_path / "models/latin1")
    (folder / "config.json").write_bytes('{"_name_or_path": "mod\u00e8le"}'.encode("latin-1"))
    assert "/models/latin1/config.json is not UTF-8 text (byte 22)" in problem("/models/latin1", tmp_path)


def test_an_index_too_big_for_one_answer_is_sent_as_its_total_size_alone(tmp_path):
    weight_map = {f"model.layers.{n}.mlp.weight": "model-00001-of-00002.safetensors" for n in range(400)}
    write_model(tmp_path / "models/moe", index={"metadata": {"total_size": 3_000}, "weight_map": weight_map})
    files = read_model_dir("/models/moe", root=tmp_path, answer_chars=4_000)
    assert files.index_cut and json.loads(files.index_text) == {"metadata": {"total_size": 3_000}}
    assert len(json.dumps(files.to_dict())) <= 4_000


def test_an_index_past_its_limit_gives_its_leading_total_size_or_is_refused(tmp_path):
    folder = write_model(tmp_path / "models/huge")
    names = {
        f"model.layers.{n}.mlp.experts.weight": "model-00001-of-00002.safetensors" for n in range(90_000)
    }
    text = json.dumps({"metadata": {"total_size": 688_586_727_753}, "weight_map": names}, indent=2)
    assert len(text) > MAX_INDEX_BYTES  # a DeepSeek-V3-sized index
    (folder / "model.safetensors.index.json").write_text(text)
    files = read_model_dir("/models/huge", root=tmp_path)
    assert files.index_cut and json.loads(files.index_text) == {"metadata": {"total_size": 688_586_727_753}}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": names, "metadata": {}}))
    assert "model.safetensors.index.json is " in problem("/models/huge", tmp_path)


def test_an_index_past_its_limit_nested_without_end_is_refused_saying_so(tmp_path):
    folder = write_model(tmp_path / "models/deep")
    (folder / "model.safetensors.index.json").write_text('{"metadata": ' + "[" * (MAX_INDEX_BYTES + 1))
    assert "model.safetensors.index.json is " in problem("/models/deep", tmp_path)


def test_an_index_cut_to_its_total_carries_nothing_nested_however_its_total_is_written(tmp_path):
    folder = write_model(tmp_path / "models/odd")
    for total, kept in [([[[1]]], "list"), ({"a": {"b": 1}}, "dict"), ("3000", "3000"), (None, None)]:
        index = {"metadata": {"total_size": total}, "weight_map": {"x": "y" * (MAX_INDEX_BYTES // 2)}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
        files = read_model_dir("/models/odd", root=tmp_path, answer_chars=100_000)
        assert files.index_cut and json.loads(files.index_text) == {"metadata": {"total_size": kept}}


def test_the_answer_round_trips_and_a_malformed_one_is_refused_naming_the_field(tmp_path):
    files = read_model_dir("/models/tiny-1b", root=write_model(tmp_path / "models/tiny-1b").parent.parent)
    assert ModelDirFiles.from_dict(json.loads(json.dumps(files.to_dict()))) == files
    good = files.to_dict()
    for bad, said in [
        ({**good, "safetensors_bytes": "3000"}, "safetensors_bytes: expected int, got str"),
        ({**good, "index_cut": 1}, "index_cut: expected bool, got int"),
        ({**good, "safetensors_count": True}, "safetensors_count: expected int, got bool"),
        ({**good, "safetensors_count": -1}, "below zero"),
        ({**good, "safetensors_count": 10**9}, "safetensors_count: more than 10,000"),
        ({**good, "safetensors_bytes": 2**80}, "safetensors_bytes: more than 1,125,899,906,842,624"),
        ({**good, "config_text": "x" * 1_000_001}, "config_text: more than 1,000,000"),
        ({**good, "password": "x"}, "unknown field(s) password"),
        ({k: v for k, v in good.items() if k != "config_text"}, "missing field config_text"),
        ([], "must be an object"),
    ]:
        with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
            ModelDirFiles.from_dict(bad)


def test_the_biggest_answer_fits_one_signed_report():
    from fleet.agent.reports import MAX_REPORT_BYTES

    empty = ModelDirFiles(model_dir="/" + "m" * 1023, config_text="")
    fullest = ModelDirFiles(
        model_dir=empty.model_dir, config_text="x" * (ANSWER_CHARS - len(json.dumps(empty.to_dict())))
    )
    assert len(json.dumps(fullest.to_dict())) == ANSWER_CHARS  # as much as the reader lets through
    answer = {"model": fullest.to_dict()}
    envelope = {
        "host": "h" * 253,
        "kind": "answer",
        "sent_at": 1_700_000_000.123,
        "body": {"request_id": "0" * 32, "answer": answer},
        "signature": "f" * 64,
    }
    assert len(json.dumps(envelope)) <= MAX_REPORT_BYTES


def test_a_link_loop_is_refused(tmp_path):
    (tmp_path / "models").mkdir()
    os.symlink("/models/b", tmp_path / "models/a")
    os.symlink("/models/a", tmp_path / "models/b")
    assert "too many levels of symbolic links" in problem("/models/a", tmp_path)
