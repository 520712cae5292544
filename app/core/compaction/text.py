"""Text rules shared by every compaction stage: sentences, markers, refs, rendering.

Contract: pure functions and compiled patterns, linear-time, English and Chinese. A *marker*
is a word class the stages look for (a qualifier, an approval, a decision, an effect, a
failure); ``qualifier_kinds`` names the qualifier classes of a sentence in the fixed
priority order ``precondition > except > limit > deadline > only`` (the first is the
constraint's ``kind``: the most specific restriction wins, the text stays verbatim).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

from app.core.detectors.literals import Cue
from app.core.fts import query_terms
from app.core.model import SessionEvent
from app.core.refs import event_ref as event_ref  # the view and the checkpoint cite it

_I = re.IGNORECASE
QUALIFIERS: tuple[tuple[str, Cue], ...] = (
    ("precondition", Cue(re.compile(
        r"\bmust first\b|\brequires? (?:\w+ ){0,2}approval\b|\bonly after\b|"
        r"\bprecondition\b|须先|必须先|需先|前提", _I))),
    ("except", Cue(re.compile(
        r"\bexcept(?:ed|ing)?\b|\bexcluding\b|\bexcluded\b|\bunless\b|除外|除了|不含|不包括", _I))),
    ("limit", Cue(re.compile(
        r"\blimit(?:ed)?\b|\bat most\b|\bno more than\b|\bcapped\b|上限|最多|不超过|至多", _I))),
    ("deadline", Cue(re.compile(
        r"\bdeadline\b|\bbefore\b|\bby (?:\d{4}-\d{2}-\d{2}|end of|eod|friday|monday)|"
        r"截止|之前|\d{4}-\d{2}-\d{2}\s*前", _I))),
    ("only", Cue(re.compile(r"\bonly\b|仅限|仅|只有|只能|只", _I))),
)
NEGATION = Cue(re.compile(
    r"\bnot\b|\bnever\b|\bno\b|n't\b|\bcannot\b|\bwithout\b|\bineligible\b|"
    r"不|没有|禁止|不得|无", _I))
APPROVAL = Cue(re.compile(
    r"\bneeds? (?:\w+ ){0,2}approval\b|\bawaiting (?:\w+ ){0,2}(?:sign-?off|approval)\b|"
    r"\bpending (?:\w+ ){0,2}approval\b|待审批|需要审批|需审批|待确认|待批准", _I))
GRANT = Cue(re.compile(
    r"\bapproved\b|\bsigned off\b|\bapproval granted\b|已批准|审批通过|已审批", _I))
DECISION = Cue(re.compile(
    r"\bdecided\b|\bdecision\b|\bwe will\b|\bagreed\b|\bgo with\b|\bsettled on\b|"
    r"决定|采用|确定|同意|定为", _I))
SUPERSEDE = Cue(re.compile(
    r"\binstead\b|\bsupersed\w*|\breplaces?\b|\bno longer\b|\bscrap\b|改为|改成|取代|不再", _I))
EVIDENCE = Cue(re.compile(
    r"\bpassed\b|\bverified\b|\bsucceeded\b|\bcommit [0-9a-f]{7,40}\b|通过|已验证", _I))
FAILURE = Cue(re.compile(r"(?-i:\bFAILED\b)|\btests? failed\b|失败", _I))
QUESTION = Cue(re.compile(
    r"\bopen question\b|\btbd\b|\bto be (?:decided|confirmed)\b|\bunresolved\b|"
    r"待定|未决|尚未确定", _I))
NEXT_ACTION = Cue(re.compile(r"\bnext (?:safe )?(?:step|action)\b|下一步", _I))
EFFECT_VERB = Cue(re.compile(
    r"\b(created|deployed|sent|opened)\b|(已?创建|已?部署|已?发送|已?打开)", _I))
EFFECT_ID = re.compile(
    r"#(\w+(?:[.-]\w+)*)|\bid[=:\s]+(\w+(?:[.-]\w+)*)|\b([a-z]+-\d+|\d{3,}|[0-9a-f]{7,40})\b", _I)
# A session segment is escaped (app.core.refs), so it is drawn from this alphabet alone.
REF = re.compile(r"session://[A-Za-z0-9._~%-]+/events/\d+")
_SPLIT = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")
_WS = re.compile(r"\s+")
MAX_SENTENCE_CHARS = 600


def sentences(text: str) -> Iterator[str]:
    """Non-empty sentences of ``text`` (split at . ! ? 。！？； and newlines), bounded length."""
    for part in _SPLIT.split(text):
        part = part.strip(" \t-*•")
        if part:
            yield part[:MAX_SENTENCE_CHARS]


def normalized(text: str) -> str:
    """The dedupe key: case-folded, single-spaced, without trailing punctuation."""
    bare = REF.sub("", text).replace("[]", "")
    return _WS.sub(" ", bare).strip().rstrip(".。!！;；").casefold()


# Memoized (a pure function of one sentence): every stage of a compaction (extract, summarize,
# check) asks it of the same sentences, and each compaction of a session asks it again.
@functools.lru_cache(maxsize=32_768)
def qualifier_kinds(sentence: str) -> tuple[str, ...]:
    return tuple(kind for kind, pattern in QUALIFIERS if pattern.search(sentence))


def is_qualified(sentence: str) -> bool:
    return bool(qualifier_kinds(sentence) or NEGATION.search(sentence))


_QUALIFIER_WORDS = frozenset(("only", "except", "excepted", "excluding", "unless", "before",
                              "limit", "limited", "most", "deadline", "no", "not", "more",
                              "than", "can", "may", "use", "apply", "applies"))


# Memoized too: read-back asks it of the same archived events turn after turn (a long tool
# result's terms were ~5 % of a turn's profiled CPU), compaction of the same sentences.
@functools.lru_cache(maxsize=8192)
def content_terms(text: str) -> frozenset[str]:
    """Terms that name the subject of a sentence (fts tokens minus qualifier/modal words)."""
    return frozenset(t for t in query_terms(REF.sub(" ", text)) if t not in _QUALIFIER_WORDS)


def dedupe(items: Sequence[str]) -> tuple[str, ...]:
    """First occurrence of each normalized text, order kept."""
    seen: dict[str, str] = {}
    for item in items:
        if item.strip():
            seen.setdefault(normalized(item), item)
    return tuple(seen.values())


def render_event(e: SessionEvent, session_id: str) -> str:
    """One line per event, as a prompt would carry it (used for token counts and summaries)."""
    who = e.role or ("tool" if e.type == "tool_result" else "assistant")
    body = e.content
    if e.type == "tool_call":
        body = f"call {e.name or '?'}({e.arguments if e.arguments is not None else ''})"
    return f"[{event_ref(session_id, e.seq)}] {who}: {body}"
