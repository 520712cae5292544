"""Builders: turn collected layer values into pipeline candidates with every label set.

Contract: pure functions from domain values to ``Candidate`` lists; tokens are counted with
the injected ``count_tokens``. Labels are chosen so the guards can check them, never skipped:

* task state — two candidates from one checkpoint: the never-compress ``#core`` (goal,
  constraints verbatim with their kind, pending approvals, next safe action; priority 100) and
  the compressible ``#detail`` (decisions, evidence, open questions, tool effects with their
  idempotency keys; priority 80, omitted when empty). Trust ``system``: the checkpoint is the
  runtime's own structured state.
* query — the user's own turn: trust ``curated`` (not ``untrusted``, which would fence it as
  data; not ``system``/``reviewed``, which it is not), origin ``user``, never-compress, rendered
  as the final user message. Its sensitivity is the turn's level capped below ``secret`` so the
  safety guard never drops the question itself.
* session — messages and tool calls are ``curated`` (recorded through an authenticated runtime
  key and rendered in their own role, never as system text); tool results are ``untrusted``
  data (fenced). Priority rises with recency (newest 60, one less per older event, floor 10),
  so the recent exchange outranks older history and plain retrievals (40).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from app.core.constraint_state import constraint_line, held
from app.core.guards.safety import Detector
from app.core.model import (
    Acl,
    Candidate,
    DataLevel,
    Freshness,
    Kind,
    Layer,
    Scanned,
    ScannedPart,
    Scope,
    Section,
    SessionEvent,
    TaskCheckpoint,
    Trust,
    scanned,
)
from app.core.refs import checkpoint_ref, event_ref, session_ref, task_ref

CountTokens = Callable[[str], int]
WHOLE_TENANT = Acl(whole_tenant=True)


def _bullets(title: str, items: Sequence[str]) -> list[str]:
    return [f"{title}:", *(f"- {item}" for item in items)] if items else []


def checkpoint_core_text(cp: TaskCheckpoint, now: datetime | None = None) -> str:
    """``now``: the turn's, to mark an expired constraint for re-confirmation."""
    lines = [f"Task {cp.task_id} (checkpoint revision {cp.revision})", f"Goal: {cp.goal}"]
    lines += _bullets("Constraints (verbatim)",
                      [constraint_line(c, now) for c in held(cp.constraints)[0]])
    lines += _bullets("Pending approvals (do not act before they are granted)",
                      list(cp.pending_approvals))
    if cp.next_safe_action:
        lines.append(f"Next safe action: {cp.next_safe_action}")
    return "\n".join(lines)


def checkpoint_detail_text(cp: TaskCheckpoint, now: datetime | None = None, *,
                           with_older: bool = True) -> str:
    """``with_older``: also the older found constraints (``constraint_state.held``), which
    a compaction view leaves to task state's own detail candidate: its block is never
    compressed, and they would grow it without bound."""
    effects = [f"{e.effect_id}: {e.status}, idempotency_key={e.idempotency_key}"
               + (f", ref={e.ref}" if e.ref else "") for e in cp.tool_effects]
    older = [constraint_line(c, now) for c in held(cp.constraints)[1]] if with_older else []
    lines = [*_bullets("Earlier constraints found in the session (verbatim)", older),
             *_bullets("Accepted decisions", list(cp.accepted_decisions)),
             *_bullets("Verified evidence", list(cp.verified_evidence)),
             *_bullets("Open questions", list(cp.open_questions)),
             *_bullets("Tool effects (never repeat; reuse the idempotency key)", effects)]
    return "\n".join(lines)


def _task_texts(cp: TaskCheckpoint, now: datetime | None) -> list[tuple[str, str]]:
    """(part, text) of the task state candidates: ``core``, and ``detail`` unless empty."""
    detail = checkpoint_detail_text(cp, now)
    return [("core", checkpoint_core_text(cp, now)), *([("detail", detail)] if detail else [])]


def text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def scan_parts(parts: Sequence[tuple[str, str]], scan: Detector) -> tuple[ScannedPart, ...]:
    """The detectors' findings in each (part, text), by the text's digest."""
    return tuple(ScannedPart(part, text_digest(text), tuple(scan(text))) for part, text in parts)


def stored_scan(cp: TaskCheckpoint, part: str, text: str) -> Scanned | None:
    """The findings ``cp`` was stored with for ``part``, when they were made of ``text``."""
    stored = next((p for p in cp.scanned if p.part == part), None)
    if stored is None or stored.digest != text_digest(text):
        return None
    return scanned(text, stored.findings)


