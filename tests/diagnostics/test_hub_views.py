"""A model sized by its Hugging Face id everywhere a model is named: the catalogue keeps what was
fetched (its source URL and date) and answers the next ask; the sizing page's fetch form (and
"Fetch again"), its offer for a typed id the catalogue lacks, `manage.py size --hf-id` and the
API's `hf_id`, all against a real local hub server named by HF_ENDPOINT."""

import io
import json
from urllib.parse import parse_qs, urlparse

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from diagnostics import hub_service
from diagnostics.models import ModelSpec
from tests.conftest import HTMX_HEADERS
from tests.diagnostics.hub_server import COMMIT, closed_port_url, serving
from tests.diagnostics.test_hub import CONFIG, INDEX, SINGLE_FILE_BYTES
from tests.factories import make_host, make_instance

pytestmark = pytest.mark.django_db
HF_ID = "acme/plain-1b"


@pytest.fixture
def hub(settings, monkeypatch, tmp_path):
    """The local hub, named by HF_ENDPOINT, with one plain model."""
    for server in serving(monkeypatch, tmp_path):
        settings.HF_ENDPOINT = server.url
        settings.HF_TOKEN = ""
        settings.HUB_FETCH_TIMEOUT_S = 5
        server.add(HF_ID, config=CONFIG, large={"model.safetensors": SINGLE_FILE_BYTES})
        yield server


@pytest.fixture
def offline(settings):
    settings.HF_ENDPOINT = closed_port_url()
    return settings.HF_ENDPOINT


@pytest.fixture
def engineer_client(client, cast):
    client.force_login(cast.engineer)
    return client


def test_a_fetched_model_joins_the_catalogue_with_its_source_url_and_date(hub):
    spec, fetched = hub_service.model_for_hf_id(HF_ID)
    assert fetched and spec.source == ModelSpec.Source.HUB and spec.fetched_at is not None
    assert (spec.key, spec.name, spec.hf_id) == ("acme-plain-1b", HF_ID, HF_ID)
    assert spec.sources == [f"{hub.url}/{HF_ID}/resolve/{COMMIT}/config.json"]
    assert spec.weight_bytes == SINGLE_FILE_BYTES and spec.config == CONFIG
    spec.full_clean()  # what the admin would accept


def test_asking_again_uses_the_catalogue_and_fetching_again_refreshes_the_same_entry(hub):
    first, _ = hub_service.model_for_hf_id(HF_ID)
    asked = len(hub.requests)
    again, fetched = hub_service.model_for_hf_id("ACME/Plain-1B")  # ids are case-insensitive
    assert not fetched and again.pk == first.pk and len(hub.requests) == asked
    hub.add(HF_ID, config={**CONFIG, "num_hidden_layers": 20}, index=INDEX)
    refreshed, fetched = hub_service.model_for_hf_id(HF_ID, refresh=True)
    assert fetched and (refreshed.pk, refreshed.key) == (first.pk, first.key)
    assert refreshed.config["num_hidden_layers"] == 20 and refreshed.weight_bytes == 16_060_522_496
    assert ModelSpec.objects.filter(source=ModelSpec.Source.HUB).count() == 1


def test_a_shipped_model_asked_for_by_its_id_needs_no_fetch(hub):
    spec, fetched = hub_service.model_for_hf_id("Qwen/Qwen3-8B")
    assert spec.key == "qwen3-8b" and spec.source == ModelSpec.Source.SHIPPED and not fetched
    assert hub.requests == []


def test_the_console_sends_hf_token_to_the_hub(hub, settings):
    hub.add("acme/gated-8b", config=CONFIG, index=INDEX, gated_token="hf_granted")
    settings.HF_TOKEN = "hf_granted"
    spec, _ = hub_service.model_for_hf_id("acme/gated-8b")
    assert spec.weight_bytes == 16_060_522_496
    assert {seen.authorization for seen in hub.requests} == {"Bearer hf_granted"}


