"""Durable ingest jobs (``IngestJobStore``) in ``knowledge_jobs`` (migration 0020).

A job row holds the submitted document (its metadata and text, as JSON) from ``create``
until the job ends: ``end`` clears it in the statement that marks the job done or failed, so
user content outlives the job only in the knowledge tables it was written to. Ended rows are
deleted after the retention window (``purge``, a definer function: every tenant's at once).

A claim is a lease, not a lock held on a connection: ``claim`` moves a due job to ``running``
with ``attempts + 1`` and ``not_before = now() + lease``; every ``progress`` extends it. A
worker that dies leaves the job ``running`` with a lease that lapses, and the job is due again
(``ctxgate_open_knowledge_jobs``). Each write of an attempt names the attempt it belongs to
(``attempts = :a``), so a worker that lost its lease changes nothing.
"""

# ruff: noqa: S608 - the SQL joins constant fragments only; every value is a bind parameter
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Row, Sql
from app.core.model import Acl, DataLevel, Trust
from app.ports import ClaimedIngest, DocumentBounds, IngestJob, NewDocument

_COLS = ("tenant_id, job_id, doc_id, version, status, attempts, progress, total, chunks, "
         "error, not_before, created_at, updated_at")
_FENCE = "tenant_id = :t AND job_id = :id AND attempts = :a AND status = 'running'"
_S = {name: Sql(sql) for name, sql in {
    "create": f"""
INSERT INTO knowledge_jobs (tenant_id, job_id, doc_id, version, status, document, acl_users,
    sensitivity, domain)
VALUES (:t, :id, :doc_id, :version, 'pending', CAST(:document AS jsonb),
        CAST(:acl_users AS text[]), :sensitivity, :domain)
RETURNING {_COLS}""",
    # Within the caller's bounds, as documents are (NULL bounds: any).
    "get": f"""SELECT {_COLS} FROM knowledge_jobs WHERE tenant_id = :t AND job_id = :id
AND sensitivity <= :max_level
AND (CAST(:domains AS text[]) IS NULL OR domain = ANY (CAST(:domains AS text[])))""",
    "open": "SELECT tenant_id, job_id FROM ctxgate_open_knowledge_jobs(:limit)",
    "claim": f"""
UPDATE knowledge_jobs SET status = 'running', attempts = attempts + 1, progress = 0,
    not_before = now() + make_interval(secs => :lease), updated_at = now()
WHERE tenant_id = :t AND job_id = :id AND status IN ('pending', 'running')
    AND not_before <= now()
RETURNING {_COLS}, document""",
    "progress": f"""
UPDATE knowledge_jobs SET progress = :done, total = :total, updated_at = now(),
    not_before = now() + make_interval(secs => :lease)
WHERE {_FENCE}""",
    "retry": f"""
UPDATE knowledge_jobs SET status = 'pending', error = :error, progress = 0, updated_at = now(),
    not_before = now() + make_interval(secs => :delay)
WHERE {_FENCE}""",
    "end": f"""
UPDATE knowledge_jobs SET status = CASE WHEN CAST(:error AS text) IS NULL THEN 'done'
    ELSE 'failed' END, chunks = :chunks, error = :error, document = NULL,
    progress = coalesce(CAST(:chunks AS integer), progress), updated_at = now()
WHERE {_FENCE}""",
    "purge": "SELECT ctxgate_purge_knowledge_jobs(:age)",
}.items()}


def _job(row: Row) -> IngestJob:
    waiting = row.status == "pending" and row.error is not None
    return IngestJob(
        tenant_id=row.tenant_id, job_id=row.job_id, doc_id=row.doc_id, version=row.version,
        status=row.status, attempts=row.attempts, progress=row.progress, total=row.total,
        chunks=row.chunks, error=row.error, retry_at=row.not_before if waiting else None,
        created_at=row.created_at, updated_at=row.updated_at)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _encode(document: NewDocument, text: str) -> str:
    return dumps({
        "title": document.title, "domain": document.domain,
        "sensitivity": int(document.sensitivity), "trust": document.trust.value,
        "acl": {"all": document.acl.whole_tenant, "users": list(document.acl.users),
                "groups": list(document.acl.groups)},
        "observed_at": _iso(document.observed_at), "expires_at": _iso(document.expires_at),
        "source": document.source, "text": text})


def _decode(row: Row) -> tuple[NewDocument, str]:
    d: dict[str, Any] = row.document
    acl = d["acl"]
    return NewDocument(
        doc_id=row.doc_id, version=row.version, title=d["title"], domain=d["domain"],
        sensitivity=DataLevel(d["sensitivity"]), trust=Trust(d["trust"]),
        acl=Acl(whole_tenant=acl["all"], users=tuple(acl["users"]),
                groups=tuple(acl["groups"])),
        observed_at=_when(d["observed_at"]), expires_at=_when(d["expires_at"]),
        source=d["source"], chunks=()), d["text"]


class PgIngestJobStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, *, tenant_id: str, document: NewDocument, text: str) -> IngestJob:
        async with self._db.tenant_tx(tenant_id) as conn:
            row = await conn.one(_S["create"], {
                "t": tenant_id, "id": uuid.uuid4().hex, "doc_id": document.doc_id,
                "version": document.version, "document": _encode(document, text),
                "acl_users": list(document.acl.users),
                "sensitivity": int(document.sensitivity), "domain": document.domain})
        return _job(row)

    async def get(self, *, tenant_id: str, job_id: str, bounds: DocumentBounds | None = None
                  ) -> IngestJob | None:
        limit = {"max_level": int(DataLevel.SECRET), "domains": None} if bounds is None else {
            "max_level": int(bounds.max_level),
            "domains": None if bounds.domains is None else list(bounds.domains)}
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["get"], {"t": tenant_id, "id": job_id, **limit})
        return None if row is None else _job(row)

    async def open_jobs(self, *, limit: int) -> list[tuple[str, str]]:
        async with self._db.unscoped_tx() as conn:
            return [(r.tenant_id, r.job_id) for r in await conn.fetch(_S["open"],
                                                                       {"limit": limit})]

    async def claim(self, *, tenant_id: str, job_id: str, lease_s: float
                    ) -> ClaimedIngest | None:
        async with self._db.tenant_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["claim"], {"t": tenant_id, "id": job_id,
                                                    "lease": lease_s})
        if row is None:  # another worker claimed it first, or it ended meanwhile
            return None
        document, text = _decode(row)
        return ClaimedIngest(job=_job(row), document=document, text=text)

    async def progress(self, *, job: IngestJob, done: int, total: int, lease_s: float
                       ) -> bool:
        async with self._db.tenant_tx(job.tenant_id) as conn:
            return await conn.execute(_S["progress"], {
                **_fence(job), "done": done, "total": total, "lease": lease_s}) > 0

    async def retry(self, *, job: IngestJob, error: str, delay_s: float) -> None:
        async with self._db.tenant_tx(job.tenant_id) as conn:
            await conn.execute(_S["retry"], {**_fence(job), "error": error, "delay": delay_s})

    async def end(self, *, job: IngestJob, chunks: int | None, error: str | None) -> None:
        async with self._db.tenant_tx(job.tenant_id) as conn:
            await conn.execute(_S["end"], {**_fence(job), "chunks": chunks, "error": error})

    async def purge(self, *, older_than_s: float) -> int:
        async with self._db.unscoped_tx() as conn:
            return int(await conn.fetchval(_S["purge"], {"age": older_than_s}))


def _fence(job: IngestJob) -> dict[str, Any]:
    return {"t": job.tenant_id, "id": job.job_id, "a": job.attempts}
