"""A family of detectors run on the text as a model reads it (``confusables.canonical``).

Contract: ``CanonicalText(name, members)`` is a ``Detector`` whose findings are the
members' findings on ``canonical(text)`` (case-folding members first, each group in member
order), with spans mapped back to
``text``. The members run through their own ``Prefiltered`` scan of the canonical text: the
service's prefilter sees the raw text, where "ignоre" (Cyrillic о) holds no literal
``ignore``, so this detector declares no literals there and always runs.

Case-folding members (``fold``) run on one folded copy made in the same pass as the
canonical text, not each on its own: folding non-ASCII text costs ~50 ms per MB, and a dozen
members folding it again took 3x the time of the scan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app.core.detectors.base import PatternDetector
from app.core.detectors.confusables import canonical
from app.core.detectors.prefilter import Prefiltered
from app.core.guards.safety import Detector, Finding


class CanonicalText:
    def __init__(self, name: str, members: Sequence[Detector]) -> None:
        self.name = name
        self.members = tuple(members)
        folding = [m for m in self.members if isinstance(m, PatternDetector) and m.fold]
        self._folded = Prefiltered([dataclasses.replace(m, fold=False) for m in folding])
        self._cased = Prefiltered([m for m in self.members if m not in folding])

    def __call__(self, text: str) -> list[Finding]:
        canon, origin = canonical(text)
        folded, _ = canonical(text, fold=True)
        found = self._folded(folded) + self._cased(canon)
        if origin(len(canon), True) == len(text):  # nothing removed: spans are unchanged
            return found
        return [dataclasses.replace(f, start=origin(f.start), end=origin(f.end, end=True))
                for f in found]

    def __repr__(self) -> str:  # stable (no address): the findings cache fingerprints it
        return f"CanonicalText({self.name!r}, {self.members!r})"
