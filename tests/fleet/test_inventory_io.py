from textwrap import dedent

import pytest

from fleet.inventory_io import (
    MAX_BYTES,
    ImportFailed,
    apply_import,
    detect_format,
    export_inventory,
    plan_import,
)
from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance
from tests.factories import make_gateway, make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db

CSV_HEADER = "kind,name,address,host,index,model,form_factor,base_url,served_model_name,gpus"


@pytest.fixture
def small_fleet():
    host = make_host(name="gpu-h100-01", tags=["prod", "h100"], driver_version="570.133.20")
    gpus = [make_gpu(host, index=i, nvlink_peers=[1 - i]) for i in range(2)]
    instance = make_instance(host, gpus=gpus, name="vllm-qwen", tensor_parallel_size=2, max_num_seqs=64)
    make_gateway(name="llm-gateway", instances=[instance])
    return instance


def _yaml(text: str) -> str:
    return dedent(text).lstrip()


def _import(text: str, fmt: str = "yaml", actor=None, source: str = "import"):
    plan = plan_import(text=text, fmt=fmt)
    assert plan.ok, [str(e) for e in plan.errors]
    return apply_import(plan=plan, actor=actor, source=source)


def _messages(text: str, fmt: str = "yaml") -> list[str]:
    return [str(error) for error in plan_import(text=text, fmt=fmt).errors]


def _wipe() -> None:
    Gateway.objects.all().delete()
    GpuHost.objects.all().delete()


@pytest.mark.embedded
@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_an_export_imported_into_an_empty_inventory_exports_the_same_again(small_fleet, fmt):
    exported = export_inventory(fmt=fmt)
    _wipe()
    result = _import(exported, fmt)
    assert result.counts == {"create": 5, "update": 0, "unchanged": 0}
    assert export_inventory(fmt=fmt) == exported


@pytest.mark.parametrize("fmt", ["yaml", "csv"])
def test_importing_the_inventory_s_own_export_plans_no_changes(small_fleet, fmt):
    plan = plan_import(text=export_inventory(fmt=fmt), fmt=fmt)
    assert plan.ok
    assert plan.counts == {"create": 0, "update": 0, "unchanged": 5}


def test_a_csv_export_opens_in_a_spreadsheet_without_running_a_formula_and_imports_unchanged(small_fleet):
    Instance.objects.filter(pk=small_fleet.pk).update(extra_args="--enforce-eager")
    small_fleet.host.notes = '=HYPERLINK("http://evil.example/","click")'
    small_fleet.host.save()
    exported = export_inventory(fmt="csv")
    assert ",'--enforce-eager," in exported and "'=HYPERLINK" in exported
    plan = plan_import(text=exported, fmt="csv")
    assert plan.ok and plan.counts["update"] == 0


def test_the_export_lists_objects_sorted_by_their_natural_key():
    for name in ["node-c", "node-a", "node-b"]:
        make_host(name=name)
    lines = [line for line in export_inventory(fmt="csv").splitlines() if line.startswith("host,")]
    assert [line.split(",")[1] for line in lines] == ["node-a", "node-b", "node-c"]


def test_a_plan_writes_nothing_to_the_inventory_or_the_change_log():
    plan = plan_import(
        text=_yaml("""
        hosts:
          - {name: gpu-new-01, address: 10.0.9.1}
        gpus:
          - {host: gpu-new-01, index: 0, model: l40s, form_factor: pcie}
    """),
        fmt="yaml",
    )
    assert plan.ok
    assert plan.counts == {"create": 2, "update": 0, "unchanged": 0}
    assert not GpuHost.objects.exists()
    assert not Gpu.objects.exists()
    assert not ChangeLogEntry.objects.exists()


@pytest.mark.embedded
def test_a_bad_csv_row_is_reported_with_its_line_and_nothing_is_imported():
    text = "\n".join(
        [
            CSV_HEADER,
            "host,gpu-a100-01,10.0.0.1,,,,,,,",
            "gpu,,,gpu-a100-01,0,a100-80gb,sxm,,,",
            "instance,vllm-01,,gpu-a100-01,,,,ftp://10.0.0.1:8000,Qwen/Qwen3-8B,0",
        ]
    )
    plan = plan_import(text=text, fmt="csv")
    assert [str(e) for e in plan.errors] == [
        "line 4: instance vllm-01: base_url: Enter an http:// or https:// URL."
    ]
    with pytest.raises(ValueError):
        apply_import(plan=plan, actor=None, source="import")
    assert not GpuHost.objects.exists()


