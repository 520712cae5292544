"""Split a document into retrieval chunks that each fit a token budget.

Contract of ``chunk_text(text, max_tokens=, overlap_tokens=, count_tokens=)``:
- Pure and deterministic: same input and counter, same chunks. No I/O; the token counter is
  passed in, so the core never imports a tokenizer.
- Every chunk is non-empty, stripped of outer whitespace, and ``count_tokens(chunk) <=
  max_tokens`` (checked with the real counter, not estimated). Whitespace-only text gives ``[]``.
- Chunks keep the document's own text between their first and last piece (paragraph breaks,
  spaces, or none between CJK sentences), so a chunk is always a substring of the
  (newline-normalised, stripped) input.
- Boundaries are chosen, best first: blank-line paragraph breaks; sentence ends (``. ! ?``
  followed by whitespace, Chinese/Japanese ``。！？；`` with or without whitespace) and single
  line breaks (runbook steps, list items); and only for a sentence that alone exceeds the budget,
  a hard split at the last whitespace of the fitting prefix (or at a character, for CJK).
- Consecutive chunks share up to ``overlap_tokens`` of whole pieces (sentences or paragraphs) so
  a fact straddling a boundary is retrievable from either side. The overlap is best effort: it
  is 0 where the trailing piece alone is larger than ``overlap_tokens``. Each chunk adds at least
  one piece the previous chunk did not have, so the output is finite and never repeats a chunk.
- ``ValueError`` if ``max_tokens < 1``, ``overlap_tokens`` is not in ``[0, max_tokens)``, or a
  single character costs more than ``max_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Span = tuple[int, int]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# The piece ends after the match: CJK enders need no following space; Latin enders do, so that
# "3.14" or "v1.2" are not sentence ends. A single newline ends a piece too.
_SENTENCE_END = re.compile(
    r"[。！？；]+[”’」』）)\"']*\s*"
    r"|[.!?]+[\"')\]”’]*\s+"
    r"|\n\s*"
)


def chunk_text(
    text: str, *, max_tokens: int, overlap_tokens: int, count_tokens: Callable[[str], int]
) -> list[str]:
    if max_tokens < 1:
        raise ValueError("max_tokens must be >= 1")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError("overlap_tokens must be in [0, max_tokens)")
    doc = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not doc:
        return []

    def count(span: Span) -> int:
        return count_tokens(doc[span[0]:span[1]].strip())

    pieces = _pieces(doc, max_tokens, count)
    costs = [count(p) for p in pieces]
    return [doc[pieces[i][0]:pieces[j - 1][1]].strip()
            for i, j in _pack(pieces, costs, max_tokens, overlap_tokens, count)]


def _pieces(doc: str, max_tokens: int, count: Callable[[Span], int]) -> list[Span]:
    """Spans that tile ``doc``, each fitting ``max_tokens`` on its own, coarsest first."""
    out: list[Span] = []
    for para in _split(doc, 0, len(doc), _PARAGRAPH_BREAK):
        if count(para) <= max_tokens:
            out.append(para)
            continue
        for sent in _split(doc, para[0], para[1], _SENTENCE_END):
            if count(sent) <= max_tokens:
                out.append(sent)
            else:
                out.extend(_hard_split(doc, sent, max_tokens, count))
    return out


def _split(doc: str, start: int, end: int, boundary: re.Pattern[str]) -> list[Span]:
    """Tile ``doc[start:end]`` into spans ending right after each ``boundary`` match."""
    spans: list[Span] = []
    pos = start
    for m in boundary.finditer(doc, start, end):
        if m.end() > pos and doc[pos:m.end()].strip():
            spans.append((pos, m.end()))
            pos = m.end()
    if pos < end:
        if doc[pos:end].strip() or not spans:
            spans.append((pos, end))
        else:  # trailing whitespace joins the previous span, so spans still tile
            spans[-1] = (spans[-1][0], end)
    return spans


def _hard_split(doc: str, span: Span, max_tokens: int, count: Callable[[Span], int]) -> list[Span]:
    """Cut an over-budget sentence into the longest fitting prefixes, at whitespace if possible.

    Binary search needs ``count`` to grow with the prefix, which BPE counts do in practice; the
    invariant kept is only that the accepted prefix was measured to fit, so a non-monotonic
    counter costs a shorter piece, never an oversized one.
    """
    start, end = span
    out: list[Span] = []
    while start < end:
        if count((start, end)) <= max_tokens:
            out.append((start, end))
            break
        if count((start, start + 1)) > max_tokens:
            raise ValueError(f"max_tokens={max_tokens} is smaller than one character")
        lo, hi = start + 1, end  # count(lo) fits, count(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count((start, mid)) <= max_tokens:
                lo = mid
            else:
                hi = mid
        cut = _whitespace_cut(doc, start, lo)
        if cut is not None and count((start, cut)) <= max_tokens:
            lo = cut
        out.append((start, lo))
        start = lo
    return out


def _whitespace_cut(doc: str, start: int, end: int) -> int | None:
    """Just after the last whitespace in the second half of ``doc[start:end]``, if any."""
    floor = start + (end - start) // 2
    for i in range(end - 1, floor, -1):
        if doc[i].isspace():
            return i + 1
    return None


def _pack(
    pieces: list[Span], costs: list[int], max_tokens: int, overlap: int,
    count: Callable[[Span], int],
) -> list[Span]:
    """Greedy packing into ``(first, stop)`` piece-index ranges, with whole-piece overlap.

    Sums of piece costs only estimate a chunk's count (BPE may merge across a boundary), so
    each chunk is re-counted, and shrunk while it does not fit: first from the end, keeping at
    least one new piece, then by shedding overlap from the front.
    """
    ranges: list[Span] = []
    first, new = 0, 0  # pieces[new] is the first piece the previous chunk did not include
    n = len(pieces)
    while new < n:
        stop, total = first, 0
        while stop < n and (stop <= new or total + costs[stop] <= max_tokens):
            total += costs[stop]
            stop += 1
        while count((pieces[first][0], pieces[stop - 1][1])) > max_tokens:
            if stop - 1 > new:
                stop -= 1
            elif first < new:
                first += 1
            else:  # a single piece, measured to fit when it was made: unreachable
                break
        ranges.append((first, stop))
        if stop >= n:
            break
        # Overlap: trailing whole pieces within the overlap budget that still leave room for
        # the next new piece; never the chunk's first piece, so the start always advances.
        back, kept = stop, 0
        while (back - 1 > first and kept + costs[back - 1] <= overlap
               and kept + costs[back - 1] + costs[stop] <= max_tokens):
            kept += costs[back - 1]
            back -= 1
        first, new = back, stop
    return ranges
