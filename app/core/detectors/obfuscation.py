"""Injection spelled to slip past patterns: letters spaced out, digits for letters.

Contract: ``Deobfuscated(inner)`` is a ``Detector`` that runs ``inner`` on the forms a model
reads back from an obfuscated text and reports what ``inner`` found there and not in the
text as written, as one ``injection.obfuscated`` finding (action ``quarantine``) spanning the
whole text (offsets in a rewritten text do not map back one to one). The forms:

* **spaced**: runs of four or more single letters joined by one separator (``i g n o r e``,
  ``i.g.n.o.r.e``, ``i-g-n-o-r-e``) become words; a wider gap between two runs is a space.
* **leet**: a word that mixes letters with the digits and signs people type for letters
  (``1gn0re``, ``pr3vious``, ``a11``, ``$ystem``) gets the letters back; ``1`` is ``i`` or
  ``l``, so it is read both ways, and a third time as ``i`` leading a word and ``l`` inside
  one (``1nstructions``, ``a11``). Pure numbers are left alone, so dates, versions and
  amounts never change.

Why here and not in ``confusables.canonical``: digits are text's own characters almost
everywhere (ids, hashes, versions), so they are rewritten only inside words that mix them with
letters, and only when the rewrite brings out a word the injection rules key on that the text
did not hold: a benign text with ``mp3`` or ``x86_64`` costs one regex search and one keyword
test, and never a second scan.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from app.core.guards.safety import Detector, Finding

OBFUSCATED = "injection.obfuscated"
_SEP = r"[ .\-_*/|]"
# Four or more single letters joined by one separator each (optionally doubled, as spaced
# text often is): "i g n o r e", "i.g.n.o.r.e".
_SPACED = re.compile(rf"(?<![A-Za-z])[A-Za-z](?:{_SEP}{{1,2}}[A-Za-z](?![A-Za-z])){{3,}}")
# What such a run must hold, as a cheap gate: the full pattern starts with a letter, which
# Python's regex engine tries at every letter of a page; a separator-led one is ~5x faster.
_SPACED_GATE = re.compile(rf"{_SEP}[A-Za-z]{_SEP}{{1,2}}[A-Za-z]{_SEP}")
_GAP = re.compile(rf"{_SEP}{{2,}}")
_ONE = re.compile(_SEP)
# A word (``@`` and ``$`` count as letters here) where a letter and a leet character meet.
_LEET_WORD = re.compile(r"(?<![\w@$])[\w@$]*?(?:[A-Za-z][013457@$]|[013457@$][A-Za-z])[\w@$]*")
_AS_I = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                       "$": "s"})
_AS_L = str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a",
                       "$": "s"})
_LEADING_ONE = re.compile(r"(?<![\w@$])1")


def _as_i(text: str) -> str:
    return text.translate(_AS_I)


def _as_l(text: str) -> str:
    return text.translate(_AS_L)


def _leading_i(text: str) -> str:
    return _LEADING_ONE.sub("i", text).translate(_AS_L)


# How leet characters read back: ``1`` as ``i``, as ``l``, and as ``i`` leading a word but
# ``l`` inside one. Applied to leet words only.
_READINGS = (_as_i, _as_l, _leading_i)


# The words the injection rules key on: a rewrite that brings none of them out cannot make
# a rule match that the text as written did not, so it is not scanned again.
KEYWORDS = ("ignore", "ignorin", "disregard", "forget", "instruction", "previous", "prompt",
            "system", "reveal", "jailbreak", "override", "rules", "developer", "assistant",
            "pretend", "unrestricted", "uncensored", "password", "secret", "hacked", "pwned")


def _any_keyword(text: str) -> bool:
    return any(k in text for k in KEYWORDS)  # substring searches: faster than an alternation


def _brings_keyword(form: str, before: str) -> bool:
    return any(k in form and k not in before for k in KEYWORDS)


def _read(reading: Callable[[str], str], m: re.Match[str]) -> str:
    return reading(m.group())


def _spaced(text: str) -> str:
    def join(m: re.Match[str]) -> str:
        return " ".join(_ONE.sub("", word) for word in _GAP.split(m.group()))

    return _SPACED.sub(join, text)


def forms(text: str) -> list[str]:
    """The rewritten forms of ``text`` worth scanning again (see the module contract)."""
    spaced = _spaced(text) if _SPACED_GATE.search(f" {text}") else text
    out = [spaced] if spaced != text else []
    words = _LEET_WORD.findall(spaced)
    if words:
        # the leet words alone first, joined (C-speed translations): the text is rewritten
        # only in a reading that brings a keyword out (a page of hashes stops here)
        joined = " ".join(words)
        out += [_LEET_WORD.sub(partial(_read, reading), spaced) for reading in _READINGS
                if _any_keyword(reading(joined).lower())]
    before = text.lower()
    return [f for f in out if _brings_keyword(f.lower(), before)]


class Deobfuscated:
    def __init__(self, inner: Detector) -> None:
        self.inner = inner
        self.name = OBFUSCATED

    def __call__(self, text: str) -> list[Finding]:
        for form in forms(text):
            found = self.inner(form)
            if found:
                return [Finding(type=OBFUSCATED, action="quarantine", start=0, end=len(text))]
        return []

    def __repr__(self) -> str:  # stable (no address): the findings cache fingerprints it
        return f"Deobfuscated({self.inner!r})"
