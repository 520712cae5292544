"""Long-term memory records and their history (``MemoryStore``).

Write (``write``; ``write_many`` for a batch: one transaction, every scope it touches locked
up front in one statement, in hash order, then each write in turn), one transaction under a
per-scope advisory lock (tenant, level, user, domain), so two concurrent writes of one scope
cannot both miss each other's duplicate: read
the live records of the scope (same normalized statement first, then same key, then nearest by
cosine), run the pure gate on them, apply its decision. Every change bumps ``version`` and adds
a ``memory_history`` row (PK tenant, memory_id, version, action): ``created``, ``confirmed``,
``superseded``, ``approved``, ``rejected``. A rejected candidate is never written at all. The
history rows of a transaction are written in one statement at its end (nothing in it reads
them): a batch of 100 writes is ~200 round trips instead of ~300.

Recall pushes the permission down (``VISIBLE``): tenant; user memories only of the turn's
user (domain NULL or the turn's), team memories of the turn's domain, or without a domain
when marked ``tenant_wide`` or when the turn has no domain either; purpose NULL (every
purpose) or the turn's own (a turn without a purpose sees NULL only); status ``active``, or
``hypothesis`` of the turn's task; not expired at ``query.now``; sensitivity at or below the
level. Vector recall is an exact scan (a user's and a team's memories are few); full-text uses
the same normalized ``search_text`` as knowledge (``app.core.fts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Row, Sql, Tx
from app.core import fts
from app.core.embedding_space import EmbeddingSpace
from app.core.memory_gate import Existing, GateDecision, MemoryWrite, norm_sha256
from app.core.model import DataLevel, MemoryHit, MemoryRecord, MemoryStatus
from app.ports import Gate, MemoryFilter, MemoryProbe, MemoryQuery

RELATED_LIMIT = 50
RANKERS = ("memory_vector", "memory_fts")
_COLS = """m.tenant_id, m.memory_id, m.version, m.statement, m.origin, m.evidence_ref,
    m.scope_level, m.user_id, m.domain, m.owner, m.source_session, m.task_id, m.confidence,
    m.sensitivity, m.status, m.supersedes, m.pinned, m.subject_key, m.observed_at,
    m.confirmed_at, m.expires_at, m.purpose, m.tenant_wide"""
_RET = _COLS.replace("m.", "")
SAME_SCOPE = """m.tenant_id = :tenant_id AND m.scope_level = :level
    AND m.user_id IS NOT DISTINCT FROM CAST(:user_id AS text)
    AND m.domain IS NOT DISTINCT FROM CAST(:domain AS text)"""
VISIBLE = """m.tenant_id = :tenant_id
    AND ((m.scope_level = 'user' AND m.user_id = :user_id) OR m.scope_level = 'team')
    AND (m.domain = CAST(:domain AS text) OR (m.domain IS NULL AND (m.scope_level = 'user'
        OR m.tenant_wide OR CAST(:domain AS text) IS NULL)))
    AND (m.purpose IS NULL OR m.purpose = CAST(:purpose AS text))
    AND (m.status = 'active' OR (m.status = 'hypothesis' AND m.task_id = CAST(:task_id AS text)))
    AND (m.expires_at IS NULL OR m.expires_at > :now)
    AND m.sensitivity <= :max_level"""
# Vectors of the query's space only (``:spaces``: ``EmbeddingSpace.accepted``; NULL: all, for
# a store given no space); a NULL provenance is the legacy model's. Another space's vector is
# no similarity at all: the gate then judges by statement and key alone, and recall by words.
IN_SPACE = """(CAST(:spaces AS text[]) IS NULL
    OR coalesce(m.embedder, CAST(:legacy AS text)) = ANY (CAST(:spaces AS text[])))"""
MEMORY_SQL = {
    # The subquery sorts the distinct keys before the outer projection takes the locks.
    "lock": """
SELECT count(pg_advisory_xact_lock(k)) FROM (
    SELECT DISTINCT hashtextextended(l, 0) AS k FROM unnest(CAST(:locks AS text[])) AS l
    ORDER BY k
) AS keys""",
    "related": f"""
SELECT {_COLS}, CASE WHEN {IN_SPACE}
    THEN 1 - (m.embedding <=> CAST(:embedding AS vector)) END AS similarity
FROM memories m WHERE {SAME_SCOPE} AND m.status IN ('active', 'pending', 'hypothesis')
ORDER BY (m.norm_sha256 = :norm) DESC,
    (m.subject_key IS NOT NULL AND m.subject_key = CAST(:key AS text)) DESC,
    similarity DESC NULLS LAST, m.created_at DESC
LIMIT :limit""",  # noqa: S608 - constant fragments, values are bound
    "insert": f"""
