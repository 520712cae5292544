"""``ctxgate bench --scale smoke``: the whole pipeline on tiny data, on the test stores.

Uses the session's PostgreSQL and Redis (``pg_owner_url``/``redis_url``) with a unique tenant
prefix; starts only the server subprocess and the load-generator process.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import ingest
from bench.run import Config, run_bench

SECTIONS = {"config", "machine", "stores", "ingest", "scenarios", "server", "floor", "recall",
            "growth", "targets"}
SCENARIOS = {"closed_c1_client_emb", "closed_c8_client_emb", "closed_c32_client_emb",
             "open_rate", "closed_c1_server_emb", "probe_corpus_large", "probe_corpus_small",
             "probe_session_short", "probe_session_long"}


def test_bench_smoke(pg_owner_url: str, redis_url: str, uid: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    rep = run_bench(Config(scale="smoke", seed=7, out=out, owner_url=pg_owner_url,
                           redis_url=redis_url, prefix=f"b{uid}", progress=False))
    assert rep.keys() >= SECTIONS
    assert json.loads(out.read_text())["config"]["scale"] == "smoke"
    assert rep["scenarios"].keys() >= SCENARIOS
    for name, s in rep["scenarios"].items():
        assert s["ok"] > 0, (name, s["errors"])
        assert s["throughput_rps"] > 0, name
        assert s["p50_ms"] is not None and s["stages_p50_ms"], name
    assert rep["ingest"]["chunks"] == 240 and rep["ingest"]["chunks_per_s_copy"] > 0
    assert rep["floor"]["p50_ms"] > 0
    assert {"large", "small"} <= rep["recall"].keys()
    assert rep["recall"]["small"]["recall_at_10_mean"] == 1.0  # exact path
    assert rep["server"]["rss_max_mb"] is not None
    assert {t["status"] for t in rep["targets"]} <= {"met", "missed", "not measured"}


async def test_the_bulk_loads_fallback_index_is_the_migrations(pg_owner_url: str) -> None:
    """A crashed load that left the HNSW index dropped rebuilds it as the migrations define."""
    conn = await ingest.owner_connection(pg_owner_url)
    try:
        defined = await conn.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = $1", ingest.HNSW_INDEX)
    finally:
        await conn.close()
    assert defined == ingest.HNSW_FALLBACK
