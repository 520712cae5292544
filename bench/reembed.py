"""Re-embedding after an embedder switch: how long the background job takes, and what a
turn costs while it runs.

``python -m bench.reembed --docs 400``: an embedded PostgreSQL in a temp dir (Redis from
``CTXGATE_TEST_REDIS_URL``, else an embedded one) gets ``--docs`` one-chunk documents of ~100
runbook words, embedded by the e5 model under another name (``e5-before-switch``): the same
vectors, but stale to a server configured with e5 itself. Then the app opens with e5 and
starts the job (default batch and pause), and turns are sent one after another while it
runs (not with ``--no-turns``), then as many (at least 20) after it has finished.
Reported: rows re-embedded per second (beside the ingest's rows per second, the same model on
the same texts), and the turn latency p50/p95 during and after the job.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from app.adapters.embedders.e5 import E5Embedder
from app.adapters.postgres import migrate
from app.embedded import EmbeddedPostgres, EmbeddedRedis
from app.main import Container, create_app
from app.settings import Settings
from bench.generate import runbook_text


class Renamed:
    """e5 under another model id: its vectors are stale to a server configured with e5."""

    def __init__(self, inner: E5Embedder, model: str) -> None:
        self.inner, self.model, self.dim = inner, model, inner.dim

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed_passages(texts)


def _pct(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return round(values[0], 1) if values else None
    return round(statistics.quantiles(values, n=100)[q - 1], 1)


async def _turn(http: httpx.AsyncClient, key: str, rng: random.Random) -> float:
    body: dict[str, Any] = {"user_id": "alice", "query": runbook_text(rng, 8),
                            "data_level": "internal", "budget": {"max_tokens": 4000}}
    start = time.perf_counter()
    r = await http.post("/v1/context", headers={"Authorization": f"Bearer {key}"}, json=body)
    assert r.status_code == 200, r.text
    return (time.perf_counter() - start) * 1000


async def main(docs: int, seed: int, turns: bool) -> dict[str, Any]:
    token = "bench-admin-token"  # noqa: S105 - a throwaway server's
    base = Path(tempfile.mkdtemp(prefix="ctxgate-bench-reembed-", dir="/tmp"))
    pg = EmbeddedPostgres(base / "pg")
    redis = None if os.environ.get("CTXGATE_TEST_REDIS_URL") else EmbeddedRedis(base / "r")
    url = pg.start()
    try:
        await asyncio.to_thread(migrate.upgrade, url, app_role="ctxgate_app", app_password=None)
        settings = Settings(database_url=url, admin_token=token,
                            redis_url=os.environ.get("CTXGATE_TEST_REDIS_URL")
                            or (redis.start() if redis else None), redis_prefix="bench-reembed")
        e5 = E5Embedder()
        await e5.warm()
        rng = random.Random(seed)
        before = await Container.open(settings, embedder=Renamed(e5, "e5-before-switch"))
        return await _run(settings, before, e5, docs, rng, turns)
    finally:
        pg.stop()
        if redis is not None:
            redis.stop()


async def _run(settings: Settings, before: Container, e5: E5Embedder, docs: int,
               rng: random.Random, turns: bool) -> dict[str, Any]:
    admin = {"Authorization": "Bearer bench-admin-token"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(container=before)),
                                 base_url="http://bench") as http:
        r = await http.post("/v1/admin/keys", headers=admin, json={
            "tenant_id": "bench", "role": "runtime", "max_data_level": "confidential"})
        key = r.json()["api_key"]
        items = [{"doc_id": f"d{i}", "version": "v1", "text": runbook_text(rng, 100),
                  "sensitivity": "internal", "trust": "reviewed", "acl": None} for i in range(docs)]
        began = time.perf_counter()
        for start in range(0, docs, 100):
            r = await http.post("/v1/knowledge/documents", headers={
                "Authorization": f"Bearer {key}"}, json={"items": items[start:start + 100]})
            assert r.status_code in (200, 201), r.text
        ingest_s = time.perf_counter() - began
    await before.close()

    after = await Container.open(settings, embedder=e5)
    try:
        async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=create_app(container=after)),
                base_url="http://bench") as http:
            stale = (await http.get("/v1/admin/embeddings", headers=admin)).json()
            began = time.perf_counter()
            after.reembedder.start()
            during: list[float] = []
            while turns and after.reembedder.running:
                during.append(await _turn(http, key, rng))
            await after.reembedder.idle()
            took = time.perf_counter() - began
            idle = [await _turn(http, key, rng) for _ in range(max(len(during), 20))]
            done = (await http.get("/v1/admin/embeddings", headers=admin)).json()
    finally:
        await after.close()
    return {
        "docs": docs, "stale_before": stale["tables"]["knowledge_chunks"]["stale"],
        "stale_after": done["tables"]["knowledge_chunks"]["stale"],
        "job_s": round(took, 1), "rows_per_s": round(docs / took, 1),
        "ingest_rows_per_s": round(docs / ingest_s, 1),
        "turns_during": len(during), "turn_ms_during_p50": _pct(during, 50),
        "turn_ms_during_p95": _pct(during, 95), "turn_ms_after_p50": _pct(idle, 50),
        "turn_ms_after_p95": _pct(idle, 95)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-turns", action="store_true",
                        help="the job alone (turns are sent after it only)")
    args = parser.parse_args()
    print(asyncio.run(main(args.docs, args.seed, not args.no_turns)))
