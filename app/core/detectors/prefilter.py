"""One pass over a text decides which detector patterns need to run on it at all.

Contract: ``Prefiltered(detectors)`` is a ``Detector`` whose findings are exactly the
concatenation, in ``detectors`` order, of every member's findings — only faster. Each pattern
of a ``PatternDetector`` has required factors (``app.core.detectors.literals``); another
detector may declare its own as a ``triggers`` attribute. One multi-literal scan of the text
finds which literals occur; a pattern runs only when each of its factors has a literal in
the text, and a member without factors always runs. A text that holds none costs one scan,
not two dozen regex passes.

The scan is Hyperscan (``hyperscan``: one SIMD pass over a literal database) where its wheel
exists; elsewhere ``str.__contains__`` per literal gives the same answer, slower. Hyperscan
scans UTF-8 bytes. The literals of a ``fold`` detector match ASCII-case-insensitively, a
superset of its lower-case patterns matching ``fold_ascii(text)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from app.core.detectors.base import PatternDetector, fold_ascii
from app.core.detectors.literals import Factor, required_factors
from app.core.guards.safety import Detector, Finding

try:
    import hyperscan
except ImportError:  # no wheel for this platform: the pure-Python scan below
    hyperscan = None  # type: ignore[assignment]

HAVE_HYPERSCAN = hyperscan is not None

Literal = tuple[str, bool]  # (text, caseless); caseless text is ASCII-lower-case
Conjunction = tuple[frozenset[int], ...]  # literal ids: one of each set must occur


def pattern_factors(detector: Detector) -> list[tuple[Factor, ...]] | None:
    """Per pattern, its required factors; None: the detector declares none and always runs.
    A detector's ``fold`` attribute says its factors match ASCII-case-insensitively."""
    if isinstance(detector, PatternDetector):
        return [required_factors(p) for p in detector.patterns]
    own: tuple[Factor, ...] | None = getattr(detector, "triggers", None)
    return None if own is None else [own]


class Prefiltered:
    name = "prefiltered"

    def __init__(self, detectors: Sequence[Detector], *, use_hyperscan: bool = True) -> None:
        self._detectors = tuple(detectors)
        ids: dict[Literal, int] = {}
        self._plans: list[list[Conjunction] | None] = []
        for d in self._detectors:
            per_pattern = pattern_factors(d)
            if per_pattern is None:
                self._plans.append(None)
                continue
            fold: bool = getattr(d, "fold", False)
            self._plans.append([tuple(
                frozenset(ids.setdefault((fold_ascii(s), True) if fold else (s, False), len(ids))
                          for s in f) for f in factors) for factors in per_pattern])
        self._literals = sorted(ids, key=ids.__getitem__)
        # Each pattern listed under the literals of its smallest factor (every factor is
        # required, so one will do): a text wakes only the patterns one of its literals names,
        # instead of every pattern's conjunction being tested on every text (with ~270 injection
        # patterns that test was 85% of a short text's cost). Patterns without factors always run.
        self._wakes: dict[int, list[tuple[int, int]]] = {}
        self._always: list[tuple[int, int]] = []
        for di, plan in enumerate(self._plans):
            for pi, conj in enumerate(plan or ()):
                if not conj:
                    self._always.append((di, pi))
                    continue
                for lit in min(conj, key=len):
                    self._wakes.setdefault(lit, []).append((di, pi))
        # a pattern with no factors (an empty conjunction) runs on every text
        self.unfiltered = tuple(d.name for d, plan in zip(self._detectors, self._plans,
                                                          strict=True)
                                if plan is None or not all(plan))
        self._db = self._compile() if use_hyperscan and HAVE_HYPERSCAN else None

    def _compile(self) -> Any:
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[text.encode("utf-8", "surrogatepass")
                                for text, _ in self._literals],
                   ids=list(range(len(self._literals))), elements=len(self._literals),
                   flags=[hyperscan.HS_FLAG_SINGLEMATCH
                          | (hyperscan.HS_FLAG_CASELESS if caseless else 0)
                          for _, caseless in self._literals], literal=True)
        return db

    def present(self, text: str) -> set[int]:
        """Ids of the literals that occur in ``text``."""
        found: set[int] = set()
        if self._db is not None:
            def on_match(lit: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
                found.add(lit)

            self._db.scan(text.encode("utf-8", "surrogatepass"), match_event_handler=on_match)
            return found
        folded = fold_ascii(text)
        return {i for i, (lit, caseless) in enumerate(self._literals)
                if lit in (folded if caseless else text)}

    def __call__(self, text: str) -> list[Finding]:
        found = self.present(text)
        woken: dict[int, set[int]] = {}
        for di, pi in self._always:
            woken.setdefault(di, set()).add(pi)
        for lit in found:
            for di, pi in self._wakes.get(lit, ()):
                woken.setdefault(di, set()).add(pi)
        out: list[Finding] = []
        for di, (d, plan) in enumerate(zip(self._detectors, self._plans, strict=True)):
            if plan is None:
                out.extend(d(text))
                continue
            hit = [i for i in sorted(woken.get(di, ())) if all(f & found for f in plan[i])]
            if not hit:
                continue
            if isinstance(d, PatternDetector) and len(hit) < len(plan):
                d = dataclasses.replace(d, patterns=tuple(d.patterns[i] for i in hit))
            out.extend(d(text))
        return out
