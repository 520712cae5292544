"""Which sentences constrain, their dates, and the links from conclusions to them.

Contract (pure, linear-time, English and Chinese; no clock — ``now`` is passed in):

* ``constraint_kind(sentence)`` — the kind of a sentence that *constrains* (``precondition >
  except > limit > deadline > only``, ``text.QUALIFIERS``), else None. A *strong* qualifier
  (仅限, 除外, 不包括, 不得超过, 上限, 截止, 须先, 前提, except, excluding, at most, no more than,
  only after, only if, deadline, limited to…) is enough. A *weak* one (only, 只, 仅, before, 之前,
  limit) also needs a normative cue (applies, valid, eligible, may, must, 适用, 有效, 可, 须…) or
  a date/amount, so "It's the only way" or "Before we start, let me check" are not
  constraints. Questions are never constraints.
* ``parse_date(sentence)`` — the first calendar date: ISO ``2026-06-30`` / ``2026/06/30`` /
  ``2026.06.30``, ``2026年6月30日``, ``June 30, 2026`` / ``30 June 2026`` / ``Jun 30 2026``,
  ``6/30/2026`` (month first unless the first number is over 12). None when there is none or it
  is not a real date.
* ``constraint(sentence, kind, source_ref, origin)`` — the structured ``Constraint``: its
  ``id`` (a hash of the normalized text, stable across commits), and for a deadline its
  ``due`` date and ``expires_at`` (the end of that day, UTC); a deadline whose date cannot be
  parsed keeps its text and gets the flag ``date_unparsed`` (never dropped).
* ``status(constraint, now)`` (``app.core.constraint_state``) — ``active``, ``reconfirm``
  (expired at ``now``: re-confirmed before a conclusion relies on it; neither kept silently
  nor dropped) or ``date_unparsed``.
* ``link(decision, constraints)`` — the decision with ``[constraint:<id>]`` appended for
  every constraint it depends on (≥ ``MIN_LINK_TERMS`` shared subject terms); a conclusion
  carries a reference to the constraint that qualifies it.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta

from app.core.compaction import text as tx
from app.core.constraint_state import status as status
from app.core.model import Constraint

_I = re.IGNORECASE
STRONG = re.compile(
    r"\bexcept(?:ed|ing)?\b|\bexcluding\b|\bexcluded\b|\bunless\b|\bat most\b|"
    r"\bno more than\b|\bnot (?:to )?exceed\b|\bup to \d|\bcapped\b|\blimited to\b|\bdeadline\b|"
    r"\bno later than\b|\bonly (?:after|if|when|for|to|within|until|before|on|applies|valid)\b|"
    r"\bmust (?:first|be)\b|\brequires? (?:\w+ ){0,2}approval\b|\bprecondition\b|"
    r"\bprovided that\b|\bon condition that\b|\bvalid (?:until|through|only)\b|"
    r"仅限|除外|不包括|不含|不得超过|不超过|上限|最多|至多|截止|须先|必须先|需先|前提|"
    r"限于|方可", _I)
WEAK_NORMATIVE = re.compile(
    r"\b(?:applies|apply|valid|eligible|allowed|permitted|may|must|shall|can|cannot|available|"
    r"discount|price|customers?|orders?|offer|refunds?|payments?|contract|clause|policy)\b|"
    r"适用|有效|可以|可|能|须|应|享受|折扣|价格|客户|订单|下单|条款|合同|退款", _I)
_AMOUNT = re.compile(
    r"\d+(?:[.,]\d+)?\s*(?:%|percent|days?|hours?|units?|元|天|小时|个|次|万)|\$\d", _I)
# Descriptive uses of a weak qualifier word that never state a rule.
NOT_A_RULE = re.compile(
    r"\bthe only (?:way|one|thing|time|reason|option|problem)\b|\bonly (?:just|a (?:minute|bit|"
    r"little|few)|have|had|ran|saw|found|managed)\b|\bnot only\b|\bbefore (?:we|you|I|"
    r"starting|that)\b|只是|只好|只要你|不只|之前(?:我们|你|我)", _I)
_QUESTION = re.compile(r"[?？]\s*$")

_MONTHS = {m: i for i, names in enumerate((
    ("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",),
    ("jun", "june"), ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"),
    ("oct", "october"), ("nov", "november"), ("dec", "december")), 1) for m in names}
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
       r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATES: tuple[tuple[re.Pattern[str], tuple[str, str, str]], ...] = (
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), ("y", "m", "d")),
    (re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"), ("y", "m", "d")),
    (re.compile(_MON + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})", _I), ("M", "d", "y")),
    (re.compile(r"(\d{1,2})(?:st|nd|rd|th)?\s+" + _MON + r",?\s+(\d{4})", _I), ("d", "M", "y")),
    (re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4})(?!\d)"), ("m", "d", "y")),
)
# A deadline word with no calendar date after it: the date is relative or unstated.
DEADLINE_WORDS = re.compile(r"\bdeadline\b|\bby\b|\bbefore\b|\buntil\b|\bno later than\b|"
                            r"\bexpires?\b|截止|之前|以前|\S前", _I)
MIN_LINK_TERMS = 2
MARKER = re.compile(r"\s*\[constraint:([0-9a-f]+)\]")


def parse_date(sentence: str) -> date | None:
    for pattern, order in _DATES:
        for m in pattern.finditer(sentence):
            parts = dict(zip(order, m.groups(), strict=True))
            month = _MONTHS[parts["M"].lower().rstrip(".")] if "M" in parts else int(parts["m"])
            day = int(parts["d"])
            if "M" not in parts and order == ("m", "d", "y") and month > 12 >= day:
                month, day = day, month  # 30/6/2026: day first
            try:
                return date(int(parts["y"]), month, day)
            except ValueError:
                continue
    return None


# Qualifiers ``text.QUALIFIERS`` does not name, by kind.
_MORE = {"limit": re.compile(r"不得超过|不得多于|\bnot (?:to )?exceed\b|\bup to \d|\blimited to\b",
                             _I),
         "deadline": re.compile(r"\b(?:valid|until|through|no later than)\b.{0,20}\d{4}|"
                                r"有效期至|以前", _I)}
_ORDER = tuple(kind for kind, _ in tx.QUALIFIERS)


def kinds_of(sentence: str) -> tuple[str, ...]:
    """The qualifier kinds of ``sentence`` in priority order (``text.qualifier_kinds`` and
    the few it does not name)."""
    found = set(tx.qualifier_kinds(sentence))
    found |= {kind for kind, p in _MORE.items() if p.search(sentence)}
    return tuple(k for k in _ORDER if k in found)


@functools.lru_cache(maxsize=32_768)  # pure; asked of the same clauses at every compaction
def constraint_kind(sentence: str) -> str | None:
    """The kind of a constraining sentence (see the module docstring), else None."""
    kinds = kinds_of(sentence)
    if not kinds or _QUESTION.search(sentence):
        return None
    if STRONG.search(sentence):
        return kinds[0]
    if NOT_A_RULE.search(sentence):
        return None
    if WEAK_NORMATIVE.search(sentence) or parse_date(sentence) or _AMOUNT.search(sentence):
        return kinds[0]
    return None


def constraint_id(text: str) -> str:
    return hashlib.sha256(tx.normalized(text).encode()).hexdigest()[:10]


def constraint(sentence: str, kind: str, *, source_ref: str | None,
               origin: str = "") -> Constraint:
    """The structured constraint of one sentence: id, and for a deadline its date/expiry or
    the ``date_unparsed`` flag. A sentence of any kind that names a date gets it too (the
    date is what expires)."""
    due = parse_date(sentence)
    flags: tuple[str, ...] = ()
    if due is None and (kind == "deadline" or "deadline" in kinds_of(sentence)) \
            and DEADLINE_WORDS.search(sentence):
        flags = ("date_unparsed",)
    expires = datetime.combine(due + timedelta(days=1), time(), UTC) if due else None
    return Constraint(text=sentence, kind=kind, source_ref=source_ref,
                      id=constraint_id(sentence), origin=origin,
                      due=due.isoformat() if due else None,
                      expires_at=expires.isoformat() if expires else None, flags=flags)


def with_id(c: Constraint) -> Constraint:
    """``c`` with its id and dates filled in when it was written without them (an API
    checkpoint, a revision stored before ids existed)."""
    if c.id:
        return c
    made = constraint(c.text, c.kind, source_ref=c.source_ref, origin=c.origin)
    return replace(made, flags=tuple(dict.fromkeys((*c.flags, *made.flags))))


def _subject(text: str) -> frozenset[str]:
    """Subject terms without bare numbers ("7.2" alone ties any two clauses together)."""
    return frozenset(t for t in tx.content_terms(MARKER.sub("", text)) if not t.isdigit())


def depends_on(sentence: str, c: Constraint) -> bool:
    """Whether ``sentence`` concludes about ``c``'s subject (≥ MIN_LINK_TERMS shared terms,
    numbers aside)."""
    if tx.normalized(c.text) == tx.normalized(MARKER.sub("", sentence)):
        return False
    return len(_subject(sentence) & _subject(c.text)) >= MIN_LINK_TERMS


def link(decision: str, constraints: Sequence[Constraint]) -> str:
    have = set(MARKER.findall(decision))
    add = [c.id for c in constraints if c.id and c.id not in have and depends_on(decision, c)]
    return decision + "".join(f" [constraint:{i}]" for i in add)


def cited(decision: str) -> frozenset[str]:
    return frozenset(MARKER.findall(decision))
