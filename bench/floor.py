"""The floor: the store calls one turn makes, from a tight asyncio loop, no service.

Same drivers and statements as the service: ``Database`` (app role, RLS, pgvector codec) and
the Redis client from ``app.adapters``, and the adapters' SQL constants, in the turn's order:
the key lookup and the replay check; then concurrently the Redis tail and pin snapshot,
session info, the latest checkpoint, vector search (the count once per tenant, as the
service remembers it, then exact or HNSW with the same settings), full-text search and the
memory recall (both rankers, one statement); then the compaction lookup, the manifest insert and
the replay entry. What a real turn does beyond this (HTTP, JSON, building candidates, the
pipeline, the manifest) is the service's overhead over the floor.

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

from app.adapters.postgres.audit import record_params
from app.adapters.postgres.codec import dumps
from app.adapters.postgres.compactions import LATEST_SQL as COMPACTION_SQL
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.keys import PRINCIPAL_SQL
from app.adapters.postgres.knowledge import (
    ANN_SETTINGS,
    COUNT_VISIBLE_SQL,
    EF_SEARCH_MIN,
    EXACT_MAX_ROWS,
    SEARCH_ANN_SQL,
    SEARCH_EXACT_SQL,
    SEARCH_TEXT_SQL,
    PgKnowledgeStore,
)
from app.adapters.postgres.manifests import INSERT_WITH_AUDIT_SQL
from app.adapters.postgres.memories import MEMORY_SQL
from app.adapters.postgres.sessions import INFO_SQL
from app.adapters.postgres.tasks import GET_LATEST_SQL
from app.adapters.redis.client import open_redis
from app.adapters.redis.keys import replay_key, tail_key
from app.adapters.redis.pins import RedisPinSnapshots
from app.core import fts
from app.core.model import DataLevel
from app.ports import KnowledgeQuery

_COUNT, _EXACT, _ANN = Sql(COUNT_VISIBLE_SQL), Sql(SEARCH_EXACT_SQL), Sql(SEARCH_ANN_SQL)
_FTS, _KEY = Sql(SEARCH_TEXT_SQL), Sql(PRINCIPAL_SQL)
_INFO, _LATEST, _MANIFEST = Sql(INFO_SQL), Sql(GET_LATEST_SQL), Sql(INSERT_WITH_AUDIT_SQL)
_MEMORY = Sql(MEMORY_SQL["recall"])
K = 8  # Settings.knowledge_k
MEMORY_K = 5  # Settings.memory_k


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
    key_hash: bytes = b""


def _visible(t: FloorTurn, level: DataLevel) -> dict[str, Any]:
    return {"tenant_id": t.tenant_id, "user_id": t.user_id, "groups": t.groups,
            "domain": t.domain, "max_level": int(level), "now": datetime.now(UTC)}


async def _floor_turn(db: Database, redis: Any, prefix: str, t: FloorTurn,
                      manifest: dict[str, Any], counts: dict[str, int]) -> None:
    vis = _visible(t, DataLevel.INTERNAL)
    turn_id = f"floor_{uuid.uuid4().hex[:16]}"
    async with db.connection() as conn:
        await conn.fetchrow(_KEY, {"key_hash": t.key_hash})
    await redis.get(replay_key(prefix, t.tenant_id, turn_id))

    async def tail() -> None:
        await redis.lrange(tail_key(prefix, t.tenant_id, t.session_id), 0, -1)

    async def pins() -> None:
        await redis.get(RedisPinSnapshots(redis, prefix=prefix, ttl_s=1).key(t.tenant_id,
                                                                            t.session_id))

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
        settings = {**ANN_SETTINGS, "hnsw.ef_search": str(min(1000, max(EF_SEARCH_MIN, 2 * K)))}
        async with db.tenant_tx(t.tenant_id, settings) as conn:
            n = counts.get(t.tenant_id)
            if n is None:
                n = counts[t.tenant_id] = await conn.fetchval(
                    _COUNT, {**params, "cap": EXACT_MAX_ROWS})
            if n < EXACT_MAX_ROWS:
                await conn.fetch(_EXACT, params)
                return
            if len(await conn.fetch(_ANN, params)) < K:
                await conn.fetch(_EXACT, params)

    q = fts.tsquery(t.query)
    recall = {"tenant_id": t.tenant_id, "user_id": t.user_id, "domain": t.domain,
              "task_id": t.task_id, "now": vis["now"], "max_level": vis["max_level"],
              "k": MEMORY_K}

    async def fulltext() -> None:
        if q is not None:
            async with db.tenant_tx(t.tenant_id) as conn:
                await conn.fetch(_FTS, {**vis, "tsquery": q, "k": K})

    async def memory() -> None:
        async with db.tenant_tx(t.tenant_id) as conn:
            await conn.fetch(_MEMORY, {**recall, "embedding": t.embedding, "tsquery": q})

    await asyncio.gather(tail(), pins(), info(), checkpoint(), vector(), fulltext(), memory())
    async with db.tenant_tx(t.tenant_id) as conn:
        await conn.fetchrow(COMPACTION_SQL, {"tenant_id": t.tenant_id,
                                             "session_id": t.session_id})
    body = dumps({**manifest, "turn_id": turn_id})
    async with db.tenant_tx(t.tenant_id) as conn:
        await conn.execute(_MANIFEST, {
            "tenant_id": t.tenant_id, "turn_id": turn_id, "key_id": "bench-floor",
            "session_id": t.session_id, "task_id": t.task_id, "user_id": t.user_id,
            "request_sha256": "0" * 64, "body": body, "created_at": None,
            **record_params([])})
    await redis.set(replay_key(prefix, t.tenant_id, turn_id), body, ex=60)


async def measure_floor(owner_url: str, redis_url: str, prefix: str, turns: list[FloorTurn],
                        manifest: dict[str, Any], *, n: int) -> list[float]:
    """Latency (ms) of ``n`` sequential floor turns, after a short warm-up."""
    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=10)
    redis = open_redis(redis_url)
    out: list[float] = []
    counts: dict[str, int] = {}
    try:
        for i in range(min(20, n)):
            await _floor_turn(db, redis, prefix, turns[i % len(turns)], manifest, counts)
        for i in range(n):
            t0 = time.perf_counter()
            await _floor_turn(db, redis, prefix, turns[i % len(turns)], manifest, counts)
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
