"""Summaries of load results and the target table (met / missed / not measured)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.floor import percentiles
from bench.load import Result


def summarize(r: Result) -> dict[str, Any]:
    ok = r.statuses.get(200, 0)
    stages: dict[str, list[float]] = {}
    for t in r.timings:
        for k, v in t.items():
            stages.setdefault(k, []).append(v)
    return {
        "requests": len(r.latencies_ms), "ok": ok,
        "statuses": {str(k): v for k, v in sorted(r.statuses.items())},
        "throughput_rps": round(ok / r.wall_s, 1) if r.wall_s > 0 else 0.0,
        "wall_s": round(r.wall_s, 2),
        **percentiles(r.latencies_ms),
        "stages_p50_ms": {k: round(float(np.median(v)), 3) for k, v in stages.items()},
        "errors": r.errors,
    }


def _t(name: str, target: str, value: Any, met: bool | None, note: str = "") -> dict[str, Any]:
    return {"target": name, "goal": target, "measured": value,
            "status": "not measured" if met is None else ("met" if met else "missed"),
            "note": note}


def targets(rep: dict[str, Any]) -> list[dict[str, Any]]:
    sc = rep["scenarios"]
    floor = rep["floor"]["p50_ms"]
    c1 = sc.get("closed_c1_client_emb", {}).get("p50_ms")
    out = []
    if c1 is not None and floor:
        ratio = c1 / floor
        out.append(_t("c=1 p50 vs floor", "<= 2x floor", f"{ratio:.2f}x ({c1} vs {floor} ms)",
                      ratio <= 2.0))
        out.append(_t("c=1 p50 (client embeddings)", "<= 10 ms", f"{c1} ms", c1 <= 10.0))
    op = sc.get("open_rate", {})
    if op.get("p99_ms") is not None:
        out.append(_t(f"open loop {rep['config']['rate']:.0f} rps p99", "<= 30 ms",
                      f"{op['p99_ms']} ms", op["p99_ms"] <= 30.0))
    sat = sc.get("closed_c32_client_emb", {})
    if sat.get("p99_ms") is not None:
        ok = sat["throughput_rps"] >= 300 and sat["p99_ms"] <= 150
        out.append(_t(f"saturation (c=32, {rep['server']['workers']} workers)",
                      ">= 300 rps at p99 <= 150 ms",
                      f"{sat['throughput_rps']} rps, p99 {sat['p99_ms']} ms", ok))
    for name, r in rep["recall"].items():
        if r.get("recall_at_10_mean") is None:
            continue
        ok = r["recall_at_10_mean"] >= 0.95 and (r["search_p99_ms"] or 0) <= 15
        out.append(_t(f"recall@10 {name} tenant ({r['visible_chunks']} visible, {r['path']})",
                      ">= 0.95 at p99 <= 15 ms",
                      f"{r['recall_at_10_mean']} at p99 {r['search_p99_ms']} ms", ok))
    g = rep["growth"]
    if g.get("session_ratio") is not None:
        out.append(_t("session length (short -> long probe)", "flat +-20%",
                      f"{g['session_ratio']:.2f}x", abs(g["session_ratio"] - 1) <= 0.2,
                      g["session_note"]))
    if g.get("corpus_ratio") is not None:
        out.append(_t("corpus size (small -> large tenant, same run)", "<= 1.5x",
                      f"{g['corpus_ratio']:.2f}x", g["corpus_ratio"] <= 1.5,
                      g["corpus_note"]))
    out.append(_t("corpus 10k -> 100k chunks", "<= 1.5x", None, None,
                  "needs a full-scale run to compare with"))
    rss = rep["server"].get("rss_max_mb")
    out.append(_t("server RSS per worker", "<= 300 MB", f"{rss} MB",
                  None if rss is None else rss <= 300))
    ing = rep["ingest"]
    rate = ing.get("chunks_per_s_with_index")
    out.append(_t("bulk ingest (COPY + HNSW rebuild)", ">= 2000 chunks/s",
                  f"{rate} chunks/s (COPY alone {ing.get('chunks_per_s_copy')})",
                  None if rate is None else rate >= 2000))
    return out