def test_a_bad_yaml_record_is_reported_at_the_line_its_mapping_starts():
    messages = _messages(
        _yaml("""
        hosts:
          - name: gpu-a100-01
            address: 10.0.0.1
          - name: gpu-a100-02
            address: http://10.0.0.2
    """)
    )
    assert messages == [
        "line 4: host gpu-a100-02: address: Enter an IP address or a host name, without scheme or port."
    ]


def test_it_collects_every_error_in_the_file_not_just_the_first():
    messages = _messages(
        _yaml("""
        hosts:
          - {name: Bad Name, address: 10.0.0.1}
          - {name: ok-host, address: 10.0.0.2, numa_nodes: 0}
        instances:
          - {name: vllm-01, host: nowhere, base_url: http://10.0.0.3:8000, served_model_name: m}
    """)
    )
    assert [m.split(":")[0] for m in messages] == ["line 2", "line 3", "line 5"]
    assert "No host named nowhere" in messages[2]


def test_an_update_shows_its_diff_and_is_logged_with_the_actor_and_source(small_fleet, cast):
    text = _yaml("""
        instances:
          - {name: vllm-qwen, max_num_seqs: 128}
    """)
    plan = plan_import(text=text, fmt="yaml")
    [change] = plan.changes
    assert (change.action, change.diff) == ("update", {"max_num_seqs": [64, 128]})
    assert str(change) == "~ update instance vllm-qwen: max_num_seqs 64 -> 128"
    apply_import(plan=plan, actor=cast.sre, source="import")
    entry = ChangeLogEntry.objects.for_object(small_fleet).get()
    assert (entry.action, entry.actor, entry.source) == ("update", cast.sre, "import")
    assert entry.changes == {"max_num_seqs": [64, 128]}


def test_each_created_object_is_logged_as_created():
    _import(
        _yaml("""
        hosts:
          - {name: gpu-a100-01, address: 10.0.0.1}
        gpus:
          - {host: gpu-a100-01, index: 0, model: a100-80gb, form_factor: sxm}
    """),
        source="cli",
    )
    entries = ChangeLogEntry.objects.order_by("id")
    assert [(e.object_repr, e.action, e.source) for e in entries] == [
        ("gpu-a100-01", "create", "cli"),
        ("gpu-a100-01/gpu0", "create", "cli"),
    ]


def test_a_field_left_out_keeps_its_value_and_objects_left_out_are_left_alone(small_fleet):
    other = make_host(name="gpu-other-01")
    _import(
        _yaml("""
        hosts:
          - {name: gpu-h100-01, rack: r09}
    """)
    )
    host = GpuHost.objects.get(name="gpu-h100-01")
    assert (host.rack, host.driver_version) == ("r09", "570.133.20")
    assert GpuHost.objects.filter(pk=other.pk).exists()
    assert Instance.objects.get().gpus.count() == 2


def test_a_gpu_can_sit_on_a_host_created_earlier_in_the_same_file():
    result = _import(
        _yaml("""
        hosts:
          - {name: gpu-l40s-01, address: 10.0.0.7, numa_nodes: 1}
        gpus:
          - {host: gpu-l40s-01, index: 0, model: l40s, form_factor: pcie, numa_node: 0}
    """)
    )
    assert result.counts["create"] == 2
    assert Gpu.objects.get().memory_mib == 46068


def test_a_gpu_is_checked_against_its_host_from_the_same_file():
    messages = _messages(
        _yaml("""
        hosts:
          - {name: gpu-l40s-01, address: 10.0.0.7, numa_nodes: 1}
        gpus:
          - {host: gpu-l40s-01, index: 0, model: l40s, form_factor: pcie, numa_node: 1}
    """)
    )
    assert messages == [
        "line 4: gpu gpu-l40s-01/gpu0: numa_node: Host gpu-l40s-01 has 1 NUMA node(s): use 0..0."
    ]


def test_a_gpu_on_a_host_that_is_nowhere_is_refused():
    messages = _messages(
        _yaml("""
        gpus:
          - {host: gpu-ghost-01, index: 0, model: l40s, form_factor: pcie}
    """)
    )
    assert len(messages) == 1
    assert messages[0].startswith("line 2: gpu gpu-ghost-01/gpu0: host: No host named gpu-ghost-01")


