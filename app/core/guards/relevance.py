"""Stage 4 — the relevance guard: fuse the rankers, cut below the floor and per layer.

Contract: ``relevance_guard(candidates, limits=..., floor=..., rrf_k=60)``

* Candidates sharing a ``ref`` are ONE candidate: they are merged first (the first one's
  labels are kept) and their ``(ranker, rank)`` pairs unioned; a ranker listed twice counts once,
  with its best rank, so a duplicate delivery cannot inflate the score.
* A candidate with scores gets ``score = Σ 1 / (rrf_k + rank)`` (reciprocal rank fusion).
* ``score < floor``                       → ``dropped.relevance.below_floor``
* beyond ``limits[layer]`` candidates of its layer, ranked by score desc then ref
                                           → ``dropped.relevance.layer_limit``
  A layer absent from ``limits`` is not limited.
* Candidates without scores (session history, task state, instructions, the query) are not
  ranked: they pass with ``score = 0`` and do not count against any limit.

Survivors keep their input order; the compiler and the budget do their own ordering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from app.core.model import Candidate, Drop, DropLayer, Layer


def merge_by_ref(candidates: Iterable[Candidate]) -> list[Candidate]:
    merged: dict[str, Candidate] = {}
    for c in candidates:
        first = merged.get(c.ref)
        if first is None:
            merged[c.ref] = c
            continue
        best: dict[str, int] = {}
        for ranker, rank in (*first.scores, *c.scores):
            best[ranker] = min(rank, best.get(ranker, rank))
        merged[c.ref] = dataclasses.replace(first, scores=tuple(sorted(best.items())))
    return list(merged.values())


def rrf(scores: Iterable[tuple[str, int]], rrf_k: int) -> float:
    best: dict[str, int] = {}
    for ranker, rank in scores:
        best[ranker] = min(rank, best.get(ranker, rank))
    return sum(1.0 / (rrf_k + rank) for rank in best.values())


def _scored(c: Candidate, rrf_k: int) -> Candidate:
    score = rrf(c.scores, rrf_k)
    ranks = ", ".join(f"{ranker}#{rank}" for ranker, rank in c.scores)
    reason = f"rrf {score:.4f} ({ranks})"
    return dataclasses.replace(c, score=score,
                               reason=f"{c.reason}; {reason}" if c.reason else reason)


def _drop(c: Candidate, rule: str, reason: str) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.RELEVANCE,
                type=f"dropped.relevance.{rule}", reason=reason)


def relevance_guard(
    candidates: Iterable[Candidate],
    *,
    limits: Mapping[Layer, int],
    floor: float,
    rrf_k: int = 60,
) -> tuple[list[Candidate], list[Drop]]:
    merged = merge_by_ref(candidates)
    out = [_scored(c, rrf_k) if c.scores else dataclasses.replace(c, score=0.0) for c in merged]
    dropped: list[Drop] = []
    over: set[str] = set()
    ranked = sorted((c for c in out if c.scores), key=lambda c: (-c.score, c.ref))
    taken: dict[Layer, int] = {}
    for c in ranked:
        if c.score < floor:
            dropped.append(_drop(c, "below_floor", f"score {c.score:.4f} < floor {floor}"))
            over.add(c.ref)
            continue
        limit = limits.get(c.layer)
        if limit is not None and taken.get(c.layer, 0) >= limit:
            dropped.append(_drop(c, "layer_limit", f"{c.layer.value} limit {limit} reached"))
            over.add(c.ref)
            continue
        taken[c.layer] = taken.get(c.layer, 0) + 1
    return [c for c in out if c.ref not in over], dropped