def test_the_page_fetches_a_model_by_its_id_and_sizes_it_with_the_inputs_it_had(hub, engineer_client):
    page = engineer_client.get(reverse("diagnostics:sizing")).content.decode()
    assert 'name="hf_id"' in page and 'hx-include="#sizing-form"' in page and 'id="hub-busy"' in page
    posted = {"hf_id": HF_ID, "model": "qwen3-8b", "gpu": "l40s", "gpus": "1", "max_model_len": "8192"}
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), posted, **HTMX_HEADERS)
    assert response.status_code == 200
    target = urlparse(response["HX-Redirect"])
    assert parse_qs(target.query) == {
        "model": ["acme-plain-1b"], "gpu": ["l40s"], "gpus": ["1"], "max_model_len": ["8192"]
    }  # fmt: skip
    sized = engineer_client.get(response["HX-Redirect"]).content.decode()
    assert "Starts:" in sized and "was fetched from" in sized
    assert "was fetched on" in sized and f"{hub.url}/{HF_ID}/resolve/{COMMIT}/config.json" in sized
    assert 'name="refresh" value="on"' in sized and "Fetch again" in sized


def test_fetch_again_refreshes_the_model_from_the_hub(hub, engineer_client):
    hub_service.model_for_hf_id(HF_ID)
    hub.add(HF_ID, config={**CONFIG, "num_hidden_layers": 20}, index=INDEX)
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": HF_ID, "refresh": "on"})
    assert response.status_code == 302
    assert ModelSpec.objects.get(hf_id=HF_ID).config["num_hidden_layers"] == 20


def test_a_model_already_in_the_catalogue_opens_without_a_fetch_and_says_so(hub, engineer_client):
    hub_service.model_for_hf_id(HF_ID)
    asked = len(hub.requests)
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": HF_ID}, follow=True)
    assert "is in the sizing catalogue, fetched on" in response.content.decode()
    assert len(hub.requests) == asked


def test_an_offline_hub_shows_the_message_and_the_upload_form(offline, engineer_client):
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": HF_ID}, **HTMX_HEADERS)
    content = response.content.decode()
    assert response.status_code == 200 and content.startswith('<section id="hub-fetch"')
    assert "Cannot reach" in content and "the console is offline or the hub is blocked" in content
    assert f'action="{reverse("diagnostics:sizing-upload")}"' in content and 'name="config_text"' in content
    assert f'name="name" value="{HF_ID}"' in content  # the upload keeps the id as the model's name


def test_without_htmx_a_failed_fetch_is_a_page_with_the_status_of_what_failed(offline, engineer_client):
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": HF_ID})
    assert response.status_code == 502 and "Cannot reach" in response.content.decode()
    invalid = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": "not an id"})
    assert invalid.status_code == 400 and "give it as owner/name" in invalid.content.decode()


def test_a_model_the_hub_lacks_is_named_with_the_hubs_answer(hub, engineer_client, settings):
    settings.HF_TOKEN = "hf_reader"
    response = engineer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": "acme/missing"})
    assert response.status_code == 404
    assert "has no model <code>acme/missing</code> (HTTP 404)" in response.content.decode()


def test_a_typed_model_the_catalogue_lacks_but_named_by_a_hub_id_is_offered_the_fetch(hub, engineer_client):
    query = {"model": HF_ID, "gpu": "l40s"}
    response = engineer_client.get(
        reverse("diagnostics:sizing"), query, HTTP_HX_TARGET="results", **HTMX_HEADERS
    )
    content = response.content.decode()
    assert "is not in the sizing catalogue, but it looks like a Hugging Face id" in content
    assert f'name="hf_id" value="{HF_ID}"' in content
    assert hub.requests == []  # the page only offers; the engineer fetches


def test_sizing_an_instance_serving_a_hub_model_the_catalogue_lacks_offers_the_fetch(hub, engineer_client):
    instance = make_instance(make_host(), served_model_name=HF_ID)
    response = engineer_client.get(reverse("diagnostics:sizing-instance", args=[instance.pk]), follow=True)
    assert "it looks like a Hugging Face id" in response.content.decode()


