import io
from textwrap import dedent

import pytest
import yaml
from django.core.management import CommandError, call_command

from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db

NEW_HOST = dedent("""
    hosts:
      - {name: gpu-a100-01, address: 10.0.0.1}
""")


def _run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def qwen():
    host = make_host(name="gpu-h100-01")
    return make_instance(host, gpus=[make_gpu(host, index=0)], name="vllm-qwen", max_num_seqs=64)


def test_fleet_export_writes_yaml_to_stdout_by_default(qwen):
    out, _ = _run("fleet", "export")
    document = yaml.safe_load(out)
    assert [h["name"] for h in document["hosts"]] == ["gpu-h100-01"]
    assert document["instances"][0]["gpus"] == [0]


def test_fleet_export_writes_csv_to_a_file(qwen, tmp_path):
    target = tmp_path / "fleet.csv"
    out, _ = _run("fleet", "export", "--format", "csv", "--output", str(target))
    assert out == ""
    assert target.read_text().startswith("kind,name,")


@pytest.mark.embedded
def test_fleet_import_creates_the_objects_and_prints_the_counts(tmp_path):
    source = tmp_path / "fleet.yaml"
    source.write_text(NEW_HOST)
    out, _ = _run("fleet", "import", str(source))
    assert out.strip() == f"Imported {source}: 1 created, 0 updated, 0 unchanged."
    assert ChangeLogEntry.objects.get().source == "cli"


def test_fleet_import_takes_csv_from_the_extension(tmp_path):
    source = tmp_path / "fleet.csv"
    source.write_text("kind,name,address\nhost,gpu-a100-01,10.0.0.1\n")
    _run("fleet", "import", str(source))
    assert GpuHost.objects.filter(name="gpu-a100-01").exists()


def test_fleet_import_reads_stdin_given_a_dash(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(NEW_HOST))
    _run("fleet", "import", "-")
    assert GpuHost.objects.filter(name="gpu-a100-01").exists()


def test_a_dry_run_prints_the_plan_and_changes_nothing(qwen, tmp_path):
    source = tmp_path / "fleet.yaml"
    source.write_text(NEW_HOST + "instances:\n  - {name: vllm-qwen, max_num_seqs: 128}\n")
    out, _ = _run("fleet", "import", str(source), "--dry-run")
    assert out.splitlines() == [
        "+ create host gpu-a100-01",
        "~ update instance vllm-qwen: max_num_seqs 64 -> 128",
        "Dry run, nothing changed; would be 1 created, 1 updated, 0 unchanged.",
    ]
    assert not GpuHost.objects.filter(name="gpu-a100-01").exists()
    assert Instance.objects.get().max_num_seqs == 64


def test_fleet_import_writes_line_numbered_errors_to_stderr_and_fails(tmp_path):
    source = tmp_path / "fleet.yaml"
    source.write_text(NEW_HOST + "  - {name: Bad Name, address: 10.0.0.2}\n")
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 error"):
        call_command("fleet", "import", str(source), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().startswith("line 4: host Bad Name: name: Use 1-63 lowercase")
    assert not GpuHost.objects.exists()


def test_fleet_import_refuses_a_file_it_cannot_tell_the_format_of(tmp_path):
    source = tmp_path / "fleet.txt"
    source.write_text(NEW_HOST)
    with pytest.raises(CommandError, match="--format"):
        _run("fleet", "import", str(source))
    _run("fleet", "import", str(source), "--format", "yaml")
    assert GpuHost.objects.exists()


def test_fleet_import_fails_on_a_file_that_is_not_there(tmp_path):
    with pytest.raises(CommandError, match="Cannot read"):
        _run("fleet", "import", str(tmp_path / "missing.yaml"))


@pytest.mark.embedded
def test_demo_fleet_loads_three_hosts_six_instances_and_a_gateway():
    out, _ = _run("demo_fleet")
    assert out.strip() == "Demo fleet: 24 created, 0 updated, 0 unchanged."
    assert (GpuHost.objects.count(), Gpu.objects.count()) == (3, 14)
    assert sorted(Instance.objects.values_list("engine", flat=True)) == [
        "ollama",
        "sglang",
        "tgi",
        "vllm",
        "vllm",
        "vllm",
    ]
    gateway = Gateway.objects.get()
    assert (gateway.name, gateway.url) == ("llm-gateway", "http://127.0.0.1:8080")
    assert {i.engine for i in gateway.instances.all()} == {"vllm"}
    assert ChangeLogEntry.objects.filter(source="demo").count() == 24


def test_the_demo_fleet_runs_one_instance_tensor_parallel_on_two_gpus():
    _run("demo_fleet")
    urls = Instance.objects.values_list("base_url", flat=True)
    ports = sorted(url.rsplit(":", 1)[1] for url in urls)
    assert ports == ["8101", "8102", "8103", "8104", "8105", "8106"]
    tp2 = Instance.objects.get(tensor_parallel_size=2)
    assert tp2.gpus.count() == 2


def test_demo_fleet_run_twice_changes_nothing_the_second_time():
    _run("demo_fleet")
    stamps = list(Instance.objects.values_list("updated_at", flat=True))
    out, _ = _run("demo_fleet")
    assert out.strip() == "Demo fleet: 0 created, 0 updated, 24 unchanged."
    assert list(Instance.objects.values_list("updated_at", flat=True)) == stamps
    assert ChangeLogEntry.objects.count() == 24
