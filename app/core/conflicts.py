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

from app.core.fts import ascii_terms, ascii_words, query_terms
from app.core.model import Kind, Layer, Segment, Trust

MIN_SHARED_TERMS = 3
MAX_SENTENCES = 64
MAX_CONFLICTS = 20
AUTHORITY_NAMES = ("managed_enforcement", "task_contract", "reviewed_project_rule",
                   "local_preference", "retrieved_document", "model_generated_memory")

_SENTENCE = re.compile(r"[^.!?。！？；;\n]{1,2000}")
# Words that negate, except, limit or bound in time ("must not" is "not"), "n't", and their
# Chinese counterparts (no word boundaries there).
_POLARITY_WORDS = frozenset((
    "not", "never", "no", "only", "except", "excepted", "excluding", "unless", "without",
    "limit", "limited", "before", "after", "until", "deadline", "cannot", "forbidden"))
_POLARITY_CJK = ("不", "没有", "禁止", "仅限", "只", "除外", "除了", "上限", "截止", "之前", "不得")
_POLARITY = re.compile(rf"\b(?:{'|'.join(sorted(_POLARITY_WORDS))})\b|n't|"
                       rf"{'|'.join(_POLARITY_CJK)}", re.IGNORECASE)


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


# Pure, and the same segments come back turn after turn. The memo holds the texts themselves
# (a chunk is ~1 kB): 8,192 of them is ~10 MB a worker, and holds a corpus's hot chunks, not
# only a few sessions' (bench/profile_turns.py prints the hit rate).
@functools.lru_cache(maxsize=8192)
def _statements(text: str) -> tuple[tuple[frozenset[str], bool], ...]:
    out: list[tuple[frozenset[str], bool]] = []
    for match in _SENTENCE.finditer(text):
        terms, polar = _sentence(match.group())
        if len(terms) >= MIN_SHARED_TERMS:
            out.append((terms, polar))
            if len(out) >= MAX_SENTENCES:
                break
    return tuple(out)


def _sentence(sentence: str) -> tuple[frozenset[str], bool]:
    """A sentence's content terms, and whether it negates, excepts or limits."""
    if sentence.isascii():
        # The common case, from one pass over its words: in lowercased ASCII text, ``\bw\b``
        # is exactly "``w`` is one of its [a-z0-9_] runs" (tests compare it with _POLARITY).
        lowered = sentence.lower()
        words = ascii_words(lowered)
        polar = "n't" in lowered or not _POLARITY_WORDS.isdisjoint(words)
        return frozenset(ascii_terms(words)), polar
    return frozenset(query_terms(sentence)), _POLARITY.search(sentence) is not None


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
