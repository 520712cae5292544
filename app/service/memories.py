"""Long-term memory: the write gate around the store, reads, reviews, and recall for a turn.

- ``write`` embeds the statement, then lets the store run the pure gate
  (``app.core.memory_gate.decide``) under its per-scope lock. Evidence-backed origins without
  an explicit expiry get ``default_ttl_days``. ``write_many`` does the same for a batch with
  one embedder call and one transaction; each write has its own decision. A write may carry
  the client's embedding, which is used as given (the embedder never sees that statement).
  The gate analyses each statement once per batch (``statement_terms``, memoized here), not
  once per write that meets it among its related records.
- Reads: another tenant's or another user's memory is the same ``NotFound`` as a missing one;
  a runtime key reads user memories only with the matching ``user_id``.
- ``recall(scope, query, embedding)`` returns the pushed-down hits of both rankers;
  ``pins(scope)`` returns the pinned snapshot of the session (frozen at its first turn).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.core.embedding_space import client_made
from app.core.errors import Conflict, ForbiddenScope, NotFound
from app.core.guards.safety import Detector
from app.core.memory_gate import (
    Existing,
    GateDecision,
    MemoryWrite,
    TermsOf,
    decide,
    statement_terms,
)
from app.core.model import DataLevel, MemoryHit, MemoryRecord, MemoryStatus, Principal, Role, Scope
from app.observability import Metrics
from app.ports import (
    Embedder,
    Gate,
    MemoryFilter,
    MemoryProbe,
    MemoryQuery,
    MemoryStore,
    PinSnapshots,
    Vector,
)
from app.service import degraded

PIN_LIMIT = 10
PIN_TOKENS = 500
EVIDENCE_TTL_ORIGINS = frozenset({"verified_tool_result", "reviewed_doc"})


class MemoryService:
    def __init__(self, store: MemoryStore, embedder: Embedder, *, secret: Sequence[Detector],
                 pii: Sequence[Detector], pins: PinSnapshots, k: int,
                 default_ttl_days: int, count_tokens: Any,
                 injection: Sequence[Detector] = (), suspect: Sequence[Detector] = (),
                 metrics: Metrics | None = None) -> None:
        self._store = store
        self._embedder = embedder
        self._secret = tuple(secret)
        self._pii = tuple(pii)
        self._injection = tuple(injection)  # a statement giving the model orders: rejected
        self._suspect = tuple(suspect)  # one that reads like orders (learned): held
        self._pins = pins
        self._k = k
        self._ttl = timedelta(days=default_ttl_days)
        self._count = count_tokens
        self._metrics = metrics

    async def write(self, *, principal: Principal, write: MemoryWrite
                    ) -> tuple[GateDecision, MemoryRecord | None]:
        return (await self.write_many(principal=principal, writes=[write]))[0]

    async def write_many(self, *, principal: Principal, writes: Sequence[MemoryWrite],
                         embeddings: Sequence[Vector | None] | None = None
                         ) -> list[tuple[GateDecision, MemoryRecord | None]]:
        """Each write's decision (and record), in order. ``embeddings`` (aligned with
        ``writes``; None: all the server's) are the client's vectors, used as given; the other
        statements the gate could store are embedded in one ``embed_passages`` call (none
        left: no call). Then all are stored in one transaction, each gated against the
        records before it (the batch's earlier writes included)."""
        decided = await self._write_many(principal, writes, embeddings)
        if self._metrics is not None:
            for decision, _ in decided:
                self._metrics.memory_decisions.labels(decision=decision.decision,
                                                      type=decision.type).inc()
        return decided

    async def _write_many(self, principal: Principal, writes: Sequence[MemoryWrite],
                          embeddings: Sequence[Vector | None] | None
                          ) -> list[tuple[GateDecision, MemoryRecord | None]]:
        now = datetime.now(UTC)
        terms: TermsOf = functools.cache(statement_terms)  # this batch's; dropped with it
        out: list[tuple[GateDecision, MemoryRecord | None] | None] = []
        kept: list[tuple[MemoryWrite, Vector | None]] = []
        for write, given in zip(writes, embeddings or [None] * len(writes), strict=True):
            if write.expires_at is None and write.origin in EVIDENCE_TTL_ORIGINS:
                write = _with_expiry(write, now + self._ttl)
            # Embed only what the gate could store: a secret must not leave for an embedder.
            pre = self._gate(write, terms)(())
            if pre.decision == "rejected" and pre.type != "memory.missing_evidence":
                out.append((pre, None))
            else:
                out.append(None)
                kept.append((write, given))
        if not kept:
            return [r for r in out if r is not None]
        needed = [w.statement for w, given in kept if given is None]
        made = iter(await self._embedder.embed_passages(needed) if needed else [])
        stored = iter(await self._store.write_many(tenant_id=principal.tenant_id, writes=[
            (MemoryProbe(write=w, memory_id=f"mem_{uuid.uuid4().hex[:16]}",
                         embedding=given if given is not None else next(made),
                         embedder=self._embedder.model if given is None
                         else client_made(self._embedder.model),
                         actor=principal.key_id, now=now), self._gate(w, terms))
            for w, given in kept]))
        return [r if r is not None else next(stored) for r in out]

    def _gate(self, write: MemoryWrite, terms: TermsOf) -> Gate:
        def gate(existing: Sequence[Existing]) -> GateDecision:
            return decide(write, existing=existing, secret_detectors=self._secret,
                          pii_detectors=self._pii, injection_detectors=self._injection,
                          suspect_detectors=self._suspect, terms=terms)
        return gate

    async def get(self, *, principal: Principal, memory_id: str, user_id: str | None
                  ) -> tuple[MemoryRecord, list[dict[str, Any]]]:
        r = await self._visible(principal, memory_id, user_id)
        return r, await self._store.history(tenant_id=principal.tenant_id, memory_id=memory_id)

    async def find(self, *, principal: Principal, filt: MemoryFilter) -> list[MemoryRecord]:
        if principal.role is Role.RUNTIME and filt.user_id is None and filt.scope_level != "team":
            raise ForbiddenScope("a runtime key lists user memories only for one user_id")
        rows = await self._store.find(tenant_id=principal.tenant_id, filt=filt)
        if principal.role is Role.RUNTIME:
            rows = [r for r in rows if r.scope_level == "team" or r.user_id == filt.user_id]
        return rows

    async def review(self, *, principal: Principal, memory_id: str, approve: bool
                     ) -> MemoryRecord:
        r = await self._store.get(tenant_id=principal.tenant_id, memory_id=memory_id)
        if r is None:
            raise NotFound("memory not found")
        done = await self._store.review(tenant_id=principal.tenant_id, memory_id=memory_id,
                                        approve=approve, actor=principal.key_id,
                                        now=datetime.now(UTC))
        if done is None:
            raise Conflict(f"memory is {r.status.value}, not pending")
        self._review_seen("approved" if approve else "rejected")
        return done

    def _review_seen(self, verdict: str) -> None:
        if self._metrics is not None:
            self._metrics.memory_reviews.labels(verdict=verdict).inc()

    async def delete(self, *, principal: Principal, memory_id: str, user_id: str | None) -> None:
        r = await self._visible(principal, memory_id, user_id)
        if r.scope_level == "team" and principal.role is not Role.ADMIN:
            raise ForbiddenScope("team memory is deleted by an admin key")
        if r.scope_level == "user" and principal.role is Role.RUNTIME and r.user_id != user_id:
            raise NotFound("memory not found")
        await self._store.delete(tenant_id=principal.tenant_id, memory_id=memory_id)
        self._review_seen("deleted")

    async def _visible(self, principal: Principal, memory_id: str, user_id: str | None
                       ) -> MemoryRecord:
        r = await self._store.get(tenant_id=principal.tenant_id, memory_id=memory_id)
        if r is None or (principal.role is Role.RUNTIME and r.scope_level == "user"
                         and r.user_id != user_id):
            raise NotFound("memory not found")
        return r

    def query(self, scope: Scope, text: str, embedding: Sequence[float] | None,
              k: int | None = None) -> MemoryQuery:
        """``k``: rows per ranker (a turn's retrieval depth); None: the server's."""
        return MemoryQuery(tenant_id=scope.tenant_id, user_id=scope.user_id,
                           domain=scope.domain, task_id=scope.task_id,
                           max_level=scope.data_level, now=datetime.now(UTC),
                           embedding=embedding, text=text, k=self._k if k is None else k,
                           purpose=scope.purpose)

    async def recall(self, scope: Scope, text: str, embedding: Sequence[float] | None,
                     k: int | None = None) -> list[MemoryHit]:
        q = self.query(scope, text, embedding, k)
        return await self._store.recall(query=q)

    async def pins(self, scope: Scope) -> list[MemoryRecord]:
        """The user's pinned memories; with a session, the snapshot of its first turn."""
        if scope.session_id is not None:
            frozen = await degraded.fallback(
                "redis", self._pins.read(scope.tenant_id, scope.session_id), None,
                "reading the pin snapshot")
            if frozen is not None:
                return _thaw(frozen)
        q = self.query(scope, "", None)
        live = _bounded(await self._store.pinned(query=q, limit=PIN_LIMIT), self._count)
        if scope.session_id is None:
            return live
        # Without Redis the turn serves the live set, unfrozen: the stable prefix may then
        # change mid-session (a cache miss for the model), never the facts.
        snapshot = _freeze(live)
        return _thaw(await degraded.fallback(
            "redis", self._pins.freeze(scope.tenant_id, scope.session_id, snapshot), snapshot,
            "freezing the pin snapshot"))


def _with_expiry(w: MemoryWrite, expires_at: datetime) -> MemoryWrite:
    fields = {name: getattr(w, name) for name in MemoryWrite.__dataclass_fields__}
    return MemoryWrite(**{**fields, "expires_at": expires_at})


def _bounded(records: list[MemoryRecord], count: Any) -> list[MemoryRecord]:
    out: list[MemoryRecord] = []
    total = 0
    for r in records[:PIN_LIMIT]:
        total += int(count(r.statement))
        if total > PIN_TOKENS:
            break
        out.append(r)
    return out


def _freeze(records: list[MemoryRecord]) -> bytes:
    return orjson.dumps([{
        "tenant_id": r.tenant_id, "memory_id": r.memory_id, "version": r.version,
        "statement": r.statement, "origin": r.origin, "user_id": r.user_id,
        "domain": r.domain, "owner": r.owner, "source_session": r.source_session,
        "confidence": r.confidence, "sensitivity": int(r.sensitivity),
        "observed_at": r.observed_at.isoformat(), "confirmed_at": r.confirmed_at.isoformat(),
        "expires_at": r.expires_at.isoformat() if r.expires_at else None,
    } for r in records])


def _thaw(payload: bytes) -> list[MemoryRecord]:
    return [MemoryRecord(
        tenant_id=d["tenant_id"], memory_id=d["memory_id"], version=d["version"],
        statement=d["statement"], origin=d["origin"], evidence_ref=None, scope_level="user",
        user_id=d["user_id"], domain=d["domain"], owner=d["owner"],
        source_session=d["source_session"], task_id=None, confidence=d["confidence"],
        sensitivity=DataLevel(d["sensitivity"]), status=MemoryStatus.ACTIVE, supersedes=None,
        pinned=True, subject_key=None, observed_at=datetime.fromisoformat(d["observed_at"]),
        confirmed_at=datetime.fromisoformat(d["confirmed_at"]),
        expires_at=datetime.fromisoformat(d["expires_at"]) if d["expires_at"] else None,
    ) for d in orjson.loads(payload)]
