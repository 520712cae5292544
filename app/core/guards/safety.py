"""Stage 3 — the safety guard: what may enter the envelope at all, and where.

Contract: ``safety_guard(scope, candidates, detectors=..., count_tokens=...)`` returns the
candidates that may be shown (possibly masked or moved) and ``Drop`` records (layer ``safety``):

    dropped.safety.data_level   sensitivity above the turn's data level (unknown counts as above)
    dropped.safety.secret       ``secret`` content never enters an envelope, whatever was asked
    dropped.safety.<finding>    a detector found something whose action is ``drop``

Low-trust content (``untrusted``, ``evidence``, ``inferred``) may never sit in the stable
section: the stable prefix is cached and read as instructions. Such a candidate is moved to the
dynamic section, where the renderer fences it as data. Session-section tool results stay in
the transcript (moving them would split tool_call/tool_result pairs); the renderer fences them
too.

Detectors are the extension point for secrets, PII and injection scanners: each is a callable
returning ``Finding`` spans. A ``mask`` finding replaces its span with ``[REDACTED:<type>]``
(and the tokens are recounted when ``count_tokens`` is given); a ``drop`` finding drops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol

from app.core.model import Candidate, DataLevel, Drop, DropLayer, Scope, Section, Trust

LOW_TRUST: frozenset[Trust] = frozenset({Trust.UNTRUSTED, Trust.EVIDENCE, Trust.INFERRED})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One span a detector flagged. ``type`` is a stable machine word, e.g. ``pii.email``."""

    type: str
    action: Literal["drop", "mask"]
    start: int = 0
    end: int = 0


class Detector(Protocol):
    @property
    def name(self) -> str: ...

    def __call__(self, text: str) -> list[Finding]: ...


def _drop(c: Candidate, type_: str, reason: str) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.SAFETY, type=type_, reason=reason)


def _level_drop(scope: Scope, c: Candidate) -> Drop | None:
    if c.sensitivity is None or c.sensitivity > scope.data_level:
        label = c.sensitivity.label if c.sensitivity is not None else "unknown"
        return _drop(c, "dropped.safety.data_level",
                     f"sensitivity {label} above turn level {scope.data_level.label}")
    if c.sensitivity == DataLevel.SECRET:
        return _drop(c, "dropped.safety.secret", "secret content never enters an envelope")
    return None


def _mask(text: str, findings: Sequence[Finding]) -> str:
    """Replace flagged spans, left to right; a span overlapping an earlier one is merged."""
    out: list[str] = []
    pos = 0
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        start = max(f.start, pos)
        if f.end <= start:
            continue
        out.append(text[pos:start])
        out.append(f"[REDACTED:{f.type}]")
        pos = f.end
    out.append(text[pos:])
    return "".join(out)


def _apply_detectors(
    c: Candidate, detectors: Sequence[Detector], count_tokens: Callable[[str], int] | None
) -> Candidate | Drop:
    findings = [f for d in detectors for f in d(c.content)]
    for f in findings:
        if f.action == "drop":
            return _drop(c, f"dropped.safety.{f.type}", f"detector found {f.type}")
    masks = [f for f in findings if f.action == "mask"]
    if not masks:
        return c
    content = _mask(c.content, masks)
    types = ", ".join(sorted({f.type for f in masks}))
    tokens = count_tokens(content) if count_tokens is not None else c.tokens
    return dataclasses.replace(c, content=content, tokens=tokens,
                               reason=_join(c.reason, f"masked: {types}"))


def _join(reason: str, extra: str) -> str:
    return f"{reason}; {extra}" if reason else extra


def _placed(c: Candidate) -> Candidate:
    if c.trust in LOW_TRUST and c.section is Section.STABLE:
        return dataclasses.replace(c, section=Section.DYNAMIC,
                                   reason=_join(c.reason, f"moved to dynamic: {c.trust.value}"))
    return c


def safety_guard(
    scope: Scope,
    candidates: Iterable[Candidate],
    *,
    detectors: Sequence[Detector] = (),
    count_tokens: Callable[[str], int] | None = None,
) -> tuple[list[Candidate], list[Drop]]:
    kept: list[Candidate] = []
    dropped: list[Drop] = []
    for c in candidates:
        level = _level_drop(scope, c)
        if level is not None:
            dropped.append(level)
            continue
        result = _apply_detectors(c, detectors, count_tokens)
        if isinstance(result, Drop):
            dropped.append(result)
        else:
            kept.append(_placed(result))
    return kept, dropped
