"""Full-text normalization shared by indexing and querying (pure: no I/O, no globals mutated).

PostgreSQL's default parser does not segment Chinese, Japanese or Korean: a run of CJK
characters becomes one token, so "退款接口超时" could only match that exact run. We therefore
index a *normalized* text instead of the raw chunk:

- ``normalize(text)`` lowercases word runs and turns every CJK run into space-separated
  overlapping character bigrams ("退款接口" -> "退款 款接 接口"; a one-character run stays as
  is). Punctuation becomes a space. The database stores this as ``search_text`` and derives
  its ``tsvector`` with the ``simple`` configuration (no stemming, no stop words), so the
  lexemes in the index are exactly the tokens produced here.
- ``query_terms(text)`` produces the same tokens for a query, keeping only those that are
  safe to place in ``to_tsquery`` without escaping: ASCII ``[a-z0-9_]`` words and CJK
  bigrams. English function words (``_STOP_WORDS``) are dropped so an OR query is not
  dominated by "the" and "did": a query of function words only searches for nothing.
- ``tsquery(text)`` joins the terms with `` | `` (OR), or returns ``None`` when nothing is
  left to search for. The store matches it against two tsvectors of the same normalized
  text: ``simple`` (exact lexemes, the CJK bigrams) and ``english`` (Snowball stems, so
  "researching" finds "research").
- ``coverage(terms, text)`` is the share of a query's terms a text holds (``held_of``), a
  word matching when it starts with the term's ``stem`` (a light English suffix stripper):
  the lexical half of the relevance floor (``coverage_of`` compiles it once per query).
- ``rarity(held)`` weighs each term by how few of a set of texts hold it (BM25's inverse
  document frequency), and ``weighted_share`` is the share of that weight a text holds: the
  lexical half of a candidate's rank, where a rare word says more than a common one.

>>> normalize("Refund 退款接口超时!")
'refund 退款 款接 接口 口超 超时'
>>> tsquery("why does the refund time out?")
'refund | time'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping

# Han (incl. extension A and compatibility), kana, Hangul syllables, and the supplementary
# ideographic planes. Each run of these is bigrammed; everything else is split on non-words.
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0003134f"  # CJK Extensions B-G
)
_CJK_RUN = re.compile(rf"[{_CJK}]+")
_CJK_SPLIT = re.compile(rf"([{_CJK}]+)")  # split(): other text, a CJK run, other text, ...
_WORD = re.compile(r"\w+")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")  # what \w matches in lowercased ASCII text

MAX_WORD_CHARS = 64  # longer "words" are hashes or base64 blobs: useless as lexemes
MAX_QUERY_TERMS = 64  # bounds the size of the tsquery a user's text can produce

# Function words: a query keeps none of them, so "did" or "what" cannot tie generic chatter
# to every question (PostgreSQL's english configuration drops most of them from the index too).
_STOP_WORDS = frozenset((
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "done", "for", "from", "had", "has", "have", "having", "he", "her", "here", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not", "of",
    "on", "or", "our", "out", "she", "should", "so", "some", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "to", "too", "up", "us", "very",
    "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with",
    "would", "you", "your",
))


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokens(text: str) -> list[str]:
    """Lowercased words and CJK bigrams of ``text``, in order."""
    out: list[str] = []
    for i, part in enumerate(_CJK_SPLIT.split(text)):
        if i % 2:
            out.extend(_bigrams(part))
        elif part.isascii():  # most text: its words in one C call
            out.extend(w for w in _ASCII_WORD.findall(part.lower()) if len(w) <= MAX_WORD_CHARS)
        else:  # lowercasing may change a length (İ): measure first
            out.extend(w.lower() for w in _WORD.findall(part) if len(w) <= MAX_WORD_CHARS)
    return out


def normalize(text: str) -> str:
    """The text to index: tokens joined by single spaces."""
    return " ".join(tokens(text))


def _safe(term: str) -> bool:
    # A token is a lowercased word-character run or a CJK bigram, so an ASCII one is always
    # [a-z0-9_]+ (asserted by tests against the regex): no regex for the common case.
    if term.isascii():
        return True
    return _CJK_RUN.fullmatch(term) is not None


def ascii_words(lowered: str) -> list[str]:
    """The tokens of lowercased ASCII text: its ``[a-z0-9_]`` runs, in order, unfiltered."""
    return _ASCII_WORD.findall(lowered)


def ascii_terms(words: list[str]) -> list[str]:
    """``query_terms`` of ASCII text from its ``ascii_words``: every ASCII token is safe and
    none is CJK, so this is all of it, in C but for the filter."""
    return _kept(words)[:MAX_QUERY_TERMS]


def _kept(words: list[str]) -> list[str]:
    """``words`` made distinct (first seen first), without stop words and overlong words."""
    return [w for w in dict.fromkeys(words) if len(w) <= MAX_WORD_CHARS and w not in _STOP_WORDS]


def query_terms(text: str) -> list[str]:
    """Distinct, escape-free lexemes of a query, in first-seen order."""
    if text.isascii():  # the common case
        return ascii_terms(ascii_words(text.lower()))
    # ``tokens`` filtered by ``_safe`` part by part, without asking of each token: a CJK
    # run's bigrams are CJK (safe, never a stop word); an ASCII part's words are safe; the
    # other parts hold no CJK, so only their words that lowercase to ASCII are safe.
    seen: dict[str, None] = {}
    for i, part in enumerate(_CJK_SPLIT.split(text)):
        if i % 2:
            seen.update(dict.fromkeys(_bigrams(part)))
        elif part.isascii():
            seen.update(dict.fromkeys(_kept(_ASCII_WORD.findall(part.lower()))))
        else:  # measured before lowercasing, as ``tokens`` does
            seen.update(dict.fromkeys(t for w in _WORD.findall(part) if len(w) <= MAX_WORD_CHARS
                                      and (t := w.lower()).isascii() and t not in _STOP_WORDS))
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)[:MAX_QUERY_TERMS]


def tsquery(text: str) -> str | None:
    """An OR ``to_tsquery('simple', ...)`` expression, or None if the query has no terms."""
    terms = query_terms(text)
    return " | ".join(terms) if terms else None


_SUFFIXES = ("ing", "ed", "es", "s", "ly")  # longest first within each family


def stem(word: str) -> str:
    """A light English stem: one common inflection stripped when 4+ characters remain
    ("researching", "researched", "researches" -> "research"). Not Snowball: it only has to
    make a query term and a text's word compare equal for ``coverage``."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def held_of(terms: list[str]) -> Callable[[str], frozenset[str]]:
    """For one query, compiled once for the turn's candidates: which of ``terms`` a text
    holds. An ASCII term is held by a word starting with its stem (one regex pass over the
    lowercased text, in C), a CJK bigram as a substring. Longer stems are tried first, so
    "timeout" is not cut to "time"."""
    if not terms:
        return lambda text: frozenset()
    stems = {t: stem(t) for t in terms if t.isascii()}
    cjk = [t for t in terms if not t.isascii()]
    alternatives = sorted(set(stems.values()), key=lambda w: (-len(w), w))
    words = re.compile(r"\b(?:" + "|".join(alternatives) + ")") if alternatives else None

    def held(text: str) -> frozenset[str]:
        found = set(words.findall(text.lower())) if words is not None else set()
        return frozenset([*(t for t, s in stems.items() if s in found),
                          *(t for t in cjk if t in text)])

    return held


