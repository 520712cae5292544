"""The assembly pipeline: the one place where the stage order lives.

Contract: ``assemble(scope=..., candidates=..., checkpoint=..., budget=..., now=...,
count_tokens=..., config=..., clock=None)`` runs the pure stages over the candidates the
service collected and returns the ``Assembly`` and the per-stage timings in ms.

Order (``STAGE_ORDER``, pinned by a test) — "Guard before Memory":

    scope (resolved by the service) → collect (service) →
    permission → safety → relevance → dedupe → compress → budget → compile → validate

* permission and safety come first so that nothing a principal may not see is ever scored,
  merged, counted or rendered; permission drops leave as ``Assembly.permission_drops`` (audit
  only), never in ``Assembly.dropped`` (the manifest).
* compress (referencing long tool results and retrievals) runs AFTER dedupe and BEFORE budget
  (incident 3: "引用化在去重合并与预算分配之间执行"): dedupe must compare full contents, and the
  budget must count the compact form, or long results crowd out everything else.
* validate may loop back: when a required text of the checkpoint (goal, constraint, pending
  approval) is missing, the candidates holding it are pinned (never-compress, priority 100, in
  their full uncompressed form) and budget → compile → validate re-run, up to
  ``config.max_attempts`` attempts. Required pins that cannot fit raise ``BudgetTooSmall``.
  Missing key evidence is pinned only when that fits; otherwise the previous attempt stands
  and the failed check is reported (an attempt whose never-compress content alone would
  exceed the budget is not made: its outcome is known).

The safety guard applies ``profile`` (the turn's redaction profile, resolved by the service)
or, without one, ``config.profile`` (built-in ``default`` unless the root says otherwise).

The envelope is rendered for ``rendering`` (the request's model API; OpenAI chat by default).

Timings use the injected ``clock`` (seconds, e.g. ``time.perf_counter``); without one they are 0.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime

from app.core.budget import allocate, usable_tokens
from app.core.compile import compile_envelope
from app.core.compress import reference_long
from app.core.dedupe import dedupe
from app.core.errors import BudgetTooSmall
from app.core.guards.permission import permission_guard
from app.core.guards.relevance import relevance_guard
from app.core.guards.safety import Detector, safety_guard
from app.core.model import (
    Assembly,
    Budget,
    Candidate,
    Drop,
    Envelope,
    Layer,
    Rendering,
    Scope,
    Section,
    TaskCheckpoint,
    Validation,
)
from app.core.redaction import DEFAULT_PROFILE, RedactionProfile
from app.core.validate import ValidationResult, validate

STAGE_ORDER: tuple[str, ...] = (
    "permission", "safety", "relevance", "dedupe", "compress", "budget", "compile", "validate",
)
PIN_PRIORITY = 100

CountTokens = Callable[[str], int]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PipelineConfig:
    """Settings of the pure pipeline; built once by the composition root."""

    shares: Mapping[Section, float]
    limits: Mapping[Layer, int]
    floor: float = 0.0  # relevance floor (0..1) of the floored layers; a turn may set its own
    similarity_baseline: float = 0.75  # the embedder's cosine similarity of unrelated texts
    threshold_tokens: int = 512
    excerpt_tokens: int = 96
    rrf_k: int = 60
    detectors: Sequence[Detector] = ()
    profile: RedactionProfile = DEFAULT_PROFILE  # a turn may override it (``assemble(profile=)``)
    max_attempts: int = 3


class _Timer:
    def __init__(self, clock: Callable[[], float] | None) -> None:
        self._clock = clock
        self.ms: dict[str, float] = dict.fromkeys(STAGE_ORDER, 0.0)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = self._clock() if self._clock is not None else 0.0
        yield
        if self._clock is not None:
            self.ms[name] += (self._clock() - start) * 1000.0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """Context of the budget → compile → validate loop of one turn."""

    originals: Mapping[str, Candidate]  # after dedupe, before compress: what a pin restores
    compact: Sequence[Candidate]
    checkpoint: TaskCheckpoint | None
    budget: Budget
    shares: Mapping[Section, float]
    count_tokens: CountTokens
    timer: _Timer
    rendering: Rendering


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Outcome:
    envelope: Envelope
    drops: list[Drop]
    result: ValidationResult


def _with_tokens(candidates: Sequence[Candidate], count_tokens: CountTokens) -> list[Candidate]:
    return [dataclasses.replace(c, tokens=count_tokens(c.content))
            if c.tokens == 0 and c.content else c for c in candidates]


def _pin(c: Candidate) -> Candidate:
    reason = f"{c.reason}; pinned by validation" if c.reason else "pinned by validation"
    return dataclasses.replace(c, never_compress=True, priority=max(c.priority, PIN_PRIORITY),
                               reason=reason)


def _attempt(run: _Run, pinned: frozenset[str]) -> _Outcome:
    candidates = [_pin(run.originals[c.ref]) if c.ref in pinned else c for c in run.compact]
    with run.timer.stage("budget"):
        kept, drops = allocate(candidates, budget=run.budget, shares=run.shares)
    with run.timer.stage("compile"):
        envelope = compile_envelope(kept, count_tokens=run.count_tokens,
                                    rendering=run.rendering)
    with run.timer.stage("validate"):
        result = validate(envelope, checkpoint=run.checkpoint)
    return _Outcome(envelope=envelope, drops=drops, result=result)


def _holders(run: _Run, texts: Sequence[str]) -> frozenset[str]:
    """The refs of the originals holding any of ``texts`` verbatim: each text is found in
    their contents joined by NUL (no match of a text without NUL spans two of them), from
    one holder to the next, not asked of every candidate in turn."""
    if not texts or not run.originals:
        return frozenset()
    refs = list(run.originals)
    contents = [run.originals[r].content for r in refs]
    starts = [0]
    for c in contents:
        starts.append(starts[-1] + len(c) + 1)
    joined = "\0".join(contents)
    found: set[str] = set()
    for t in texts:
        if "\0" in t:
            found.update(r for r, c in zip(refs, contents, strict=True) if t in c)
            continue
        at = joined.find(t)
        while at != -1:
            i = bisect_right(starts, at) - 1
            found.add(refs[i])
            at = joined.find(t, starts[i + 1])
    return frozenset(found)


def _fit(run: _Run, max_attempts: int) -> tuple[_Outcome, int]:
    pinned: frozenset[str] = frozenset()
    fallback: _Outcome | None = None  # the last outcome, kept while only soft pins are tried
    attempt = 1
    while True:
        try:
            out = _attempt(run, pinned)
        except BudgetTooSmall:
            if fallback is None:
                raise
            return fallback, attempt
        required = _holders(run, out.result.missing_required) - pinned
        new = required or (_holders(run, out.result.missing_soft) - pinned)
        if out.result.ok or not new or attempt >= max_attempts:
            return out, attempt
        fallback = None if required else out
        if fallback is not None and _cannot_fit(run, pinned | new):
            return out, attempt  # the soft pins' attempt would raise and fall back to this one
        pinned |= new
        attempt += 1


def _cannot_fit(run: _Run, pinned: frozenset[str]) -> bool:
    """Whether never-compress content with ``pinned`` (in full) exceeds the usable budget, so
    ``allocate`` would raise ``BudgetTooSmall``: it counts whole tool-call units, never fewer
    tokens than this. Most turns of a session whose found constraints outgrow the budget
    asked for such an attempt (docs/benchmarks.md, session 5)."""
    tokens = sum(run.originals[c.ref].tokens if c.ref in pinned else c.tokens
                 for c in run.compact if c.ref in pinned or c.never_compress)
    return tokens > usable_tokens(run.budget)


def _guards(scope: Scope, candidates: Sequence[Candidate], *, now: datetime,
            config: PipelineConfig, profile: RedactionProfile, count_tokens: CountTokens,
            timer: _Timer, query: str) -> tuple[list[Candidate], list[Drop], list[Drop]]:
    """permission → safety → relevance → dedupe; returns (survivors, permission, others)."""
    with timer.stage("permission"):
        allowed, permission = permission_guard(scope, candidates, now=now)
    with timer.stage("safety"):
        safe, safety = safety_guard(scope, allowed, detectors=config.detectors, profile=profile,
                                    count_tokens=count_tokens)
    with timer.stage("relevance"):
        relevant, relevance = relevance_guard(safe, limits=config.limits, floor=config.floor,
                                              rrf_k=config.rrf_k, query=query,
                                              similarity_baseline=config.similarity_baseline)
    with timer.stage("dedupe"):
        unique, duplicates = dedupe(relevant)
    return unique, permission, [*safety, *relevance, *duplicates]


def assemble(
    *,
    scope: Scope,
    candidates: Sequence[Candidate],
    checkpoint: TaskCheckpoint | None,
    budget: Budget,
    now: datetime,
    count_tokens: CountTokens,
    config: PipelineConfig,
    clock: Callable[[], float] | None = None,
    profile: RedactionProfile | None = None,
    rendering: Rendering = Rendering.OPENAI,
    query: str = "",
) -> tuple[Assembly, dict[str, float]]:
    """``query``: the turn's text, what the relevance floor measures retrievals against."""
    timer = _Timer(clock)
    unique, permission, dropped = _guards(
        scope, _with_tokens(candidates, count_tokens), now=now, config=config,
        profile=profile if profile is not None else config.profile,
        count_tokens=count_tokens, timer=timer, query=query)
    with timer.stage("compress"):
        compact = reference_long(unique, threshold_tokens=config.threshold_tokens,
                                 excerpt_tokens=config.excerpt_tokens, count_tokens=count_tokens)
    run = _Run(originals={c.ref: c for c in unique}, compact=compact, checkpoint=checkpoint,
               budget=budget, shares=config.shares, count_tokens=count_tokens, timer=timer,
               rendering=rendering)
    out, attempts = _fit(run, config.max_attempts)
    validation = Validation(ok=out.result.ok, attempts=attempts, checks=out.result.checks)
    assembly = Assembly(envelope=out.envelope, dropped=(*dropped, *out.drops),
                        permission_drops=tuple(permission), candidates=len(candidates),
                        validation=validation)
    return assembly, timer.ms
