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

Constraints from every source (``extract``: messages, tool results, and the retrieved
``sources`` the session relied on) are committed with their id (``qualify``); every accepted
decision that depends on a constraint carries ``[constraint:<id>]`` (old decisions are linked
to new constraints too). With the turn's ``now``, a constraint whose date has passed is kept
and asked about (an open question "Re-confirm …", for those task state holds never-compressed,
``held``), and one whose deadline date cannot be parsed is kept with its flag and asked about
as well: neither is dropped, neither is silently relied on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.core.compaction import text as tx
from app.core.compaction.check import contradiction
from app.core.compaction.extract import Extractor, Source, extract_sources
from app.core.compaction.qualify import MARKER, link, status, with_id
from app.core.constraint_state import held
from app.core.model import Constraint, SessionEvent, TaskCheckpoint, ToolEffect


def _union_constraints(old: Sequence[Constraint], new: Sequence[Constraint]) -> tuple[
        Constraint, ...]:
    seen: dict[str, Constraint] = {}
    for c in (*old, *new):
        seen.setdefault(tx.normalized(c.text), with_id(c))
    return tuple(seen.values())


def _linked(decisions: Sequence[str], constraints: Sequence[Constraint]) -> tuple[str, ...]:
    """Decisions deduplicated by their text without links, each carrying its constraints."""
    seen: dict[str, str] = {}
    for d in decisions:
        key = tx.normalized(MARKER.sub("", d))
        seen[key] = link(seen.get(key, d), constraints)
    return tuple(seen.values())


def reconfirm_questions(constraints: Sequence[Constraint], now: datetime | None
                        ) -> list[str]:
    """One open question per constraint that cannot be relied on as it stands at ``now``."""
    out = []
    for c in constraints:
        state = status(c, now)
        if state == "reconfirm":
            out.append(f"Re-confirm: expired {c.due}, still applies? {c.text} "
                       f"[constraint:{c.id}]")
        elif state == "date_unparsed":
            out.append(f"Confirm the date: {c.text} [constraint:{c.id}]")
    return out


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
    sources: Sequence[Source] = (),
    now: datetime | None = None,
) -> TaskCheckpoint:
    found = extractor.extract(events, session_id=session_id)
    old = checkpoint or TaskCheckpoint(
        task_id=task_id, revision=0, user_id=user_id, session_id=session_id,
        parent_task_id=None, goal="")
    superseded = {tx.normalized(s) for s in found.superseded}
    constraints = _union_constraints(
        old.constraints,
        [*found.constraints, *extract_sources(sources), *_pinned_constraints(pinned)])
    decisions, conflicting = _screen(
        [d for d in found.decisions if tx.normalized(d) not in superseded], constraints)
    return TaskCheckpoint(
        task_id=old.task_id, revision=old.revision + 1, user_id=old.user_id,
        session_id=old.session_id or session_id, parent_task_id=old.parent_task_id,
        goal=old.goal or found.goal,
        accepted_decisions=_linked([*old.accepted_decisions, *decisions], constraints),
        verified_evidence=tx.dedupe([*old.verified_evidence, *found.evidence]),
        open_questions=tx.dedupe([*old.open_questions, *found.questions, *conflicting,
                                  # held ones only: an older found one's own line in the
                                  # compressible detail already says EXPIRED, and a question
                                  # per stale log line outgrew the never-compressed block
                                  *reconfirm_questions(held(constraints)[0], now)]),
        constraints=constraints,
        pending_approvals=tx.dedupe([*old.pending_approvals, *found.approvals]),
        tool_effects=_union_effects(old.tool_effects, found.effects),
        next_safe_action=found.next_action or old.next_safe_action,
        admission=old.admission, created_at=old.created_at,
    )
