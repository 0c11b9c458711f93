"""The guide's alert set is one table: the console's rules, the Prometheus rules generator and
the Alertmanager intake all take their names, alertnames, causes and defaults from it."""

from core.alert_set import GUIDE_ALERTS, by_alertname
from core.taxonomy import CATEGORIES
from diagnostics.configgen.alert_rules import RULES
from incidents.alertmanager import ALERTNAME_CATEGORIES
from incidents.default_rules import DEFAULT_RULES


def test_every_cause_is_a_taxonomy_category():
    assert {a.category for a in GUIDE_ALERTS} <= set(CATEGORIES)


def test_the_console_rules_are_the_table():
    assert [(r[0], r[1], r[2], r[6]) for r in DEFAULT_RULES] == [
        (a.key, a.name, a.signal, a.category) for a in GUIDE_ALERTS
    ]


def test_the_generated_prometheus_rules_carry_the_table_s_alertnames_and_defaults():
    table = {a.alertname: a for a in GUIDE_ALERTS if a.alertname}
    assert {r.alert for r in RULES} == set(table)
    for rule in RULES:
        assert (rule.severity, rule.threshold) == (
            table[rule.alert].prometheus_severity,
            table[rule.alert].guide_threshold,
        )


def test_alertmanager_maps_every_alertname_of_the_table_to_its_cause():
    assert ALERTNAME_CATEGORIES["VLLMKVCacheSwap"] == "oom.kv_pressure"  # was "other"
    assert {name: ALERTNAME_CATEGORIES[name] for name in by_alertname()} == {
        name: alert.category for name, alert in by_alertname().items()
    }


def test_the_kv_rule_fires_on_the_probes_kv_pressure_not_on_usage():
    (kv,) = [a for a in GUIDE_ALERTS if a.key == "kv_cache_high"]
    assert kv.signal == "kv_pressure"


def test_the_generated_kv_rule_and_the_probes_agree_on_how_many_waiting_make_pressure():
    from diagnostics.configgen.alert_rules import FIELDS
    from fleet.probes.findings import Thresholds

    (field,) = [f for f in FIELDS if f.name == "kv_min_waiting"]
    assert float(field.default) == Thresholds().kv_min_waiting
