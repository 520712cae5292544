"""Compaction as a transaction, wired: read the session, run the pure lifecycle, persist.

``CompactionService.compact`` reads the archive (the last ``history_events`` events), the
task's checkpoint and the session's latest recorded compaction (its ``consecutive_failures``
feed the breaker, its id the lineage), runs ``compaction_steps`` with the configured
summarizer (``arun_compaction`` drives it; a local summarizer is awaited through a thin
wrapper) and persists in this order:

1. the new checkpoint revision (``TaskService.put`` with the revision read as the expected
   one), when the lifecycle committed facts that differ from the stored checkpoint and the
   session has a task;
2. the compaction row (``CompactionStore.insert``: the record and the summary).

Separate transactions, in this order, so a crash never leaves a summary without its committed
facts (the worst case is a checkpoint revision without its compaction row, which the next run
simply builds on). ``view_candidates`` turns an outcome's view into pipeline candidates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.core.candidates import WHOLE_TENANT, CountTokens, session_candidates
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
from app.core.model import (
    Candidate,
    DataLevel,
    Freshness,
    Kind,
    Layer,
    Principal,
    Section,
    SessionEvent,
    TaskCheckpoint,
    Trust,
)
from app.ports import CompactionStore
from app.service.sessions import SessionService
from app.service.tasks import TaskService

log = logging.getLogger(__name__)
RECORDED = frozenset(("compaction.completed", "compaction.breaker_open"))
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
class Compacted:
    """One run: the outcome, its record (``trigger`` added), the checkpoint to serve."""

    outcome: CompactionOutcome
    record: dict[str, Any]
    checkpoint: TaskCheckpoint | None  # the stored revision (None: no task)
    stored: bool  # a compaction row was written (completed or breaker open)

    @property
    def serves_view(self) -> bool:
        return self.outcome.action in RECORDED


class CompactionService:
    def __init__(self, *, sessions: SessionService, tasks: TaskService, store: CompactionStore,
                 summarizer: AsyncSummarizer, count_tokens: CountTokens, keep_recent: int,
                 history_events: int = 2000, options: Options | None = None) -> None:
        self._sessions = sessions
        self._tasks = tasks
        self._store = store
        self._summarizer = summarizer
        self._count = count_tokens
        self._keep_recent = keep_recent
        self._history = history_events
        self._options = options or Options()

    async def compact(self, *, principal: Principal, session_id: str, user_id: str,
                      task_id: str | None, budget_tokens: int, manual: bool,
                      checkpoint: TaskCheckpoint | None = None) -> Compacted:
        """Compact the session now (the caller decided: a manual request or the assembler's
        threshold), persist the checkpoint, then the record. Another user's session or task:
        ``NotFound``. ``checkpoint`` is the task's latest when the caller already read it."""
        tenant_id = principal.tenant_id
        events = await self._sessions.recent(tenant_id=tenant_id, session_id=session_id,
                                             user_id=user_id, limit=self._history)
        if task_id is not None and checkpoint is None:
            checkpoint = await self._tasks.for_turn(tenant_id=tenant_id, task_id=task_id,
                                                    user_id=user_id)
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
        stored = outcome.action in RECORDED
        if stored:  # after the checkpoint: never a summary without its committed facts
            await self._store.insert(
                tenant_id=tenant_id, session_id=session_id, record=record,
                summary=outcome.compaction.summary if outcome.compaction else "")
        return Compacted(outcome=outcome, record=record, checkpoint=served, stored=stored)

    async def _commit(self, principal: Principal, old: TaskCheckpoint | None,
                      new: TaskCheckpoint) -> TaskCheckpoint:
        if old is not None and replace(new, revision=old.revision, created_at=old.created_at,
                                       admission=old.admission) == old:
            return old  # nothing new was committed: no empty revision
        revision = await self._tasks.put(principal=principal, checkpoint=new,
                                         expected_revision=old.revision if old else 0)
        return replace(new, revision=revision)


def _seq_of(ref: str) -> int | None:
    head, _, tail = ref.rpartition("/events/")
    return int(tail) if head and tail.isdigit() else None


def view_candidates(outcome: CompactionOutcome, *, tenant_id: str, session_id: str,
                    owner_user_id: str | None, count_tokens: CountTokens,
                    with_checkpoint: bool) -> list[Candidate]:
    """The session layer of a compacted turn: the summary block (checkpoint when there is no
    task to carry it, pins, summary or the breaker's turn handles) as one curated
    never-compress candidate ``session://{sid}/compaction/{id}``, then the sticky events and
    the recent tail as ordinary session candidates (their pruned form)."""
    view: View = outcome.view
    by_seq = {e.seq: e for e in outcome.prune.events}
    seqs = sorted({s for i in view.items if i.kind in ("sticky", "event")
                   if (s := _seq_of(i.ref)) is not None and s in by_seq})
    kinds = ("pinned", "summary", "reference") + (("checkpoint",) if with_checkpoint else ())
    block = [i.content for i in view.items if i.kind in kinds]
    out: list[Candidate] = []
    if block:
        first = seqs[0] if seqs else None
        reference = view.mode == "reference"
        title = ("Earlier turns of this session (breaker open: uncompressed, by handle)"
                 if reference else "Summary of the earlier session")
        content = (f"{title}; every event stays in the archive as "
                   f"session://{session_id}/events/{{seq}}:\n\n" + "\n\n".join(block))
        out.append(Candidate(
            ref=f"session://{session_id}/compaction/{outcome.compaction_id}",
            kind=Kind.SESSION, layer=Layer.SESSION, section=Section.SESSION, role="assistant",
            content=content, tenant_id=tenant_id, origin=f"session://{session_id}",
            trust=Trust.CURATED, sensitivity=DataLevel.INTERNAL, acl=WHOLE_TENANT,
            owner_user_id=owner_user_id, freshness=Freshness(),
            tokens=count_tokens(content), priority=90, never_compress=not reference,
            seq=None if first is None else first - 1,
            reason="session compaction " + ("reference view" if reference else "summary")))
    out += session_candidates([by_seq[s] for s in seqs], tenant_id=tenant_id,
                              session_id=session_id, owner_user_id=owner_user_id,
                              count_tokens=count_tokens)
    return out