def test_it_refuses_an_instance_whose_gpu_count_does_not_match_its_parallel_size(small_fleet):
    messages = _messages(
        _yaml("""
        instances:
          - name: vllm-qwen
            tensor_parallel_size: 4
    """)
    )
    assert messages == [
        "line 2: instance vllm-qwen: gpus: 2 GPU(s) chosen but tensor x pipeline parallel size is 4 x 1 = 4."
    ]


def test_it_refuses_gpu_indexes_the_host_does_not_have(small_fleet):
    messages = _messages(
        _yaml("""
        instances:
          - {name: vllm-qwen, gpus: [0, 7]}
    """)
    )
    assert messages == ["line 2: instance vllm-qwen: gpus: Host gpu-h100-01 has no GPU with index 7."]


def test_it_refuses_a_gateway_in_front_of_an_unknown_instance():
    messages = _messages(
        _yaml("""
        gateways:
          - {name: llm-gateway, url: http://127.0.0.1:8080, instances: [vllm-nope]}
    """)
    )
    assert messages == [
        "line 2: gateway llm-gateway: instances: No instance named vllm-nope "
        "in the file or the database (or it has errors)."
    ]


def test_an_unknown_csv_column_is_an_error_on_the_header_line():
    messages = _messages("kind,name,address,colour\nhost,gpu-a100-01,10.0.0.1,blue\n", "csv")
    assert messages == ["line 1: colour: Unknown column."]


def test_a_csv_row_of_an_unknown_kind_is_an_error():
    messages = _messages("kind,name\nhost,a\nvm,b\n", "csv")
    assert "line 3: kind: Unknown kind 'vm'; use host, gpu, instance, gateway." in messages


def test_a_csv_cell_in_a_column_the_row_s_kind_lacks_is_an_error():
    messages = _messages("kind,name,address,base_url\nhost,a,10.0.0.1,http://x\n", "csv")
    assert messages == ["line 2: host a: base_url: A host has no such field."]


def test_malformed_csv_is_reported_with_its_line():
    messages = _messages('kind,name,address\nhost,a,10.0.0.1\nhost,"b,10.0.0.2\n', "csv")
    assert messages[0].startswith("line 3: Malformed CSV")


def test_csv_line_numbers_count_physical_lines_of_multi_line_cells():
    text = 'kind,name,address,notes\nhost,a,10.0.0.1,"two\nlines"\nhost,b,bad_addr!,\n'
    assert _messages(text, "csv")[0].startswith("line 4: host b: address:")


def test_an_unknown_yaml_key_is_an_error_on_its_line():
    messages = _messages(
        _yaml("""
        hosts:
          - name: gpu-a100-01
            address: 10.0.0.1
            colour: blue
    """)
    )
    assert messages == ["line 4: host gpu-a100-01: colour: Unknown field for a host."]


def test_an_unknown_yaml_section_is_an_error():
    assert _messages("hosts: []\nservers: []\n") == [
        "line 2: servers: Unknown section; use hosts, gpus, instances, gateways."
    ]


@pytest.mark.embedded
def test_malformed_yaml_is_reported_with_its_line():
    messages = _messages("hosts:\n  - name: a\n    address: 10.0.0.1\n   bad: [\n")
    assert len(messages) == 1
    assert messages[0].startswith("line 4: Malformed YAML")


def test_a_key_given_twice_in_one_yaml_mapping_is_an_error():
    messages = _messages(
        _yaml("""
        hosts:
          - name: a
            address: 10.0.0.1
            address: 10.0.0.2
    """)
    )
    assert messages == ["line 4: address: Duplicate key (first given on line 3)."]


def test_an_object_given_twice_in_the_file_is_an_error_naming_the_first_line():
    messages = _messages(
        _yaml("""
        hosts:
          - {name: gpu-a100-01, address: 10.0.0.1}
          - {name: gpu-a100-01, address: 10.0.0.2}
    """)
    )
    assert messages == ["line 3: host gpu-a100-01: Duplicate host (first given on line 2)."]


def test_a_yaml_number_for_a_text_field_must_be_quoted():
    messages = _messages("hosts:\n  - {name: a, address: 10.0.0.1, cuda_version: 12.10}\n")
    assert messages == ["line 2: host a: cuda_version: Write 12.1 as quoted text."]


