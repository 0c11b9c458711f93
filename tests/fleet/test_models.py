import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError

from fleet.models import Gpu, GpuHost, Instance
from tests.factories import make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db


def test_it_rejects_a_host_name_with_spaces_or_capitals():
    host = GpuHost(name="GPU Node 1", address="10.0.0.1")
    with pytest.raises(ValidationError) as err:
        host.full_clean()
    assert "name" in err.value.message_dict


@pytest.mark.parametrize("address", ["10.1.2.3", "fe80::1", "gpu-01.dc1.example.com"])
def test_it_accepts_ip_addresses_and_host_names(address):
    GpuHost(name="node", address=address).full_clean()


@pytest.mark.parametrize("address", ["http://10.0.0.1", "10.0.0.1:22", "bad_host!", "-lead.example"])
def test_it_rejects_addresses_with_scheme_port_or_bad_characters(address):
    with pytest.raises(ValidationError) as err:
        GpuHost(name="node", address=address).full_clean()
    assert "address" in err.value.message_dict


def test_host_names_are_unique_in_the_database():
    make_host(name="node-a")
    with pytest.raises(IntegrityError):
        GpuHost.objects.create(name="node-a", address="10.9.9.9")


def test_it_normalises_tags_into_a_sorted_unique_list():
    host = make_host(tags=["prod", " a100 ", "prod", ""])
    assert host.tags == ["a100", "prod"]


def test_a_gpu_takes_its_memory_from_the_catalogue_when_left_blank():
    gpu = make_gpu(make_host(), model="h200-141gb", form_factor="sxm")
    assert gpu.memory_mib == 143771


def test_a_gpu_rejects_a_form_factor_its_model_does_not_come_in():
    host = make_host()
    with pytest.raises(ValidationError) as err:
        make_gpu(host, model="l4", form_factor="sxm")
    assert "form_factor" in err.value.message_dict


def test_a_gb10_superchip_is_inventoried_as_a_system_on_chip():
    gpu = make_gpu(make_host(), model="gb10", form_factor="soc")
    assert gpu.memory_mib == 122547
    with pytest.raises(ValidationError) as err:
        make_gpu(make_host(name="spark-2"), model="gb10", form_factor="pcie")
    assert "comes as soc" in err.value.message_dict["form_factor"][0]


def test_a_gpu_numa_node_must_exist_on_its_host():
    host = make_host(numa_nodes=2)
    with pytest.raises(ValidationError) as err:
        make_gpu(host, numa_node=2)
    assert "0..1" in err.value.message_dict["numa_node"][0]


def test_a_gpu_cannot_be_its_own_nvlink_peer():
    with pytest.raises(ValidationError):
        make_gpu(make_host(), index=0, nvlink_peers=[0, 1])


def test_gpu_indexes_are_unique_per_host():
    host = make_host()
    make_gpu(host, index=0)
    with pytest.raises(IntegrityError):
        Gpu.objects.create(host=host, index=0, model="h100-80gb", form_factor="sxm", memory_mib=1)


def test_an_instance_accepts_only_http_and_https_urls():
    host = make_host()
    with pytest.raises(ValidationError) as err:
        make_instance(host, base_url="ftp://10.0.0.1:8000")
    assert "base_url" in err.value.message_dict


def test_an_instance_stores_the_api_key_variable_name_never_a_secret():
    host = make_host()
    with pytest.raises(ValidationError) as err:
        make_instance(host, api_key_env="sk-live-123abc")
    assert "environment variable" in err.value.message_dict["api_key_env"][0]


def test_an_instance_gpu_count_must_match_tensor_times_pipeline_parallel():
    host = make_host()
    gpus = [make_gpu(host, index=i) for i in range(3)]
    instance = make_instance(host, tensor_parallel_size=2)
    with pytest.raises(ValidationError) as err:
        instance.clean_gpus(gpus)
    assert "2 x 1 = 2" in err.value.message_dict["gpus"][0]
    instance.clean_gpus(gpus[:2])


def test_an_instance_cannot_use_gpus_of_another_host():
    other_gpu = make_gpu(make_host())
    instance = make_instance(make_host())
    with pytest.raises(ValidationError):
        instance.clean_gpus([other_gpu])


def test_the_database_refuses_a_gpu_memory_utilization_above_one():
    host = make_host()
    with pytest.raises(IntegrityError):
        Instance.objects.create(
            host=host, name="x", base_url="http://a", served_model_name="m", gpu_memory_utilization=1.5
        )


def test_the_host_filter_finds_hosts_by_tag_and_search_terms():
    from fleet.filters import HostFilterSet

    make_host(name="alpha", tags=["prod", "h100"])
    make_host(name="beta", tags=["staging"])
    qs = GpuHost.objects.with_counts()
    assert [h.name for h in HostFilterSet({"tag": "prod"}, qs).qs] == ["alpha"]
    assert [h.name for h in HostFilterSet({"q": "bet"}, qs).qs] == ["beta"]


ACRONYMS = {
    "cpu",
    "gpu",
    "nvml",
    "ip",
    "url",
    "tp",
    "pp",
    "kv",
    "id",
    "pci",
    "numa",
    "cuda",
    "os",
    "ram",
    "mig",
    "uuid",
    "api",
}


def _miscased_acronym(word: str) -> bool:
    """Cpu, Gpus, Url: an acronym (or its plural, GPUs) not in capitals."""
    stem = word[:-1] if word.endswith("s") and word[:-1].lower() in ACRONYMS else word
    return stem.lower() in ACRONYMS and stem != stem.upper()


def test_no_field_label_spells_an_acronym_as_a_word():
    import re

    from django.apps import apps
    from django.utils.text import capfirst

    wrong = [
        f"{model.__name__}.{field.name}: {capfirst(field.verbose_name)}"
        for model in apps.get_app_config("fleet").get_models()
        for field in model._meta.get_fields()
        if hasattr(field, "verbose_name")
        for word in re.findall(r"[A-Za-z]+", str(capfirst(field.verbose_name)))
        if _miscased_acronym(word)
    ]
    assert wrong == []
    assert capfirst(GpuHost._meta.get_field("cpu_cores").verbose_name) == "CPU cores"
