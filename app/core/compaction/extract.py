"""The default fact extractor for ``commit``: deterministic rules, English and Chinese.

Contract: ``RuleExtractor().extract(events, session_id=...)`` returns an ``Extraction`` of
facts found in the events, each citing ``session://{sid}/events/{seq}``:

* constraints — constraining sentences (``qualify.constraint_kind``: a qualifier with the
  context of a rule) of user and assistant messages, of successful tool results (a contract
  usually enters through ``read_contract``; at most ``MAX_CONSTRAINTS_PER_SOURCE`` per
  result) and of the retrieved ``sources`` the session relied on (``extract_sources``), each
  a structured ``Constraint`` with its id, ``source_ref``, ``origin`` and, for a deadline, its
  date (``qualify.constraint``). A constraint only restricts: one planted by a fetched page
  can narrow an answer, never widen it, and it names its source.
* pending approvals — message sentences with an approval marker (needs approval, 待审批…).
* decisions — message sentences with a decision marker; a later decision with a supersede
  marker (instead, no longer, 改为…) drops the earlier ones on the same subject (≥ 2 shared
  terms) from THIS extraction; they are reported as ``superseded``.
* evidence — passed/verified sentences of messages and successful tool results.
* open questions, the last next-step sentence, and tool effects from tool_call/tool_result
  pairs whose result reports created/deployed/sent/opened + an id; the idempotency key is the
  call's ``idempotency_key`` argument, else ``derived:`` + a hash of name and arguments.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.core.compaction import text as tx
from app.core.compaction.qualify import constraint, constraint_kind
from app.core.model import Constraint, SessionEvent, ToolEffect

MAX_EVIDENCE_PER_RESULT = 3
MAX_CONSTRAINTS_PER_SOURCE = 8
MAX_CLAUSE_CHARS = 400


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """Retrieved evidence the session relied on (a segment of one of its turns' envelopes,
    as the manifests record it), read again by its ``ref``."""

    ref: str
    text: str
    origin: str = "knowledge"


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    goal: str = ""
    decisions: tuple[str, ...] = ()
    superseded: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    approvals: tuple[str, ...] = ()
    effects: tuple[ToolEffect, ...] = ()
    next_action: str = ""


class Extractor(Protocol):
    def extract(self, events: Sequence[SessionEvent], *, session_id: str) -> Extraction: ...


@dataclass(slots=True)
class _Acc:
    decisions: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    next_action: str = ""


def _decide(acc: _Acc, cited: str, sentence: str) -> None:
    if tx.SUPERSEDE.search(sentence):
        terms = tx.content_terms(sentence)
        old = [d for d in acc.decisions if len(tx.content_terms(d) & terms) >= 2]
        acc.superseded.extend(old)
        acc.decisions = [d for d in acc.decisions if d not in old]
    acc.decisions.append(cited)


# A pure function of its arguments, asked about the same texts again and again: a session's
# tail is read before every compaction (ConstraintService) and by every compaction's own
# commit, each turn the history outgrows its share, and a 4 kB tool result of runbook text
# costs 10-25 ms to read clause by clause. The memo is bounded and holds no state besides.
@functools.lru_cache(maxsize=4096)
def constraints_in(text: str, *, ref: str, origin: str) -> tuple[Constraint, ...]:
    """The constraining sentences of one source, at most ``MAX_CONSTRAINTS_PER_SOURCE``."""
    if not any(p.may_occur(text) for _, p in tx.QUALIFIERS):
        return ()
    out: list[Constraint] = []
    for s in tx.sentences(text):
        # A clause is a sentence; an unpunctuated run this long is a log or a listing, and
        # held verbatim it would cost the budget more than any clause does.
        if len(s) > MAX_CLAUSE_CHARS:
            continue
        kind = constraint_kind(s)
        if kind is not None:
            out.append(constraint(s, kind, source_ref=ref, origin=origin))
            if len(out) == MAX_CONSTRAINTS_PER_SOURCE:
                break
    return tuple(out)


def extract_sources(sources: Sequence[Source]) -> tuple[Constraint, ...]:
    return tuple(c for s in sources for c in constraints_in(s.text, ref=s.ref, origin=s.origin))


def _message(acc: _Acc, e: SessionEvent, ref: str) -> None:
    acc.constraints.extend(constraints_in(e.content, ref=ref, origin=e.role or "user"))
    for s in tx.sentences(e.content):
        if tx.APPROVAL.search(s):
            acc.approvals.append(s)
        elif tx.QUESTION.search(s):
            acc.questions.append(f"{s} [{ref}]")
        elif tx.DECISION.search(s) and not s.endswith(("?", "？")):
            _decide(acc, f"{s} [{ref}]", s)
        elif tx.EVIDENCE.search(s) and not tx.FAILURE.search(s):
            acc.evidence.append(f"{s} [{ref}]")
        if tx.NEXT_ACTION.search(s):
            acc.next_action = s


def _result_evidence(acc: _Acc, e: SessionEvent, ref: str) -> None:
    if not tx.EVIDENCE.may_occur(e.content):  # (the usual long result: no sentence can)
        return
    found = [s for s in tx.sentences(e.content)
             if tx.EVIDENCE.search(s) and not tx.FAILURE.search(s)]
    acc.evidence.extend(f"{s} [{ref}]" for s in found[:MAX_EVIDENCE_PER_RESULT])


def idempotency_key(call: SessionEvent | None) -> str:
    if call is None:
        return "derived:unknown-call"
    if isinstance(call.arguments, dict):
        given = call.arguments.get("idempotency_key")
        if isinstance(given, str) and given:
            return given
    raw = json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False,
                     default=str)
    return "derived:" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def effect_of(call: SessionEvent | None, result: SessionEvent, ref: str) -> ToolEffect | None:
    """The side effect a successful result reports (verb + id), or None."""
    verb = tx.EFFECT_VERB.search(result.content)
    if result.is_error or verb is None:
        return None
    found = tx.EFFECT_ID.search(result.content, verb.end()) or tx.EFFECT_ID.search(
        result.content)
    if found is None:
        return None
    ident = next(g for g in found.groups() if g)
    name = (call.name if call else None) or result.name or "tool"
    return ToolEffect(effect_id=f"{name}:{ident}", idempotency_key=idempotency_key(call),
                      status=verb.group().casefold(), ref=ref)


class RuleExtractor:
    """The offline default ``Extractor`` (see the module docstring for the rules)."""

    def extract(self, events: Sequence[SessionEvent], *, session_id: str) -> Extraction:
        acc, effects = _Acc(), []
        calls = {e.call_id: e for e in events if e.type == "tool_call" and e.call_id}
        goal = next((e.content.strip()[:400] for e in events
                     if e.type == "message" and e.role == "user" and e.content.strip()), "")
        for e in events:
            ref = tx.event_ref(session_id, e.seq)
            if e.type == "message" and e.role in ("user", "assistant"):
                _message(acc, e, ref)
            elif e.type == "tool_result":
                effect = effect_of(calls.get(e.call_id or ""), e, ref)
                if effect is not None:
                    effects.append(effect)
                if not e.is_error:
                    _result_evidence(acc, e, ref)
                    acc.constraints.extend(constraints_in(e.content, ref=ref, origin="tool"))
        return Extraction(
            goal=goal, decisions=tuple(acc.decisions), superseded=tuple(acc.superseded),
            evidence=tuple(acc.evidence), questions=tuple(acc.questions),
            constraints=tuple(acc.constraints), approvals=tuple(acc.approvals),
            effects=tuple(effects), next_action=acc.next_action)
