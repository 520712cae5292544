"""Reports of ``ctxgate eval``: a JSON document (the record) and an HTML page (for people).

The HTML is one self-contained file: the charts are inline SVG drawn by matplotlib, and every
piece of text from the suite or the server is escaped (a case may plant ``<script>``).
"""

from __future__ import annotations

import html
import io
from typing import Any

from app.evaluation.metrics import HIGHER_IS_BETTER
from app.evaluation.runner import RunResult


def run_json(result: RunResult) -> dict[str, Any]:
    return {
        "suite": {"name": result.suite.name, "version": result.suite.version,
                  "format": result.suite.format, "k": result.suite.k},
        "config": {"name": result.config.name, "request": result.config.request,
                   "env": sorted(result.config.env)},  # names only: values may be secrets
        "server": result.server,
        "started_at": result.started_at,
        "passed": result.passed,
        "metrics": result.metrics(),
        "thresholds": [{"metric": m, "bound": b, "value": v, "ok": ok}
                       for m, b, v, ok in result.threshold_results()],
        "cases": [{
            "id": c.case.id, "set": c.case.set, "passed": c.passed,
            "seconds": round(c.seconds, 3),
            "failed_checks": [f"step {i}: {name}" for i, (_, s) in enumerate(c.steps)
                              for name, ok in s.checks if not ok],
            "checks": sum(len(s.checks) for _, s in c.steps),
        } for c in result.cases],
    }


def compare_json(a: RunResult, b: RunResult) -> dict[str, Any]:
    """B against A: per-metric delta, and a regression where B is worse than A by more than
    the suite's ``max_regression`` for that metric (0 when unset: any worsening counts)."""
    ma, mb = a.metrics(), b.metrics()
    rows, failed = [], []
    for metric, higher in HIGHER_IS_BETTER.items():
        va, vb = ma.get(metric), mb.get(metric)
        if va is None or vb is None:
            rows.append({"metric": metric, "a": va, "b": vb, "delta": None, "regression": False})
            continue
        worse = (va - vb) if higher else (vb - va)
        allowed = a.suite.max_regression.get(metric, 0.0)
        regression = worse > allowed + 1e-9
        rows.append({"metric": metric, "a": va, "b": vb, "delta": round(vb - va, 4),
                     "regression": regression})
        if regression:
            failed.append(metric)
    failed += [f"{side}: threshold {m}" for side, r in (("a", a), ("b", b))
               for m, _, _, ok in r.threshold_results() if not ok]
    return {"a": run_json(a), "b": run_json(b), "deltas": rows, "failed": failed,
            "passed": not failed}


def _chart(series: dict[str, dict[str, float | None]], title: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in HIGHER_IS_BETTER if any(s.get(m) is not None for s in series.values())]
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(metrics) + 1.2))
    height = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.barh([j + i * height for j in range(len(metrics))],
                [values.get(m) or 0.0 for m in metrics], height=height, label=name)
    ax.set_yticks([j + height * (len(series) - 1) / 2 for j in range(len(metrics))])
    ax.set_yticklabels([f"{m} ({'↑' if HIGHER_IS_BETTER[m] else '↓'})" for m in metrics])
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg"):]  # drop the XML prolog: the SVG is inlined in HTML


_STYLE = ("body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}"
          "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em}"
          ".ok{color:#176f2c}.bad{color:#b00020;font-weight:600}")


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f"<td>{html.escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
        for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, parts: list[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>")


def _verdict(passed: bool) -> str:
    return f"<p class='{'ok' if passed else 'bad'}'>{'PASSED' if passed else 'FAILED'}</p>"


def run_html(report: dict[str, Any]) -> str:
    title = f"ctxgate eval: {report['suite']['name']} {report['suite']['version']}"
    return _page(title, [
        f"<h1>{html.escape(title)}</h1>", _verdict(report["passed"]),
        f"<p>configuration {html.escape(report['config']['name'])}, server "
        f"{html.escape(report['server'])}, started {html.escape(report['started_at'])}</p>",
        _chart({report["config"]["name"]: report["metrics"]}, "metrics"),
        "<h2>Thresholds</h2>",
        _table(["metric", "bound", "value", "ok"],
               [[t["metric"], t["bound"], t["value"], t["ok"]] for t in report["thresholds"]]),
        "<h2>Cases</h2>",
        _table(["case", "set", "passed", "checks", "failed checks", "seconds"],
               [[c["id"], c["set"], c["passed"], c["checks"], "; ".join(c["failed_checks"]),
                 c["seconds"]] for c in report["cases"]]),
    ])


def compare_html(report: dict[str, Any]) -> str:
    a, b = report["a"], report["b"]
    title = f"ctxgate eval compare: {a['config']['name']} vs {b['config']['name']}"
    return _page(title, [
        f"<h1>{html.escape(title)}</h1>", _verdict(report["passed"]),
        _chart({a["config"]["name"]: a["metrics"], b["config"]["name"]: b["metrics"]},
               "A and B"),
        _table(["metric", "A", "B", "delta", "regression"],
               [[r["metric"], r["a"], r["b"], r["delta"], r["regression"]]
                for r in report["deltas"]]),
        "<h2>Failed</h2>", _table(["why"], [[f] for f in report["failed"]]),
    ])


def replay_html(report: dict[str, Any]) -> str:
    """``ctxgate eval replay``'s page: the variants' totals and, per turn, each variant's
    tokens and its refs against what the turn recorded (counts; the refs are in the JSON)."""
    names = list(report["summary"])
    rows = []
    for t in report["turns"]:
        cells: list[Any] = [t["turn_id"], t["status"], (t.get("recorded") or {}).get(
            "total_tokens")]
        for name in names:
            v = (t.get("variants") or {}).get(name)
            if v is None or v["status"] != "ok":
                cells.append(None if v is None else f"error: {v['error']}")
                continue
            d = v["vs_recorded"]
            cells.append(f"{v['shape']['total_tokens']} tokens, overlap {d['overlap']}, "
                         f"+{len(d['added'])} -{len(d['removed'])} ~{len(d['changed'])}")
        rows.append(cells)
    return _page("ctxgate eval replay", [
        "<h1>ctxgate eval replay</h1>", _verdict(report["passed"]),
        _table(["variant", "turns", "ok", "errors", "turns changed", "median tokens",
                "median overlap with recorded"],
               [[n, s["turns"], s["ok"], s["errors"], s["turns_changed"], s["median_tokens"],
                 s["median_overlap_with_recorded"]] for n, s in report["summary"].items()]),
        "<h2>Failed</h2>", _table(["why"], [[f] for f in report["failed"]]),
        "<h2>Turns</h2>",
        _table(["turn", "status", "recorded tokens", *names], rows),
    ])
