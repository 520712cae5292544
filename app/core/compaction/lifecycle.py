"""The compaction lifecycle: prune → commit → compact → rebuild → validate (→ commit again).

Contract: ``compaction_steps(events, checkpoint, ...)`` is the lifecycle as a generator that
yields summary requests and receives summaries (``run_compaction`` drives it with a local
summarizer; ``app.service.compaction.arun_compaction`` with a network model); it returns a
recordable ``CompactionOutcome``:

1. prune the old tool results; if the full view still exceeds ``compact_at * budget_tokens``:
2. commit the facts into a new checkpoint revision (union, never shrinks);
3. compact the narrative before the recent tail (the cut keeps tool pairs whole);
4. rebuild checkpoint + pins + summary + sticky (recent by state) + tail;
5. validate; on failure the missing items are pinned (in the checkpoint when they are
   qualifiers, in the summary request and in the view) and the loop returns to 2.

Circuit breaker: the attempts of this run plus ``failures_so_far`` (consecutive failures of
earlier runs) may not reach ``BREAKER_AFTER`` (3): then the breaker opens, the outcome serves
the uncompressed history in reference mode (last ``inline_recent_turns`` turns inline, older
turns as handles) and asks for a human. The checkpoint committed on the way is kept: facts
extracted are never wasted. Everything is deterministic: no clock, no I/O, ids are hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.core.compaction import text as tx
from app.core.compaction.breaker import THRESHOLD
from app.core.compaction.check import validate_compaction
from app.core.compaction.commit import commit
from app.core.compaction.compact import Cut, finish, plan_cut, request_for
from app.core.compaction.extract import Extractor, RuleExtractor
from app.core.compaction.prune import prune
from app.core.compaction.rebuild import find_sticky, full_view, rebuild, reference_view
from app.core.compaction.summarize import Summarizer
from app.core.compaction.values import (
    Compaction,
    CompactionCheck,
    CompactionOutcome,
    Lineage,
    PruneResult,
    SummaryRequest,
    View,
)
from app.core.constraint_state import held
from app.core.model import SessionEvent, TaskCheckpoint

BREAKER_AFTER = THRESHOLD
MAX_ATTEMPTS = 3
CountTokens = Callable[[str], int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Origin:
    """Whose session this is (task and user only matter when there is no checkpoint yet) and
    the turn's ``now`` (the commit asks to re-confirm a constraint whose date has passed)."""

    session_id: str
    task_id: str = ""
    user_id: str = ""
    now: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    summary_max_chars: int = 4000
    inline_recent_turns: int = 6
    soft_trim_chars: int = 4000
    hard_clear_after: int = 40
    keep_last_assistant_turns: int = 3
    # A model's summary must itself carry every committed constraint verbatim (the prompt
    # demands it); the extractive summary is built from the sentences and is not held to it.
    summary_carries_constraints: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    events: tuple[SessionEvent, ...]
    checkpoint: TaskCheckpoint | None
    origin: Origin
    keep_recent: int
    count_tokens: CountTokens
    extractor: Extractor
    options: Options
    previous_id: str | None
    failures_so_far: int
    pruned: PruneResult
    tokens_before: int
    tokens_pruned: int  # the full view after pruning


@dataclass(frozen=True, slots=True, kw_only=True)
class _Attempt:
    checkpoint: TaskCheckpoint
    cut: Cut
    request: SummaryRequest


