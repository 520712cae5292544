"""Required literals of a regex: what every match of it must contain.

Contract: ``required_factors(pattern)`` returns a tuple of *factors* — sets of strings — such
that every text in which ``pattern`` has a match contains, for each factor, at least one of
its strings. An empty tuple means nothing could be read off (the pattern must always run).
It is a sound under-approximation: factors may be weaker than the best ones, never wrong.
``re.IGNORECASE`` patterns get no factors: Unicode case folding maps ``k`` to the Kelvin sign,
which a byte-level scanner would not look for.

It walks the parsed pattern. Elements that match one of a few known strings (a character, a
class of at most ``_CLASS_MAX`` characters such as ``\\s``, a group or alternation of such,
zero-width assertions as the empty string) extend the current *run* by cross product; a
mandatory repeat of one contributes its first occurrence and ends the run; anything else
(``.``, ``\\d``, negated classes, optional parts) ends it. Groups and mandatory repeats pass
their own factors on; an alternation contributes the union of each branch's strongest
factor. Requiring ``post`` *followed by a space* is what keeps ``postmortem`` from waking a
detector up.
"""

from __future__ import annotations

import functools
import re
import re._constants as c  # the parser's opcodes: no public API exposes a pattern's tree
import re._parser as p
from collections.abc import Iterable
from typing import Any

Factor = frozenset[str]

_CLASS_MAX = 32  # a larger class is no better than a wildcard for a literal scan
_RUN_MAX = 512  # alternatives in one run before it is cut
_SMALL_REPEAT = 2  # a repeat up to this many copies is spelled out as alternatives
_REPEATS = (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT)
_ZERO_WIDTH = (c.AT, c.ASSERT, c.ASSERT_NOT)
# ``\s`` in a str pattern is ``str.isspace`` (sre's CATEGORY_UNI_SPACE); all lie below U+3001.
_SPACES = frozenset(ch for ch in map(chr, range(0x3001)) if ch.isspace())


def required_factors(pattern: re.Pattern[str]) -> tuple[Factor, ...]:
    if pattern.flags & re.IGNORECASE:
        return ()
    factors = _conjunction(p.parse(pattern.pattern, pattern.flags).data)
    # One-byte factors ("t", " ", ":") occur in nearly every text: they filter nothing and
    # cost the scanner a report each. Dropping a factor only weakens the requirement.
    strong = [f for f in factors if strength(f)[0] > 1]
    return tuple(strong or sorted(factors, key=strength)[-1:])


def strength(f: Factor) -> tuple[int, int]:
    """Longer shortest string first (rarer in text), then fewer strings."""
    return min(len(s.encode()) for s in f), -len(f)


def _class(items: list[tuple[Any, Any]]) -> set[str] | None:
    out: set[str] = set()
    for op, av in items:
        if op is c.LITERAL:
            out.add(chr(av))
        elif op is c.RANGE and av[1] - av[0] < _CLASS_MAX:
            out.update(map(chr, range(av[0], av[1] + 1)))
        elif op is c.CATEGORY and av is c.CATEGORY_SPACE:
            out |= _SPACES
        else:
            return None
    return out if len(out) <= _CLASS_MAX else None


def _product(a: set[str], b: set[str]) -> set[str]:
    return {x + y for x in a for y in b}


def _alternatives(op: Any, av: Any) -> set[str] | None:
    """The strings one element can match, when they are few and fixed; else None."""
    if op is c.LITERAL:
        return {chr(av)}
    if op is c.IN:
        return _class(av)
    if op in _ZERO_WIDTH:
        return {""}
    if op is c.SUBPATTERN and not av[1] & re.IGNORECASE:
        return _sequence_alternatives(av[3].data)
    if op in _REPEATS and av[1] <= _SMALL_REPEAT:  # ``-?``, ``\s{1,2}``: spelled out
        low, high, body = av
        one = _sequence_alternatives(body.data)
        if one is None:
            return None
        spelled, power = ({""} if low == 0 else set()), {""}
        for k in range(1, high + 1):
            power = _product(power, one)
            if len(power) > _RUN_MAX:
                return None
            if k >= low:
                spelled |= power
        return spelled if len(spelled) <= _RUN_MAX else None
    if op is c.BRANCH:
        out: set[str] = set()
        for branch in av[1]:
            alts = _sequence_alternatives(branch.data)
            if alts is None:
                return None
            out |= alts
        return out if len(out) <= _RUN_MAX else None
    return None


