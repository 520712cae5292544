"""Collect: every memory layer's candidates for one turn, read concurrently from the stores.

Contract: ``Collector.collect(scope, req)`` returns ``Collected`` — the session's hot tail (and
its history window as candidates), its transcript hits and, when the history is outgrown, the
latest compaction; the task's checkpoint; vector and full-text knowledge hits; memory hits and
pins; the admitted instruction bundle. Each read is scoped to ``scope`` (tenant, user, groups,
domain, level) in its own query; nothing here decides what the model may see: the pipeline
does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from opentelemetry.trace import Tracer

from app.core.candidates import session_candidates
from app.core.model import (
    Candidate,
    KnowledgeHit,
    MemoryHit,
    MemoryRecord,
    Scope,
    Section,
    SessionEvent,
    TaskCheckpoint,
    TranscriptHit,
    TurnRequest,
    Visibility,
)
from app.core.pipeline import PipelineConfig
from app.core.replay import AsOf
from app.core.retrieval import RetrievalDefaults, RetrievalPlan, retrieval_plan
from app.core.session_state import SessionState
from app.observability import record_counts, stage_span
from app.ports import (
    Embedder,
    KnowledgeQuery,
    KnowledgeStore,
    SessionStateStore,
    SharedReads,
    StoredCompaction,
    TokenCounter,
)
from app.service.bundles import Admitted, BundleService
from app.service.compaction import CompactionService
from app.service.memories import MemoryService
from app.service.sessions import SessionService
from app.service.tasks import TaskService

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Collected:
    # the whole hot tail: a compaction's view may keep events older than the history window
    tail: list[SessionEvent]
    session_owner: str | None
    session: list[Candidate]  # the history window as candidates (also what sizes compaction)
    latest: StoredCompaction | None  # read only when the history is outgrown
    checkpoint: TaskCheckpoint | None
    hits: list[KnowledgeHit]
    transcript: list[TranscriptHit]
    bundle: Admitted | None
    memories: list[MemoryHit]
    pins: list[MemoryRecord]
    state: SessionState | None = None  # the session's state (SessionStateStore), no task
    plan: RetrievalPlan | None = None  # the depths the layers were read with, and the floor
    embedding: Sequence[float] | None = None  # the query vector the search used, if it got one


@dataclass(frozen=True, slots=True, kw_only=True)
class _Session:
    """What the session layer collected: nothing without a session (or a new one)."""

    owner: str | None = None
    tail: list[SessionEvent] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    latest: StoredCompaction | None = None


def session_budget(config: PipelineConfig, req: TurnRequest) -> float:
    """The tokens the session section may take this turn (what compaction is sized by)."""
    share = config.shares.get(Section.SESSION, 0.0)
    return (req.budget.max_tokens - req.budget.reserve_output) * share


class Collector:
    def __init__(self, *, sessions: SessionService, tasks: TaskService, bundles: BundleService,
                 knowledge: KnowledgeStore, embedder: Embedder, count_tokens: TokenCounter,
                 config: PipelineConfig, retrieval: RetrievalDefaults, history_events: int,
                 memories: MemoryService | None, compactions: CompactionService | None,
                 reads: SharedReads, tracer: Tracer,
                 states: SessionStateStore | None = None) -> None:
        self._sessions = sessions
        self._tasks = tasks
        self._bundles = bundles
        self._knowledge = knowledge
        self._embedder = embedder
        self._count = count_tokens
        self._config = config
        self._defaults = retrieval
        self._history = history_events
        self._memories = memories
        self._compactions = compactions
        self._reads = reads
        self._states = states
        self._tracer = tracer

    async def collect(self, scope: Scope, req: TurnRequest, as_of: AsOf | None = None
                      ) -> Collected:
        """Every layer's store reads for one turn, started concurrently: the Redis reads and
        the embedding overlap, the Postgres reads share one read-only transaction
        (``reads``), queued on its connection. The session layer also reads the latest
        compaction once its history is ``outgrown``. Permission is pushed into each query
        (and re-checked by the pipeline). Each ranked layer reads as deep as the turn's
        ``retrieval_plan`` (its budget, or the request's limits) says.

        ``as_of`` (a replay, which writes nothing): the session as that past turn read it,
        from the archive, and the bundle revision the request pins resolved without binding
        the session or asking the channel (``BundleService.preview``)."""
        plan = self.plan(req)
        async def session() -> _Session:
            if scope.session_id is None:
                return _Session()
            info, tail = await (self._sessions.hot_tail(
                tenant_id=scope.tenant_id, session_id=scope.session_id, user_id=scope.user_id)
                if as_of is None else self._sessions.as_of(
                    tenant_id=scope.tenant_id, session_id=scope.session_id,
                    user_id=scope.user_id, seq=as_of.seq, at=as_of.at))
            if info is None:
                return _Session()
            history = self._session_candidates(scope, tail[-self._history:], info.user_id)
            return _Session(owner=info.user_id, tail=tail, candidates=history,
                            latest=await self._latest(scope, req, history))

        async def task() -> TaskCheckpoint | None:
            if scope.task_id is None:
                return None
            return await self._tasks.for_turn(
                tenant_id=scope.tenant_id, task_id=scope.task_id, user_id=scope.user_id)

        async def state() -> SessionState | None:
            """Without a task, the session's own state carries its constraints."""
            if scope.task_id is not None or scope.session_id is None or self._states is None:
                return None
            return await self._states.get(tenant_id=scope.tenant_id,
                                          session_id=scope.session_id)

        embedding = asyncio.ensure_future(self._read("embedding", self._embedding(req)))

        async def vector() -> list[KnowledgeHit]:
            return await self._knowledge.search_vector(
                query=self._query(scope, req, await embedding, plan.knowledge))

        async def memories() -> tuple[list[MemoryHit], list[MemoryRecord]]:
            if self._memories is None:
                return [], []
            return await asyncio.gather(
                self._memories.recall(scope, req.query, await embedding, plan.memory),
                self._memories.pins(scope))

        async def transcript() -> list[TranscriptHit]:
            """The user's other sessions, by words and meaning: read beside this session's
            own reads, not after them, so a brand-new session recalls too. The search is
            bounded to the caller's own sessions by its SQL; another user's session_id fails
            the turn in ``session()``."""
            if not self._transcript_open(scope) or plan.session <= 0:
                return []
            # A client's query vector may come from another model than the server's event
            # vectors: then only words are compared.
            server_vector = req.query_embedding is None
            return await self._sessions.search_owned(
                tenant_id=scope.tenant_id, session_id=scope.session_id, user_id=scope.user_id,
                visibility=scope.session_visibility, query=req.query, limit=plan.session,
                exclude_current=True, agent_id=req.agent_id,
                embedding=await embedding if server_vector else None,
                embedder=self._embedder.model if server_vector else None)

        async def text() -> list[KnowledgeHit]:
            """Words, with each hit's cosine read in the same statement, so the relevance
            guard judges a hit found by words alone by its meaning too."""
            return await self._knowledge.search_text(
                query=self._query(scope, req, await embedding, plan.knowledge))

        async def bundle() -> Admitted | None:
            if req.workspace is None:
                return None
            if as_of is not None:
                revision = req.workspace.revision
                return None if revision is None else await self._bundles.preview(
                    tenant_id=scope.tenant_id, workspace=req.workspace, revision=revision)
            return await self._bundles.admit(
                tenant_id=scope.tenant_id, session_id=scope.session_id, agent_id=req.agent_id,
                workspace=req.workspace)

        # Admitting a bundle may write (the session's binding): it runs beside the shared
        # reads, on connections of its own, not inside them.
        admission = asyncio.ensure_future(self._read("bundle", bundle(), _found))
        read = self._read
        try:
            async with self._reads(scope.tenant_id):
                sess, checkpoint, vhits, thits, (mhits, pins), (own, found) = \
                    await asyncio.gather(
                        read("session", session(), lambda s: len(s.tail)),
                        read("task", task(), _found), read("knowledge.vector", vector(), len),
                        read("knowledge.text", text(), len),
                        read("memory", memories(), lambda m: len(m[0]) + len(m[1])),
                        asyncio.gather(read("state", state(), _found),
                                       read("transcript", transcript(), len)))
            admitted = await admission
        finally:
            embedding.cancel()
            admission.cancel()
        return Collected(tail=sess.tail, session_owner=sess.owner, session=sess.candidates,
                         latest=sess.latest, checkpoint=checkpoint, hits=[*vhits, *thits],
                         transcript=found, bundle=admitted, memories=mhits, pins=pins,
                         state=own if sess.owner == scope.user_id else None, plan=plan,
                         embedding=_settled(embedding))

    async def _read(self, layer: str, read: Awaitable[T],
                    size: Callable[[T], int] | None = None) -> T:
        """One layer's read in a span of its own, a child of the turn's collect span, with
        how many items (events, hits, rows) it found: the layers run concurrently, and the
        trace shows which one the turn waited for."""
        with stage_span(self._tracer, f"ctxgate.collect.{layer}") as span:
            got = await read
            if size is not None:
                record_counts(span, items=size(got))
            return got

    def plan(self, req: TurnRequest) -> RetrievalPlan:
        """The turn's retrieval depth per layer and relevance floor."""
        return retrieval_plan(req.budget, self._config.shares.get(Section.DYNAMIC, 0.0),
                              req.retrieval, self._defaults)

    @staticmethod
    def _transcript_open(scope: Scope) -> bool:
        """Whether the turn's visibility opens any session but its own: ``tree`` and wider
        with a session; ``agent`` and ``all`` without one (a stateless turn)."""
        if scope.session_id is None:
            return scope.session_visibility >= Visibility.AGENT
        return scope.session_visibility > Visibility.SELF

    async def _latest(self, scope: Scope, req: TurnRequest, history: list[Candidate]
                      ) -> StoredCompaction | None:
        """The latest compaction, read beside the other layers when the turn will need it
        (the history is outgrown): not one round trip after them."""
        if (self._compactions is None or scope.session_id is None or not history
                or not self._compactions.outgrown(sum(c.tokens for c in history),
                                                  session_budget(self._config, req))):
            return None
        return await self._compactions.latest(tenant_id=scope.tenant_id,
                                              session_id=scope.session_id)

    async def _embedding(self, req: TurnRequest) -> list[float]:
        if req.query_embedding is not None:
            return list(req.query_embedding)
        return await self._embedder.embed_query(req.query)

    def _query(self, scope: Scope, req: TurnRequest, emb: Sequence[float] | None, k: int
               ) -> KnowledgeQuery:
        return KnowledgeQuery(
            tenant_id=scope.tenant_id, user_id=scope.user_id, groups=scope.groups,
            domain=scope.domain, max_level=scope.data_level, now=datetime.now(UTC),
            embedding=emb, text=req.query, k=k)

    def _session_candidates(self, scope: Scope, events: list[SessionEvent], owner: str
                            ) -> list[Candidate]:
        if scope.session_id is None or not events:
            return []
        return session_candidates(events, tenant_id=scope.tenant_id,
                                  session_id=scope.session_id, owner_user_id=owner,
                                  count_tokens=self._count)


def _found(value: object) -> int:
    return int(value is not None)


def _settled(vector: asyncio.Future[list[float]]) -> list[float] | None:
    """The query vector when the turn's reads got one (an embedder failure is theirs)."""
    if not vector.done() or vector.cancelled() or vector.exception() is not None:
        return None
    return vector.result()
