import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from fleet.change_tracking import record_create
from fleet.models import ChangeLogEntry, Gateway, Gpu, GpuHost, Instance
from tests.factories import make_gateway, make_gpu, make_host, make_instance

pytestmark = pytest.mark.django_db

KINDS = ["hosts", "gpus", "instances", "gateways"]


@pytest.fixture
def api_as(cast):
    def login(role: str) -> APIClient:
        client = APIClient()
        client.force_login(cast.for_role(role))
        return client

    return login


@pytest.fixture
def inventory():
    """One of each kind: a host with two GPUs, an instance on both, a gateway in front of it."""
    host = make_host(name="node-a")
    gpus = [make_gpu(host), make_gpu(host)]
    instance = make_instance(host, gpus=gpus, name="vllm-a", tensor_parallel_size=2)
    gateway = make_gateway(name="gw-a", instances=[instance])
    return {"hosts": host, "gpus": gpus[0], "instances": instance, "gateways": gateway}


def _host_payload(**fields):
    return {"name": "node-new", "address": "10.1.0.1", "numa_nodes": 2, **fields}


def _instance_payload(**fields):
    return {
        "name": "vllm-new",
        "host": "node-a",
        "base_url": "http://10.1.0.1:8000",
        "served_model_name": "Qwen/Qwen3-8B",
        **fields,
    }


def _detail(kind, obj):
    return f"/api/{kind}/{obj.pk}/"


# Who may do what


