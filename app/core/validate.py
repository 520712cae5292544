"""Stage 9 — validate the envelope against the task checkpoint before it is sent.

Contract: ``validate(envelope, checkpoint=...)`` returns a ``ValidationResult``: one ``Check``
per rule and the texts that were missing, so the pipeline can pin the candidates holding them
and retry. A text is present when it appears verbatim in some segment's content.

    validate.goal_present               the checkpoint's goal
    validate.pending_approvals_present  every pending approval
    validate.constraints_verbatim       every constraint's text, word for word ("only before
                                        2026-06-30, channel customers excepted" paraphrased is
                                        a different constraint)
    validate.key_evidence_present       every verified evidence item, and every accepted
                                        decision that cites a constraint (``[constraint:<id>]``:
                                        the conclusion must carry its qualifier into the turn)

Goal, approvals and the constraints task state holds (``constraint_state.held``) are
*required*: the pipeline pins them even if that means ``BudgetTooSmall``. Evidence, and the
older constraints found in the session, are *soft*: pinned when they fit, reported when not.
Check details name counts and positions, never content: they end up in the manifest.
With no checkpoint (the first turn of a task, or no task) every check passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app.core.constraint_state import held
from app.core.model import Check, Envelope, TaskCheckpoint


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ValidationResult:
    checks: tuple[Check, ...]
    missing_required: tuple[str, ...] = ()
    missing_soft: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def missing(self) -> tuple[str, ...]:
        return (*self.missing_required, *self.missing_soft)


CHECK_TYPES: tuple[str, ...] = (
    "validate.goal_present",
    "validate.pending_approvals_present",
    "validate.constraints_verbatim",
    "validate.key_evidence_present",
)


# Joins the segments' contents for one substring search per text: a text without it cannot
# match across two segments, so found in the join is found in one segment.
_SEP = "\0"


def _present(text: str, joined: str, contents: Sequence[str]) -> bool:
    if _SEP in text:
        return any(text in c for c in contents)
    return text in joined


def _check(type_: str, texts: Sequence[str], contents: Sequence[str], joined: str
           ) -> tuple[Check, list[str]]:
    wanted = [t for t in texts if t]
    missing_at = [i for i, t in enumerate(wanted, 1) if not _present(t, joined, contents)]
    if not missing_at:
        return Check(type=type_, ok=True), []
    where = ", ".join(f"#{i}" for i in missing_at)
    detail = f"missing {len(missing_at)} of {len(wanted)}: {where}"
    return Check(type=type_, ok=False, detail=detail), [wanted[i - 1] for i in missing_at]


def validate(envelope: Envelope, *, checkpoint: TaskCheckpoint | None) -> ValidationResult:
    if checkpoint is None:
        return ValidationResult(
            checks=tuple(Check(type=t, ok=True, detail="no task checkpoint") for t in CHECK_TYPES)
        )
    contents = [s.content for s in envelope.segments]
    joined = _SEP.join(contents)
    goal, m_goal = _check(CHECK_TYPES[0], [checkpoint.goal], contents, joined)
    approvals, m_appr = _check(CHECK_TYPES[1], checkpoint.pending_approvals, contents, joined)
    kept, older = held(checkpoint.constraints)
    constraints, m_cons = _check(CHECK_TYPES[2], [c.text for c in kept], contents, joined)
    cited = [d for d in checkpoint.accepted_decisions if "[constraint:" in d]
    evidence, m_evid = _check(CHECK_TYPES[3], [*checkpoint.verified_evidence, *cited,
                                               *(c.text for c in older)], contents, joined)
    return ValidationResult(
        checks=(goal, approvals, constraints, evidence),
        missing_required=(*m_goal, *m_appr, *m_cons),
        missing_soft=tuple(m_evid),
    )