def _sequence_alternatives(items: Iterable[tuple[Any, Any]]) -> set[str] | None:
    out = {""}
    for op, av in items:
        alts = _alternatives(op, av)
        if alts is None:
            return None
        out = _product(out, alts)
        if len(out) > _RUN_MAX:
            return None
    return out


def _conjunction(items: Iterable[tuple[Any, Any]]) -> list[Factor]:
    factors: list[Factor] = []
    run: set[str] = {""}

    def cut() -> None:
        nonlocal run
        if "" not in run:  # a run that may be empty requires nothing
            factors.append(frozenset(run))
        run = {""}

    for op, av in items:
        alts = _alternatives(op, av)
        repeat = alts is None and op in _REPEATS and av[0] >= 1
        if repeat:  # a mandatory repeat too long to spell out: its body's first copy
            alts = _sequence_alternatives(av[2].data)
            if alts is None:
                cut()
                factors.extend(_conjunction(av[2].data))
                continue
        if alts is not None:
            if len(run) * len(alts) > _RUN_MAX:
                cut()
            run = _product(run, alts)
            if repeat:
                cut()  # the body may repeat: what follows is not adjacent to its first copy
            continue
        cut()
        if op is c.SUBPATTERN and not av[1] & re.IGNORECASE:
            factors.extend(_conjunction(av[3].data))
        elif op is c.ATOMIC_GROUP:
            factors.extend(_conjunction(av.data))
        elif op is c.BRANCH:
            best = [max(fs, key=strength) if fs else None
                    for fs in (_conjunction(b.data) for b in av[1])]
            if all(f is not None for f in best):
                factors.append(frozenset().union(*(f for f in best if f is not None)))
    cut()
    return factors


# Characters ``re.IGNORECASE`` equates with an ASCII letter that ``str.casefold`` does not map
# to it (casefold already takes the Kelvin sign to "k" and the long s to "s");
# tests/unit/test_prefilter.py checks the whole Unicode range.
_IGNORECASE_EXTRA = str.maketrans({"\u0130": "i", "\u0131": "i"})


@functools.lru_cache(maxsize=1024)  # a sentence is tested against a dozen cues in a row
def caseless(text: str) -> str:
    """``text`` as a case-insensitive pattern's literals see it."""
    if "\u0130" in text or "\u0131" in text:  # str.translate is ~30 us a sentence: only then
        text = text.translate(_IGNORECASE_EXTRA)
    return text.casefold()


class Cue:
    """A keyword pattern that runs only when its required literals occur.

    ``search`` answers exactly as ``pattern.search``. For an ``re.IGNORECASE`` pattern the
    literals are read off its case-sensitive twin and looked for in ``caseless(text)``. This is
    for the many short texts the compaction extractor asks a dozen questions each: a leading
    ``\\b`` makes the engine try every position, four times the cost of a substring test.
    """

    __slots__ = ("_factors", "_fold", "pattern")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self._fold = bool(pattern.flags & re.IGNORECASE)
        twin = re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)
        factors = required_factors(twin)
        self._factors = tuple(frozenset(caseless(s) for s in f) for f in factors) \
            if self._fold else factors

    def may_occur(self, text: str) -> bool:
        """False when ``search`` finds nothing in ``text``, nor in any part of it: one test of
        a whole text spares asking each of its sentences."""
        if not self._factors:
            return True
        hay = caseless(text) if self._fold else text
        return all(any(s in hay for s in f) for f in self._factors)

    def search(self, text: str) -> re.Match[str] | None:
        return self.pattern.search(text) if self.may_occur(text) else None
