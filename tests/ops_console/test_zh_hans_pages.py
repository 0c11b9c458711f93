"""Every page in Simplified Chinese: the language follows the browser's Accept-Language
until the header's switcher stores a choice, and no page left in zh-hans shows English
outside identifiers (tests/zh.py says what counts as one)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from core.roles import Role
from tests.pages import ADMIN_PAGES, PAGES, make_fleet, names, pages
from tests.zh import assert_speaks_chinese, visible_texts

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("template", list(PAGES))
def test_every_page_reads_in_chinese_for_the_roles_that_open_it(client, cast, template):
    fleet = make_fleet()
    path = template.format(**{name: obj.pk for name, obj in fleet.items()})
    client.force_login(cast.admin if PAGES[template] > Role.VIEWER else cast.viewer)
    response = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5", follow=True)
    assert_speaks_chinese(response, names=names(fleet), where=path)


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_the_admins_entry_points_read_in_chinese(client, cast, path):
    cast.admin.is_staff = cast.admin.is_superuser = True
    cast.admin.save()
    client.force_login(cast.admin)
    response = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-CN", follow=True)
    assert_speaks_chinese(response, names={cast.admin.username}, where=path)


def test_the_language_follows_accept_language(client, cast):
    client.force_login(cast.viewer)
    assert '<html lang="zh-hans"' in client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert '<html lang="en"' in client.get("/", HTTP_ACCEPT_LANGUAGE="en-GB").content.decode()


def test_the_switcher_remembers_the_choice_over_accept_language(client, cast):
    client.force_login(cast.viewer)
    answer = client.post(reverse("set_language"), {"language": "zh-hans", "next": "/fleet/"})
    assert answer.status_code == 302 and answer["Location"] == "/fleet/"
    page = client.get("/fleet/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<html lang="zh-hans"' in page
    assert 'value="en"' in page and 'aria-pressed="true" disabled' in page
    client.post(reverse("set_language"), {"language": "en", "next": "/fleet/"})
    assert '<html lang="en"' in client.get("/fleet/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()


def test_the_sign_in_page_offers_the_switch_too(client):
    page = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert_speaks_chinese(page, where="/accounts/login/")
    assert 'name="language"' in page.content.decode()


def test_every_page_lists_in_both_languages_with_the_same_links(client, cast):
    fleet = make_fleet()
    client.force_login(cast.admin)
    for path in pages(fleet):
        english = client.get(path, HTTP_ACCEPT_LANGUAGE="en", follow=True).content.decode()
        chinese = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-CN", follow=True).content.decode()
        assert english.count("<a ") == chinese.count("<a "), path


# What a person should never read: a Python timedelta ("0:09:20.680029"), a float with all its
# digits ("0.0069282456567907255"), None, nan, a lazy object's repr.
RAW_VALUES = re.compile(r"\b\d+:\d\d:\d\d\.\d{3,}|\d\.\d{6,}|\bNone\b|\bnan\b|<django\.utils|__proxy__")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_no_page_shows_a_raw_value_in_either_language(client, cast, language):
    fleet = make_fleet()
    client.force_login(cast.admin)
    raw = []
    for path in pages(fleet):
        html = client.get(path, HTTP_ACCEPT_LANGUAGE=language, follow=True).content.decode()
        raw += [f"{path}: {text.strip()[:100]!r}" for text in visible_texts(html) if RAW_VALUES.search(text)]
    assert not raw, "\n".join(raw)