def scan_task_state(cp: TaskCheckpoint, now: datetime | None, scan: Detector
                    ) -> tuple[ScannedPart, ...]:
    """The detectors' findings in ``cp``'s task state texts as rendered at ``now``: made once
    when a revision is written and stored with it (``TaskCheckpoint.scanned``)."""
    return scan_parts(_task_texts(cp, now), scan)


def _task_candidate(cp: TaskCheckpoint, tenant_id: str, part: str, content: str,
                    count_tokens: CountTokens) -> Candidate:
    core = part == "core"
    return Candidate(
        ref=checkpoint_ref(cp.task_id, cp.revision, part),
        kind=Kind.TASK_STATE, layer=Layer.TASK, section=Section.DYNAMIC, role="system",
        content=content, tenant_id=tenant_id, origin=task_ref(cp.task_id),
        trust=Trust.SYSTEM, sensitivity=DataLevel.INTERNAL, acl=WHOLE_TENANT,
        owner_user_id=cp.user_id,
        freshness=Freshness(observed_at=cp.created_at, revision=str(cp.revision)),
        tokens=count_tokens(content), priority=100 if core else 80, never_compress=core,
        reason=f"task checkpoint {part}",
        scanned=stored_scan(cp, part, content),
    )


def task_state_candidates(
    checkpoint: TaskCheckpoint, tenant_id: str, count_tokens: CountTokens,
    now: datetime | None = None,
) -> list[Candidate]:
    return [_task_candidate(checkpoint, tenant_id, part, text, count_tokens)
            for part, text in _task_texts(checkpoint, now)]


def query_candidate(
    scope: Scope, query: str, tenant_id: str, count_tokens: CountTokens
) -> Candidate:
    return Candidate(
        ref="turn://query", kind=Kind.QUERY, layer=Layer.TURN, section=Section.DYNAMIC,
        role="user", content=query, tenant_id=tenant_id, origin="user", trust=Trust.CURATED,
        sensitivity=min(scope.data_level, DataLevel.CONFIDENTIAL), acl=WHOLE_TENANT,
        owner_user_id=scope.user_id, tokens=count_tokens(query), priority=100,
        never_compress=True, reason="the turn's query",
    )


def _event_shape(e: SessionEvent) -> tuple[Kind, str, str, Trust, tuple[tuple[str, str], ...]]:
    """(kind, role, content, trust, meta) of one session event."""
    if e.type == "tool_call":
        args = e.arguments if isinstance(e.arguments, str) else json.dumps(
            e.arguments if e.arguments is not None else {}, ensure_ascii=False, sort_keys=True)
        meta = (("call_id", e.call_id or ""), ("name", e.name or ""))
        return Kind.SESSION, "assistant", args, Trust.CURATED, meta
    if e.type == "tool_result":
        meta = (("call_id", e.call_id or ""), ("is_error", "true" if e.is_error else "false"))
        return Kind.TOOL_RESULT, "tool", e.content, Trust.UNTRUSTED, meta
    return Kind.SESSION, e.role or "user", e.content, Trust.CURATED, ()


def event_content(e: SessionEvent) -> str:
    """The content of ``e``'s candidate: what is counted, scanned and shown."""
    return _event_shape(e)[2]


def with_derived(e: SessionEvent, count_tokens: CountTokens, scan: Detector) -> SessionEvent:
    """``e`` with its token count and findings (of its candidate content) made if missing."""
    if e.tokens is not None and e.findings is not None:
        return e
    content = event_content(e)
    return replace(e, tokens=count_tokens(content) if e.tokens is None else e.tokens,
                   findings=tuple(scan(content)) if e.findings is None else e.findings)


def session_candidates(
    events: Sequence[SessionEvent],
    *,
    tenant_id: str,
    session_id: str,
    owner_user_id: str | None,
    count_tokens: CountTokens,
) -> list[Candidate]:
    out: list[Candidate] = []
    newest = len(events) - 1
    for i, e in enumerate(events):
        kind, role, content, trust, meta = _event_shape(e)
        out.append(Candidate(
            ref=event_ref(session_id, e.seq), kind=kind, layer=Layer.SESSION,
            section=Section.SESSION, role=role, content=content, tenant_id=tenant_id,
            origin=session_ref(session_id), trust=trust, sensitivity=DataLevel.INTERNAL,
            acl=WHOLE_TENANT, owner_user_id=owner_user_id,
            freshness=Freshness(observed_at=e.created_at),
            tokens=count_tokens(content) if e.tokens is None else e.tokens,
            priority=max(10, 60 - (newest - i)), seq=e.seq, meta=meta,
            reason=f"session {e.type}",
            scanned=scanned(content, e.findings),
        ))
    return out
