"""Instruction conflicts: when two included segments disagree, the more trusted one wins.

Contract: ``find_conflicts(segments)`` returns one ``Conflict`` per (higher, lower) pair of
segments where a rule-like sentence of the higher-authority segment and a sentence of the
lower one talk about the same thing (shared content terms) with opposite polarity (one
negates, excepts or limits; the other does not). Authority follows the seeds' order:

    managed enforcement > task contract > reviewed project rule > local preference
    > retrieved document / tool output > model-generated memory

The lower segment can never override the higher: it stays fenced as data (low-trust content
is always fenced) and the manifest records an ``instruction_conflict`` naming both sources,
so a wrong answer can be traced to "the platform gave contradictory inputs". The query and
the conversation itself are not rules and are not compared. Deterministic and bounded: at
most ``MAX_SENTENCES`` sentences per segment and ``MAX_CONFLICTS`` records.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from itertools import combinations

from app.core.fts import query_terms
from app.core.model import Kind, Layer, Segment, Trust

MIN_SHARED_TERMS = 3
MAX_SENTENCES = 64
MAX_CONFLICTS = 20
AUTHORITY_NAMES = ("managed_enforcement", "task_contract", "reviewed_project_rule",
                   "local_preference", "retrieved_document", "model_generated_memory")

_SENTENCE = re.compile(r"[^.!?。！？；;\n]{1,2000}")
_POLARITY = re.compile(
    r"\b(?:not|never|no|only|except|excepted|excluding|unless|without|limit|limited|"
    r"before|after|until|deadline|must not|cannot|forbidden)\b|n't|"
    r"不|没有|禁止|仅限|只|除外|除了|上限|截止|之前|不得", re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Conflict:
    higher_ref: str
    lower_ref: str
    higher_authority: str
    lower_authority: str
    shared_terms: int
    resolution: str = "higher_wins"


def authority(seg: Segment) -> int | None:
    """Rank in the seeds' trust order (0 is highest), or None for non-rules."""
    c = seg.candidate
    if c.kind in (Kind.QUERY, Kind.SESSION):
        return None
    if c.trust is Trust.INFERRED:
        return 5
    if c.kind is Kind.INSTRUCTION:
        return 0 if c.origin.startswith("managed") else 2
    if c.kind is Kind.TASK_STATE:
        return 1
    if c.kind is Kind.MEMORY and c.layer is Layer.USER:
        return 3
    return 4


# Pure, and the same segments come back turn after turn. The memo holds the texts themselves,
# so it stays small: a few dozen sessions' segments, a few MB.
@functools.lru_cache(maxsize=1024)
def _statements(text: str) -> tuple[tuple[frozenset[str], bool], ...]:
    out: list[tuple[frozenset[str], bool]] = []
    for match in _SENTENCE.finditer(text):
        sentence = match.group()
        terms = frozenset(query_terms(sentence))
        if len(terms) >= MIN_SHARED_TERMS:
            out.append((terms, _POLARITY.search(sentence) is not None))
            if len(out) >= MAX_SENTENCES:
                break
    return tuple(out)


def _disagree(higher: tuple[tuple[frozenset[str], bool], ...],
              lower: tuple[tuple[frozenset[str], bool], ...]) -> int:
    """The most shared terms of any opposite-polarity sentence pair (0: no conflict)."""
    best = 0
    for h_terms, h_pol in higher:
        for l_terms, l_pol in lower:
            if h_pol != l_pol:
                shared = len(h_terms & l_terms)
                if shared >= MIN_SHARED_TERMS:
                    best = max(best, shared)
    return best


def find_conflicts(segments: tuple[Segment, ...]) -> tuple[Conflict, ...]:
    ranked = [(a, s, _statements(s.content)) for s in segments
              if (a := authority(s)) is not None]
    found: list[Conflict] = []
    for (a1, s1, st1), (a2, s2, st2) in combinations(ranked, 2):
        if a1 == a2:
            continue
        (ha, hs, hst), (la, ls, lst) = sorted(((a1, s1, st1), (a2, s2, st2)),
                                              key=lambda x: x[0])
        shared = _disagree(hst, lst)
        if shared:
            found.append(Conflict(higher_ref=hs.candidate.ref, lower_ref=ls.candidate.ref,
                                  higher_authority=AUTHORITY_NAMES[ha],
                                  lower_authority=AUTHORITY_NAMES[la], shared_terms=shared))
            if len(found) >= MAX_CONFLICTS:
                break
    return tuple(found)
