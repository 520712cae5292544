"""Compaction as a transaction, wired: read the session, run the pure lifecycle, persist.

``CompactionService.compact`` reads the archive (the last ``history_events`` events), the
task's checkpoint and the session's latest recorded compaction (its ``consecutive_failures``
feed the breaker, its id the lineage), runs ``compaction_steps`` with the configured
summarizer (``arun_compaction`` drives it; a local summarizer is awaited through a thin
wrapper) and persists in this order:

1. the new checkpoint revision (``TaskService.put`` with the revision read as the expected
   one), when the lifecycle committed facts that differ from the stored checkpoint and the
   session has a task;
2. the compaction row (``CompactionStore.insert``: the record, the summary and the
   ``SessionView`` it serves).

Separate transactions, in this order, so a crash never leaves a summary without its committed
facts (the worst case is a checkpoint revision without its compaction row, which the next run
simply builds on).

``for_turn`` is the assembler's entry: past the threshold (``outgrown``) it first tries the
latest row's view (``latest``, one indexed read the assembler makes while it collects the
other layers) plus the events appended since, and compacts again only when that no longer
fits; ``view_candidates`` turns a view into pipeline candidates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core.candidates import WHOLE_TENANT, CountTokens, event_content, session_candidates
from app.core.compaction import (
    AsyncSummarizer,
    CompactionOutcome,
    Options,
    Origin,
    Summarizer,
    SummaryRequest,
    View,
    compaction_steps,
)
from app.core.guards.safety import Detector
from app.core.model import (
    Candidate,
    DataLevel,
    Finding,
    Freshness,
    Kind,
    Layer,
    Principal,
    Section,
    SessionEvent,
    TaskCheckpoint,
    Trust,
    scanned,
    tagged_findings,
    untag_findings,
)
from app.core.refs import compaction_ref, event_seq, session_events_pattern, session_ref
from app.ports import CompactionStore, StoredCompaction
from app.service.sessions import SessionService
from app.service.tasks import TaskService

log = logging.getLogger(__name__)
RECORDED = frozenset(("compaction.completed", "compaction.breaker_open"))  # stored, served
MIN_SUMMARY_CHARS = 400


async def arun_compaction(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
                          summarizer: AsyncSummarizer, **kwargs: Any) -> CompactionOutcome:
    """``run_compaction`` with an awaited summarizer (HTTP models); same stages, same rules."""
    steps = compaction_steps(events, checkpoint, **kwargs)
    try:
        request = next(steps)
        while True:
            request = steps.send(await summarizer.summarize(request))
    except StopIteration as stop:
        outcome: CompactionOutcome = stop.value
        return outcome


class LocalSummarizer:
    """A synchronous ``Summarizer`` (e.g. the extractive default) behind the async port."""

    def __init__(self, summarizer: Summarizer) -> None:
        self._summarizer = summarizer

    async def summarize(self, request: SummaryRequest) -> str:
        return self._summarizer.summarize(request)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionView:
    """The session layer one compaction serves: its summary block and the events it kept.

    Stored with the compaction row: a later turn serves it again, with the events appended
    since ``through_seq``, for as long as that still fits under the threshold, instead of
    compacting the whole session every turn."""

    compaction_id: str
    reference: bool  # breaker open: a block of handles, which may be compressed
    block: str  # "" when the view has no summary block
    kept_seqs: tuple[int, ...]  # sticky and recent events, in seq order
    through_seq: int  # the last event the compaction read
    findings: tuple[Finding, ...] | None = None  # the detectors' on ``block``, made once

    def to_json(self, detectors: str) -> dict[str, Any]:
        """``detectors``: the fingerprint of the detector code that made ``findings``."""
        return {"compaction_id": self.compaction_id, "reference": self.reference,
                "block": self.block, "kept_seqs": list(self.kept_seqs),
                "through_seq": self.through_seq,
                "findings": None if self.findings is None
                else tagged_findings(self.findings, detectors)}

    @classmethod
    def from_json(cls, doc: Any, detectors: str) -> SessionView | None:
        """None for a row without a view (written before migration 0006). Its findings only
        when the detector code ``detectors`` names made them (else the block is scanned)."""
        if not isinstance(doc, dict):
            return None
        return cls(compaction_id=str(doc["compaction_id"]), reference=bool(doc["reference"]),
                   block=str(doc["block"]), kept_seqs=tuple(int(s) for s in doc["kept_seqs"]),
                   through_seq=int(doc["through_seq"]),
                   findings=untag_findings(doc.get("findings"), detectors))


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """One run (or a reuse): its record, the checkpoint to serve, the view it serves."""

    record: dict[str, Any]
    checkpoint: TaskCheckpoint | None  # the stored revision (None: no task)
    view: SessionView | None  # None: nothing recorded to serve (compaction.none / pruned)
    outcome: CompactionOutcome | None = None  # None: a stored view was reused
    candidates: tuple[Candidate, ...] = ()  # the session layer, for a turn

    @property
    def breaker_opened(self) -> bool:
        return self.outcome is not None and self.outcome.breaker_open


class CompactionService:
    """``scan`` is the pipeline's detector and ``detectors`` the fingerprint of its code: a
    view's block is scanned once, when the compaction makes it, and its findings stored with
    it, so no turn that serves the view again (in any worker) scans it."""

    def __init__(self, *, sessions: SessionService, tasks: TaskService, store: CompactionStore,
                 summarizer: AsyncSummarizer, count_tokens: CountTokens, scan: Detector,
                 detectors: str, keep_recent: int, history_events: int = 2000,
                 compact_at: float = 0.8, options: Options | None = None) -> None:
        self._sessions = sessions
        self._tasks = tasks
        self._store = store
        self._summarizer = summarizer
        self._count = count_tokens
        self._scan = scan
        self._detectors = detectors
        self._keep_recent = keep_recent
        self._history = history_events
        self._compact_at = compact_at
        self._options = options or Options()

    def outgrown(self, history_tokens: int, session_budget: float) -> bool:
        """Whether a history of ``history_tokens`` is past ``compact_at`` x ``session_budget``:
        then a turn serves a compacted view (``for_turn``)."""
        return history_tokens > self._compact_at * session_budget

    async def latest(self, *, tenant_id: str, session_id: str) -> StoredCompaction | None:
        """The session's latest compaction: a turn reads it while it collects the other
        layers, once it knows the history is ``outgrown``."""
        return await self._store.latest(tenant_id=tenant_id, session_id=session_id)

    async def for_turn(self, *, principal: Principal, session_id: str, user_id: str,
                       task_id: str | None, events: Sequence[SessionEvent],
                       owner_user_id: str | None, history_tokens: int, session_budget: float,
                       checkpoint: TaskCheckpoint | None, latest: StoredCompaction | None
                       ) -> Compacted | None:
        """The session layer of a turn whose history (``history_tokens``, of the hot tail
        ``events``) is ``outgrown``: the ``latest`` compaction's view plus the events since,
        while that fits; otherwise a new compaction. None: serve the history as it is (under
        the threshold, or the run recorded nothing to serve)."""
        threshold = self._compact_at * session_budget
        if not self.outgrown(history_tokens, session_budget):
            return None
        tenant_id = principal.tenant_id
        stored = (SessionView.from_json(latest.view, self._detectors)
                  if latest is not None else None)
        if latest is not None and stored is not None:
            layer = view_candidates(stored, events, tenant_id=tenant_id,
                                    session_id=session_id, owner_user_id=owner_user_id,
                                    count_tokens=self._count)
            if layer is not None and _still_fresh(layer, stored, threshold):
                return Compacted(record={**latest.record, "reused": True},
                                 checkpoint=checkpoint if task_id is not None else None,
                                 view=stored, candidates=tuple(layer))
        done = await self.compact(principal=principal, session_id=session_id,
                                  user_id=user_id, task_id=task_id,
                                  budget_tokens=max(1, int(session_budget)), manual=False,
                                  checkpoint=checkpoint, latest=latest)
        if done.view is None or done.outcome is None:
            return None
        layer = view_candidates(done.view, _derived_from(done.outcome.prune.events, events),
                                tenant_id=tenant_id, session_id=session_id,
                                owner_user_id=owner_user_id, count_tokens=self._count)
        return replace(done, record={**done.record, "reused": False},
                       candidates=tuple(layer or ()))

    async def compact(self, *, principal: Principal, session_id: str, user_id: str,
                      task_id: str | None, budget_tokens: int, manual: bool,
                      checkpoint: TaskCheckpoint | None = None,
                      latest: StoredCompaction | None = None) -> Compacted:
        """Compact the session now (a manual request, or ``for_turn`` past the threshold),
        persist the checkpoint, then the record with its view. Another user's session or task:
        ``NotFound``. ``checkpoint`` and ``latest`` are the task's latest checkpoint and the
        session's latest compaction when the caller already read them."""
        tenant_id = principal.tenant_id
        events = await self._sessions.recent(tenant_id=tenant_id, session_id=session_id,
                                             user_id=user_id, limit=self._history)
        if task_id is not None and checkpoint is None:
            checkpoint = await self._tasks.for_turn(tenant_id=tenant_id, task_id=task_id,
                                                    user_id=user_id)
        if latest is None:
            latest = await self._store.latest(tenant_id=tenant_id, session_id=session_id)
        options = replace(self._options, summary_max_chars=max(
            MIN_SUMMARY_CHARS, min(self._options.summary_max_chars, budget_tokens * 3 // 2)))
        outcome = await arun_compaction(
            events, checkpoint, summarizer=self._summarizer,
            origin=Origin(session_id=session_id, task_id=task_id or "", user_id=user_id),
            budget_tokens=budget_tokens, compact_at=0.0, keep_recent=self._keep_recent,
            count_tokens=self._count,
            failures_so_far=latest.consecutive_failures if latest else 0,
            previous_compaction_id=latest.compaction_id if latest else None, options=options)
        record = {**outcome.record(), "trigger": "manual" if manual else "auto"}
        served = checkpoint
        if task_id is not None and outcome.checkpoint is not None and outcome.action in RECORDED:
            served = await self._commit(principal, checkpoint, outcome.checkpoint)
        record["checkpoint_revision_after"] = served.revision if served else None
        if task_id is None:
            served = None
        view = None
        if outcome.action in RECORDED:  # after the checkpoint: never a summary without facts
            view = session_view(outcome, session_id=session_id, with_checkpoint=served is None)
            view = replace(view, findings=tuple(self._scan(view.block)))
            await self._store.insert(
                tenant_id=tenant_id, session_id=session_id, record=record,
                summary=outcome.compaction.summary if outcome.compaction else "",
                view=view.to_json(self._detectors))
        return Compacted(outcome=outcome, record=record, checkpoint=served, view=view)

    async def _commit(self, principal: Principal, old: TaskCheckpoint | None,
                      new: TaskCheckpoint) -> TaskCheckpoint:
        if old is not None and replace(new, revision=old.revision, created_at=old.created_at,
                                       admission=old.admission) == old:
            return old  # nothing new was committed: no empty revision
        revision = await self._tasks.put(principal=principal, checkpoint=new,
                                         expected_revision=old.revision if old else 0)
        return replace(new, revision=revision)


def _derived_from(events: Sequence[SessionEvent], tail: Sequence[SessionEvent]
                  ) -> list[SessionEvent]:
    """The compaction's ``events`` (read from the archive, which keeps no derived fields, and
    possibly pruned) with the token count and findings of the tail's copy of each, where that
    copy has the same candidate content: counted and scanned when it entered the tail."""
    copies = {e.seq: e for e in tail}
    out: list[SessionEvent] = []
    for e in events:
        t = copies.get(e.seq)
        if t is not None and e.tokens is None and e.findings is None \
                and event_content(t) == event_content(e):
            e = replace(e, tokens=t.tokens, findings=t.findings)
        out.append(e)
    return out


def _still_fresh(layer: Sequence[Candidate], view: SessionView, threshold: float) -> bool:
    """Serve the stored view again while it fits, or while what was appended since is under a
    quarter of the threshold: a new run would keep those events as its recent tail anyway, so
    compacting again would cost a full run per turn for the same view (a view whose own
    recent tail is over the threshold stays over it)."""
    appended = sum(c.tokens for c in layer if c.seq is not None and c.seq > view.through_seq)
    return sum(c.tokens for c in layer) <= threshold or appended <= threshold / 4


def session_view(outcome: CompactionOutcome, *, session_id: str,
                 with_checkpoint: bool) -> SessionView:
    """What a recorded outcome serves: the summary block (the checkpoint when there is no task
    to carry it, pins, summary or the breaker's turn handles) and the sticky and recent events
    it kept."""
    view: View = outcome.view
    known = {e.seq for e in outcome.prune.events}
    seqs = sorted({s for i in view.items if i.kind in ("sticky", "event")
                   if (s := event_seq(i.ref)) is not None and s in known})
    kinds = ("pinned", "summary", "reference") + (("checkpoint",) if with_checkpoint else ())
    items = [i.content for i in view.items if i.kind in kinds]
    reference = view.mode == "reference"
    title = ("Earlier turns of this session (breaker open: uncompressed, by handle)"
             if reference else "Summary of the earlier session")
    block = (f"{title}; every event stays in the archive as "
             f"{session_events_pattern(session_id)}:\n\n" + "\n\n".join(items)) if items else ""
    return SessionView(compaction_id=outcome.compaction_id, reference=reference, block=block,
                       kept_seqs=tuple(seqs), through_seq=max(known, default=0))


def view_candidates(view: SessionView, events: Sequence[SessionEvent], *, tenant_id: str,
                    session_id: str, owner_user_id: str | None, count_tokens: CountTokens
                    ) -> list[Candidate] | None:
    """The session layer a view serves, given the session's recent ``events``: the block as
    one curated candidate ``session://{sid}/compaction/{id}`` (never compressed unless it is
    the breaker's handle block), then the kept events and every event after ``through_seq``
    as ordinary session candidates. None when ``events`` no longer hold a kept event or do
    not reach back to ``through_seq`` (the view cannot be served from them)."""
    by_seq = {e.seq: e for e in events}
    if any(s not in by_seq for s in view.kept_seqs):
        return None
    if events and events[0].seq > view.through_seq + 1:
        return None  # a gap: events after the view that the tail no longer holds
    shown = [*(by_seq[s] for s in view.kept_seqs),
             *(e for e in events if e.seq > view.through_seq)]
    out: list[Candidate] = []
    if view.block:
        first = shown[0].seq if shown else None
        out.append(Candidate(
            ref=compaction_ref(session_id, view.compaction_id),
            kind=Kind.SESSION, layer=Layer.SESSION, section=Section.SESSION, role="assistant",
            content=view.block, tenant_id=tenant_id, origin=session_ref(session_id),
            trust=Trust.CURATED, sensitivity=DataLevel.INTERNAL, acl=WHOLE_TENANT,
            owner_user_id=owner_user_id, freshness=Freshness(),
            tokens=count_tokens(view.block), priority=90, never_compress=not view.reference,
            scanned=scanned(view.block, view.findings),
            seq=None if first is None else first - 1,
            reason="session compaction " + ("reference view" if view.reference else "summary")))
    out += session_candidates(shown, tenant_id=tenant_id, session_id=session_id,
                              owner_user_id=owner_user_id, count_tokens=count_tokens)
    return out
