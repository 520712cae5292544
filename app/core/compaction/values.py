"""Values of the compaction lifecycle (frozen, slotted, keyword-only; no behaviour).

    PrunedItem / PruneResult   what ``prune`` trimmed or cleared, and the new event views
    SummaryRequest             what a ``Summarizer`` is asked to condense
    Compaction                 the summary, its hash, the cut and the recent tail
    ViewItem / View            the rebuilt context: checkpoint, pins, summary, sticky, tail
    Contradiction / CompactionCheck   the result of ``validate_compaction``
    Lineage / CompactionOutcome       the recordable result of ``run_compaction``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.model import Check, Constraint, SessionEvent, TaskCheckpoint


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunedItem:
    seq: int
    ref: str
    action: str  # "prune.soft_trim" | "prune.hard_clear"
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PruneResult:
    events: tuple[SessionEvent, ...]
    pruned: tuple[PrunedItem, ...] = ()

    @property
    def chars_saved(self) -> int:
        return sum(p.chars_before - p.chars_after for p in self.pruned)


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRequest:
    """The narrative to condense. ``constraints`` and ``pinned`` must survive verbatim."""

    session_id: str
    events: tuple[SessionEvent, ...]
    constraints: tuple[Constraint, ...] = ()
    pinned: tuple[str, ...] = ()
    max_chars: int = 4000


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    summary: str
    summary_sha256: str
    cut_seq: int | None  # first seq of the recent tail (None: nothing kept)
    summarized_seqs: tuple[int, ...]
    recent: tuple[SessionEvent, ...]
    dropped_orphans: tuple[int, ...] = ()  # seqs of unpaired calls/results at the boundary


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewItem:
    kind: str  # checkpoint | pinned | summary | sticky | event | reference
    ref: str
    content: str


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    items: tuple[ViewItem, ...]
    mode: str = "compacted"  # compacted | full | reference

    @property
    def text(self) -> str:
        return "\n\n".join(i.content for i in self.items)

    def of_kind(self, kind: str) -> str:
        return "\n".join(i.content for i in self.items if i.kind == kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Contradiction:
    sentence: str
    constraint: str
    shared_terms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionCheck:
    checks: tuple[Check, ...]
    missing: tuple[str, ...] = ()
    contradictions: tuple[Contradiction, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    previous_compaction_id: str | None
    checkpoint_revision_before: int | None
    checkpoint_revision_after: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOutcome:
    """One run of the lifecycle; ``record()`` is the event the service stores."""

    compaction_id: str
    action: str  # compaction.none | compaction.pruned | compaction.completed | breaker_open
    view: View
    checkpoint: TaskCheckpoint | None
    prune: PruneResult
    compaction: Compaction | None
    check: CompactionCheck | None
    attempts: int
    consecutive_failures: int
    breaker_open: bool
    needs_human: bool
    tokens_before: int
    tokens_after: int
    lineage: Lineage
    tokens_pruned: int = 0  # the full view after pruning, before any summary
    pinned: tuple[str, ...] = field(default=())

    def record(self) -> dict[str, Any]:
        """Machine-first record: counts, hashes and refs, never user content."""
        c, k = self.compaction, self.check
        return {
            "type": self.action, "compaction_id": self.compaction_id,
            "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
            "cut_seq": c.cut_seq if c else None,
            "summary_sha256": c.summary_sha256 if c else None,
            "pruned": len(self.prune.pruned), "attempts": self.attempts,
            "validation": None if k is None else {
                "ok": k.ok, "checks": [{"type": x.type, "ok": x.ok, "detail": x.detail}
                                       for x in k.checks]},
            "consecutive_failures": self.consecutive_failures,
            "breaker_open": self.breaker_open, "needs_human": self.needs_human,
            "previous_compaction_id": self.lineage.previous_compaction_id,
            "checkpoint_revision_before": self.lineage.checkpoint_revision_before,
            "checkpoint_revision_after": self.lineage.checkpoint_revision_after,
        }
