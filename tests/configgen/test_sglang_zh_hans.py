"""The SGLang parts of the config pages in Simplified Chinese: the alert rules and the dashboard
with SGLang chosen (and their SGLang cross-checks) read in Chinese outside identifiers, and the
files are the same bytes in every language."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import translation

from diagnostics.configgen import registry
from tests.zh import assert_speaks_chinese

pytestmark = pytest.mark.django_db

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}
SGLANG_NOISY = {
    "alerts": {
        "engine": "both",
        "sglang_job": "vllm",
        "sglang_kv_threshold": "0.8",
        "sglang_down_for": "10s",
    },
    "grafana": {"engine": "both", "refresh": "10s"},
    "sglang": {
        "tensor_parallel_size": "3",
        "gpu_devices": "0,1,2",
        "gpu_model": "a100-80gb",
        "mem_fraction_static": "0.1",
    },
}


@pytest.mark.parametrize("kind", list(SGLANG_NOISY))
def test_the_sglang_cross_checks_read_in_chinese(engineer, kind):
    response = engineer.get(reverse("diagnostics:config-generator", args=[kind]), SGLANG_NOISY[kind], **ZH)
    assert_speaks_chinese(response, where=f"/configs/{kind}/ (SGLang)")
    content = response.content.decode()
    assert "SGLang" in content and 'class="config"' in content


@pytest.mark.parametrize("kind", list(SGLANG_NOISY))
def test_the_sglang_files_are_the_same_bytes_in_every_language(kind):
    generator = registry.get(kind)
    outputs = {}
    for language in ("en", "zh-hans"):
        with translation.override(language):
            files = generator.render(generator.spec(SGLANG_NOISY[kind]))
            outputs[language] = [(f.name, f.content) for f in files]
    assert outputs["zh-hans"] == outputs["en"]
    assert not any(re.search(r"[\u4e00-\u9fff]", content) for _, content in outputs["en"])