def test_engineers_alone_fetch_models(hub, viewer_client):
    assert viewer_client.post(reverse("diagnostics:sizing-hub"), {"hf_id": HF_ID}).status_code == 403
    assert hub.requests == []


def test_the_cli_sizes_a_model_by_its_hf_id_as_the_api_does(hub, engineer_client):
    out, err = io.StringIO(), io.StringIO()
    call_command("size", "--hf-id", HF_ID, "--gpu", "l40s", "--json", stdout=out, stderr=err)
    cli = json.loads(out.getvalue())
    assert cli["model"] == HF_ID and cli["fits"] is True
    assert f"fetched {HF_ID} from {hub.url} into the catalogue as acme-plain-1b" in err.getvalue()
    api = engineer_client.get(reverse("api-sizing"), {"hf_id": HF_ID, "gpu": "l40s"})
    assert api.status_code == 200 and api.json() == cli
    assert len([seen for seen in hub.requests if seen.path.endswith("config.json")]) == 1  # then the cache


def test_the_cli_says_when_the_hub_cannot_be_reached_and_what_to_do_instead(offline):
    with pytest.raises(CommandError, match=r"Cannot reach .* \(here: --config path/to/config\.json\)"):
        call_command("size", "--hf-id", HF_ID, "--gpu", "l40s", stdout=io.StringIO(), stderr=io.StringIO())


def test_the_cli_offers_hf_id_for_a_model_named_by_an_id_the_catalogue_lacks(hub):
    with pytest.raises(CommandError, match=f"or use --hf-id {HF_ID} to fetch it from Hugging Face"):
        call_command("size", "--model", HF_ID, "--gpu", "l40s", stdout=io.StringIO())


def test_the_api_says_the_hub_cannot_be_reached_as_a_bad_gateway(offline, engineer_client):
    response = engineer_client.post(
        reverse("api-sizing"), {"hf_id": HF_ID, "gpu": "l40s"}, content_type="application/json"
    )
    assert response.status_code == 502 and response.json()["hub_problem"] == "unreachable"
    assert response.json()["errors"]["hf_id"][0].startswith(f"Cannot reach {offline}")


def test_the_api_takes_model_or_hf_id_and_points_a_typed_id_to_hf_id(hub, engineer_client):
    both = engineer_client.get(reverse("api-sizing"), {"model": "qwen3-8b", "hf_id": HF_ID, "gpu": "l40s"})
    assert both.status_code == 400 and both.json()["errors"]["hf_id"] == ["Give model or hf_id, not both."]
    typed = engineer_client.get(reverse("api-sizing"), {"model": HF_ID, "gpu": "l40s"})
    assert typed.status_code == 400
    assert typed.json()["errors"]["model"][-1] == f"To fetch {HF_ID} from Hugging Face, pass it as hf_id."
    assert hub.requests == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_the_fetch_keeps_the_pages_inputs_and_an_offline_hub_offers_the_upload(
    page, live_server, cast, hub, settings
):
    from django.db import connections

    from tests.browser import OUTPUT_DIR, log_in

    try:
        log_in(page, live_server, cast.engineer, "/sizing/?model=qwen3-8b&gpu=l40s&max_model_len=8192")
        page.wait_for_selector("#results .verdict")
        page.wait_for_function("window.htmx !== undefined")  # htmx loads deferred
        page.fill("#id_hf_id", HF_ID)
        page.click("#hub-fetch button[type=submit]")
        page.wait_for_url("**model=acme-plain-1b**")
        assert "gpu=l40s" in page.url and "max_model_len=8192" in page.url
        assert "was fetched on" in page.inner_text("#results")
        page.wait_for_function("window.htmx !== undefined")
        settings.HF_ENDPOINT = closed_port_url()
        page.click("#results .hub-source button")  # Fetch again, with the hub now out of reach
        page.wait_for_selector("#hub-fetch .form-errors")
        assert "Cannot reach" in page.inner_text("#hub-fetch")
        assert page.is_visible("#hub-fetch textarea[name=config_text]")
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT_DIR / "sizing-hub-offline.png"), full_page=True)
    finally:
        connections.close_all()