INSERT INTO memories (tenant_id, memory_id, statement, norm_sha256, subject_key, origin,
    evidence_ref, scope_level, user_id, domain, owner, source_session, task_id, confidence,
    sensitivity, status, supersedes, pinned, observed_at, confirmed_at, expires_at, embedding,
    embedder, search_text, purpose, tenant_wide)
VALUES (:tenant_id, :memory_id, :statement, :norm, :key, :origin, :evidence_ref, :level,
    :user_id, :domain, :owner, :source_session, :task_id, :confidence, :sensitivity, :status,
    :supersedes, :pinned, :now, :now, :expires_at, CAST(:embedding AS vector), :embedder,
    :search_text,
    :purpose, :tenant_wide)
RETURNING {_RET}""",  # noqa: S608 - constant fragments, values are bound
    "confirm": f"""
UPDATE memories SET confirmed_at = :now, version = version + 1, updated_at = :now
WHERE tenant_id = :tenant_id AND memory_id = :memory_id RETURNING {_RET}""",  # noqa: S608 - constant fragments, values are bound
    "status": f"""
UPDATE memories SET status = :status, version = version + 1, updated_at = :now
WHERE tenant_id = :tenant_id AND memory_id = :memory_id AND status = :from_status
RETURNING {_RET}""",  # noqa: S608 - constant fragments, values are bound
    "history_add": """
INSERT INTO memory_history (tenant_id, memory_id, version, at, action, actor, snapshot)
SELECT :tenant_id, h.memory_id, h.version, h.at, h.action, h.actor, CAST(h.snapshot AS jsonb)
FROM unnest(CAST(:memory_ids AS text[]), CAST(:versions AS integer[]),
            CAST(:ats AS timestamptz[]), CAST(:actions AS text[]), CAST(:actors AS text[]),
            CAST(:snapshots AS text[])) AS h(memory_id, version, at, action, actor, snapshot)""",
    "get": f"""
SELECT {_COLS} FROM memories m WHERE m.tenant_id = :tenant_id AND m.memory_id = :memory_id
""",  # noqa: S608 - constant fragments, values are bound
    "history": """
SELECT version, at, action, actor, snapshot FROM memory_history
WHERE tenant_id = :tenant_id AND memory_id = :memory_id ORDER BY version, at""",
    "list": f"""
SELECT {_COLS} FROM memories m WHERE m.tenant_id = :tenant_id
    AND (CAST(:user_id AS text) IS NULL OR m.user_id = :user_id)
    AND (CAST(:level AS text) IS NULL OR m.scope_level = :level)
    AND (CAST(:status AS text) IS NULL OR m.status = :status)
ORDER BY m.updated_at DESC, m.memory_id LIMIT :limit""",  # noqa: S608 - constant fragments, values are bound
    "delete_history": "DELETE FROM memory_history WHERE tenant_id = :tenant_id "
                      "AND memory_id = :memory_id",
    "delete": "DELETE FROM memories WHERE tenant_id = :tenant_id AND memory_id = :memory_id",
    # Both rankers in one statement (one round trip): leg 0 is the vector ranking, leg 1 the
    # full-text one; a NULL embedding or tsquery leaves its leg empty.
    "recall": f"""
SELECT * FROM (
    (SELECT {_COLS}, 0 AS leg FROM memories m
     WHERE {VISIBLE} AND m.embedding IS NOT NULL AND CAST(:embedding AS vector) IS NOT NULL
         AND {IN_SPACE}
     ORDER BY m.embedding <=> CAST(:embedding AS vector), m.memory_id LIMIT :k)
    UNION ALL
    (SELECT {_COLS}, 1 AS leg FROM memories m, to_tsquery('simple', :tsquery) AS q(query)
     WHERE {VISIBLE} AND m.tsv @@ q.query
     ORDER BY ts_rank_cd(m.tsv, q.query) DESC, m.memory_id LIMIT :k)
) AS hits""",  # noqa: S608 - constant fragments, values are bound
    "pinned": f"""