def share(held: frozenset[str], terms: list[str]) -> float:
    """The share of ``terms`` a text holds, from the terms it holds (``held_of``); 0 for no
    terms."""
    return len(held) / len(terms) if terms else 0.0


def coverage_of(terms: list[str]) -> Callable[[str], float]:
    """``coverage`` for one query, compiled once for the turn's candidates (``held_of``)."""
    held = held_of(terms)
    return lambda text: share(held(text), terms)


def coverage(terms: list[str], text: str) -> float:
    """The share of ``terms`` (``query_terms``) found in ``text``: a word of the text starting
    with a term's ``stem``, or the CJK bigram itself; 0 for no terms.

    >>> coverage(query_terms("researching refunds"), "Research on refund timeouts")
    1.0
    """
    return coverage_of(terms)(text)


def rarity(held: Collection[frozenset[str]]) -> dict[str, float]:
    """Each term's distinctiveness among a set of texts, from the terms each holds
    (``held_of``), in 0..1: BM25's inverse document frequency ``ln(1 + (N - df + 0.5) /
    (df + 0.5))`` over those ``N`` texts, divided by what a term only one text of ``N``
    could score at most (``df`` → 0), so a common word weighs little whatever the query. A
    term no text holds has no weight.

    >>> w = rarity([frozenset({"stork", "keeping"}), frozenset({"keeping"})])
    >>> w["stork"] > w["keeping"]
    True
    """
    df: dict[str, int] = {}
    for terms in held:
        for t in terms:
            df[t] = df.get(t, 0) + 1
    n = len(held)
    ceiling = math.log(1.0 + (n + 0.5) / 0.5)
    return {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) / ceiling for t, d in df.items()}


def weighted_share(held: frozenset[str], weights: Mapping[str, float]) -> float:
    """The words signal of a text: the mean distinctiveness (``rarity``) of the terms some
    text holds, counting only those ``held``: 1 only for a text holding every such term,
    each unique to it; low for one holding common words only (0 when nothing weighs)."""
    return sum(weights.get(t, 0.0) for t in held) / len(weights) if weights else 0.0
