"""Stage 3 — the safety guard: what may enter the envelope at all, and where.

Contract: ``safety_guard(scope, candidates, detectors=..., profile=..., count_tokens=...)``
returns the candidates that may be shown (possibly masked, moved or quarantined) and ``Drop``
records (layer ``safety``):

    dropped.safety.data_level   sensitivity above the turn's data level (unknown counts as above)
    dropped.safety.secret       ``secret`` content never enters an envelope, whatever was asked
                                (checked before any detector runs)
    dropped.safety.injection    an ``injection.*`` finding whose action is ``drop``; the reason
                                names the finding type, e.g. ``detector found injection.role``
    dropped.safety.<finding>    any other finding whose action is ``drop``

The findings are the ``detectors``' on the candidate's content, or those it carries from where
that very text entered (``Candidate.scanned``: the same detector code, made once at the tail or
at ingest). Each finding's action comes from the redaction profile (``app.core.redaction``),
given the detector's proposal: ``drop`` drops (the first dropping finding by position names
the type), ``mask`` replaces its span with ``[REDACTED:<type>]`` (tokens are recounted when
``count_tokens`` is given), ``allow`` ignores it, and ``quarantine`` (injection only; anything
else asking for it is dropped — fail closed) keeps the candidate but forces it into the dynamic
section as ``untrusted`` with the meta hint ``quarantined=<types>``, which the renderer shows as
``quarantined="true"`` on its data fence.

Injection findings are ignored on ``system`` and ``reviewed`` content (operator-authored
instructions legitimately say "you are…" and "call the refund tool") and on the user's own
query (it is the principal's turn, not third-party data, and it is never dropped); they apply
to curated memory and session content, evidence, untrusted and inferred content. Findings of
a ``DATA_ONLY`` type (``injection.learned``: a model that scores how much a text reads like
orders to the assistant) apply to low-trust content only (``LOW_TRUST``: knowledge evidence,
untrusted documents, tool results, hypotheses): a user's own messages and curated memory are
instructions or facts by nature, and the memory write gate has judged the latter already. They
are left out where a rule's injection finding already names the attack.

Low-trust content (``untrusted``, ``evidence``, ``inferred``) may never sit in the stable
section: the stable prefix is cached and read as instructions. Such a candidate is moved to the
dynamic section, where the renderer fences it as data. Session-section tool results stay in
the transcript (moving them would split tool_call/tool_result pairs) unless quarantined; the
renderer fences them too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from app.core.model import (
    Candidate,
    DataLevel,
    Drop,
    DropLayer,
    Finding,
    FindingAction,
    Kind,
    Scope,
    Section,
    Trust,
)
from app.core.redaction import DEFAULT_PROFILE, RedactionProfile

LOW_TRUST: frozenset[Trust] = frozenset({Trust.UNTRUSTED, Trust.EVIDENCE, Trust.INFERRED})
INJECTION_EXEMPT: frozenset[Trust] = frozenset({Trust.SYSTEM, Trust.REVIEWED})
QUARANTINE_META = "quarantined"
LEARNED_INJECTION = "injection.learned"  # app.core.detectors.learned's type
DATA_ONLY: frozenset[str] = frozenset({LEARNED_INJECTION})

# Finding and FindingAction live in app.core.model (a session event carries its findings)
__all__ = ["DATA_ONLY", "INJECTION_EXEMPT", "LEARNED_INJECTION", "LOW_TRUST", "QUARANTINE_META",
           "Detector", "Finding", "FindingAction", "level_verdict", "safety_guard"]


class Detector(Protocol):
    @property
    def name(self) -> str: ...

    def __call__(self, text: str) -> list[Finding]: ...


def _drop(c: Candidate, type_: str, reason: str) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.SAFETY, type=type_, reason=reason)


def level_verdict(scope: Scope, c: Candidate) -> tuple[str, str] | None:
    """``("data_level" | "secret", reason)`` when ``c``'s sensitivity keeps it out of the
    turn, else None. The data-level half is also pushed down into the stores' SQL (a search
    never returns a row above the level), which is why explain reports it as a permission
    label."""
    if c.sensitivity is None or c.sensitivity > scope.data_level:
        label = c.sensitivity.label if c.sensitivity is not None else "unknown"
        return "data_level", f"sensitivity {label} above turn level {scope.data_level.label}"
    if c.sensitivity == DataLevel.SECRET:
        return "secret", "secret content never enters an envelope"
    return None


def _level_drop(scope: Scope, c: Candidate) -> Drop | None:
    denied = level_verdict(scope, c)
    return None if denied is None else _drop(c, f"dropped.safety.{denied[0]}", denied[1])


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


def _is_injection(type_: str) -> bool:
    return type_ == "injection" or type_.startswith("injection.")


def _decide(c: Candidate, detectors: Sequence[Detector], profile: RedactionProfile
            ) -> list[tuple[str, Finding]]:
    """Every applicable finding with the action the profile gives it, in position order."""
    exempt = c.trust in INJECTION_EXEMPT or c.kind is Kind.QUERY
    decided: list[tuple[str, Finding]] = []
    found = (c.scanned.findings if c.scanned is not None and c.scanned.text is c.content
             else [f for d in detectors for f in d(c.content)])
    if any(_is_injection(f.type) and f.type not in DATA_ONLY for f in found):
        found = [f for f in found if f.type not in DATA_ONLY]  # a rule named the attack
    for f in sorted(found, key=lambda f: f.start):
        injection = _is_injection(f.type)
        if (injection and exempt) or (f.type in DATA_ONLY and c.trust not in LOW_TRUST):
            continue
        action = profile.action_for(f.type, f.action)
        if action == "quarantine" and not injection:
            action = "drop"  # a profile or detector asking to quarantine a non-injection
        if action != "allow":
            decided.append((action, f))
    return decided


def _quarantine(c: Candidate, types: Sequence[str]) -> Candidate:
    label = ", ".join(types)
    return dataclasses.replace(
        c, section=Section.DYNAMIC, trust=Trust.UNTRUSTED,
        meta=(*((k, v) for k, v in c.meta if k != QUARANTINE_META), (QUARANTINE_META, label)),
        reason=_join(c.reason, f"quarantined: {label}"))


def _apply_detectors(c: Candidate, detectors: Sequence[Detector], profile: RedactionProfile,
                     count_tokens: Callable[[str], int] | None) -> Candidate | Drop:
    decided = _decide(c, detectors, profile)
    for action, f in decided:
        if action == "drop":
            family = "injection" if _is_injection(f.type) else f.type
            return _drop(c, f"dropped.safety.{family}", f"detector found {f.type}")
    masks = [f for action, f in decided if action == "mask"]
    if masks:
        content = _mask(c.content, masks)
        types = ", ".join(sorted({f.type for f in masks}))
        tokens = count_tokens(content) if count_tokens is not None else c.tokens
        c = dataclasses.replace(c, content=content, tokens=tokens,
                                reason=_join(c.reason, f"masked: {types}"))
    quarantined = sorted({f.type for action, f in decided if action == "quarantine"})
    return _quarantine(c, quarantined) if quarantined else c


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
    profile: RedactionProfile = DEFAULT_PROFILE,
    count_tokens: Callable[[str], int] | None = None,
) -> tuple[list[Candidate], list[Drop]]:
    kept: list[Candidate] = []
    dropped: list[Drop] = []
    for c in candidates:
        level = _level_drop(scope, c)
        if level is not None:
            dropped.append(level)
            continue
        result = _apply_detectors(c, detectors, profile, count_tokens)
        if isinstance(result, Drop):
            dropped.append(result)
        else:
            kept.append(_placed(result))
    return kept, dropped
