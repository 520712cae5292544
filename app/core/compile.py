"""Stage 8 — compile the envelope: order, segment ids, hashes and chat messages.

Contract: ``compile_envelope(candidates, count_tokens=...)`` returns the ``Envelope``:

* order — sections stable → session → dynamic. Stable: instructions, then memories, each by
  ref. Session: by ``seq`` ascending. Dynamic: task state first, then memories, retrievals and
  tool results by score desc then ref, then the query last.
* segments ``seg_1..n`` in that order; ``tokens`` recounted with ``count_tokens`` so the
  manifest states what was really sent; ``content_sha256`` = sha256 hex of the content;
  ``total_tokens`` = the sum of segment tokens.
* ``stable_prefix_sha256`` = sha256 of the canonical JSON ``[[ref, content], ...]`` of the
  stable segments in their canonical (ref) order: the same stable inputs give the same hash
  whatever order they arrived in and whatever the session or dynamic content is, which is what
  lets a provider's prompt cache hit. ``stable_prefix_with`` is the same hash with one
  instruction segment in place of another (a shadow bundle revision's), no envelope compiled.
* ``system``, ``messages``, ``cache_breakpoint`` — the segments rendered for ``render`` (the
  request's model API), see ``app.core.render``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence

from app.core.model import (
    SECTION_ORDER,
    Candidate,
    Envelope,
    Kind,
    Rendering,
    Section,
    Segment,
)
from app.core.render import render

_Key = tuple[int, int, float, int, str]


def order_key(c: Candidate) -> _Key:
    section = SECTION_ORDER.index(c.section)
    if c.section is Section.STABLE:
        return (section, 0 if c.kind is Kind.INSTRUCTION else 1, 0.0, 0, c.ref)
    if c.section is Section.SESSION:
        seq = c.seq if c.seq is not None else 2**62
        return (section, 0, 0.0, seq, c.ref)
    if c.kind is Kind.TASK_STATE:
        return (section, 0, 0.0, 0, c.ref)
    if c.kind is Kind.QUERY:
        return (section, 2, 0.0, 0, c.ref)
    return (section, 1, -c.score, 0, c.ref)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _prefix(stable: Iterable[tuple[_Key, str, str]]) -> str:
    """(order key, ref, content) of the stable segments -> the canonical hash."""
    canonical = json.dumps([[ref, content] for _, ref, content in sorted(stable)],
                           ensure_ascii=False, separators=(",", ":"))
    return sha256_hex(canonical)


def _stable(segments: Sequence[Segment]) -> list[tuple[_Key, str, str]]:
    return [(order_key(s.candidate), s.candidate.ref, s.content) for s in segments
            if s.candidate.section is Section.STABLE]


def stable_prefix_sha256(segments: Sequence[Segment]) -> str:
    return _prefix(_stable(segments))


def stable_prefix_with(segments: Sequence[Segment], *, instead_of: str, ref: str,
                       content: str) -> str:
    """The stable prefix hash with instruction ``ref`` (its ``content``; none when blank) in
    place of the segment ``instead_of``: what serving another revision would hash to."""
    kept = [s for s in _stable(segments) if s[1] != instead_of]
    added = ([((SECTION_ORDER.index(Section.STABLE), 0, 0.0, 0, ref), ref, content)]
             if content.strip() else [])
    return _prefix(kept + added)


def compile_envelope(
    candidates: Iterable[Candidate], *, count_tokens: Callable[[str], int],
    rendering: Rendering = Rendering.OPENAI,
) -> Envelope:
    ordered = sorted(candidates, key=order_key)
    segments = tuple(
        Segment(id=f"seg_{i}", candidate=c, content=c.content,
                tokens=count_tokens(c.content), content_sha256=sha256_hex(c.content))
        for i, c in enumerate(ordered, start=1)
    )
    rendered = render(segments, rendering)
    return Envelope(
        segments=segments,
        messages=rendered.messages,
        total_tokens=sum(s.tokens for s in segments),
        stable_prefix_sha256=stable_prefix_sha256(segments),
        render=rendering,
        system=rendered.system,
        cache_breakpoint=rendered.cache_breakpoint,
    )
