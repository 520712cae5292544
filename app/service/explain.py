"""Explain one source of one turn: which stage stopped it and why (``app.core.explain``).

Contract: ``ExplainService.explain(principal, turn_id, ref)`` returns the ``Explained`` answer
or raises a domain error:

* ``NotFound`` — no such turn in the key's tenant, a turn of another runtime key, or a source
  the manifest does not cite and the tenant does not hold (another tenant's source reads as
  missing: every lookup is bounded to the turn's tenant), or a document beyond the calling
  key's own bounds (data level, domains: absent, as in document management);
* ``ForbiddenScope`` — a runtime key asking about its own turn (explain is for ops and admin
  keys: it names sources the turn's user may not read);
* ``InvalidRequest`` — ``ref`` is not a ref; ``NotExplainable`` — the manifest does not cite
  it and the turn recorded no scope to re-evaluate it against (made before explain, or erased).

Order: the manifest's own records first (cheap, exact); only a source it does not cite is
looked up and re-evaluated — permission against the recorded scope at the turn's time, then,
for a readable knowledge source, its ranks now for the recorded query (``not_a_candidate``).
A knowledge source the relevance stage dropped also gets its ranks now, when the turn was
recorded. Memories, sessions and tasks are checked for permission (owner, labels; another
session of the user also for the turn's session visibility); they are not re-ranked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from app.core import explain as core
from app.core.errors import ForbiddenScope, InvalidRequest, NotExplainable, NotFound
from app.core.model import DropLayer, Principal, Role, Scope
from app.core.refs import event_seq, parse_ref
from app.core.retrieval import knowledge_candidates, pinned_candidates
from app.ports import (
    Embedder,
    KnowledgeQuery,
    KnowledgeStore,
    MemoryStore,
    SessionArchive,
    TaskStore,
)
from app.ports_explain import (
    KnowledgeProbe,
    RecordedTurn,
    SessionReach,
    SourceKey,
    TurnRecords,
)
from app.service.knowledge import bounds


@dataclass(frozen=True, slots=True, kw_only=True)
class Explained:
    turn_id: str
    ref: str
    explanation: core.Explanation
    evaluated_at: datetime


def _zero(_: str) -> int:
    return 0  # labels carry no content: nothing to count


def _knowledge_source(parts: tuple[str, ...]) -> SourceKey:
    if len(parts) == 1:
        return SourceKey(doc_id=parts[0])
    version, chunk = (parts[1], parts[2]) if len(parts) == 3 else ("", "")
    if not (version.startswith("v") and chunk.startswith("c") and chunk[1:].isdigit()):
        raise InvalidRequest("a kb ref is kb://{doc_id} or kb://{doc_id}#v{version}:c{n}")
    return SourceKey(doc_id=parts[0], version=version[1:], chunk_no=int(chunk[1:]))


class ExplainService:
    def __init__(self, *, turns: TurnRecords, knowledge: KnowledgeProbe,
                 documents: KnowledgeStore, memories: MemoryStore, sessions: SessionArchive,
                 reach: SessionReach, tasks: TaskStore, embedder: Embedder,
                 clock: Callable[[], datetime]) -> None:
        self._turns = turns
        self._knowledge = knowledge
        self._documents = documents
        self._reach = reach
        self._memories = memories
        self._sessions = sessions
        self._tasks = tasks
        self._embedder = embedder
        self._clock = clock

    async def explain(self, principal: Principal, turn_id: str, ref: str) -> Explained:
        turn = await self._turns.turn(tenant_id=principal.tenant_id, turn_id=turn_id)
        if turn is None or (principal.role is Role.RUNTIME and turn.key_id != principal.key_id):
            raise NotFound(f"no manifest {turn_id!r}")
        if principal.role is Role.RUNTIME:
            raise ForbiddenScope("explain is for ops and admin keys")
        try:
            scheme, parts = parse_ref(ref)
        except ValueError:
            raise InvalidRequest("ref is not a source ref (kb://, mem://, session://, "
                                 "task://)") from None
        found = core.from_manifest(turn.body, ref)
        if found is not None:
            if found.stage is DropLayer.RELEVANCE and scheme == "kb" and turn.recorded:
                found = await self._with_ranks(principal, turn, turn.recorded, parts, found)
        else:
            found = await self._reevaluate(principal, turn, scheme, parts, ref)
        return Explained(turn_id=turn_id, ref=ref, explanation=found,
                         evaluated_at=self._clock())

    async def _reevaluate(self, principal: Principal, turn: RecordedTurn, scheme: str,
                          parts: tuple[str, ...], ref: str) -> core.Explanation:
        if turn.recorded is None:
            raise NotExplainable(f"the manifest does not cite {ref!r} and turn "
                                 f"{turn.turn_id!r} recorded no scope to re-evaluate it against")
        scope = self._scope(principal, turn, turn.recorded)
        now = datetime.fromisoformat(str(turn.body["created_at"]))
        if scheme == "kb":
            source = _knowledge_source(parts)
            # Beyond the caller's own bounds a document is absent, as in document management.
            if await self._documents.get_document(bounds=bounds(principal),
                                                  doc_id=source.doc_id) is None:
                raise NotFound(f"no source {ref!r}")
            return await self._knowledge_source(scope, turn, source, ref, now)
        if scheme == "mem":
            return await self._memory(scope, parts[0], ref, now)
        if scheme == "session":
            return await self._session(scope, turn, parts[0], ref, now)
        if scheme == "task":
            return await self._task(scope, parts[0], ref, now)
        raise NotFound(f"no source {ref!r}")

    @staticmethod
    def _scope(principal: Principal, turn: RecordedTurn, recorded: dict[str, Any]) -> Scope:
        return core.recorded_scope(tenant_id=principal.tenant_id, key_id=turn.key_id,
                                   body=turn.body, recorded=recorded)

    async def _knowledge_source(self, scope: Scope, turn: RecordedTurn, source: SourceKey,
                                ref: str, now: datetime) -> core.Explanation:
        found = await self._knowledge.labels(tenant_id=scope.tenant_id, source=source)
        if found is None:
            raise NotFound(f"no source {ref!r}")
        denied = core.permission(scope, knowledge_candidates(found.chunks, count_tokens=_zero),
                                 now)
        if denied is not None:
            return denied
        if not found.current:
            return core.not_a_candidate({}, _depth(turn.body, "knowledge"), why=(
                "a superseded version: searches read the document's current version only"))
        ranks, vector = await self._ranks(scope, turn, source, now)
        return core.not_a_candidate(ranks, _depth(turn.body, "knowledge"),
                                    vector_ranked=vector)

    async def _with_ranks(self, principal: Principal, turn: RecordedTurn,
                          recorded: dict[str, Any], parts: tuple[str, ...],
                          found: core.Explanation) -> core.Explanation:
        scope = self._scope(principal, turn, recorded)
        now = datetime.fromisoformat(str(turn.body["created_at"]))
        ranks, _ = await self._ranks(scope, turn, _knowledge_source(parts), now)
        best = min(ranks.values()) if ranks else None
        return replace(found, detail={**found.detail, "rank": best, "ranks": ranks})

    async def _ranks(self, scope: Scope, turn: RecordedTurn, source: SourceKey,
                     now: datetime) -> tuple[dict[str, int], bool]:
        """The source's ranks now for the recorded query; whether the vector ranker ran (not
        when the turn brought its own query vector: it is not recorded)."""
        recorded = turn.recorded or {}
        query = str(recorded.get("query", ""))
        vector = recorded.get("query_vector") == "server"
        embedding = await self._embedder.embed_query(query) if vector and query else None
        ranks = await self._knowledge.ranks(query=KnowledgeQuery(
            tenant_id=scope.tenant_id, user_id=scope.user_id, groups=scope.groups,
            domain=scope.domain, max_level=scope.data_level, now=now, embedding=embedding,
            text=query, k=_depth(turn.body, "knowledge") or 0), source=source)
        return ranks, vector

    async def _memory(self, scope: Scope, memory_id: str, ref: str, now: datetime
                      ) -> core.Explanation:
        record = await self._memories.get(tenant_id=scope.tenant_id, memory_id=memory_id)
        if record is None:
            raise NotFound(f"no source {ref!r}")
        denied = core.permission(scope, pinned_candidates([record], count_tokens=_zero), now)
        if denied is not None:
            return denied
        return core.not_a_candidate({}, None, why=(
            f"memory recall did not return it (status {record.status.value}; only active "
            "memories, and the task's hypotheses, are recalled); memories are not re-ranked"))

    async def _session(self, scope: Scope, turn: RecordedTurn, session_id: str, ref: str,
                       now: datetime) -> core.Explanation:
        info = await self._sessions.info(tenant_id=scope.tenant_id, session_id=session_id)
        seq = event_seq(ref)
        if info is None or (seq is not None and not 0 < seq <= info.last_seq):
            raise NotFound(f"no source {ref!r}")
        denied = core.permission(scope, [core.owned_source(ref, scope.tenant_id, info.user_id)],
                                 now)
        if denied is not None:
            return denied
        own = session_id == scope.session_id
        if not own and not await self._reach.visible(
                tenant_id=scope.tenant_id, user_id=scope.user_id, session_id=scope.session_id,
                agent_id=(turn.recorded or {}).get("agent_id"),
                visibility=scope.session_visibility, target=session_id):
            return core.out_of_reach(scope)
        why = ("an event of the turn's own session outside the history window it read, or "
               "folded into a compaction" if own else
               f"transcript recall (visibility {scope.session_visibility.label}) did not return "
               "it; transcripts are not re-ranked")
        return core.not_a_candidate({}, _depth(turn.body, "session"), why=why)

    async def _task(self, scope: Scope, task_id: str, ref: str, now: datetime
                    ) -> core.Explanation:
        checkpoint = await self._tasks.get(tenant_id=scope.tenant_id, task_id=task_id)
        if checkpoint is None:
            raise NotFound(f"no source {ref!r}")
        denied = core.permission(
            scope, [core.owned_source(ref, scope.tenant_id, checkpoint.user_id)], now)
        if denied is not None:
            return denied
        why = ("another revision or part of the turn's task was read" if task_id == scope.task_id
               else "the turn was not on this task" if scope.task_id is not None
               else "the turn named no task")
        return core.not_a_candidate({}, None, why=why)


def _depth(body: dict[str, Any], layer: str) -> int | None:
    value = (body.get("retrieval") or {}).get(layer)
    return value if isinstance(value, int) else None
