"""docs/monitoring.md and docs/grafana/kbroker-dashboard.json against the metrics the brokers export.

The exported names come from the collectors themselves (kbroker/metrics: ``requests.metric_names()``, the state
collectors' ``describe()``, prometheus_client's process/platform/gc collectors), so a renamed or removed metric
fails here until the docs, the alert rules and the dashboard follow -- and a new metric fails until it is documented.
"""
import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from kbroker.metrics import requests
from kbroker.metrics.cluster import declared_names, state_collectors
from kbroker.metrics.groups import GroupLagCollector

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "monitoring.md"
DASHBOARD = REPO / "docs" / "grafana" / "kbroker-dashboard.json"
# A metric name in a PromQL expression or the docs: ours and the process collector's.
NAME = re.compile(r"\b(?:kafka|kbroker|process|python)_[a-z0-9_]+")
# Prometheus' own series (written by the server for every target).
BUILTIN = {"up"}


def exported():
    """Every sample name a broker's /metrics can carry."""
    names = set(requests.metric_names())
    names |= declared_names(state_collectors(None, None, None) + [GroupLagCollector(None, None)])
    reg = CollectorRegistry()
    for c in (ProcessCollector, PlatformCollector, GCCollector):
        c(registry=reg)
    for fam in reg.collect():
        names.update(s.name for s in fam.samples)
        names.add(fam.name + "_total" if fam.type == "counter" else fam.name)
    return names


def expand(token):
    """``a_{x,y}_b`` -> [``a_x_b``, ``a_y_b``] (the docs write families of names that way)."""
    m = re.search(r"\{([a-z0-9_,]+)\}", token)
    if not m:
        return [token]
    return [e for alt in m.group(1).split(",") for e in expand(token[:m.start()] + alt + token[m.end():])]


def doc_section(title):
    text = DOC.read_text()
    start = text.index("\n## " + title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def alert_rules():
    section = doc_section("Alert rules")
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


def dashboard_exprs():
    dash = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    exprs.append(v)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(dash)
    return exprs


def unknown(names, known):
    return sorted(n for n in names if n not in known and n not in BUILTIN)


def test_the_exported_set_is_what_a_broker_serves():
    names = exported()
    for n in ("kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_brokertopicmetrics_bytesin_total",
              "kafka_controller_controllerstats_leaderelectionrateandtimems_count", "kbroker_consumergroup_lag",
              "kbroker_request_total_time_seconds_bucket", "process_resident_memory_bytes"):
        assert n in names
    assert "kafka_server_replicamanager_underreplicatedpartitions_total" not in names


def test_alert_rules_name_only_exported_metrics():
    rules = alert_rules()
    names = set(NAME.findall(rules))
    assert len(re.findall(r"^\s+- alert: ", rules, re.M)) >= 10
    assert len(names) >= 12
    assert unknown(names, exported()) == []
    for expr in re.findall(r"expr: (.*)", rules):
        assert expr.count("(") == expr.count(")"), expr


def test_dashboard_queries_name_only_exported_metrics():
    exprs = dashboard_exprs()
    assert len(exprs) >= 40
    names = {n for e in exprs for n in NAME.findall(e)}
    assert unknown(names, exported()) == []
    for e in exprs:
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}"), e


def test_dashboard_is_importable():
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"])
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "instance"}


def test_every_exported_metric_is_documented_and_every_documented_one_exists():
    reference = doc_section("Metric reference")
    # `name{label,label}` is a label set (dropped); `a_{x,y}_b` a family of names (expanded).
    documented = {e for tok in re.findall(r"`([^`]+)`", reference)
                  for e in expand(re.sub(r"\{[^{}]*\}(?![a-z0-9_])", "", tok))}
    documented = {m for d in documented for m in NAME.findall(d)}
    names = exported()
    families = {re.sub(r"_(bucket|count|sum)$", "", n) for n in names if n.startswith(("kafka_", "kbroker_"))}
    missing = sorted(f for f in families if f not in documented and f + "_total" not in documented
                     and not any(d.startswith(f) for d in documented))
    assert missing == []
    stale = sorted(d for d in documented if d.startswith(("kafka_", "kbroker_")) and d not in names
                   and d not in families)
    assert stale == []
