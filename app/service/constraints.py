"""Constraints a turn keeps whatever their source, and the read-back that brings their
evidence back (issue 17, items 1 and 2).

``ConstraintService.before_compaction`` runs in a turn whose history has outgrown its share,
before the compaction: it commits what constrains (``app.core.compaction.commit``) into
* the task's checkpoint: the constraints of the retrieved evidence the session relied on
  (the ``kb://`` segments of its turns' envelopes, as the last ``relied_turns`` manifests
  record them, read again by ref under the turn's permission) and the re-confirmation of an
  expired one; the session's own events are committed by the compaction's commit step, which
  builds on this revision;
* or, without a task, the session's state (``SessionStateStore``): the events of the hot tail
  and those sources, so a session without a task keeps its constraints past any compaction.
A write that lost a race (``StaleRevision``) leaves the turn with what it read; the next
outgrown turn commits again (a commit is a union: nothing found is ever dropped).

``read_back`` plans the seeds' three triggers (``app.core.readback``) against the turn's
candidates and fetches what they name by ref: an archived event (through the owner check) or
a knowledge chunk (under the turn's permission). Each becomes a compressible candidate
(priority ``READ_BACK_PRIORITY``, unranked so the relevance floor does not drop what a
trigger asked for), and a ``{"reason", "ref"}`` record for the manifest. An event of another
user's session, or a chunk the turn may not read, is skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from app.core.candidates import CountTokens
from app.core.compaction import RuleExtractor, commit
from app.core.compaction.extract import Source
from app.core.errors import NotFound, StaleRevision
from app.core.guards.safety import Detector
from app.core.model import (
    Candidate,
    Principal,
    Scope,
    SessionEvent,
    TaskCheckpoint,
    TranscriptHit,
    Trust,
    Visibility,
    scanned,
)
from app.core.readback import (
    APPROVAL_REACTIVATED,
    ReadBack,
    cited,
    cites_conclusion,
    missing_evidence,
    plan,
    reactivated,
)
from app.core.refs import event_ref, event_seq, parse_ref
from app.core.retrieval import knowledge_candidates, transcript_candidates
from app.core.session_state import SessionState, scan_session_state
from app.ports import ChunkReader, KnowledgeQuery, SessionStateStore
from app.service.sessions import SessionService
from app.service.tasks import TaskService

READ_BACK_PRIORITY = 70  # above retrieval (40) and old history, below task state (80, 100)
# Full-text hits trigger (b) looks through: a query that cites ("you said", 之前…) looks
# further, as the archive ranks long tool results (many matching terms) before the short
# message that states the conclusion; (c) looks for one known sentence.
CITED_SEARCH_HITS = 100
UNCUED_SEARCH_HITS = 20
APPROVAL_SEARCH_HITS = 20


def _same(old: TaskCheckpoint | None, new: TaskCheckpoint) -> bool:
    return old is not None and dataclasses.replace(
        new, revision=old.revision, created_at=old.created_at, admission=old.admission) == old


class ConstraintService:
    def __init__(self, *, sessions: SessionService, tasks: TaskService,
                 states: SessionStateStore, chunks: ChunkReader, count_tokens: CountTokens,
                 relied_turns: int = 20, scan: Detector | None = None) -> None:
        self._sessions = sessions
        self._scan = scan  # the pipeline's detector: a state is stored with its findings
        self._tasks = tasks
        self._states = states
        self._chunks = chunks
        self._count = count_tokens
        self._relied_turns = relied_turns

    def _query(self, scope: Scope, now: datetime) -> KnowledgeQuery:
        return KnowledgeQuery(tenant_id=scope.tenant_id, user_id=scope.user_id,
                              groups=scope.groups, domain=scope.domain,
                              max_level=scope.data_level, now=now, embedding=None, text="",
                              k=0)

    async def _sources(self, scope: Scope, now: datetime) -> list[Source]:
        refs = await self._chunks.relied(tenant_id=scope.tenant_id,
                                         session_id=scope.session_id or "",
                                         turns=self._relied_turns)
        if not refs:
            return []
        hits = await self._chunks.chunks(query=self._query(scope, now), refs=refs)
        return [Source(ref=h.chunk_ref, text=h.text) for h in hits]

    async def before_compaction(
        self, *, principal: Principal, scope: Scope, tail: Sequence[SessionEvent],
        checkpoint: TaskCheckpoint | None, state: SessionState | None, now: datetime
    ) -> tuple[TaskCheckpoint | None, SessionState | None]:
        """(checkpoint, state) after committing (see the module docstring)."""
        if scope.session_id is None:
            return checkpoint, state
        sources = await self._sources(scope, now)
        try:
            if scope.task_id is not None:
                return await self._commit_task(principal, scope, checkpoint, sources, now), state
            return checkpoint, await self._commit_state(scope, tail, state, sources, now)
        except StaleRevision:
            return checkpoint, state

    async def _commit_task(self, principal: Principal, scope: Scope,
                           old: TaskCheckpoint | None, sources: Sequence[Source],
                           now: datetime) -> TaskCheckpoint | None:
        if old is None or not (sources or old.constraints):
            return old  # the compaction's commit makes the first revision from the events
        new = commit((), old, extractor=RuleExtractor(), session_id=scope.session_id or "",
                     task_id=old.task_id, user_id=old.user_id, sources=sources, now=now)
        if _same(old, new):
            return old
        revision = await self._tasks.put(principal=principal, checkpoint=new,
                                         expected_revision=old.revision)
        return dataclasses.replace(new, revision=revision)

    async def _commit_state(self, scope: Scope, tail: Sequence[SessionEvent],
                            stored: SessionState | None, sources: Sequence[Source],
                            now: datetime) -> SessionState | None:
        """Only the tail's events after the last committed one are read again."""
        sid = scope.session_id or ""
        old = stored.state if stored else None
        through = stored.through_seq if stored else 0
        fresh = [e for e in tail if e.seq > through]
        new = commit(fresh, old, extractor=RuleExtractor(), session_id=sid,
                     user_id=scope.user_id, sources=sources, now=now)
        if _same(old, new) or not (new.constraints or old):
            return stored  # nothing new, or nothing that constrains: no row for it
        state = dataclasses.replace(new, session_id=sid, scanned=())
        expected = old.revision if old else 0
        if self._scan is not None:  # scanned as the revision this write gets renders it
            state = dataclasses.replace(state, scanned=scan_session_state(
                dataclasses.replace(state, revision=expected + 1), now, self._scan))
        made = SessionState(state=state,
                            through_seq=max((e.seq for e in tail), default=through))
        revision = await self._states.put(tenant_id=scope.tenant_id, session_id=sid,
                                          state=made, expected_revision=expected)
        return dataclasses.replace(made, state=dataclasses.replace(
            made.state, revision=revision, created_at=now))

    async def read_back(self, *, scope: Scope, query: str, candidates: Sequence[Candidate],
                        state: TaskCheckpoint | None, compacted: bool, now: datetime,
                        tail: Sequence[SessionEvent] = ()
                        ) -> tuple[list[Candidate], list[dict[str, str]]]:
        """The read-back candidates of a turn and their manifest records. An event the hot
        ``tail`` still holds is taken from it, with the findings made when it was appended
        (the archive keeps none, so it is not scanned again)."""
        sid = scope.session_id
        if sid is None:
            return [], []
        present = {c.ref for c in candidates}
        found = {event_ref(sid, e.seq): TranscriptHit(session_id=sid, event=e, rank=1)
                 for e in tail}
        approvals = reactivated(query, state.pending_approvals) if state is not None else []
        approval_plans = [r for a in approvals
                          for r in await self._approval(scope, a, present, found)]
        cited_plans: list[ReadBack] = []
        if cites_conclusion(query) or compacted:
            hits = await self._sessions.search_owned(
                tenant_id=scope.tenant_id, session_id=sid, user_id=scope.user_id,
                visibility=Visibility.SELF, query=query,
                limit=CITED_SEARCH_HITS if cites_conclusion(query) else UNCUED_SEARCH_HITS)
            own = [h for h in hits if h.session_id == sid]
            for h in own:
                found.setdefault(event_ref(sid, h.event.seq), h)
            cited_plans = cited(query, own, present,
                                session_ref_of={h.event.seq: event_ref(sid, h.event.seq)
                                                for h in own})
        plans = plan(missing_evidence(state, present), approval_plans, cited_plans)
        out = await self._fetch(scope, plans, found, now)
        return out, [{"reason": p.reason, "ref": p.ref} for p in plans
                     if any(c.ref == p.ref for c in out)]

    async def _approval(self, scope: Scope, approval: str, present: set[str],
                        found: dict[str, TranscriptHit]) -> list[ReadBack]:
        """Where a re-activated pending approval was asked for (the archived event that
        holds its text), unless the turn already carries it."""
        sid = scope.session_id or ""
        hits = await self._sessions.search_owned(
            tenant_id=scope.tenant_id, session_id=sid, user_id=scope.user_id,
            visibility=Visibility.SELF, query=approval, limit=APPROVAL_SEARCH_HITS)
        for h in hits:
            ref = event_ref(sid, h.event.seq)
            if h.session_id == sid and approval in h.event.content:
                found.setdefault(ref, h)
                return [] if ref in present else [
                    ReadBack(reason=APPROVAL_REACTIVATED, ref=ref)]
        return []

    async def _fetch(self, scope: Scope, plans: Sequence[ReadBack],
                     found: dict[str, TranscriptHit], now: datetime) -> list[Candidate]:
        out: list[Candidate] = []
        chunk_refs = [p.ref for p in plans if p.ref.startswith("kb://")]
        chunks = ({h.chunk_ref: h for h in await self._chunks.chunks(
            query=self._query(scope, now), refs=chunk_refs)} if chunk_refs else {})
        for p in plans:
            if p.ref in chunks:
                made = knowledge_candidates([chunks[p.ref]], count_tokens=self._count)
            else:
                hit = found.get(p.ref) or await self._event(scope, p.ref)
                if hit is None:
                    continue
                made = transcript_candidates([hit], tenant_id=scope.tenant_id,
                                             owner_user_id=scope.user_id,
                                             count_tokens=self._count)
                if hit.event.type == "tool_result":
                    made = [dataclasses.replace(c, trust=Trust.UNTRUSTED) for c in made]
                if hit.event.type != "tool_call":  # (a call's findings are of its arguments)
                    made = [dataclasses.replace(c, scanned=scanned(c.content,
                                                                   hit.event.findings))
                            for c in made]
            out += [dataclasses.replace(c, scores=(), priority=READ_BACK_PRIORITY,
                                        reason=p.reason) for c in made]
        return out

    async def _event(self, scope: Scope, ref: str) -> TranscriptHit | None:
        seq = event_seq(ref)
        if seq is None:
            return None
        session_id = parse_ref(ref)[1][0]
        try:
            events = await self._sessions.transcript(
                tenant_id=scope.tenant_id, session_id=session_id, user_id=scope.user_id,
                after_seq=seq - 1, limit=1)
        except NotFound:  # another user's session: not this turn's to read
            return None
        return next((TranscriptHit(session_id=session_id, event=e, rank=1)
                     for e in events if e.seq == seq), None)
