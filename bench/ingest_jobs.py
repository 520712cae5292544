"""Ingest off the request path: documents/s and chunks/s of background ingest jobs while
turns run, what a turn costs meanwhile, and what the request itself costs.

``python -m bench.ingest_jobs --docs 6 --sections 24``: an embedded PostgreSQL in a temp dir
(Redis from ``CTXGATE_TEST_REDIS_URL``, else an embedded one), the app in-process with the e5
embedder (warmed) and its ingest worker (default settings: batch 16, one job at a time, duty
0.5). 20 one-chunk documents are ingested first (201) so turns retrieve something, and 20
turns run alone (the baseline). Then ``--docs`` documents of ``--sections`` paragraphs of ~120
runbook words each (many chunks: every one is a job, 202) are posted, and turns are sent one
after another until every job is done. Reported: the POST latency, docs/s and chunks/s of the
jobs, turn p50/p95 alone and during the jobs, and for scale the time one such document takes
ingested inline (``KnowledgeService.ingest``, nothing else running): what the request used
to wait for.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from app.adapters.embedders.e5 import E5Embedder
from app.adapters.postgres import migrate
from app.core.model import Acl, DataLevel, Trust
from app.embedded import EmbeddedPostgres, EmbeddedRedis
from app.main import Container, create_app
from app.ports import NewDocument
from app.settings import Settings
from bench.generate import runbook_text
from bench.reembed import _pct, _turn

TOKEN = "bench-admin-token"  # noqa: S105 - a throwaway server's


def _doc(doc_id: str, text: str) -> dict[str, Any]:
    return {"doc_id": doc_id, "version": "v1", "text": text, "sensitivity": "internal",
            "trust": "reviewed", "acl": None}


async def main(docs: int, sections: int, seed: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="ctxgate-bench-ingest-", dir="/tmp"))
    pg = EmbeddedPostgres(base / "pg")
    redis = None if os.environ.get("CTXGATE_TEST_REDIS_URL") else EmbeddedRedis(base / "r")
    url = pg.start()
    try:
        await asyncio.to_thread(migrate.upgrade, url, app_role="ctxgate_app", app_password=None)
        settings = Settings(database_url=url, admin_token=TOKEN,
                            redis_url=os.environ.get("CTXGATE_TEST_REDIS_URL")
                            or (redis.start() if redis else None), redis_prefix="bench-ingest")
        e5 = E5Embedder()
        await e5.warm()
        container = await Container.open(settings, embedder=e5)
        try:
            return await _run(container, docs, sections, random.Random(seed))
        finally:
            await container.close()
    finally:
        pg.stop()
        if redis is not None:
            redis.stop()


async def _run(container: Container, docs: int, sections: int,
               rng: random.Random) -> dict[str, Any]:
    transport = httpx.ASGITransport(app=create_app(container=container))
    container.ingest_worker.start()  # ASGITransport runs no lifespan
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        r = await http.post("/v1/admin/keys", headers={"Authorization": f"Bearer {TOKEN}"},
                            json={"tenant_id": "bench", "role": "runtime",
                                  "max_data_level": "confidential"})
        key = r.json()["api_key"]
        auth = {"Authorization": f"Bearer {key}"}
        r = await http.post("/v1/knowledge/documents", headers=auth, json={"items": [
            _doc(f"small{i}", runbook_text(rng, 100)) for i in range(20)]})
        assert r.status_code == 201, r.text
        alone = [await _turn(http, key, rng) for _ in range(20)]

        texts = ["\n\n".join(runbook_text(rng, 120) for _ in range(sections))
                 for _ in range(docs)]
        accept_ms, jobs = [], []
        began = time.perf_counter()
        for i, text in enumerate(texts):
            start = time.perf_counter()
            r = await http.post("/v1/knowledge/documents", headers=auth, json=_doc(f"big{i}",
                                                                                   text))
            accept_ms.append((time.perf_counter() - start) * 1000)
            assert r.status_code == 202, r.text
            jobs.append(r.headers["location"])
        during: list[float] = []
        open_jobs = list(jobs)
        chunks = 0
        while open_jobs:
            during.append(await _turn(http, key, rng))
            still = []
            for location in open_jobs:
                job = (await http.get(location, headers=auth)).json()
                if job["status"] == "failed":
                    raise AssertionError(job)
                if job["status"] == "done":
                    chunks += job["chunks"]
                else:
                    still.append(location)
            open_jobs = still
        took = time.perf_counter() - began
    await container.ingest_worker.stop()
    start = time.perf_counter()
    inline_chunks = await container.knowledge.ingest(
        tenant_id="bench", content=texts[0], document=NewDocument(
            doc_id="inline", version="v1", title=None, domain=None,
            sensitivity=DataLevel.INTERNAL, trust=Trust.REVIEWED, acl=Acl(whole_tenant=True),
            observed_at=None, expires_at=None, source=None, chunks=()))
    inline_s = time.perf_counter() - start
    return {
        "docs": docs, "chunks": chunks, "jobs_s": round(took, 1),
        "docs_per_s": round(docs / took, 2), "chunks_per_s": round(chunks / took, 1),
        "accept_ms_p50": _pct(accept_ms, 50), "accept_ms_max": round(max(accept_ms), 1),
        "turns_alone": len(alone), "turn_ms_alone_p50": _pct(alone, 50),
        "turn_ms_alone_p95": _pct(alone, 95), "turns_during": len(during),
        "turn_ms_during_p50": _pct(during, 50), "turn_ms_during_p95": _pct(during, 95),
        "inline_doc_chunks": inline_chunks, "inline_doc_s": round(inline_s, 2)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=6)
    parser.add_argument("--sections", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(asyncio.run(main(args.docs, args.sections, args.seed)))
