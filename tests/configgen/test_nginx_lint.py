"""The nginx linter: syntax errors with their line, then the gateway rules, each finding
with its line, why and the corrected snippet; the generator's own output lints clean."""

import pytest

from diagnostics.configgen import nginx, nginx_lint
from tests.hang import ends

# The guide's gateway template (3.2), as printed: a shared "anonymous" key bucket, and the
# embeddings, models and health locations without HTTP/1.1 or a cleared Connection header.
GUIDE_TEMPLATE = """\
limit_req_zone $binary_remote_addr zone=per_ip:10m rate=30r/s;
limit_req_zone $api_key zone=per_key:10m rate=10r/s;
limit_conn_zone $binary_remote_addr zone=per_ip_conn:10m;
map $http_authorization $api_key {
    default "anonymous";
    "~*Bearer\\s+(.+)" $1;
}
client_max_body_size 10m;
upstream vllm_servers {
    server 10.0.1.10:8000 weight=1;
    server 10.0.1.11:8000 weight=1;
    keepalive 64;
}
server {
    listen 80;
    proxy_connect_timeout 10s;
    proxy_send_timeout 30s;
    proxy_read_timeout 180s;
    proxy_buffering off;
    location /v1/chat/completions {
        limit_req zone=per_ip burst=20 nodelay;
        limit_req zone=per_key burst=5 nodelay;
        limit_conn per_ip_conn 10;
        limit_req_status 429;
        limit_conn_status 429;
        proxy_pass http://vllm_servers;
        proxy_set_header Host $host;
        proxy_http_version 1.1;
        proxy_set_header Connection '';
    }
    location /v1/completions {
        limit_req zone=per_ip burst=20 nodelay;
        limit_req_status 429;
        proxy_pass http://vllm_servers;
        proxy_set_header Host $host;
    }
    error_page 429 @rate_limited;
    location @rate_limited {
        default_type application/json;
        return 429 '{"error":{"message":"Rate limit exceeded."}}';
    }
}
"""


def rules(result):
    return {(f.rule, f.line) for f in result.findings}


def test_the_guides_template_shows_its_slips_with_their_lines():
    result = nginx_lint.lint(GUIDE_TEMPLATE)
    assert result.syntax_errors == [] and result.locations_checked == 3
    found = rules(result)
    assert ("shared_anonymous_bucket", 2) in found  # the per-key zone, line of its limit_req_zone
    assert ("http11", 31) in found and ("connection_header", 31) in found  # /v1/completions
    assert not any(rule == "sse_buffering" for rule, _ in found)  # buffering off is inherited
    shared = next(f for f in result.findings if f.rule == "shared_anonymous_bucket")
    assert "corrections #15" in shared.why and 'default "";' in shared.fix


def test_a_location_setting_one_header_loses_the_cleared_connection_from_above():
    text = """server {
    proxy_http_version 1.1;
    proxy_buffering off;
    proxy_read_timeout 300s;
    proxy_set_header Connection "";
    location /v1/ {
        proxy_set_header Host $host;
        proxy_pass http://127.0.0.1:8000;
    }
}
"""
    assert rules(nginx_lint.lint(text)) == {("connection_header", 6)}


def test_a_default_read_timeout_is_too_short_for_long_generations():
    text = "server { location / { proxy_pass http://127.0.0.1:8000; proxy_buffering off; } }"
    finding = next(f for f in nginx_lint.lint(text).findings if f.rule == "read_timeout_short")
    assert "proxy_read_timeout 60s" in finding.title and finding.fix == "proxy_read_timeout 150s;"
    assert not any(
        f.rule == "read_timeout_short" for f in nginx_lint.lint(text, longest_generation_s=30).findings
    )


def test_syntax_errors_come_back_with_their_line_and_no_rules_run():
    result = nginx_lint.lint("http {\n  server {\n    listen 80\n  }\n}\n")
    assert result.syntax_errors and result.syntax_errors[0][0] == 3
    assert "not terminated" in result.syntax_errors[0][1] and "/tmp" not in result.syntax_errors[0][1]
    assert result.findings == []


def test_a_whole_nginx_conf_with_an_http_block_is_read_too():
    (file,) = nginx.render(nginx.GENERATOR.spec({}))
    whole = "events { }\nhttp {\n" + file.content + "\n}\n"
    assert nginx_lint.lint(whole).clean


def test_the_generators_output_lints_clean():
    for preset in nginx.PRESETS:
        (file,) = nginx.render(nginx.GENERATOR.spec({}, preset=preset))
        assert nginx_lint.lint(file.content, longest_generation_s=59).clean, preset


@pytest.mark.parametrize(
    "data, message",
    [("", "empty"), (b"\xff\xfe server {}", "not UTF-8"), ("#" * 2_000_001, "reads up to")],
)
def test_input_it_cannot_read_gets_a_clear_error(data, message):
    with pytest.raises(nginx_lint.LintInputError, match=message):
        nginx_lint.lint(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("http {\n  server {\x00}\n}\n", r"holds a NUL byte \(line 2\): it is not a text file"),
        (b"server { listen 80; }\x00\x00", r"holds a NUL byte \(line 1\)"),
        ("server { listen \udcff80; }", r"not UTF-8 text \(byte 16\)"),
    ],
)
def test_text_with_nul_or_a_lone_surrogate_is_refused_clearly(data, message):
    with pytest.raises(nginx_lint.LintInputError, match=message):
        ends(nginx_lint.lint, data)


@pytest.mark.parametrize("longest", [float("inf"), float("nan"), 1e308, 0, -5])
def test_a_longest_generation_that_is_no_plausible_number_of_seconds_is_refused(longest):
    with pytest.raises(
        nginx_lint.LintInputError, match="must be a number of seconds above 0 and at most 604,800"
    ):
        nginx_lint.lint(GUIDE_TEMPLATE, longest_generation_s=longest)


def test_blocks_nested_thousands_deep_are_a_syntax_error_not_a_crash():
    result = ends(nginx_lint.lint, "http {" + " server {" * 20_000 + "}" * 20_000 + "}")
    assert result.syntax_errors == [(None, "blocks are nested hundreds deep; nginx configs nest a few")]


def test_a_timeout_of_thousands_of_digits_is_read_as_no_timeout_at_all():
    text = "server { location /v1/ { proxy_pass http://a; proxy_read_timeout " + "9" * 5000 + "s; } }"
    rules = {f.rule for f in ends(nginx_lint.lint, text).findings}
    assert "read_timeout_short" not in rules


def test_thousands_of_servers_are_linted_at_once_and_their_findings_listed_up_to_a_bound():
    text = "http {" + "server { location / { proxy_pass http://a; } }" * 20_000 + "}"
    result = ends(nginx_lint.lint, text)
    assert result.locations_checked == 20_000
    assert len(result.findings) == nginx_lint.MAX_FINDINGS + 1
    assert result.findings[-1].title == "79,500 more findings after these are not listed"


def test_a_config_that_ends_inside_a_directive_says_so():
    # Found by fuzzing: crossplane's parser stops with an empty message there.
    assert nginx_lint.lint("worker_processes 4\r").syntax_errors == [
        (None, "the config ends inside a directive: a ; or { is missing")
    ]


def test_a_burst_that_is_no_count_is_left_to_nginx_to_refuse():
    # Found by fuzzing: int("20nodelay") failed the whole lint.
    text = GUIDE_TEMPLATE.replace("burst=20 nodelay", "burst=20nodelay")
    assert "burst=20nodelay" in text
    rules = {f.rule for f in nginx_lint.lint(text).findings}
    assert "burst_zero" not in rules and "connection_header" in rules  # the other rules still run
