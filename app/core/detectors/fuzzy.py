"""Key words with one typo: the set of strings one edit away from a vocabulary.

Contract: ``near(words)`` returns a frozenset holding every word of ``words`` and every
string at optimal-string-alignment distance 1 from one of them (one deletion, insertion,
substitution of an ASCII letter, or a swap of neighbours). Membership is then one hash
lookup, so a detector's ``accept`` checks a candidate word in constant time instead of
running an edit-distance table per match. Words shorter than ``MIN_LEN`` get no variants:
"rules" one edit away is "roles", "ruler", "mules".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from string import ascii_lowercase

MIN_LEN = 6


def _edits(w: str) -> Iterator[str]:
    for i in range(len(w) + 1):
        for ch in ascii_lowercase:
            yield w[:i] + ch + w[i:]
        if i < len(w):
            yield w[:i] + w[i + 1:]
            for ch in ascii_lowercase:
                yield w[:i] + ch + w[i + 1:]
        if i < len(w) - 1:
            yield w[:i] + w[i + 1] + w[i] + w[i + 2:]


def near(words: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for w in words:
        out.add(w)
        if len(w) >= MIN_LEN:
            out.update(_edits(w))
    return frozenset(out)
