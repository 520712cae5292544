"""Task state for a session without a task: its committed state rendered like a checkpoint.

Contract (pure): a session's state is a ``TaskCheckpoint`` value with an empty ``task_id``
(``commit`` builds it exactly as it builds a task's revision; the store keeps one per
session). ``session_state_candidates`` renders it as task state: a never-compress ``core``
(goal, constraints verbatim with their ids, dates and status at the turn's ``now``, pending
approvals, next safe action; priority 100) and a compressible ``detail`` (decisions carrying
``[constraint:<id>]``, evidence, open questions, tool effects; priority 80), cited as
``session://{sid}/state/{revision}#core|#detail``. The turn validates against it as it
validates against a task checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from app.core.candidates import (
    WHOLE_TENANT,
    CountTokens,
    checkpoint_core_text,
    checkpoint_detail_text,
    scan_parts,
    stored_scan,
)
from app.core.guards.safety import Detector
from app.core.model import (
    Candidate,
    DataLevel,
    Freshness,
    Kind,
    Layer,
    ScannedPart,
    Section,
    TaskCheckpoint,
    Trust,
)
from app.core.refs import session_ref


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionState:
    """A session's committed state and the last event committed into it."""

    state: TaskCheckpoint
    through_seq: int


def state_ref(session_id: str, revision: int, part: str | None = None) -> str:
    ref = f"{session_ref(session_id)}/state/{revision}"
    return ref if part is None else f"{ref}#{part}"


def _state_texts(state: TaskCheckpoint, now: datetime | None) -> list[tuple[str, str]]:
    core = checkpoint_core_text(state, now).split("\n", 1)[-1]  # not "Task  (checkpoint …)"
    parts = [("core", f"Session state (revision {state.revision}; the session has no task)\n"
              + core)]
    detail = checkpoint_detail_text(state, now)
    return [*parts, ("detail", detail)] if detail else parts


def scan_session_state(state: TaskCheckpoint, now: datetime | None, scan: Detector
                       ) -> tuple[ScannedPart, ...]:
    """The detectors' findings in ``state``'s texts as rendered at ``now``: made once when
    a revision is written and stored with it, as a task checkpoint's are."""
    return scan_parts(_state_texts(state, now), scan)


def session_state_candidates(state: TaskCheckpoint, *, session_id: str, tenant_id: str,
                             count_tokens: CountTokens, now: datetime | None
                             ) -> list[Candidate]:
    return [Candidate(
        ref=state_ref(session_id, state.revision, part), kind=Kind.TASK_STATE,
        layer=Layer.SESSION, section=Section.DYNAMIC, role="system", content=text,
        tenant_id=tenant_id, origin=session_ref(session_id), trust=Trust.SYSTEM,
        sensitivity=DataLevel.INTERNAL, acl=WHOLE_TENANT, owner_user_id=state.user_id,
        freshness=Freshness(observed_at=state.created_at, revision=str(state.revision)),
        tokens=count_tokens(text), priority=100 if part == "core" else 80,
        never_compress=part == "core", reason=f"session state {part}",
        scanned=stored_scan(state, part, text))
        for part, text in _state_texts(state, now)]
