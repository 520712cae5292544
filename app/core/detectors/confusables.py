"""Text as a model reads it: look-alike letters to ASCII, invisible characters removed.

Contract: ``canonical(text, fold=False)`` returns ``(canon, origin)``. ``canon`` maps every
character that NFKC or a homoglyph table turns into one ASCII letter or digit (full-width forms,
mathematical alphanumerics, Cyrillic and Greek look-alikes) to that character, and drops
invisible format characters (zero-width spaces and joiners, soft hyphens, word joiners, the
BOM, bidi controls). ``origin(i, end=False)`` maps an index of ``canon`` back to ``text``, so
spans found on ``canon`` point at the original characters. With ``fold`` A-Z (and what maps
to them) become a-z in the same pass. Pure-ASCII text is returned as is (or ``str.lower``).

Why: "ignоre" with a Cyrillic о or "ig\u200bnore" reads the same to a model and to nobody's
regex. Mapping is one character to one (``str.translate``, C speed); only removals shift
offsets, and those are rare, so ``origin`` bisects a list of removal positions.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable

# Cyrillic and Greek letters that render like Latin ones (Unicode confusables, the subset
# that maps to a single ASCII letter in common fonts).
_HOMOGLYPHS = {
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
    "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d",
    "ɡ": "g", "ո": "n", "ս": "u", "ԛ": "q", "ԝ": "w", "ɑ": "a", "ı": "i",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "У": "Y", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J",
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t", "υ": "u", "ε": "e",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
}
_INVISIBLE = "\u00ad\u034f\u061c\u115f\u1160\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b" \
             "\u202c\u202d\u202e\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
_INVISIBLE_RE = re.compile(f"[{_INVISIBLE}]")
# Ranges whose NFKC form is one ASCII letter or digit: full-width forms, letter-like
# symbols, enclosed and mathematical alphanumerics.
_NFKC_RANGES = ((0xFF01, 0xFF5F), (0x2100, 0x2150), (0x2460, 0x24EA), (0x1D400, 0x1D800))


def _table() -> dict[int, str | None]:
    table: dict[int, str | None] = {ord(k): v for k, v in _HOMOGLYPHS.items()}
    for lo, hi in _NFKC_RANGES:
        for cp in range(lo, hi):
            folded = unicodedata.normalize("NFKC", chr(cp))
            if len(folded) == 1 and folded.isascii() and folded.isalnum():
                table[cp] = folded
    table.update({ord(ch): None for ch in _INVISIBLE})
    return table


_TABLE = _table()
_FOLD_TABLE = {cp: (v.lower() if v else v) for cp, v in _TABLE.items()} | {
    c: chr(c + 32) for c in range(65, 91)}


def _same(i: int, end: bool = False) -> int:
    return i


def canonical(text: str, fold: bool = False) -> tuple[str, Callable[..., int]]:
    if text.isascii():
        return (text.lower() if fold else text), _same
    canon = text.translate(_FOLD_TABLE if fold else _TABLE)
    if len(canon) == len(text):
        return canon, _same
    removed = [m.start() for m in _INVISIBLE_RE.finditer(text)]

    def origin(i: int, end: bool = False) -> int:
        # the k-th kept character is at k + (number of removals at or before it)
        k = i - 1 if end and i > 0 else i
        shift = 0
        while True:  # fixed point: the removals before the original position
            n = bisect.bisect_right(removed, k + shift)
            if n == shift:
                return k + shift + (1 if end and i > 0 else 0)
            shift = n

    return canon, origin
