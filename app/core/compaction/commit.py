"""Stage 1 — commit: extract the facts into a NEW checkpoint revision before compressing.

Contract: ``commit(events, checkpoint, extractor=..., session_id=...)`` returns a new
``TaskCheckpoint`` value with ``revision + 1`` (1 when there was none) and never mutates or
shrinks the old one: every list is the union of the old content and the extraction, old
items first, deduplicated by normalized text (constraints by text, tool effects by
``effect_id``). The goal is kept from the checkpoint, else taken from the first user
message; the next safe action is the newest one found, else the old one. ``pinned`` texts
(what a failed validation reported missing) that carry a qualifier and are not yet a
constraint become constraints, so the re-commit turns them into structured state. A new
decision that contradicts a constraint (``check.contradiction``) is not accepted: it is
recorded as an open question instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.compaction import text as tx
from app.core.compaction.check import contradiction
from app.core.compaction.extract import Extractor
from app.core.model import Constraint, SessionEvent, TaskCheckpoint, ToolEffect


def _union_constraints(old: Sequence[Constraint], new: Sequence[Constraint]) -> tuple[
        Constraint, ...]:
    seen: dict[str, Constraint] = {}
    for c in (*old, *new):
        seen.setdefault(tx.normalized(c.text), c)
    return tuple(seen.values())


def _union_effects(old: Sequence[ToolEffect], new: Sequence[ToolEffect]) -> tuple[
        ToolEffect, ...]:
    seen: dict[str, ToolEffect] = {}
    for e in (*old, *new):
        seen.setdefault(e.effect_id, e)
    return tuple(seen.values())


def _pinned_constraints(pinned: Sequence[str]) -> list[Constraint]:
    out = []
    for text in pinned:
        kinds = tx.qualifier_kinds(text)
        if kinds:
            out.append(Constraint(text=text, kind=kinds[0], source_ref=None))
    return out


def _screen(decisions: Sequence[str], constraints: Sequence[Constraint]) -> tuple[
        list[str], list[str]]:
    """A decision that drops a constraint's qualifier is not accepted: it becomes a question."""
    accepted, conflicting = [], []
    for d in decisions:
        if any(contradiction(d, c.text) for c in constraints):
            conflicting.append(f"Conflicts with a constraint, not accepted: {d}")
        else:
            accepted.append(d)
    return accepted, conflicting


def commit(
    events: Sequence[SessionEvent],
    checkpoint: TaskCheckpoint | None,
    *,
    extractor: Extractor,
    session_id: str,
    task_id: str = "",
    user_id: str = "",
    pinned: Sequence[str] = (),
) -> TaskCheckpoint:
    found = extractor.extract(events, session_id=session_id)
    old = checkpoint or TaskCheckpoint(
        task_id=task_id, revision=0, user_id=user_id, session_id=session_id,
        parent_task_id=None, goal="")
    superseded = {tx.normalized(s) for s in found.superseded}
    constraints = _union_constraints(
        old.constraints, [*found.constraints, *_pinned_constraints(pinned)])
    decisions, conflicting = _screen(
        [d for d in found.decisions if tx.normalized(d) not in superseded], constraints)
    return TaskCheckpoint(
        task_id=old.task_id, revision=old.revision + 1, user_id=old.user_id,
        session_id=old.session_id or session_id, parent_task_id=old.parent_task_id,
        goal=old.goal or found.goal,
        accepted_decisions=tx.dedupe([*old.accepted_decisions, *decisions]),
        verified_evidence=tx.dedupe([*old.verified_evidence, *found.evidence]),
        open_questions=tx.dedupe([*old.open_questions, *found.questions, *conflicting]),
        constraints=constraints,
        pending_approvals=tx.dedupe([*old.pending_approvals, *found.approvals]),
        tool_effects=_union_effects(old.tool_effects, found.effects),
        next_safe_action=found.next_action or old.next_safe_action,
        admission=old.admission, created_at=old.created_at,
    )
