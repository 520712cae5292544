"""Compaction as a transaction, wired: read the session, run the pure lifecycle, persist.

``CompactionService.compact`` reads the archive (the last ``history_events`` events), the
task's checkpoint and the session's latest recorded compaction (its breaker state, its id the
lineage), runs ``compaction_steps`` with the model summarizer when one is configured (else the
local extractive one; ``arun_compaction`` drives it) and persists in this order:

1. the new checkpoint revision (``TaskService.put`` with the revision read as the expected
   one), when the lifecycle committed facts that differ from the stored checkpoint and the
   session has a task;
2. the compaction row (``CompactionStore.insert``: the record, the summary and the
   ``SessionView`` it serves).

Separate transactions, in this order, so a crash never leaves a summary without its committed
facts (the worst case is a checkpoint revision without its compaction row, which the next run
simply builds on).

The breaker (``app.core.compaction.breaker``) lives in those rows, so every worker sees the
same state: each row carries the consecutive failures and when the breaker opened. A model
failure (``SummarizerError``: timeout, unreachable, HTTP status, garbage) is a row of its own
(``compaction.failed``, carrying the previous row's view, so the last valid view stays the one
served) and counts like a failed validation; the failure that reaches the threshold stores the
breaker's reference view instead. After the cool-down one probe runs (half-open); a valid
summary closes the breaker. ``reset`` (an admin) closes it at once with a ``compaction.reset``
row. Time comes from the clock passed in.

``for_turn`` is the assembler's entry: past the threshold (``outgrown``) it first tries the
latest row's view (``latest``, one indexed read the assembler makes while it collects the
other layers) plus the events appended since, and compacts again only when that no longer
fits. A model never holds a turn for longer than ``turn_deadline_s``: the compaction runs as a
background job (one per session at a time, at most ``max_jobs`` per worker, cancelled by
``aclose``) and a turn that stops waiting serves the last stored view, else the extractive
view made inline and not stored; the job's result, validated like any run, is stored as the
next view only if valid. The record a turn serves says which (``served``: new, stored or
extractive) and whether a model compaction is ``pending``. ``view_candidates`` turns a view
into pipeline candidates.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

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
from app.core.compaction.breaker import (
    CLOSED,
    Breaker,
    BreakerPolicy,
    Phase,
    failures_so_far,
    phase,
    retry_after,
    settle,
)
from app.core.compaction.lifecycle import derive_id
from app.core.errors import NotFound, StaleRevision
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
from app.observability import Metrics
from app.ports import CompactionStore, StoredCompaction, SummarizerError
from app.service.background import KeyedJobs
from app.service.breakers import BreakerBoard
from app.service.sessions import SessionService
from app.service.tasks import TaskService

log = logging.getLogger(__name__)
RECORDED = frozenset(("compaction.completed", "compaction.breaker_open"))  # stored, served
MIN_SUMMARY_CHARS = 400
RETRY_AFTER = timedelta(seconds=5)  # after a model failure that leaves the breaker closed
Clock = Callable[[], datetime]
Served = Literal["new", "stored", "extractive"]


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


class _Counted:
    """A summarizer that counts its calls: a run that fails on the model's n-th request made
    n attempts toward the breaker (the ones before it failed validation)."""

    def __init__(self, inner: AsyncSummarizer) -> None:
        self._inner = inner
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        return await self._inner.summarize(request)


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


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerReset:
    """What ``CompactionService.reset`` found and did."""

    previous: Phase
    failures: int  # consecutive failures before the reset
    reset: bool  # False: it was already closed with no failure, nothing was written


@dataclass(frozen=True, slots=True, kw_only=True)
class _Ask:
    """One compaction asked for: whose session, the budget, what the caller already read."""

    principal: Principal
    session_id: str
    user_id: str
    task_id: str | None
    budget_tokens: int
    manual: bool
    checkpoint: TaskCheckpoint | None = None
    latest: StoredCompaction | None = None


def breaker_of(latest: StoredCompaction | None) -> Breaker:
    """The breaker state a session's latest row carries (a row written before the state had
    ``breaker_opened_at`` opened when it was written)."""
    if latest is None or latest.consecutive_failures <= 0:
        return CLOSED
    at = latest.record.get("breaker_opened_at")
    opened = datetime.fromisoformat(at) if isinstance(at, str) else (
        latest.created_at if latest.breaker_open else None)
    return Breaker(failures=latest.consecutive_failures, opened_at=opened)


def _breaker_fields(state: Breaker, policy: BreakerPolicy, now: datetime) -> dict[str, Any]:
    return {"breaker": phase(state, policy, now).value,
            "breaker_opened_at": state.opened_at.isoformat() if state.opened_at else None}


class CompactionService:
    """``scan`` is the pipeline's detector and ``detectors`` the fingerprint of its code: a
    view's block is scanned once, when the compaction makes it, and its findings stored with
    it, so no turn that serves the view again (in any worker) scans it. ``summarizer`` is the
    local (extractive) one; ``model``, when set, a network model run off the hot path."""

    def __init__(self, *, sessions: SessionService, tasks: TaskService, store: CompactionStore,
                 summarizer: AsyncSummarizer, count_tokens: CountTokens, scan: Detector,
                 detectors: str, keep_recent: int, metrics: Metrics, breaker: BreakerPolicy,
                 clock: Clock, model: AsyncSummarizer | None = None,
                 turn_deadline_s: float = 0.3, max_jobs: int = 32,
                 history_events: int = 2000, compact_at: float = 0.8,
                 options: Options | None = None) -> None:
        self._sessions = sessions
        self._tasks = tasks
        self._store = store
        self._summarizer = summarizer
        self._model = model
        self._count = count_tokens
        self._scan = scan
        self._detectors = detectors
        self._keep_recent = keep_recent
        self._metrics = metrics
        self._policy = breaker
        self._board = BreakerBoard(breaker)
        self._clock = clock
        self._deadline = turn_deadline_s
        self._jobs: KeyedJobs[tuple[str, str], Compacted | None] = KeyedJobs(
            limit=max_jobs, name="compaction")
        self._history = history_events
        self._compact_at = compact_at
        self._options = options or Options()

    async def aclose(self) -> None:
        """Cancel the background compactions (before the stores they write close)."""
        await self._jobs.close()

    def pending(self, *, tenant_id: str, session_id: str) -> asyncio.Task[Compacted | None] | None:
        """The model compaction running in the background for this session, if any."""
        return self._jobs.running((tenant_id, session_id))

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
                       checkpoint: TaskCheckpoint | None, latest: StoredCompaction | None,
                       before: Callable[[], Awaitable[TaskCheckpoint | None]] | None = None
                       ) -> Compacted | None:
        """The session layer of a turn whose history (``history_tokens``, of the hot tail
        ``events``) is ``outgrown``: the ``latest`` compaction's view plus the events since,
        while that fits; otherwise a new compaction, waited for at most the turn deadline
        when it calls a model (then the last stored view, else the extractive one). None:
        serve the history as it is (under the threshold, or nothing to serve).
        ``before`` runs only when a new compaction is about to be made (commit what
        constrains first), and gives the checkpoint it builds on: a turn served the stored
        view pays for neither."""
        threshold = self._compact_at * session_budget
        if not self.outgrown(history_tokens, session_budget):
            return None
        tenant_id = principal.tenant_id
        key = (tenant_id, session_id)
        self._board.saw(key, breaker_of(latest), self._clock())
        last = self._last(latest, events, tenant_id=tenant_id, session_id=session_id,
                          task_id=task_id, owner_user_id=owner_user_id, checkpoint=checkpoint)
        if last is not None and last.view is not None and _still_fresh(
                last.candidates, last.view, threshold):
            return self._served(last, "stored", key)
        if before is not None:
            checkpoint = await before()
        ask = _Ask(principal=principal, session_id=session_id, user_id=user_id,
                   task_id=task_id, budget_tokens=max(1, int(session_budget)), manual=False,
                   checkpoint=checkpoint, latest=latest)
        if self._model is None or phase(breaker_of(latest), self._policy,
                                        self._clock()) is Phase.OPEN:
            # no model call to wait for: the extractive summary, or the reference view
            return self._fresh(await self._compact(ask), events, key, owner_user_id)
        done = await self._within_deadline(key, ask)
        if done is not None:
            return self._fresh(done, events, key, owner_user_id)
        if last is not None:
            return self._served(last, "stored", key)
        return await self._extractive(ask, events, key, owner_user_id)

    def stored_view(self, *, tenant_id: str, session_id: str, task_id: str | None,
                    events: Sequence[SessionEvent], owner_user_id: str | None,
                    history_tokens: int, session_budget: float,
                    checkpoint: TaskCheckpoint | None, latest: StoredCompaction | None
                    ) -> Compacted | None:
        """``for_turn`` for a replay, which may make, store, count or wait for nothing: the
        ``latest`` view when the history is ``outgrown`` and the view was made from no event
        after ``events`` (a past turn's tail); None serves the history as it is."""
        if not events or not self.outgrown(history_tokens, session_budget):
            return None
        last = self._last(latest, events, tenant_id=tenant_id, session_id=session_id,
                          task_id=task_id, owner_user_id=owner_user_id, checkpoint=checkpoint)
        if last is None or last.view is None or last.view.through_seq > events[-1].seq:
            return None
        return last

    def _last(self, latest: StoredCompaction | None, events: Sequence[SessionEvent], *,
              tenant_id: str, session_id: str, task_id: str | None,
              owner_user_id: str | None, checkpoint: TaskCheckpoint | None
              ) -> Compacted | None:
        """The last stored view as a reuse, when it is servable from the tail ``events``."""
        stored = (SessionView.from_json(latest.view, self._detectors)
                  if latest is not None else None)
        if latest is None or stored is None:
            return None
        layer = view_candidates(stored, events, tenant_id=tenant_id, session_id=session_id,
                                owner_user_id=owner_user_id, count_tokens=self._count)
        if layer is None:
            return None
        return Compacted(record={**latest.record, "reused": True},
                         checkpoint=checkpoint if task_id is not None else None,
                         view=stored, candidates=tuple(layer))

    async def _within_deadline(self, key: tuple[str, str], ask: _Ask) -> Compacted | None:
        """The background model compaction of this session (started now, or joined), if it
        finishes within the turn deadline with a view to serve."""
        job = self._jobs.start(key, lambda: self._background(ask))
        if job is None:
            return None  # this worker is at its bound: a later turn starts one
        await asyncio.wait((job,), timeout=self._deadline)  # never cancels the job
        if not job.done() or job.cancelled() or job.exception() is not None:
            return None
        return job.result()

    async def _background(self, ask: _Ask) -> Compacted | None:
        """One model compaction off the hot path. Its failures are recorded by ``compact``
        (a model failure counts toward the breaker; a concurrent checkpoint write does not)."""
        self._metrics.compaction_jobs.inc()
        try:
            return await self._compact(ask)
        except SummarizerError as exc:
            log.warning("background compaction failed (%s): %s", exc.reason, exc)
        except StaleRevision:
            self._metrics.compaction_failed("conflict")
            log.info("background compaction lost a checkpoint race; a later turn retries")
        finally:
            self._metrics.compaction_jobs.dec()
        return None

    def _fresh(self, done: Compacted, events: Sequence[SessionEvent], key: tuple[str, str],
               owner_user_id: str | None, served: Served = "new") -> Compacted | None:
        """A run's view as the turn's session layer: the events it read (possibly pruned),
        then the tail's events after them (a joined job may have read an older archive).
        None: the run left nothing to serve."""
        if done.view is None or done.outcome is None:
            return None
        archived = _derived_from(done.outcome.prune.events, events)
        newest = archived[-1].seq if archived else -1
        layer = view_candidates(done.view, [*archived, *(e for e in events if e.seq > newest)],
                                tenant_id=key[0], session_id=key[1],
                                owner_user_id=owner_user_id, count_tokens=self._count)
        return self._served(replace(done, record={**done.record, "reused": False},
                                    candidates=tuple(layer or ())), served, key)

    def _served(self, done: Compacted, served: Served, key: tuple[str, str]) -> Compacted:
        reference = done.view is not None and done.view.reference
        self._metrics.compaction_views.labels(view="reference" if reference else served).inc()
        return replace(done, record={**done.record, "served": served,
                                     "pending": self._jobs.running(key) is not None})

    async def _extractive(self, ask: _Ask, events: Sequence[SessionEvent],
                          key: tuple[str, str], owner_user_id: str | None) -> Compacted | None:
        """The offline view while the model's is pending: the lifecycle with the extractive
        summarizer, served but not stored (the background job commits the facts), so the
        block carries the checkpoint it committed and the task state stays the stored one."""
        archived, checkpoint, latest = await self._inputs(ask)
        outcome = await arun_compaction(
            archived, checkpoint, summarizer=self._summarizer,
            **self._run_args(ask, latest, model=False))
        if outcome.action not in RECORDED:
            return None
        view = session_view(outcome, session_id=ask.session_id, with_checkpoint=True)
        view = replace(view, findings=tuple(self._scan(view.block)))
        record = {**outcome.record(), "trigger": "auto", "stored": False,
                  "checkpoint_revision_after": checkpoint.revision if checkpoint else None}
        done = Compacted(record=record,
                         checkpoint=checkpoint if ask.task_id is not None else None,
                         view=view, outcome=outcome)
        return self._fresh(done, events, key, owner_user_id, "extractive")

    async def _inputs(self, ask: _Ask) -> tuple[list[SessionEvent], TaskCheckpoint | None,
                                                StoredCompaction | None]:
        """The archive's last events, the task's checkpoint and the latest row (the last two
        unless the caller read them already)."""
        tenant_id, checkpoint, latest = ask.principal.tenant_id, ask.checkpoint, ask.latest
        events = await self._sessions.recent(tenant_id=tenant_id, session_id=ask.session_id,
                                             user_id=ask.user_id, limit=self._history)
        if ask.task_id is not None and checkpoint is None:
            checkpoint = await self._tasks.for_turn(tenant_id=tenant_id, task_id=ask.task_id,
                                                    user_id=ask.user_id)
        if latest is None:
            latest = await self._store.latest(tenant_id=tenant_id, session_id=ask.session_id)
        return events, checkpoint, latest

    def _run_args(self, ask: _Ask, latest: StoredCompaction | None, *,
                  model: bool) -> dict[str, Any]:
        budget = ask.budget_tokens
        options = replace(self._options, summary_carries_constraints=model,
                          summary_max_chars=max(MIN_SUMMARY_CHARS, min(
                              self._options.summary_max_chars, budget * 3 // 2)))
        return {"origin": Origin(session_id=ask.session_id, task_id=ask.task_id or "",
                                 user_id=ask.user_id, now=self._clock()),
                "budget_tokens": budget, "compact_at": 0.0, "keep_recent": self._keep_recent,
                "count_tokens": self._count, "options": options,
                "previous_compaction_id": latest.compaction_id if latest else None}

    async def compact(self, *, principal: Principal, session_id: str, user_id: str,
                      task_id: str | None, budget_tokens: int, manual: bool,
                      checkpoint: TaskCheckpoint | None = None,
                      latest: StoredCompaction | None = None) -> Compacted:
        """Compact the session now (a manual request, ``for_turn`` or its background job),
        persist the checkpoint, then the record with its view. Another user's session or
        task: ``NotFound``. ``checkpoint`` and ``latest`` are the task's latest checkpoint and
        the session's latest compaction when the caller already read them. A model failure
        is recorded (it counts toward the breaker) and raised as ``SummarizerError`` with its
        ``retry_after_s``."""
        return await self._compact(_Ask(
            principal=principal, session_id=session_id, user_id=user_id, task_id=task_id,
            budget_tokens=budget_tokens, manual=manual, checkpoint=checkpoint, latest=latest))

    async def _compact(self, ask: _Ask) -> Compacted:
        events, checkpoint, latest = await self._inputs(ask)
        now = self._clock()
        before = breaker_of(latest)
        so_far = failures_so_far(before, self._policy, now)
        summarizer = _Counted(self._model or self._summarizer)
        try:
            outcome = await arun_compaction(
                events, checkpoint, summarizer=summarizer, failures_so_far=so_far,
                **self._run_args(ask, latest, model=self._model is not None))
        except SummarizerError as exc:
            raise await self._failed(ask, events, checkpoint, latest, exc,
                                     failures=so_far + summarizer.calls, before=before,
                                     now=now) from exc
        return await self._persist(ask, outcome, checkpoint, before=before, now=now)

    async def _persist(self, ask: _Ask, outcome: CompactionOutcome,
                       checkpoint: TaskCheckpoint | None, *, before: Breaker, now: datetime,
                       extra: dict[str, Any] | None = None) -> Compacted:
        principal, session_id, task_id = ask.principal, ask.session_id, ask.task_id
        record = {**outcome.record(), "trigger": "manual" if ask.manual else "auto",
                  **(extra or {})}
        served = checkpoint
        if task_id is not None and outcome.checkpoint is not None and outcome.action in RECORDED:
            served = await self._commit(principal, checkpoint, outcome.checkpoint)
        record["checkpoint_revision_after"] = served.revision if served else None
        if task_id is None:
            served = None
        view = None
        if outcome.action in RECORDED:  # after the checkpoint: never a summary without facts
            after = settle(before, self._policy, now, failures=outcome.consecutive_failures)
            record.update(_breaker_fields(after, self._policy, now))
            view = session_view(outcome, session_id=session_id, with_checkpoint=served is None)
            view = replace(view, findings=tuple(self._scan(view.block)))
            await self._store.insert(
                tenant_id=principal.tenant_id, session_id=session_id, record=record,
                summary=outcome.compaction.summary  # a failed summary is never stored
                if outcome.compaction and not outcome.breaker_open else "",
                view=view.to_json(self._detectors))
            self._metrics.observe_compaction(outcome)
            self._moved((principal.tenant_id, session_id), before, after, now)
        return Compacted(outcome=outcome, record=record, checkpoint=served, view=view)

    async def _failed(self, ask: _Ask, events: Sequence[SessionEvent],
                      checkpoint: TaskCheckpoint | None, latest: StoredCompaction | None,
                      exc: SummarizerError, *, failures: int, before: Breaker, now: datetime
                      ) -> SummarizerError:
        """Record a model failure: a ``compaction.failed`` row carrying the last view, or,
        when it opens the breaker, the breaker's reference view. The error to raise."""
        self._metrics.compaction_failed(exc.reason)
        after = settle(before, self._policy, now, failures=failures)
        if phase(after, self._policy, now) is not Phase.CLOSED:
            outcome = await arun_compaction(  # past the threshold: no summarizer call
                events, checkpoint, summarizer=self._summarizer, failures_so_far=failures,
                **self._run_args(ask, latest, model=False))
            await self._persist(ask, outcome, checkpoint, before=before, now=now,
                                extra={"reason": exc.reason})
        else:
            previous = latest.compaction_id if latest else None
            revision = checkpoint.revision if checkpoint else None
            record = {
                "type": "compaction.failed", "reason": exc.reason,
                "compaction_id": derive_id(previous, "compaction.failed", failures, exc.reason),
                "trigger": "manual" if ask.manual else "auto",
                "attempts": failures - failures_so_far(before, self._policy, now),
                "consecutive_failures": failures, "breaker_open": False, "needs_human": False,
                "validation": None, "cut_seq": None, "summary_sha256": None,
                "previous_compaction_id": previous, "checkpoint_revision_before": revision,
                "checkpoint_revision_after": revision,
                **_breaker_fields(after, self._policy, now)}
            await self._store.insert(tenant_id=ask.principal.tenant_id,
                                     session_id=ask.session_id, record=record, summary="",
                                     view=latest.view if latest else None)
            self._moved((ask.principal.tenant_id, ask.session_id), before, after, now)
        wait = retry_after(after, self._policy, now) or RETRY_AFTER
        return SummarizerError(str(exc), reason=exc.reason, retry_after_s=wait.total_seconds())

    async def reset(self, *, tenant_id: str, session_id: str) -> BreakerReset:
        """Close the session's breaker (an admin's decision): a ``compaction.reset`` row with
        no failures, carrying the last view unless that is the breaker's reference view (then
        the next turn compacts again). A missing session (or another tenant's): ``NotFound``."""
        if not await self._sessions.exists(tenant_id=tenant_id, session_id=session_id):
            raise NotFound(f"no session {session_id!r}")
        latest = await self._store.latest(tenant_id=tenant_id, session_id=session_id)
        now = self._clock()
        before = breaker_of(latest)
        was = phase(before, self._policy, now)
        if latest is None or before.failures == 0:
            return BreakerReset(previous=was, failures=0, reset=False)
        stored = SessionView.from_json(latest.view, self._detectors)
        record = {
            "type": "compaction.reset", "trigger": "admin",
            "compaction_id": derive_id(latest.compaction_id, "compaction.reset"),
            "attempts": 0, "consecutive_failures": 0, "breaker_open": False,
            "needs_human": False, "validation": None, "cut_seq": None, "summary_sha256": None,
            "previous_compaction_id": latest.compaction_id, "previous_breaker": was.value,
            **_breaker_fields(CLOSED, self._policy, now)}
        await self._store.insert(
            tenant_id=tenant_id, session_id=session_id, record=record, summary="",
            view=None if stored is None or stored.reference else latest.view)
        self._moved((tenant_id, session_id), before, CLOSED, now)
        return BreakerReset(previous=was, failures=before.failures, reset=True)

    def breaker_counts(self) -> dict[str, int]:
        """Sessions this worker saw with an open or half-open breaker, by phase, now."""
        return {p.value: n for p, n in self._board.counts(self._clock()).items()}

    def _moved(self, key: tuple[str, str], before: Breaker, after: Breaker,
               now: datetime) -> None:
        self._board.saw(key, after, now)
        self._metrics.breaker_moved(phase(before, self._policy, now).value,
                                    phase(after, self._policy, now).value)

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
