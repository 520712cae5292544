"""The floor: the store queries one turn issues, from a tight asyncio loop, no service.

Same drivers and statements as the service: ``Database`` (app role, RLS, pgvector codec) and
the Redis client from ``app.adapters``, and the adapters' SQL constants. One floor turn is,
concurrently, the Redis tail read, session info, the latest checkpoint, vector search (count,
then exact or HNSW with the same settings) and full-text search; then the manifest insert.
What a real turn does beyond this (key lookup, replay get/put, transcript search, memory
recall and pins, the pipeline itself) is the service's overhead over the floor.

Also here: filtered-search recall@10 of the service's vector search against exact search.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.knowledge import (
    ANN_SETTINGS_SQL,
    COUNT_VISIBLE_SQL,
    EF_SEARCH_MIN,
    EXACT_MAX_ROWS,
    SEARCH_ANN_SQL,
    SEARCH_EXACT_SQL,
    SEARCH_TEXT_SQL,
    PgKnowledgeStore,
)
from app.adapters.postgres.manifests import INSERT_SQL as MANIFEST_INSERT_SQL
from app.adapters.postgres.sessions import INFO_SQL
from app.adapters.postgres.tasks import GET_LATEST_SQL
from app.adapters.redis.client import open_redis
from app.adapters.redis.keys import tail_key
from app.core import fts
from app.core.model import DataLevel
from app.ports import KnowledgeQuery

_COUNT, _EXACT, _ANN = Sql(COUNT_VISIBLE_SQL), Sql(SEARCH_EXACT_SQL), Sql(SEARCH_ANN_SQL)
_ANN_SET, _FTS = Sql(ANN_SETTINGS_SQL), Sql(SEARCH_TEXT_SQL)
_INFO, _LATEST, _MANIFEST = Sql(INFO_SQL), Sql(GET_LATEST_SQL), Sql(MANIFEST_INSERT_SQL)
K = 8  # Settings.knowledge_k


@dataclass(frozen=True, slots=True)
class FloorTurn:
    tenant_id: str
    session_id: str
    task_id: str | None
    user_id: str
    groups: list[str]
    domain: str | None
    query: str
    embedding: list[float]


def _visible(t: FloorTurn, level: DataLevel) -> dict[str, Any]:
    return {"tenant_id": t.tenant_id, "user_id": t.user_id, "groups": t.groups,
            "domain": t.domain, "max_level": int(level), "now": datetime.now(UTC)}


async def _floor_turn(db: Database, redis: Any, prefix: str, t: FloorTurn,
                      manifest: dict[str, Any]) -> None:
    vis = _visible(t, DataLevel.INTERNAL)

    async def tail() -> None:
        await redis.lrange(tail_key(prefix, t.tenant_id, t.session_id), 0, -1)

    async def info() -> None:
        async with db.tenant_tx(t.tenant_id) as conn:
            await conn.fetchrow(_INFO, {"tenant_id": t.tenant_id, "session_id": t.session_id})

    async def checkpoint() -> None:
        if t.task_id is None:
            return
        async with db.tenant_tx(t.tenant_id) as conn:
            await conn.fetchrow(_LATEST, {"tenant_id": t.tenant_id, "task_id": t.task_id})

    async def vector() -> None:
        params = {**vis, "embedding": t.embedding, "k": K}
        async with db.tenant_tx(t.tenant_id) as conn:
            n = await conn.fetchval(_COUNT, {**params, "cap": EXACT_MAX_ROWS})
            if n < EXACT_MAX_ROWS:
                await conn.fetch(_EXACT, params)
                return
            await conn.execute(_ANN_SET,
                               {"ef_search": str(min(1000, max(EF_SEARCH_MIN, 2 * K)))})
            if len(await conn.fetch(_ANN, params)) < K:
                await conn.fetch(_EXACT, params)

    async def fulltext() -> None:
        q = fts.tsquery(t.query)
        if q is None:
            return
        async with db.tenant_tx(t.tenant_id) as conn:
            await conn.fetch(_FTS, {**vis, "tsquery": q, "k": K})

    await asyncio.gather(tail(), info(), checkpoint(), vector(), fulltext())
    turn_id = f"floor_{uuid.uuid4().hex[:16]}"
    async with db.tenant_tx(t.tenant_id) as conn:
        await conn.execute(_MANIFEST, {
            "tenant_id": t.tenant_id, "turn_id": turn_id, "key_id": "bench-floor",
            "session_id": t.session_id, "task_id": t.task_id, "user_id": t.user_id,
            "request_sha256": "0" * 64, "body": dumps({**manifest, "turn_id": turn_id}),
            "created_at": None})


async def measure_floor(owner_url: str, redis_url: str, prefix: str, turns: list[FloorTurn],
                        manifest: dict[str, Any], *, n: int) -> list[float]:
    """Latency (ms) of ``n`` sequential floor turns, after a short warm-up."""
    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=10)
    redis = open_redis(redis_url)
    out: list[float] = []
    try:
        for i in range(min(20, n)):
            await _floor_turn(db, redis, prefix, turns[i % len(turns)], manifest)
        for i in range(n):
            t0 = time.perf_counter()
            await _floor_turn(db, redis, prefix, turns[i % len(turns)], manifest)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        await redis.aclose()
        await db.close()
    return out


async def measure_recall(owner_url: str, tenant: str, embeddings: list[list[float]],
                         *, user_id: str, groups: list[str], domain: str | None,
                         level: DataLevel, k: int = 10) -> dict[str, Any]:
    """Recall@k of the service's vector search against the exact filtered scan."""
    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=2)
    store = PgKnowledgeStore(db)
    recalls: list[float] = []
    lat: list[float] = []
    visible = 0
    try:
        for emb in embeddings:
            q = KnowledgeQuery(tenant_id=tenant, user_id=user_id, groups=tuple(groups),
                               domain=domain, max_level=level, now=datetime.now(UTC),
                               embedding=emb, text="", k=k)
            t0 = time.perf_counter()
            hits = await store.search_vector(query=q)
            lat.append((time.perf_counter() - t0) * 1000)
            params = {**_visible(FloorTurn(tenant, "", None, user_id, groups, domain, "", emb),
                                 level), "embedding": emb, "k": k}
            async with db.tenant_tx(tenant) as conn:
                exact = [(r.doc_id, r.chunk_no) for r in await conn.fetch(_EXACT, params)]
                visible = int(await conn.fetchval(_COUNT, {**params, "cap": 10**9}))
            got = {(h.doc_id, h.chunk_no) for h in hits}
            if exact:
                recalls.append(len(got & set(exact)) / len(exact))
    finally:
        await db.close()
    return {
        "tenant": tenant, "visible_chunks": visible, "queries": len(embeddings),
        "path": "exact" if visible < EXACT_MAX_ROWS else "hnsw",
        "recall_at_10_mean": round(float(np.mean(recalls)), 4) if recalls else None,
        "recall_at_10_min": round(float(np.min(recalls)), 4) if recalls else None,
        **{f"search_{k_}": v for k_, v in percentiles(lat).items()},
    }


def percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None}
    a = np.asarray(values)
    return {f"p{p}_ms": round(float(np.percentile(a, p)), 3) for p in (50, 95, 99)}