def derive_id(*parts: object) -> str:
    """A record id from what the record depends on (deterministic: a rerun stores nothing new)."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:24]


def _outcome(run: _Run, *, action: str, view: View, checkpoint: TaskCheckpoint | None,
             compaction: Compaction | None = None, check: CompactionCheck | None = None,
             attempts: int = 0, pinned: tuple[str, ...] = ()) -> CompactionOutcome:
    breaker = action == "compaction.breaker_open"
    failures = run.failures_so_far + attempts if breaker else 0
    after = checkpoint.revision if checkpoint else None
    return CompactionOutcome(
        compaction_id=derive_id(run.previous_id, action,
                                compaction and compaction.summary_sha256,
                                compaction and compaction.cut_seq, after, len(run.pruned.pruned)),
        action=action, view=view, checkpoint=checkpoint, prune=run.pruned,
        compaction=compaction, check=check, attempts=attempts, consecutive_failures=failures,
        breaker_open=breaker, needs_human=breaker, tokens_before=run.tokens_before,
        tokens_pruned=run.tokens_pruned, tokens_after=run.count_tokens(view.text),
        pinned=pinned,
        lineage=Lineage(previous_compaction_id=run.previous_id,
                        checkpoint_revision_before=run.checkpoint.revision
                        if run.checkpoint else None, checkpoint_revision_after=after))


def _prepare(run: _Run, checkpoint: TaskCheckpoint | None, pinned: Sequence[str]) -> _Attempt:
    o = run.origin
    cp = commit(run.events, checkpoint, extractor=run.extractor, session_id=o.session_id,
                task_id=o.task_id, user_id=o.user_id, pinned=pinned, now=o.now)
    cut = plan_cut(run.pruned.events, keep_recent=run.keep_recent)
    request = request_for(cut, session_id=o.session_id, constraints=cp.constraints,
                          pinned=pinned, max_chars=run.options.summary_max_chars)
    return _Attempt(checkpoint=cp, cut=cut, request=request)


def _finish(run: _Run, at: _Attempt, summary: str) -> tuple[Compaction, View, CompactionCheck]:
    compaction = finish(at.cut, summary)
    sticky = find_sticky(run.events, before_seq=compaction.cut_seq)
    view = rebuild(at.checkpoint, summary, compaction.recent, sticky=sticky,
                   session_id=run.origin.session_id, pinned=at.request.pinned)
    # Only what task state holds never-compressed (``held``): the older found constraints ride
    # in its compressible detail. Demanding all of them pinned every one a long session found
    # (770 in the bench's 200-turn probe) and grew the never-compressed block to ~46k tokens.
    carried = ([c.text for c in held(at.checkpoint.constraints)[0]]
               if run.options.summary_carries_constraints and at.cut.older else [])
    return compaction, view, validate_compaction(view, at.checkpoint, at.request.pinned,
                                                 in_summary=carried)


def _breaker(run: _Run, checkpoint: TaskCheckpoint | None, attempts: int,
             last: tuple[Compaction, View, CompactionCheck] | None,
             pinned: tuple[str, ...]) -> CompactionOutcome:
    view = reference_view(run.pruned.events, checkpoint, session_id=run.origin.session_id,
                          inline_recent_turns=run.options.inline_recent_turns)
    return _outcome(run, action="compaction.breaker_open", view=view, checkpoint=checkpoint,
                    compaction=last[0] if last else None, check=last[2] if last else None,
                    attempts=attempts, pinned=pinned)


def _start(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
           origin: Origin, budget_tokens: int, compact_at: float, keep_recent: int,
           count_tokens: CountTokens, failures_so_far: int, extractor: Extractor | None,
           previous_compaction_id: str | None, options: Options | None
           ) -> tuple[_Run, CompactionOutcome | None]:
    """Prune and decide: an outcome when no compaction runs, else None."""
    opts, sid = options or Options(), origin.session_id
    pruned = prune(events, session_id=sid, soft_trim_chars=opts.soft_trim_chars,
                   hard_clear_after=opts.hard_clear_after,
                   keep_last_assistant_turns=opts.keep_last_assistant_turns)
    view = full_view(pruned.events, checkpoint, session_id=sid)
    run = _Run(events=tuple(events), checkpoint=checkpoint, origin=origin,
               keep_recent=keep_recent, count_tokens=count_tokens,
               extractor=extractor or RuleExtractor(), options=opts,
               previous_id=previous_compaction_id, failures_so_far=failures_so_far,
               pruned=pruned,
               tokens_before=count_tokens(full_view(events, checkpoint, session_id=sid).text),
               tokens_pruned=count_tokens(view.text))
    if run.tokens_pruned <= compact_at * budget_tokens:
        action = "compaction.pruned" if pruned.pruned else "compaction.none"
        return run, _outcome(run, action=action, view=view, checkpoint=checkpoint)
    if failures_so_far >= BREAKER_AFTER:
        return run, _breaker(run, checkpoint, 0, None, ())
    return run, None


def _attempts_left(run: _Run) -> int:
    return max(0, min(MAX_ATTEMPTS, BREAKER_AFTER - run.failures_so_far))


def _settle(run: _Run, at: _Attempt, result: tuple[Compaction, View, CompactionCheck],
            attempt: int) -> CompactionOutcome | tuple[str, ...]:
    """The success outcome, or the pins for the next attempt."""
    compaction, view, check = result
    if check.ok:
        return _outcome(run, action="compaction.completed", view=view,
                        checkpoint=at.checkpoint, compaction=compaction, check=check,
                        attempts=attempt, pinned=at.request.pinned)
    return tx.dedupe([*at.request.pinned, *check.missing])


def compaction_steps(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
                     origin: Origin, budget_tokens: int, compact_at: float = 0.8,
                     keep_recent: int, count_tokens: CountTokens, failures_so_far: int = 0,
                     extractor: Extractor | None = None,
                     previous_compaction_id: str | None = None,
                     options: Options | None = None
                     ) -> Generator[SummaryRequest, str, CompactionOutcome]:
    """The lifecycle as a sans-I/O generator: it yields each ``SummaryRequest`` and is sent
    the summary text back, so one loop serves a local summarizer and a network model alike
    (the caller does the waiting; the core stays synchronous and pure)."""
    run, done = _start(events, checkpoint, origin=origin, budget_tokens=budget_tokens,
                       compact_at=compact_at, keep_recent=keep_recent,
                       count_tokens=count_tokens, failures_so_far=failures_so_far,
                       extractor=extractor, previous_compaction_id=previous_compaction_id,
                       options=options)
    if done is not None:
        return done
    committed = checkpoint
    pinned: tuple[str, ...] = ()
    last: tuple[Compaction, View, CompactionCheck] | None = None
    for attempt in range(1, _attempts_left(run) + 1):
        at = _prepare(run, checkpoint, pinned)  # each retry re-commits from the same base
        summary = (yield at.request) if at.cut.older else ""
        last = _finish(run, at, summary)
        settled = _settle(run, at, last, attempt)
        if isinstance(settled, CompactionOutcome):
            return settled
        committed, pinned = at.checkpoint, settled
    return _breaker(run, committed, _attempts_left(run), last, pinned)


def run_compaction(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
                   summarizer: Summarizer, **kwargs: Any) -> CompactionOutcome:
    """Drive ``compaction_steps`` with a local (synchronous) summarizer."""
    steps = compaction_steps(events, checkpoint, **kwargs)
    try:
        request = next(steps)
        while True:
            request = steps.send(summarizer.summarize(request))
    except StopIteration as stop:
        outcome: CompactionOutcome = stop.value
        return outcome
