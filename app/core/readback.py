"""Read-back: which out-of-window content a turn brings back, and why (seeds 001, scenario
3: "校验缺关键证据 / 用户引用窗口外结论 / 待审批重新激活" — the three triggers, never the model's
own choice).

Contract (pure; the service fetches what these name, by ref, and adds it to the turn):

* ``missing_evidence(state, present)`` — trigger (a): the ``source_ref`` of every committed
  constraint, then the refs the verified evidence cites (newest first), that are readable (an
  event of a session, a knowledge chunk) and not among the turn's candidates ``present``.
* ``cites_conclusion(query)`` / ``cited(query, hits, present)`` — trigger (b): the query
  cites an earlier conclusion (a cue: "you said", "earlier", "we agreed", 之前, 刚才, 结论…)
  and an archived event of the session outside the window shares at least
  ``CITED_MIN_TERMS`` subject terms with it (without a cue: ``UNCUED_MIN_TERMS`` and most of
  the query's terms); the ``MAX_CITED`` best: most shared terms, messages before tool
  results, newest first.
* ``reactivated(query, approvals)`` — trigger (c): the pending approvals the query takes up
  again (≥ 2 shared subject terms and an approval, grant or go-ahead cue).

Each plan is a ``ReadBack(reason, ref)``: the manifest records it (``read_back``), the
read-back candidate's ``reason`` names it. At most ``MAX_READ_BACK`` per turn, in trigger
order (a, c, b), so the turn stays bounded.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from app.core.compaction import text as tx
from app.core.model import TaskCheckpoint, TranscriptHit
from app.core.refs import event_seq, parse_ref

MISSING_EVIDENCE = "read_back.missing_evidence"
CITED_CONCLUSION = "read_back.cited_conclusion"
APPROVAL_REACTIVATED = "read_back.approval_reactivated"
MAX_READ_BACK = 4
MAX_CITED = 2
CITED_MIN_TERMS = 2
UNCUED_MIN_TERMS = 4
APPROVAL_MIN_TERMS = 2
_I = re.IGNORECASE
CITE = re.compile(
    r"\byou (?:said|told|concluded|found|mentioned)\b|\bearlier\b|\bpreviously\b|"
    r"\bas (?:we|you) (?:agreed|concluded|decided|discussed)\b|\bwe (?:agreed|decided|concluded)\b"
    r"|\blast time\b|\bthe conclusion\b|\byour (?:conclusion|answer)\b|\bbefore you\b|"
    r"之前|刚才|前面|上次|先前|早些时候|你说|你讲|结论|我们定", _I)
GO_AHEAD = re.compile(
    r"\bproceed\b|\bgo ahead\b|\bresume\b|\bunblock\w*\b|\bapprov\w*\b|\bsign(?:ed)?[- ]off\b|"
    r"继续|执行|恢复|重新|批准|审批|签字", _I)
_KB_CHUNK = re.compile(r"^kb://[^#]+#v[^:]+:c\d+$")
_CITED_REFS = re.compile(r"(?:session|kb)://[A-Za-z0-9._~%#:-]+(?:/events/\d+)?")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadBack:
    reason: str
    ref: str


def readable(ref: str) -> bool:
    """An event of a session archive or one knowledge chunk: what a read-back can fetch."""
    if event_seq(ref) is not None:
        return True
    try:
        scheme, _ = parse_ref(ref)
    except ValueError:
        return False
    return scheme == "kb" and bool(_KB_CHUNK.match(ref))


def _evidence_refs(evidence: Sequence[str]) -> list[str]:
    return [m.group() for e in reversed(evidence) for m in _CITED_REFS.finditer(e)]


def missing_evidence(state: TaskCheckpoint | None, present: Collection[str]) -> list[ReadBack]:
    if state is None:
        return []
    refs = [c.source_ref for c in state.constraints if c.source_ref]
    refs += _evidence_refs(state.verified_evidence)
    wanted = dict.fromkeys(r for r in refs if r not in present and readable(r))
    return [ReadBack(reason=MISSING_EVIDENCE, ref=r) for r in wanted]


def cites_conclusion(query: str) -> bool:
    return bool(CITE.search(query))


def cited(query: str, hits: Sequence[TranscriptHit], present: Collection[str], *,
          session_ref_of: dict[int, str]) -> list[ReadBack]:
    """The archived events (``hits``, this session's, ``session_ref_of`` maps their seqs to
    refs) that the query cites, outside ``present``."""
    terms = tx.content_terms(query)
    cue = cites_conclusion(query)
    scored = []
    for h in hits:
        ref = session_ref_of.get(h.event.seq)
        if ref is None or ref in present:
            continue
        # A term of the event's (a lowercased word, or a CJK bigram) is a substring of its
        # lowercased text: the query terms found there bound the shared count from above,
        # so an event that cannot be cited even so is not tokenized (most of a long tool
        # result's terms, for nothing, on most turns of a compacted session).
        lowered = h.event.content.lower()
        if not _cited(sum(1 for t in terms if t in lowered), len(terms), cue):
            continue
        shared = len(terms & tx.content_terms(h.event.content))
        if _cited(shared, len(terms), cue):
            # a conclusion is what a message states, not what a tool returned
            scored.append((-shared, h.event.type != "message", -h.event.seq, ref))
    return [ReadBack(reason=CITED_CONCLUSION, ref=ref)
            for *_, ref in sorted(scored)[:MAX_CITED]]


def _cited(shared: int, terms: int, cue: bool) -> bool:
    """Whether an event sharing ``shared`` of the query's ``terms`` subject terms is cited
    (monotone in ``shared``)."""
    strong = shared >= UNCUED_MIN_TERMS and shared * 5 >= terms * 3
    return (cue and shared >= CITED_MIN_TERMS) or strong


def reactivated(query: str, approvals: Sequence[str]) -> list[str]:
    if not GO_AHEAD.search(query):
        return []
    terms = tx.content_terms(query)
    return [a for a in approvals if len(terms & tx.content_terms(a)) >= APPROVAL_MIN_TERMS]


def plan(*plans: Sequence[ReadBack]) -> tuple[ReadBack, ...]:
    """The turn's read-backs: the plans in order, one per ref, at most ``MAX_READ_BACK``."""
    seen: dict[str, ReadBack] = {}
    for p in plans:
        for r in p:
            seen.setdefault(r.ref, r)
    return tuple(seen.values())[:MAX_READ_BACK]
