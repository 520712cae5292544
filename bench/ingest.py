"""Bulk load through the fast path: COPY (asyncpg ``copy_records_to_table``) as the owner.

The HNSW index is dropped before the load and rebuilt after it with
``maintenance_work_mem = '1GB'`` and ``max_parallel_maintenance_workers = 1``; its definition
is read from ``pg_indexes`` first, so the rebuilt index is exactly the migration's. Then
``VACUUM (ANALYZE)`` of the loaded tables. Then the
Redis tails are written (as the service would have cached them) and one runtime key per
tenant is created through the key service.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector
from sqlalchemy.engine import make_url

from app.adapters.postgres.db import Database
from app.adapters.postgres.keys import PgKeyStore
from app.adapters.postgres.tasks import checkpoint_from, findings_param
from app.adapters.redis.client import open_redis
from app.adapters.redis.keys import tail_key
from app.adapters.redis.session_tail import Derived, encode_event
from app.adapters.tokenizers.tiktoken_counter import TiktokenCounter
from app.core.candidates import scan_task_state, with_derived
from app.core.detectors import ALL_DETECTORS
from app.core.detectors.prefilter import Prefiltered
from app.core.model import DataLevel, Role, SessionEvent
from app.ports import NewKey
from app.service.detector_cache import fingerprint
from app.service.keys import KeyService
from app.settings import Settings
from bench.generate import Dataset, Progress

HNSW_INDEX = "knowledge_chunks_embedding"
HNSW_FALLBACK = (  # the migration's definition, if a crashed run left the index dropped
    "CREATE INDEX knowledge_chunks_embedding ON public.knowledge_chunks USING hnsw "
    "(embedding vector_cosine_ops) WITH (m='16', ef_construction='96') WHERE is_current")
DOC_COLS = ("tenant_id", "doc_id", "version", "revision", "title", "domain", "sensitivity",
            "trust", "acl_all", "acl_users", "acl_groups", "observed_at", "expires_at", "source",
            "is_current")
CHUNK_COLS = ("tenant_id", "doc_id", "version", "chunk_no", "text", "tokens", "embedding",
              "search_text", "domain", "sensitivity", "trust", "acl_all", "acl_users",
              "acl_groups", "observed_at", "expires_at", "is_current", "tokenizer", "findings")
SESSION_COLS = ("tenant_id", "session_id", "user_id", "agent_id", "parent_session_id",
                "last_seq", "created_at", "updated_at")
EVENT_COLS = ("tenant_id", "session_id", "seq", "type", "role", "content", "call_id", "name",
              "arguments", "is_error", "created_at", "search_text")
TASK_COLS = ("tenant_id", "task_id", "revision", "user_id", "session_id", "parent_task_id",
             "body", "created_at", "findings")
MEMORY_COLS = ("tenant_id", "memory_id", "statement", "norm_sha256", "origin", "evidence_ref",
               "scope_level", "user_id", "domain", "owner", "source_session", "confidence",
               "sensitivity", "status", "pinned", "observed_at", "confirmed_at", "embedding",
               "search_text")
BATCH = 5000
TAIL_LEN = 200  # Settings.session_tail_len


@dataclass(frozen=True, slots=True)
class IngestResult:
    chunks: int
    copy_s: float
    index_s: float
    events: int
    events_s: float
    tails_s: float

    def as_dict(self) -> dict[str, Any]:
        total = self.copy_s + self.index_s
        return {
            "chunks": self.chunks, "copy_s": round(self.copy_s, 3),
            "index_rebuild_s": round(self.index_s, 3),
            "chunks_per_s_copy": round(self.chunks / self.copy_s, 1) if self.copy_s else None,
            "chunks_per_s_with_index": round(self.chunks / total, 1) if total else None,
            "events": self.events, "events_s": round(self.events_s, 3),
            "events_per_s": round(self.events / self.events_s, 1) if self.events_s else None,
            "redis_tails_s": round(self.tails_s, 3),
        }


async def owner_connection(owner_url: str) -> asyncpg.Connection:
    url = make_url(owner_url)
    host = url.query.get("host", url.host)
    conn: asyncpg.Connection = await asyncpg.connect(
        host=host if isinstance(host, str) else None, port=url.port, user=url.username,
        password=url.password, database=url.database)
    await register_vector(conn)
    return conn


async def _copy(conn: asyncpg.Connection, table: str, cols: tuple[str, ...],
                rows: list[tuple[Any, ...]], progress: Progress | None = None) -> None:
    for i in range(0, len(rows), BATCH):
        part = rows[i:i + BATCH]
        await conn.copy_records_to_table(table, records=part, columns=list(cols))
        if progress is not None:
            progress.update(len(part))


async def bulk_load(ds: Dataset, owner_url: str, *, progress: bool = True) -> IngestResult:
    conn = await owner_connection(owner_url)
    try:
        indexdef = await conn.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = $1", HNSW_INDEX) or HNSW_FALLBACK
        chunk_rows = [(*c[:6], ds.embeddings[c[6]], *c[7:]) for c in ds.chunks]
        bar = Progress(len(chunk_rows), "COPY chunks", enabled=progress)
        t0 = time.perf_counter()
        async with conn.transaction():
            await conn.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
            await _copy(conn, "knowledge_documents", DOC_COLS, ds.docs)
            await _copy(conn, "knowledge_chunks", CHUNK_COLS, chunk_rows, bar)
        copy_s = time.perf_counter() - t0
        bar.close()
        t1 = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '1GB'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        await conn.execute(indexdef)
        index_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        events = [(*e[:8], e[8], e[9], e[10], e[11]) for e in ds.events]
        async with conn.transaction():
            await _copy(conn, "sessions", SESSION_COLS, ds.sessions)
            await _copy(conn, "session_events", EVENT_COLS, events)
            tasks = [(*t[:6], _json(t[6]), t[7], _task_findings(t)) for t in ds.checkpoints]
            await _copy(conn, "task_checkpoints", TASK_COLS, tasks)
            await _copy(conn, "memories", MEMORY_COLS, ds.memories)
        events_s = time.perf_counter() - t2
        # Finished as a bulk load should be: visibility map and hint bits set now, not by
        # the first measured queries or by an autovacuum in the middle of the measured load.
        await conn.execute("VACUUM (ANALYZE) knowledge_chunks, knowledge_documents, sessions, "
                           "session_events, task_checkpoints, memories")
    finally:
        await conn.close()
    return IngestResult(chunks=len(chunk_rows), copy_s=copy_s, index_s=index_s,
                        events=len(ds.events), events_s=events_s, tails_s=0.0)


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def _task_findings(row: tuple[Any, ...]) -> str | None:
    """What the service stores with a checkpoint it writes (``TaskService.put``): the
    detectors' findings in its task state texts, tagged with the detector code's fingerprint."""
    _, task, revision, user, sid, parent, body, at = row
    cp = checkpoint_from(body, task_id=task, revision=revision, user_id=user, session_id=sid,
                         parent_task_id=parent, created_at=at)
    scanned = replace(cp, scanned=scan_task_state(cp, datetime.now(UTC),
                                                  Prefiltered(ALL_DETECTORS)))
    return findings_param(scanned, fingerprint())


async def write_tails(ds: Dataset, redis_url: str, prefix: str) -> float:
    """Cache each session's last TAIL_LEN events in Redis, as the service's append would:
    with their token counts and detector findings."""
    client = open_redis(redis_url)
    tokenizer = Settings().tokenizer
    count, scan = TiktokenCounter(tokenizer), Prefiltered(ALL_DETECTORS)
    derived = Derived(tokenizer=tokenizer, detectors=fingerprint())
    t0 = time.perf_counter()
    by_session: dict[tuple[str, str], list[SessionEvent]] = {}
    for e in ds.events:
        tenant, sid, seq, typ, role, content, call_id, name, args, err, at, _ = e
        by_session.setdefault((tenant, sid), []).append(SessionEvent(
            seq=seq, type=typ, role=role, content=content, call_id=call_id, name=name,
            arguments=None if args is None else _loads(args), is_error=err, created_at=at))
    try:
        async with client.pipeline(transaction=False) as pipe:
            for (tenant, sid), evs in by_session.items():
                key = tail_key(prefix, tenant, sid)
                pipe.delete(key)
                pipe.rpush(key, *[encode_event(with_derived(e, count, scan), derived)
                                  for e in evs[-TAIL_LEN:]])
                pipe.expire(key, 7 * 24 * 3600)
            await pipe.execute()
    finally:
        await client.aclose()
    return time.perf_counter() - t0


def _loads(raw: str) -> Any:
    import orjson

    return orjson.loads(raw)


async def create_keys(ds: Dataset, owner_url: str) -> dict[str, str]:
    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=1)
    try:
        svc = KeyService(PgKeyStore(db))
        out: dict[str, str] = {}
        for tenant in ds.tenants:
            _, api_key = await svc.create(NewKey(
                tenant_id=tenant, role=Role.RUNTIME, max_data_level=DataLevel.CONFIDENTIAL,
                domains=None, name="bench"))
            out[tenant] = api_key
        return out
    finally:
        await db.close()
