r"""Shared machinery of the built-in detectors: a regex detector and the pure checksums.

Contract: a ``PatternDetector`` is a ``Detector`` (``app.core.guards.safety``): calling it
with a text returns ``Finding`` spans of one stable ``type``, in pattern then position order,
deterministically, with no I/O and no state between calls. A match becomes a finding only
when its ``accept`` check passes; ``group`` names the part of the match the span covers
(e.g. the value of ``password=...``, not the key). ``accept`` sees the match and the original
text (with ``fold`` the match runs on an ASCII-lower-cased copy, which keeps every offset).

Linear time: every pattern either starts with a literal or is guarded by a negative
lookbehind of its own first character class (so only the start of a run is tried), and every
quantifier is bounded. Keyword patterns avoid ``re.IGNORECASE`` and a leading ``\b`` (both
defeat the engine's literal-prefix scan and cost ~10x): they match a folded copy and check
the word start afterwards (``fold``, ``word_start``). Work per start position is therefore
bounded by a constant, and a detector runs in time linear in the text;
``tests/unit/test_detectors_perf.py`` pins that on 1 MB adversarial inputs.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable
from datetime import date

from app.core.guards.safety import Finding, FindingAction

Accept = Callable[[re.Match[str], str], bool]  # (match, original text) -> keep it?
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def always(_m: re.Match[str], _text: str) -> bool:
    return True


def fold_ascii(text: str) -> str:
    """A-Z to a-z and nothing else: spans stay valid (``str.lower`` may change lengths, and
    lower-cases more than ASCII). Pure-ASCII text takes ``str.lower``, many times faster."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _word_start(text: str, start: int) -> bool:
    """Not inside an ASCII word (a match starting with a CJK character always is a start)."""
    if not text[start].isascii() or not text[start].isalnum():
        return True
    return start == 0 or not (text[start - 1].isascii() and (text[start - 1].isalnum()
                                                              or text[start - 1] == "_"))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PatternDetector:
    """Findings of one ``type`` for every accepted match of any of ``patterns``."""

    name: str
    type: str
    action: FindingAction
    patterns: tuple[re.Pattern[str], ...]
    accept: Accept = always
    group: str | int = 0
    fold: bool = False  # match lower-case patterns against ``fold_ascii(text)``
    word_start: bool = False  # a match starting with an ASCII letter must start a word

    def __call__(self, text: str) -> list[Finding]:
        out: list[Finding] = []
        scanned = fold_ascii(text) if self.fold else text
        for pattern in self.patterns:
            for m in pattern.finditer(scanned):
                if self.word_start and not _word_start(text, m.start()):
                    continue
                if self.accept(m, text):
                    out.append(Finding(type=self.type, action=self.action,
                                       start=m.start(self.group), end=m.end(self.group)))
        return out


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check of payment card numbers; ``digits`` holds only 0-9."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def cn_id_checksum_ok(number: str) -> bool:
    """ISO 7064 MOD 11-2 check digit of an 18-character PRC resident ID."""
    total = sum(int(ch) * w for ch, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


def plausible_date(year: int, month: int, day: int) -> bool:
    """A real calendar date between 1900 and 2099 (no clock: 'today' is not an input here)."""
    if not 1900 <= year <= 2099:
        return False
    try:
        date(year, month, day)
    except ValueError:
        return False
    return True


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text`` (0.0 for the empty string)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())
