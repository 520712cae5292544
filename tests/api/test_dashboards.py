"""deploy/'s Grafana dashboard and Prometheus rules speak only of metrics the service exports.

The app serves a few turns (two in one session: a prefix to reuse), its /metrics is scraped,
and every PromQL expression of both files is read token by token: each metric it selects must
be a family the scrape declared — a counter as ``_total``, a histogram as ``_bucket``,
``_sum`` or ``_count``, a gauge by its name — and each label a matcher or grouping names must
be one of that family's. ``promtool check rules`` (Debian's ``prometheus`` package) then
parses both with Prometheus' own parser: the rules file as it is, the dashboard's
expressions as recording rules of a scratch file.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, session, turn

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "ctxgate-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "ctxgate-rules.yaml"
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "gauge": ("",)}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile"}
KEYWORDS = {"and", "or", "unless", "offset", "bool", "atan2", "inf", "nan"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_TOKEN = re.compile(r"""
    (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<punct>\S)
""", re.VERBOSE)


@dataclass
class Selector:
    metric: str
    labels: set[str] = field(default_factory=set)


def selectors(expr: str) -> list[Selector]:
    """The metric selectors of a PromQL expression, with the labels they match or group by
    (grouping labels are attributed to every selector of the expression)."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(expr)]
    found: list[Selector] = []
    grouped: set[str] = set()
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "ident" and text in GROUPING and nxt == "(":
            i += 2
            while tokens[i][1] != ")":
                if tokens[i][0] == "ident":
                    grouped.add(tokens[i][1])
                i += 1
        elif kind == "ident" and text not in AGGREGATIONS | KEYWORDS | GROUPING and nxt != "(":
            selector = Selector(text)
            if nxt == "{":
                i += 2
                while tokens[i][1] != "}":
                    if tokens[i][0] == "ident":
                        selector.labels.add(tokens[i][1])
                    i += 1
            found.append(selector)
        i += 1
    for s in found:
        s.labels |= grouped - {"le"}
    return found


def test_selectors_reads_promql() -> None:
    got = selectors('histogram_quantile(0.99, sum by (le, stage) (rate(a_bucket{x="}",'
                    ' y=~"5.."}[5m]))) / on (x) group_left sum(b_total) > bool 1 or c')
    assert [(s.metric, s.labels) for s in got] == [
        ("a_bucket", {"x", "y", "stage"}), ("b_total", {"x", "stage"}), ("c", {"x", "stage"})]


def dashboard_exprs() -> Iterator[tuple[str, str]]:
    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            yield from walk(panel.get("panels", []))
            for target in panel.get("targets", []):
                expr = target["expr"]
                for var, value in GRAFANA_VARS.items():
                    expr = expr.replace(var, value)
                yield f"dashboard: {panel['title']} {target['refId']}", expr

    yield from walk(json.loads(DASHBOARD.read_text())["panels"])


def rule_exprs() -> Iterator[tuple[str, str]]:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            yield f"rules: {rule.get('alert') or rule.get('record')}", rule["expr"]


@pytest.fixture
async def exported(client: httpx.AsyncClient, make_key: KeyMaker,
                   tenant: str) -> dict[str, tuple[str, set[str]]]:
    """The scrape after a few turns: family name -> (type, label names seen)."""
    key = await make_key(tenant)
    await ingest(client, key, "runbook", "Refund calls time out when the gateway is slow.")
    await session(client, key, "s1")
    for turn_id in ("t1", "t2"):
        r = await client.post("/v1/context", headers=bearer(key),
                              json=turn(turn_id=turn_id, session_id="s1"))
        assert r.status_code == 200, r.text
    r = await client.get("/metrics")
    assert r.status_code == 200
    out: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(r.text):
        labels = {name for s in family.samples for name in s.labels} - {"le"}
        out[family.name] = (family.type, labels)
    return out


def test_every_expression_names_exported_metrics_and_labels(
        exported: dict[str, tuple[str, set[str]]]) -> None:
    exprs = [*dashboard_exprs(), *rule_exprs()]
    assert len(exprs) > 30
    problems: list[str] = []
    for where, expr in exprs:
        found = selectors(expr)
        if not found:
            problems.append(f"{where}: no metric in {expr!r}")
        for s in found:
            family = next((f for f, (kind, _) in exported.items()
                           for suffix in SUFFIXES.get(kind, ())
                           if s.metric == f + suffix), None)
            if family is None:
                problems.append(f"{where}: {s.metric} is not exported (as such)")
                continue
            labels = exported[family][1]
            if labels and not s.labels <= labels:
                problems.append(f"{where}: {s.metric} has no label {s.labels - labels}")
    assert problems == []


async def test_the_turns_moved_the_new_series(client: httpx.AsyncClient, make_key: KeyMaker,
                                              tenant: str) -> None:
    key = await make_key(tenant)
    await session(client, key, "s1")
    for turn_id in ("t1", "t2", "t3"):
        r = await client.post("/v1/context", headers=bearer(key),
                              json=turn(turn_id=turn_id, session_id="s1"))
        assert r.status_code == 200, r.text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families((await client.get("/metrics")).text)
               for s in f.samples}
    # The second and third turns had one before them; the same request, the same prefix.
    assert samples[("ctxgate_stable_prefix_turns_total", (("prefix", "reused"),))] == 2
    assert samples[("ctxgate_stable_prefix_turns_total", (("prefix", "changed"),))] == 0
    # The tail's events scanned again on the later turns hit the findings cache.
    assert samples[("ctxgate_cache_lookups_total",
                    (("cache", "detector"), ("result", "hit")))] > 0
    assert samples[("ctxgate_db_pool_max_connections", ())] > 0
    assert samples[("ctxgate_db_pool_connections", ())] >= 1
    assert samples[("ctxgate_db_pool_waiting_requests", ())] == 0


def test_promtool_checks_the_rules_and_the_dashboard_expressions(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package 'prometheus'); the metric-name "
                    "test above still checks every expression's metrics")
    scratch = tmp_path / "dashboard-rules.yaml"
    scratch.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": expr}
        for i, (_, expr) in enumerate(dashboard_exprs())]}]}))
    for path in (RULES, scratch):
        done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_is_importable_and_shows_what_ops_asked_for() -> None:
    board = json.loads(DASHBOARD.read_text())
    assert {"title", "uid", "schemaVersion", "panels", "templating"} <= set(board)
    (variable,) = board["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == (
        "datasource", "datasource", "prometheus")
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        grid = p["gridPos"]
        assert grid["x"] + grid["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert p["targets"] and p["description"], p["title"]
    titles = " | ".join(p["title"].lower() for p in panels)
    for asked in ("turn rate", "5xx", "turn latency", "stage timings", "drops by guard",
                  "pool saturation", "cache hit ratio", "breaker", "prefix reuse", "noise",
                  "dependency errors"):
        assert asked in titles, asked