def test_it_refuses_input_over_five_megabytes():
    plan = plan_import(text="#" * (MAX_BYTES + 1), fmt="yaml")
    assert [str(e) for e in plan.errors] == ["The input is 5.0 MB; the limit is 5 MB."]


def test_a_conflict_that_appears_after_planning_undoes_the_whole_import():
    uuid = "GPU-5fd4c6e2-8f1b-4c1e-9a3d-2b7e0c9d1a44"
    plan = plan_import(
        text=_yaml(f"""
        hosts:
          - {{name: gpu-new-01, address: 10.0.9.1}}
        gpus:
          - {{host: gpu-new-01, index: 0, model: l40s, form_factor: pcie, uuid: {uuid}}}
    """),
        fmt="yaml",
    )
    assert plan.ok
    make_gpu(make_host(name="gpu-old-01"), uuid=uuid)
    with pytest.raises(ImportFailed) as failed:
        apply_import(plan=plan, actor=None, source="import")
    assert str(failed.value).startswith("line 4: gpu gpu-new-01/gpu0: ")
    assert "Another GPU already has this UUID." in str(failed.value)
    assert not GpuHost.objects.filter(name="gpu-new-01").exists()


@pytest.mark.parametrize(
    ("filename", "fmt"), [("fleet.yaml", "yaml"), ("FLEET.YML", "yaml"), ("hosts.csv", "csv")]
)
def test_it_tells_the_format_from_the_file_extension(filename, fmt):
    assert detect_format(filename) == fmt


def test_it_refuses_to_guess_the_format_of_other_files():
    with pytest.raises(ValueError):
        detect_format("fleet.json")


# Sharing a base URL or GPUs: a warning, not an error


def test_a_plan_warns_of_an_instance_sharing_a_base_url_or_a_gpu_and_still_imports(small_fleet):
    text = _yaml("""
        instances:
          - name: vllm-twin
            host: gpu-h100-01
            base_url: HTTP://127.0.0.1:%d/
            served_model_name: Qwen/Qwen3-8B
            gpus: [1]
    """) % int(small_fleet.base_url.rsplit(":", 1)[1])
    plan = plan_import(text=text, fmt="yaml")
    assert plan.ok
    assert [str(w) for w in plan.warnings] == [
        f"line 2: instance vllm-twin: base_url: vllm-qwen already serves {small_fleet.base_url}.",
        "line 2: instance vllm-twin: gpus: gpu-h100-01/gpu1 is already used by vllm-qwen.",
    ]
    assert not Instance.objects.filter(name="vllm-twin").exists()  # planning writes nothing
    apply_import(plan=plan, actor=None, source="import")
    assert Instance.objects.filter(name="vllm-twin").exists()


def test_instances_sharing_with_each_other_in_the_same_file_are_both_warned_of():
    text = _yaml("""
        hosts:
          - {name: node-a, address: 10.0.9.1}
        instances:
          - {name: vllm-one, host: node-a, base_url: "http://10.0.9.1:8000", served_model_name: m}
          - {name: vllm-two, host: node-a, base_url: "http://10.0.9.1:8000/", served_model_name: m}
    """)
    plan = plan_import(text=text, fmt="yaml")
    assert plan.ok
    assert [(w.key, w.message) for w in plan.warnings] == [
        ("vllm-one", "vllm-two already serves http://10.0.9.1:8000."),  # stored without its slash
        ("vllm-two", "vllm-one already serves http://10.0.9.1:8000."),
    ]


def test_an_import_that_shares_nothing_warns_of_nothing(small_fleet):
    assert plan_import(text=export_inventory(fmt="yaml"), fmt="yaml").warnings == []
    _wipe()
    assert plan_import(text=export_inventory(fmt="csv"), fmt="csv").warnings == []


def test_the_import_preview_page_shows_the_warnings(sre_client, small_fleet):
    text = (
        _yaml("""
        instances:
          - {name: vllm-twin, host: gpu-h100-01, base_url: "%s", served_model_name: m}
    """)
        % small_fleet.base_url
    )
    response = sre_client.post("/fleet/import/preview/", {"text": text, "format": "yaml"})
    content = response.content.decode()
    assert response.status_code == 200
    assert "1 warning: it imports, but check it is on purpose" in content
    assert f"vllm-qwen already serves {small_fleet.base_url}." in content
    assert "Apply this import" in content
