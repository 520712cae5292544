"""Stage 6 — reference long content: a handle and a short excerpt instead of the whole text.

Contract: ``reference_long(candidates, threshold_tokens=..., excerpt_tokens=..., count_tokens=...)``
returns the candidates with every tool result and retrieval longer than ``threshold_tokens``
replaced by::

    [ref {ref} · {tokens} tokens · excerpt]
    {head of the content, at most excerpt_tokens}…

``tokens`` is recounted on the new content and ``reason`` records ``referenced: N→M tokens``.
``never_compress`` candidates and every other kind are returned untouched, as is a candidate
whose reference would not be shorter than the original.

This runs after dedupe and BEFORE the budget (incident 3: referencing sits between the dedupe
merge and the budget allocation), so the budget counts the compact form and a long tool result
costs its excerpt, not its full length. The excerpt is the longest prefix within
``excerpt_tokens``, found by a binary search on characters that starts where the content's
own count predicts: a few tokenizer calls on prefixes of about the excerpt's size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from app.core.model import Candidate, Kind

REFERENCEABLE: frozenset[Kind] = frozenset({Kind.TOOL_RESULT, Kind.RETRIEVAL})


def head_excerpt(text: str, max_tokens: int, count_tokens: Callable[[str], int],
                 total_tokens: int | None = None) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens (a binary search on
    characters). Given the text's own count, the search starts at the prefix its characters
    per token predict and gallops out from there to bracket the answer: the tokenizer reads a
    few prefixes of about the excerpt's length, not halves of the whole text."""
    lo, hi = _bracket(text, max_tokens, count_tokens, total_tokens)
    while lo < hi:  # count(text[:lo]) <= max_tokens, and the answer is at most hi
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    head = text[:lo]
    # Prefer ending on a word boundary when one is close, so the excerpt does not cut a word.
    cut = head.rfind(" ")
    if lo < len(text) and cut >= len(head) * 3 // 4:
        head = head[:cut]
    return head.rstrip()


def _bracket(text: str, max_tokens: int, count_tokens: Callable[[str], int],
             total_tokens: int | None) -> tuple[int, int]:
    """``(lo, hi)``: a prefix length that fits and one the answer cannot exceed."""
    n = len(text)
    if not total_tokens or total_tokens <= max_tokens:
        return 0, n
    guess = max(1, n * max_tokens // total_tokens)
    step = max(8, guess // 16)
    if count_tokens(text[:guess]) <= max_tokens:
        lo, probe = guess, guess + step
        while probe < n and count_tokens(text[:probe]) <= max_tokens:
            lo, step = probe, step * 2
            probe = lo + step
        return lo, (probe - 1 if probe < n else n)
    hi, probe = guess - 1, max(0, guess - step)
    while probe > 0 and count_tokens(text[:probe]) > max_tokens:
        hi, step = probe - 1, step * 2
        probe = max(0, probe - step)
    return probe, hi


def _referenced(
    c: Candidate, *, excerpt_tokens: int, count_tokens: Callable[[str], int], original: int
) -> Candidate:
    head = head_excerpt(c.content, excerpt_tokens, count_tokens, total_tokens=original)
    content = f"[ref {c.ref} · {original} tokens · excerpt]\n{head}…"
    tokens = count_tokens(content)
    if tokens >= original:
        return c
    note = f"referenced: {original}→{tokens} tokens"
    return dataclasses.replace(c, content=content, tokens=tokens,
                               reason=f"{c.reason}; {note}" if c.reason else note)


def reference_long(
    candidates: Iterable[Candidate],
    *,
    threshold_tokens: int,
    excerpt_tokens: int,
    count_tokens: Callable[[str], int],
) -> list[Candidate]:
    out: list[Candidate] = []
    for c in candidates:
        if c.kind not in REFERENCEABLE or c.never_compress:
            out.append(c)
            continue
        original = c.tokens or count_tokens(c.content)
        if original <= threshold_tokens:
            out.append(c)
            continue
        out.append(_referenced(c, excerpt_tokens=excerpt_tokens, count_tokens=count_tokens,
                               original=original))
    return out