@pytest.mark.parametrize("kind", KINDS)
def test_anonymous_requests_are_refused_with_401_and_a_token_challenge(kind, inventory):
    response = APIClient().get(f"/api/{kind}/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_the_schema_and_docs_are_behind_login_too():
    assert APIClient().get("/api/schema/").status_code == 401
    assert APIClient().get("/api/docs/").status_code == 401


def test_a_user_in_no_role_group_is_refused(api_as, inventory):
    assert api_as("outsider").get("/api/hosts/").status_code == 403


@pytest.mark.parametrize("role", ["viewer", "engineer"])
@pytest.mark.parametrize("kind", KINDS)
def test_viewers_and_engineers_can_list_and_retrieve(role, kind, api_as, inventory):
    client = api_as(role)
    listed = client.get(f"/api/{kind}/")
    assert listed.status_code == 200
    assert listed.json()["count"] == type(inventory[kind]).objects.count()
    assert client.get(_detail(kind, inventory[kind])).json()["id"] == inventory[kind].pk


@pytest.mark.parametrize("role", ["viewer", "engineer"])
def test_viewers_and_engineers_cannot_create_update_or_delete(role, api_as, inventory):
    client = api_as(role)
    host = inventory["hosts"]
    assert client.post("/api/hosts/", _host_payload(), format="json").status_code == 403
    assert client.patch(_detail("hosts", host), {"rack": "r9"}, format="json").status_code == 403
    assert client.delete(_detail("hosts", host)).status_code == 403
    host.refresh_from_db()
    assert host.rack == "r1"
    assert GpuHost.objects.count() == 1
    assert not ChangeLogEntry.objects.exists()


@pytest.mark.parametrize("role", ["sre", "admin"])
def test_sres_and_admins_can_create_update_and_delete(role, api_as, cast):
    client = api_as(role)
    created = client.post("/api/hosts/", _host_payload(), format="json")
    assert created.status_code == 201, created.json()
    url = created.json()["url"]
    assert client.patch(url, {"rack": "r9"}, format="json").json()["rack"] == "r9"
    assert client.delete(url).status_code == 204
    assert not GpuHost.objects.exists()
    entries = ChangeLogEntry.objects.order_by("id")
    assert [e.action for e in entries] == ["create", "update", "delete"]
    assert {(e.source, e.actor) for e in entries} == {("api", cast.for_role(role))}


def test_a_token_in_the_authorization_header_authenticates(cast):
    token = Token.objects.create(user=cast.sre)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.post("/api/hosts/", _host_payload(), format="json")
    assert response.status_code == 201
    assert ChangeLogEntry.objects.get().actor_name == "sam"


def test_a_wrong_token_is_refused(cast):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert client.get("/api/hosts/").status_code in (401, 403)


# Relations by natural key


def test_it_creates_an_instance_with_gpus_given_by_index(api_as, inventory):
    host = inventory["hosts"]
    make_gpu(host)
    make_gpu(host)
    response = api_as("sre").post(
        "/api/instances/", _instance_payload(gpus=[3, 2], tensor_parallel_size=2), format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["gpus"] == [2, 3]
    instance = Instance.objects.get(name="vllm-new")
    assert sorted(g.index for g in instance.gpus.all()) == [2, 3]
    logged = ChangeLogEntry.objects.for_object(instance).get()
    assert logged.changes["gpus"] == [None, ["node-a/gpu2", "node-a/gpu3"]]


def test_a_gpu_names_its_host_and_takes_its_memory_from_the_catalogue(api_as, inventory):
    response = api_as("sre").post(
        "/api/gpus/",
        {"host": "node-a", "index": 2, "model": "h200-141gb", "form_factor": "sxm"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["host"] == "node-a"
    assert response.json()["memory_mib"] == 143771


def test_a_gateway_names_its_instances(api_as, inventory):
    payload = {"name": "gw-new", "url": "https://llm.example.com/", "instances": ["vllm-a"]}
    response = api_as("sre").post("/api/gateways/", payload, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["instances"] == ["vllm-a"]
    assert body["url"] == "https://llm.example.com"
    assert body["api_url"].endswith(f"/api/gateways/{body['id']}/")


def test_hosts_show_their_gpu_and_instance_counts(api_as, inventory):
    row = api_as("viewer").get("/api/hosts/").json()["results"][0]
    assert (row["gpu_count"], row["instance_count"]) == (2, 1)
    created = api_as("sre").post("/api/hosts/", _host_payload(), format="json").json()
    assert (created["gpu_count"], created["instance_count"]) == (0, 0)


def test_it_stores_what_the_model_normalises(api_as):
    response = api_as("sre").post(
        "/api/hosts/", _host_payload(tags=["prod", " a100 ", "prod"]), format="json"
    )
    assert response.json()["tags"] == ["a100", "prod"]
    assert GpuHost.objects.get().tags == ["a100", "prod"]


# Bad input: 400 with field errors, nothing saved


def _assert_rejected(response, field):
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not ChangeLogEntry.objects.exists()


def test_it_rejects_a_gpu_that_is_on_another_host(api_as, inventory):
    other = make_host(name="node-b")
    make_gpu(other)
    make_gpu(other)
    make_gpu(other)
    response = api_as("sre").post("/api/instances/", _instance_payload(gpus=[2]), format="json")
    _assert_rejected(response, "gpus")
    assert "node-a has no GPU with index 2" in response.json()["gpus"][0]
    assert not Instance.objects.filter(name="vllm-new").exists()


def test_it_rejects_a_gpu_count_that_is_not_tensor_x_pipeline_parallel_size(api_as, inventory):
    payload = _instance_payload(gpus=[0, 1], tensor_parallel_size=1, pipeline_parallel_size=1)
    response = api_as("sre").post("/api/instances/", payload, format="json")
    _assert_rejected(response, "gpus")
    assert "1 x 1 = 1" in response.json()["gpus"][0]
    assert not Instance.objects.filter(name="vllm-new").exists()


def test_it_rejects_a_parallel_size_that_no_longer_fits_the_assigned_gpus(api_as, inventory):
    instance = inventory["instances"]
    response = api_as("sre").patch(_detail("instances", instance), {"tensor_parallel_size": 4}, format="json")
    _assert_rejected(response, "gpus")
    instance.refresh_from_db()
    assert instance.tensor_parallel_size == 2


def test_it_rejects_a_gpu_index_listed_twice(api_as, inventory):
    response = api_as("sre").post(
        "/api/instances/", _instance_payload(gpus=[0, 0], tensor_parallel_size=2), format="json"
    )
    _assert_rejected(response, "gpus")


@pytest.mark.parametrize(
    ("kind", "payload", "field"),
    [
        ("instances", _instance_payload(base_url="ftp://10.1.0.1/models"), "base_url"),
        ("gateways", {"name": "gw-new", "url": "ftp://llm.example.com"}, "url"),
        ("hosts", _host_payload(name="Node New"), "name"),
        ("instances", _instance_payload(name="vllm_new!"), "name"),
        ("instances", _instance_payload(host="no-such-host"), "host"),
        (
            "gateways",
            {"name": "gw-new", "url": "https://llm.example.com", "instances": ["nope"]},
            "instances",
        ),
    ],
)
def test_it_rejects_bad_input_with_field_errors_and_saves_nothing(kind, payload, field, api_as, inventory):
    before = {model: model.objects.count() for model in (GpuHost, Gpu, Instance, Gateway)}
    response = api_as("sre").post(f"/api/{kind}/", payload, format="json")
    _assert_rejected(response, field)
    assert {model: model.objects.count() for model in before} == before


def test_it_rejects_a_model_rule_that_only_full_clean_knows(api_as, inventory):
    # numa_node must be below the host's NUMA node count: a rule in Gpu.clean, not on a field.
    response = api_as("sre").post(
        "/api/gpus/",
        {"host": "node-a", "index": 5, "model": "h100-80gb", "form_factor": "sxm", "numa_node": 7},
        format="json",
    )
    _assert_rejected(response, "numa_node")


def test_it_rejects_a_second_gpu_with_the_same_index_on_a_host(api_as, inventory):
    response = api_as("sre").post(
        "/api/gpus/",
        {"host": "node-a", "index": 0, "model": "h100-80gb", "form_factor": "sxm"},
        format="json",
    )
    _assert_rejected(response, "non_field_errors")


def test_it_takes_only_the_name_of_the_api_key_variable(api_as, inventory):
    client = api_as("sre")
    key_as_name = client.post(
        "/api/instances/", _instance_payload(api_key_env="sk-live-abc123"), format="json"
    )
    _assert_rejected(key_as_name, "api_key_env")
    key_as_field = client.post("/api/instances/", _instance_payload(api_key="sk-live-abc123"), format="json")
    _assert_rejected(key_as_field, "api_key")
    named = client.post("/api/instances/", _instance_payload(api_key_env="VLLM_API_KEY"), format="json")
    assert named.json()["api_key_env"] == "VLLM_API_KEY"
    assert "sk-live" not in named.content.decode()


# Filters shared with the pages


def test_it_filters_by_search_engine_and_host(api_as, inventory):
    other = make_host(name="node-b")
    make_instance(other, name="tgi-b", engine="tgi", served_model_name="meta-llama/Llama-3.1-8B")
    client = api_as("viewer")

    def names(query):
        return [row["name"] for row in client.get(f"/api/instances/?{query}").json()["results"]]

    assert names("q=llama") == ["tgi-b"]
    assert names("engine=tgi") == ["tgi-b"]
    assert names("engine=vllm") == ["vllm-a"]
    assert names("host=node-a") == ["vllm-a"]
    assert names("sort=-name") == ["vllm-a", "tgi-b"]


def test_hosts_sort_by_gpu_count(api_as, inventory):
    make_host(name="node-0")
    rows = api_as("viewer").get("/api/hosts/?sort=-gpus").json()["results"]
    assert [row["name"] for row in rows] == ["node-a", "node-0"]


# Change log


def test_deleting_a_host_cascades_and_logs_the_host_its_gpus_and_instances(api_as, inventory):
    response = api_as("sre").delete(_detail("hosts", inventory["hosts"]))
    assert response.status_code == 204
    assert not Gpu.objects.exists() and not Instance.objects.exists()
    deleted = {e.object_repr for e in ChangeLogEntry.objects.filter(action="delete", source="api")}
    assert deleted == {"node-a", "node-a/gpu0", "node-a/gpu1", "vllm-a"}
    assert Gateway.objects.get().instances.count() == 0


def test_the_changes_action_lists_the_entries_newest_first(api_as, inventory):
    host = inventory["hosts"]
    record_create(host, actor=None, source="import")
    client = api_as("sre")
    client.patch(_detail("hosts", host), {"rack": "r9"}, format="json")
    response = api_as("viewer").get(f"/api/hosts/{host.pk}/changes/")
    assert response.status_code == 200
    entries = response.json()["results"]
    assert [(e["action"], e["source"], e["actor_name"]) for e in entries] == [
        ("update", "api", "sam"),
        ("create", "import", "import"),
    ]
    assert entries[0]["changes"] == {"rack": ["r1", "r9"]}
    assert set(entries[0]) == {"actor_name", "source", "action", "changes", "timestamp"}


def test_an_edit_that_changes_nothing_leaves_no_entry(api_as, inventory):
    response = api_as("sre").patch(
        _detail("gateways", inventory["gateways"]), {"kind": "nginx"}, format="json"
    )
    assert response.status_code == 200
    assert not ChangeLogEntry.objects.exists()


# Schema and docs


def test_the_schema_generates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))


def test_a_viewer_gets_the_schema_and_the_docs_page(api_as):
    client = api_as("viewer")
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/instances/{id}/changes/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content


# Query counts


def _add_rows(n: int) -> None:
    for _ in range(n):
        host = make_host()
        gpus = [make_gpu(host), make_gpu(host)]
        instance = make_instance(host, gpus=gpus, tensor_parallel_size=2)
        make_gateway(instances=[instance])


@pytest.mark.parametrize("kind", KINDS)
def test_the_list_query_count_does_not_grow_with_the_rows(kind, api_as):
    client = api_as("viewer")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/api/{kind}/").status_code == 200
        return len(captured)

    _add_rows(2)
    with_two = queries()
    _add_rows(8)
    assert queries() == with_two


def test_the_api_offers_every_field_the_host_form_edits(api_as):
    from fleet.models import GpuHost

    response = api_as("sre").post(
        "/api/hosts/",
        {"name": "api-sim-01", "address": "10.8.0.1", "gpu_telemetry": "simulated"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    assert response.json()["gpu_telemetry"] == "simulated"
    assert set(GpuHost.EDITABLE_FIELDS) <= set(response.json())


# Sharing a base URL or GPUs


def test_it_refuses_a_base_url_another_instance_serves_unless_allow_shared(api_as, inventory):
    client = api_as("sre")
    payload = _instance_payload(base_url=inventory["instances"].base_url.upper() + "/")
    refused = client.post("/api/instances/", payload, format="json")
    _assert_rejected(refused, "base_url")
    assert refused.json()["base_url"] == [f"vllm-a already serves {inventory['instances'].base_url}."]
    assert "allow_shared" in refused.json()["non_field_errors"][0]
    created = client.post("/api/instances/", {**payload, "allow_shared": True}, format="json")
    assert created.status_code == 201, created.json()
    assert "allow_shared" not in created.json()
    assert Instance.objects.filter(name="vllm-new").exists()


def test_it_refuses_a_gpu_another_instance_uses_unless_allow_shared(api_as, inventory):
    client = api_as("sre")
    refused = client.post("/api/instances/", _instance_payload(gpus=[1]), format="json")
    _assert_rejected(refused, "gpus")
    assert refused.json()["gpus"] == ["node-a/gpu1 is already used by vllm-a."]
    created = client.post("/api/instances/", _instance_payload(gpus=[1], allow_shared=True), format="json")
    assert created.status_code == 201, created.json()


def test_an_edit_of_an_instance_shared_on_purpose_needs_no_override_for_what_it_already_shares(
    api_as, inventory
):
    client = api_as("sre")
    url = client.post(
        "/api/instances/", _instance_payload(gpus=[1], allow_shared=True), format="json"
    ).json()["url"]
    assert client.patch(url, {"max_model_len": 4096}, format="json").status_code == 200
    moved = client.patch(url, {"base_url": inventory["instances"].base_url}, format="json")
    assert moved.status_code == 400 and "vllm-a already serves" in moved.json()["base_url"][0]


# Health and samples, read-only


def test_an_instance_never_probed_has_an_unknown_health_and_no_findings(api_as, inventory):
    health = api_as("viewer").get(_detail("instances", inventory["instances"])).json()["health"]
    assert health == {
        "state": "unknown",
        "label": "not probed yet",
        "reason": "",
        "since": None,
        "failing_streak": 0,
        "last_probe_at": None,
        "findings": [],
    }


def test_health_is_read_only(api_as, inventory):
    instance = inventory["instances"]
    response = api_as("sre").patch(_detail("instances", instance), {"health": {"state": "up"}}, format="json")
    assert response.status_code == 200 and response.json()["health"]["state"] == "unknown"


@pytest.mark.django_db(transaction=True)
def test_health_and_samples_show_what_a_real_probe_of_the_simulator_found(api_as, simulator, quick_settings):
    from fleet import probe_service
    from fleet.models import MetricSample
    from tests.fleet.probing import simulated_instances

    (instance,) = simulated_instances(1)
    sim = simulator()
    probe_service.run_cycle(kind="health")
    probe_service.run_cycle(kind="metrics")
    client = api_as("viewer")
    healthy = client.get(_detail("instances", instance)).json()["health"]
    assert (healthy["state"], healthy["failing_streak"], healthy["findings"]) == ("up", 0, [])
    sim.inject(instance.name, {"kind": "refuse_connections"})
    sim.wait_listening(instance.name, listening=False)
    probe_service.run_cycle(kind="health")
    health = client.get(_detail("instances", instance)).json()["health"]
    assert (health["state"], health["label"], health["failing_streak"]) == (
        "failing",
        "failing 1× in a row",
        1,
    )
    assert health["findings"][0]["category"] == "process.not_started"
    assert health["reason"] == health["findings"][0]["evidence"] and "refused" in health["reason"].lower()
    assert health["since"] and health["last_probe_at"]

    samples = client.get(f"/api/instances/{instance.pk}/samples/?series=probe_connect_s,kv_cache_usage")
    assert samples.status_code == 200, samples.json()
    rows = {row["series"]: row for row in samples.json()["samples"]}
    assert set(rows) == {"probe_connect_s", "kv_cache_usage"}
    stored = MetricSample.objects.filter(instance=instance, name="kv_cache_usage").latest("ts")
    assert (rows["kv_cache_usage"]["value"], rows["kv_cache_usage"]["unit"]) == (stored.value, "fraction")
    every = client.get(f"/api/instances/{instance.pk}/samples/").json()["samples"]
    assert {"probe_ttfb_s", "num_requests_running"} <= {row["series"] for row in every}


def test_samples_refuse_an_unknown_series_by_name(api_as, inventory):
    response = api_as("viewer").get(
        f"/api/instances/{inventory['instances'].pk}/samples/?series=ttft,kv_cache_usage"
    )
    assert response.status_code == 400
    assert response.json() == {"series": ["Unknown series: ttft."]}


def test_samples_leave_out_values_older_than_the_window(api_as, inventory):
    from datetime import timedelta

    from django.utils import timezone

    from fleet.models import MetricSample

    instance = inventory["instances"]
    now = timezone.now()
    MetricSample.objects.create(
        instance=instance, name="kv_cache_usage", ts=now - timedelta(hours=2), value=0.5
    )
    MetricSample.objects.create(
        instance=instance, name="probe_ttfb_s", ts=now - timedelta(minutes=5), value=0.2
    )
    MetricSample.objects.create(
        instance=instance, name="probe_ttfb_s", ts=now - timedelta(minutes=1), value=0.3
    )
    url = f"/api/instances/{instance.pk}/samples/"
    recent = api_as("viewer").get(url).json()["samples"]
    assert [(row["series"], row["value"]) for row in recent] == [("probe_ttfb_s", 0.3)]
    wider = api_as("viewer").get(url, {"minutes": 180}).json()["samples"]
    assert [row["series"] for row in wider] == ["kv_cache_usage", "probe_ttfb_s"]
    repeated = api_as("viewer").get(url, {"minutes": 180, "series": ["probe_ttfb_s", "e2e_p95_s"]})
    assert [row["series"] for row in repeated.json()["samples"]] == ["probe_ttfb_s"]


def test_the_instance_list_with_health_and_findings_stays_at_a_fixed_query_count(api_as):
    from fleet.models import InstanceState

    client = api_as("viewer")
    finding = {
        "code": "queue.backlog",
        "category": "queue.backlog",
        "severity": "degraded",
        "evidence": "50 waiting",
        "source": "metrics",
    }

    def add(n: int) -> None:
        for _ in range(n):
            host = make_host()
            instance = make_instance(host, gpus=[make_gpu(host)])
            InstanceState.objects.create(instance=instance, verdict="degraded", findings=[finding])

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            rows = client.get("/api/instances/").json()["results"]
        assert all(row["health"]["findings"] == [finding] for row in rows)
        return len(captured)

    add(2)
    with_two = queries()
    add(10)
    assert queries() == with_two


def test_the_schema_documents_health_and_the_samples_route(api_as):
    schema = api_as("viewer").get("/api/schema/").content.decode()
    assert "/api/instances/{id}/samples/" in schema
    assert "failing_streak" in schema and "allow_shared" in schema
