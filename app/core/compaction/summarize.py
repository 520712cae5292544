"""The ``Summarizer`` port and the offline default, ``ExtractiveSummarizer``.

Contract: a summarizer turns a ``SummaryRequest`` (the narrative events, the constraints and
pinned texts that must survive verbatim, a ``max_chars`` bound) into summary text that cites
``[session://{sid}/events/{seq}]`` refs. ``Summarizer`` is synchronous (the core calls it
inline); ``AsyncSummarizer`` is the same port for network models, driven by
``app.service.compaction.arun_compaction``.

``ExtractiveSummarizer`` is deterministic and never paraphrases: it writes the pinned texts
first, then selects whole sentences that carry, in priority order, a qualifier, an approval,
an error or failure, a tool effect, a decision or evidence, skips sentences that would
contradict a constraint (``check.contradiction``) and repeats, and emits the selection in
event order with its ref, within ``max_chars``. Tool results contribute only their error or
effect sentence (they are untrusted data, not narrative).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from app.core.compaction import text as tx
from app.core.compaction.check import contradiction
from app.core.compaction.values import SummaryRequest
from app.core.model import SessionEvent


class Summarizer(Protocol):
    def summarize(self, request: SummaryRequest) -> str: ...


class AsyncSummarizer(Protocol):
    async def summarize(self, request: SummaryRequest) -> str: ...


def _category(e: SessionEvent, s: str) -> int | None:
    if e.type == "tool_result":
        if e.is_error or tx.FAILURE.search(s):
            return 2
        return 3 if tx.EFFECT_VERB.search(s) else None
    checks = (tx.qualifier_kinds(s), tx.APPROVAL.search(s), tx.FAILURE.search(s),
              tx.EFFECT_VERB.search(s), tx.DECISION.search(s), tx.EVIDENCE.search(s))
    return next((rank for rank, hit in enumerate(checks) if hit), None)


def _candidates(request: SummaryRequest) -> Iterator[tuple[int, int, str]]:
    """(category, position, line) for every selectable sentence."""
    pos = 0
    for e in request.events:
        if e.type == "tool_call":
            continue
        who = e.role or "tool"
        for s in tx.sentences(e.content):
            cat = _category(e, s)
            if cat is None or any(contradiction(s, c.text) for c in request.constraints):
                continue
            pos += 1
            yield cat, pos, f"- {who}: {s} [{tx.event_ref(request.session_id, e.seq)}]"
            if e.type == "tool_result":
                break


@dataclass(frozen=True, slots=True)
class ExtractiveSummarizer:
    """Offline, deterministic ``Summarizer`` (see the module docstring)."""

    def summarize(self, request: SummaryRequest) -> str:
        seqs = [e.seq for e in request.events]
        head = [f"Summary of {len(seqs)} earlier events"
                + (f" (seq {seqs[0]}–{seqs[-1]}; full text in the archive):" if seqs else ":")]
        if request.pinned:
            head += ["Pinned (verbatim):", *(f"- {p}" for p in request.pinned)]
        used = sum(len(line) + 1 for line in head)
        chosen: dict[str, tuple[int, str]] = {}
        for _cat, pos, line in sorted(_candidates(request)):
            key = tx.normalized(line.split(": ", 1)[1])
            if key in chosen or used + len(line) + 1 > request.max_chars:
                continue
            chosen[key] = (pos, line)
            used += len(line) + 1
        return "\n".join([*head, *(line for _, line in sorted(chosen.values()))])
