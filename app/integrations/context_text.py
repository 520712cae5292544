"""A turn's context as one text, for runtimes that take context as text: the MCP
``assemble_context`` result and the Claude Code hook's ``additionalContext``.

Contract: ``context_text(response)`` reads the envelope's segments (already guarded,
budgeted and ordered by the server) and returns, blank-line separated and in this order:
the trusted stable texts (instructions, pinned memories), the task state, the trusted
references of the dynamic section each under its ``[ref]``, then every low-trust segment
fenced as data after the same preface the model renderings use (``app.core.render.shared``).
Left out: the session section (the runtime calling holds its own conversation) and the
query (the runtime has just been given it). The fence is the renderings' own, so a runtime
reading this text sees data marked exactly as a model API request would carry it, a
quarantined segment's fence included.
"""

from __future__ import annotations

from ctxgate_client.models import ContextResponse, Segment

from app.core.guards.safety import LOW_TRUST as SAFETY_LOW_TRUST
from app.core.render.shared import DATA_PREFACE, REVIEWED_PREFACE, fence_text

# The wire spells trust as the core does: the fence follows the safety guard's own set.
LOW_TRUST = frozenset(t.value for t in SAFETY_LOW_TRUST)
TASK_HEADING = "Task state:"


def _low(seg: Segment) -> bool:
    return seg.trust in LOW_TRUST


def context_text(response: ContextResponse) -> str:
    segments = [s for s in response.envelope.segments
                if s.section != "session" and s.kind != "query" and s.content.strip()]
    stable = [s.content for s in segments if s.section == "stable" and not _low(s)]
    task = [s.content for s in segments
            if s.section == "dynamic" and s.kind == "task_state" and not _low(s)]
    reviewed = [f"[{s.ref}]\n{s.content}" for s in segments
                if s.section == "dynamic" and s.kind != "task_state" and not _low(s)]
    data = [fence_text(s.content, ref=s.ref, trust=s.trust, quarantined=s.quarantined)
            for s in segments if _low(s)]
    parts = [*stable]
    if task:
        parts.append("\n\n".join([TASK_HEADING, *task]))
    if reviewed:
        parts.append("\n\n".join([REVIEWED_PREFACE, *reviewed]))
    if data:
        parts.append("\n".join([DATA_PREFACE, *data]))
    return "\n\n".join(parts)