SELECT {_COLS} FROM memories m WHERE {VISIBLE} AND m.pinned AND m.scope_level = 'user'
    AND m.status = 'active' ORDER BY m.observed_at, m.memory_id LIMIT :limit""",  # noqa: S608 - constant fragments, values are bound
}
_S = {name: Sql(sql) for name, sql in MEMORY_SQL.items()}


def record(row: Row) -> MemoryRecord:
    return MemoryRecord(
        tenant_id=row.tenant_id, memory_id=row.memory_id, version=row.version,
        statement=row.statement, origin=row.origin, evidence_ref=row.evidence_ref,
        scope_level=row.scope_level, user_id=row.user_id, domain=row.domain, owner=row.owner,
        source_session=row.source_session, task_id=row.task_id,
        confidence=float(row.confidence), sensitivity=DataLevel(row.sensitivity),
        status=MemoryStatus(row.status), supersedes=row.supersedes, pinned=row.pinned,
        subject_key=row.subject_key, observed_at=row.observed_at,
        confirmed_at=row.confirmed_at, expires_at=row.expires_at, purpose=row.purpose,
        tenant_wide=row.tenant_wide)


def snapshot(r: MemoryRecord) -> dict[str, Any]:
    return {"statement": r.statement, "origin": r.origin, "evidence_ref": r.evidence_ref,
            "status": r.status.value, "supersedes": r.supersedes, "confidence": r.confidence,
            "sensitivity": r.sensitivity.label, "key": r.subject_key,
            "confirmed_at": r.confirmed_at.isoformat(), "purpose": r.purpose,
            "tenant_wide": r.tenant_wide,
            "expires_at": r.expires_at.isoformat() if r.expires_at else None}


def _scope_params(tenant_id: str, w: MemoryWrite) -> dict[str, Any]:
    return {"tenant_id": tenant_id, "level": w.scope_level, "user_id": w.user_id,
            "domain": w.domain}


def _insert_params(tenant_id: str, p: MemoryProbe, d: GateDecision) -> dict[str, Any]:
    w = p.write
    assert d.status is not None
    supersedes = d.target.memory_id if d.target is not None else None
    return {**_scope_params(tenant_id, w), "memory_id": p.memory_id, "statement": w.statement,
            "norm": norm_sha256(w.statement), "key": w.key, "origin": w.origin,
            "evidence_ref": w.evidence_ref, "owner": w.owner,
            "source_session": w.source_session, "task_id": w.task_id,
            "confidence": w.confidence, "sensitivity": int(w.sensitivity),
            "status": d.status.value, "supersedes": supersedes, "pinned": w.pinned,
            "now": p.now, "expires_at": w.expires_at,
            "embedding": list(p.embedding) if p.embedding is not None else None,
            "embedder": p.embedder,
            "search_text": fts.normalize(w.statement), "purpose": w.purpose,
            "tenant_wide": w.tenant_wide}


def _recall_params(q: MemoryQuery) -> dict[str, Any]:
    return {"tenant_id": q.tenant_id, "user_id": q.user_id, "domain": q.domain,
            "task_id": q.task_id, "purpose": q.purpose, "now": q.now,
            "max_level": int(q.max_level), "k": q.k}


class _History:
    """The history rows of one transaction, written together by ``flush``."""

    def __init__(self, tenant_id: str) -> None:
        self._tenant_id = tenant_id
        self._rows: list[tuple[str, int, Any, str, str, str]] = []

    def add(self, r: MemoryRecord, action: str, actor: str, now: Any) -> MemoryRecord:
        self._rows.append((r.memory_id, r.version, now, action, actor, dumps(snapshot(r))))
        return r

    async def flush(self, conn: Tx) -> None:
        if self._rows:
            ids, versions, ats, actions, actors, snapshots = map(list, zip(*self._rows,
                                                                            strict=True))
            await conn.execute(_S["history_add"], {
                "tenant_id": self._tenant_id, "memory_ids": ids, "versions": versions,
                "ats": ats, "actions": actions, "actors": actors, "snapshots": snapshots})
            self._rows.clear()


class PgMemoryStore:
    """``space``: the vectors a query or a new statement is compared with (None: all)."""

    def __init__(self, db: Database, *, space: EmbeddingSpace | None = None) -> None:
        self._db = db
        self._space = {"spaces": None, "legacy": None} if space is None else {
            "spaces": list(space.accepted), "legacy": space.legacy}

    async def write(self, *, tenant_id: str, probe: MemoryProbe, gate: Gate
                    ) -> tuple[GateDecision, MemoryRecord | None]:
        return (await self.write_many(tenant_id=tenant_id, writes=[(probe, gate)]))[0]

    async def write_many(self, *, tenant_id: str, writes: Sequence[tuple[MemoryProbe, Gate]]
                         ) -> list[tuple[GateDecision, MemoryRecord | None]]:
        locks = [f"{tenant_id}/mem/{p.write.scope_level}/{p.write.user_id or ''}/"
                 f"{p.write.domain or ''}" for p, _ in writes]
        history = _History(tenant_id)
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["lock"], {"locks": locks})
            done = [await self._write(conn, tenant_id, p, gate, history) for p, gate in writes]
            await history.flush(conn)
            return done

    async def _write(self, conn: Tx, tenant_id: str, probe: MemoryProbe, gate: Gate,
                     history: _History) -> tuple[GateDecision, MemoryRecord | None]:
        w = probe.write
        rows = await conn.fetch(_S["related"], {
            **_scope_params(tenant_id, w), **self._space, "norm": norm_sha256(w.statement),
            "key": w.key, "limit": RELATED_LIMIT,
            "embedding": list(probe.embedding) if probe.embedding is not None else None})
        decision = gate([Existing(record=record(r), similarity=r.similarity) for r in rows])
        return decision, await self._apply(conn, tenant_id, probe, decision, history)

    async def _apply(self, conn: Tx, tenant_id: str, probe: MemoryProbe,
                     d: GateDecision, history: _History) -> MemoryRecord | None:
        if d.decision == "rejected":
            return None
        if d.decision == "duplicate" and d.target is not None:
            row = await conn.one(_S["confirm"], {
                "tenant_id": tenant_id, "memory_id": d.target.memory_id, "now": probe.now,
            })
            return history.add(record(row), "confirmed", probe.actor, probe.now)
        row = await conn.one(_S["insert"], _insert_params(tenant_id, probe, d))
        if d.decision == "superseded" and d.target is not None:
            await self._transition(conn, tenant_id, d.target.memory_id, MemoryStatus.ACTIVE,
                                   MemoryStatus.SUPERSEDED, probe.actor, probe.now, history)
        return history.add(record(row), "created", probe.actor, probe.now)

    async def _transition(self, conn: Tx, tenant_id: str, memory_id: str,
                          old: MemoryStatus, new: MemoryStatus, actor: str, now: Any,
                          history: _History) -> MemoryRecord | None:
        row = await conn.fetchrow(_S["status"], {
            "tenant_id": tenant_id, "memory_id": memory_id, "status": new.value,
            "from_status": old.value, "now": now})
        if row is None:
            return None
        return history.add(record(row), new.value, actor, now)

    async def get(self, *, tenant_id: str, memory_id: str) -> MemoryRecord | None:
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["get"], {"tenant_id": tenant_id,
                                                  "memory_id": memory_id})
        return record(row) if row is not None else None

    async def history(self, *, tenant_id: str, memory_id: str) -> list[dict[str, Any]]:
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_S["history"], {"tenant_id": tenant_id,
                                                      "memory_id": memory_id})
        return [{"version": r.version, "at": r.at.isoformat(), "action": r.action,
                 "actor": r.actor, "snapshot": r.snapshot} for r in rows]

    async def find(self, *, tenant_id: str, filt: MemoryFilter) -> list[MemoryRecord]:
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_S["list"], {
                "tenant_id": tenant_id, "user_id": filt.user_id, "level": filt.scope_level,
                "status": filt.status, "limit": filt.limit})
        return [record(r) for r in rows]

    async def review(self, *, tenant_id: str, memory_id: str, approve: bool, actor: str,
                     now: Any) -> MemoryRecord | None:
        new = MemoryStatus.ACTIVE if approve else MemoryStatus.REJECTED
        history = _History(tenant_id)
        async with self._db.tenant_tx(tenant_id) as conn:
            done = await self._transition(conn, tenant_id, memory_id, MemoryStatus.PENDING,
                                          new, actor, now, history)
            if done is not None and approve and done.supersedes is not None:
                await self._transition(conn, tenant_id, done.supersedes, MemoryStatus.ACTIVE,
                                       MemoryStatus.SUPERSEDED, actor, now, history)
            await history.flush(conn)
        return done

    async def delete(self, *, tenant_id: str, memory_id: str) -> bool:
        params = {"tenant_id": tenant_id, "memory_id": memory_id}
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["delete_history"], params)
            deleted = await conn.execute(_S["delete"], params)
        return deleted > 0

    async def recall(self, *, query: MemoryQuery) -> list[MemoryHit]:
        tsquery = fts.tsquery(query.text)
        if (query.embedding is None and tsquery is None) or query.k <= 0:
            return []
        params = {**_recall_params(query), **self._space, "tsquery": tsquery,
                  "embedding": list(query.embedding) if query.embedding is not None else None}
        async with self._db.read_tx(query.tenant_id) as conn:
            rows = await conn.fetch(_S["recall"], params)
        out: list[MemoryHit] = []
        rank = [0, 0]
        for r in rows:  # each leg arrives in its own order
            rank[r.leg] += 1
            out.append(MemoryHit(record=record(r), rank=rank[r.leg], ranker=RANKERS[r.leg]))
        return out

    async def pinned(self, *, query: MemoryQuery, limit: int) -> list[MemoryRecord]:
        async with self._db.read_tx(query.tenant_id) as conn:
            rows = await conn.fetch(_S["pinned"], {**_recall_params(query), "limit": limit})
        return [record(r) for r in rows]
