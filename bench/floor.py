"""The floor: the store calls one turn makes, from a tight asyncio loop, no service.

Same drivers and statements as the service: ``Database`` (app role, RLS, pgvector codec) and
the Redis client from ``app.adapters``, and the adapters' SQL constants, in the turn's order:
the key lookup; then concurrently the Redis tail and pin snapshot, and in one shared
read-only transaction (``Database.shared_reads``, as a turn's collect step) session info, the
latest checkpoint, vector search and memory recall (through their adapters, whose strategy is
the query: the capped exact scan or HNSW for a remembered large filter; both rankers in one
statement), full-text search and the compaction lookup; then the manifest insert. The load's
turns carry no turn_id, so the service makes no replay check or entry for them, nor does
this. What a real turn does beyond this (HTTP, JSON, building candidates, the pipeline, the
manifest) is the service's overhead over the floor.

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
    EXACT_MAX_ROWS,
    SEARCH_EXACT_SQL,
    SEARCH_TEXT_SQL,
    PgKnowledgeStore,
    ann_settings,
    visible_params,
)
from app.adapters.postgres.manifests import INSERT_WITH_AUDIT_SQL
from app.adapters.postgres.memories import PgMemoryStore
from app.adapters.postgres.sessions import INFO_SQL
from app.adapters.postgres.tasks import GET_LATEST_SQL
from app.adapters.redis.client import open_redis
from app.adapters.redis.keys import tail_key
from app.adapters.redis.pins import RedisPinSnapshots
from app.core import fts
from app.core.explain import RECORD_VERSION
from app.core.model import DataLevel
from app.ports import KnowledgeQuery, MemoryQuery
from app.service.detector_cache import fingerprint
from app.settings import Settings

_EXACT = Sql(SEARCH_EXACT_SQL)
_FTS, _KEY = Sql(SEARCH_TEXT_SQL), Sql(PRINCIPAL_SQL)
_INFO, _LATEST, _MANIFEST = Sql(INFO_SQL), Sql(GET_LATEST_SQL), Sql(INSERT_WITH_AUDIT_SQL)
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


def _knowledge_query(t: FloorTurn, level: DataLevel, embedding: list[float], k: int
                     ) -> KnowledgeQuery:
    return KnowledgeQuery(tenant_id=t.tenant_id, user_id=t.user_id, groups=tuple(t.groups),
                          domain=t.domain, max_level=level, now=datetime.now(UTC),
                          embedding=embedding, text="", k=k)


async def _floor_turn(db: Database, knowledge: PgKnowledgeStore, memories: PgMemoryStore,
                      redis: Any, prefix: str, t: FloorTurn, manifest: dict[str, Any]) -> None:
    kq = _knowledge_query(t, DataLevel.INTERNAL, t.embedding, K)
    vis = visible_params(kq)
    turn_id = f"floor_{uuid.uuid4().hex[:16]}"
    async with db.connection() as conn:
        await conn.fetchrow(_KEY, {"key_hash": t.key_hash})
    # (no replay check or entry: the load's turns carry no turn_id of their own)

    async def tail() -> None:
        await redis.lrange(tail_key(prefix, t.tenant_id, t.session_id), 0, -1)

    async def pins() -> None:
        await redis.get(RedisPinSnapshots(redis, prefix=prefix, ttl_s=1).key(t.tenant_id,
                                                                            t.session_id))

    async def info() -> None:
        async with db.read_tx(t.tenant_id) as conn:
            await conn.fetchrow(_INFO, {"tenant_id": t.tenant_id, "session_id": t.session_id})

    async def checkpoint() -> None:
        if t.task_id is None:
            return
        async with db.read_tx(t.tenant_id) as conn:
            await conn.fetchrow(_LATEST, {"tenant_id": t.tenant_id, "task_id": t.task_id})

    async def vector() -> None:  # the adapter itself: its exact-or-HNSW choice is the query
        await knowledge.search_vector(query=kq)

    q = fts.tsquery(t.query)

    async def fulltext() -> None:
        if q is not None:
            async with db.read_tx(t.tenant_id) as conn:
                await conn.fetch(_FTS, {**vis, "tsquery": q, "k": K, "spaces": None,
                                        "legacy": None, "embedding": t.embedding})

    async def memory() -> None:
        await memories.recall(query=MemoryQuery(
            tenant_id=t.tenant_id, user_id=t.user_id, domain=t.domain, task_id=t.task_id,
            max_level=kq.max_level, now=kq.now, embedding=t.embedding, text=t.query,
            k=MEMORY_K))

    async def compaction() -> None:
        async with db.read_tx(t.tenant_id) as conn:
            await conn.fetchrow(COMPACTION_SQL, {"tenant_id": t.tenant_id,
                                                 "session_id": t.session_id})

    async with db.shared_reads(t.tenant_id, ann_settings(K)):
        await asyncio.gather(tail(), pins(), info(), checkpoint(), vector(), fulltext(),
                             memory(), compaction())
    body = dumps({**manifest, "turn_id": turn_id})
    async with db.tenant_tx(t.tenant_id) as conn:
        await conn.execute(_MANIFEST, {
            "tenant_id": t.tenant_id, "turn_id": turn_id, "key_id": "bench-floor",
            "session_id": t.session_id, "task_id": t.task_id, "user_id": t.user_id,
            "request_sha256": "0" * 64, "body": body, "created_at": None, "replay": None,
            # what a turn keeps beside its manifest for explain (``record_scope``)
            "recorded": dumps({"v": RECORD_VERSION, "groups": list(t.groups), "domain": t.domain,
                               "data_level": "internal", "session_visibility": "self",
                               "purpose": None, "query": t.query,
                               "query_vector": "client"}),
            **record_params([])})


async def measure_floor(owner_url: str, redis_url: str, prefix: str, turns: list[FloorTurn],
                        manifest: dict[str, Any], *, n: int) -> list[float]:
    """Latency (ms) of ``n`` sequential floor turns, after a short warm-up."""
    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=10,
                             read_lanes=Settings().db_read_lanes)  # as an idle worker's turn
    redis = open_redis(redis_url)
    out: list[float] = []
    # remembers large permission filters as the service's does
    knowledge = PgKnowledgeStore(db, tokenizer=Settings().tokenizer,
                                 detectors=fingerprint())
    memories = PgMemoryStore(db)
    try:
        for i in range(min(20, n)):
            await _floor_turn(db, knowledge, memories, redis, prefix, turns[i % len(turns)],
                              manifest)
        for i in range(n):
            t0 = time.perf_counter()
            await _floor_turn(db, knowledge, memories, redis, prefix, turns[i % len(turns)],
                              manifest)
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
    store = PgKnowledgeStore(db, tokenizer=Settings().tokenizer,
                                 detectors=fingerprint())
    recalls: list[float] = []
    lat: list[float] = []
    visible = 0
    try:
        for emb in embeddings:
            q = _knowledge_query(FloorTurn(tenant, "", None, user_id, groups, domain, "", emb),
                                 level, emb, k)
            t0 = time.perf_counter()
            hits = await store.search_vector(query=q)
            lat.append((time.perf_counter() - t0) * 1000)
            params = {**visible_params(q), "embedding": emb, "k": k, "cap": None,
                      "spaces": None, "legacy": None}  # every stored vector: one space here
            async with db.tenant_tx(tenant) as conn:
                rows = await conn.fetch(_EXACT, params)
            exact = [(r.doc_id, r.chunk_no) for r in rows]
            visible = rows[0].visible if rows else 0
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
