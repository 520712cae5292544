"""Stage 4 — the relevance guard: fuse the rankers, cut below the floor and per layer.

Contract: ``relevance_guard(candidates, limits=..., floor=..., rrf_k=60, query="",
similarity_baseline=0.75)``

* Candidates sharing a ``ref`` are ONE candidate: they are merged first (the first one's
  labels are kept) and their ``(ranker, rank)`` pairs unioned; a ranker listed twice counts once,
  with its best rank, so a duplicate delivery cannot inflate the score.
* A candidate with scores gets ``score = Σ 1 / (rrf_k + rank)`` (reciprocal rank fusion).
* A ranked knowledge or transcript candidate (the layers the budget sizes) gets a
  ``relevance`` in 0..1,
  the better of two signals: lexical, the share of the query's terms its text holds
  (``fts.coverage``, stemmed, function words left out), and semantic, its cosine similarity
  rescaled so that ``similarity_baseline`` (what unrelated texts score with the embedder:
  ~0.75 for E5) is 0 and 1 is 1.
  ``relevance < floor``                    → ``dropped.relevance.below_floor`` (the Drop
  carries ``score`` = relevance and ``floor``)
* It is ``weak`` (noise, see ``noise``) when the floor barely passed it (``relevance <
  floor + NOISE_MARGIN``) or it shares no query term and its rescaled similarity is below
  ``NOISE_SIMILARITY``.
* beyond ``limits[layer]`` candidates of its layer, ranked by score desc then ref
                                           → ``dropped.relevance.layer_limit``
  A layer absent from ``limits`` is not limited.
* Candidates without scores (session history, task state, instructions, the query) are not
  ranked: they pass with ``score = 0`` and do not count against any limit.

Survivors keep their input order; the compiler and the budget do their own ordering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from app.core import fts
from app.core.model import Candidate, Drop, DropLayer, Layer, Segment

# Layers whose ranked candidates face the floor: knowledge, and other sessions' events (whose
# vector ranker always returns the nearest, related or not). Memories are few and curated.
FLOORED = frozenset({Layer.KNOWLEDGE, Layer.SESSION})
NOISE_MARGIN = 0.1
NOISE_SIMILARITY = 0.3


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


def _scored(c: Candidate, rrf_k: int, judgement: Mapping[str, float | bool]) -> Candidate:
    """``c`` fused (and judged): one copy, the guard's cost being mostly copies."""
    score = rrf(c.scores, rrf_k)
    ranks = ", ".join(f"{ranker}#{rank}" for ranker, rank in c.scores)
    reason = f"rrf {score:.4f} ({ranks})"
    return dataclasses.replace(c, score=score,
                               reason=f"{c.reason}; {reason}" if c.reason else reason,
                               **judgement)  # type: ignore[arg-type]


def _drop(c: Candidate, rule: str, reason: str, *, floor: float | None = None) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.RELEVANCE,
                type=f"dropped.relevance.{rule}", reason=reason,
                score=None if floor is None else c.relevance, floor=floor)


def rescaled(similarity: float | None, baseline: float) -> float:
    """Cosine similarity mapped so ``baseline`` is 0 and 1 is 1, clamped to 0..1."""
    if similarity is None or baseline >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (similarity - baseline) / (1.0 - baseline)))


def judge(c: Candidate, coverage: Callable[[str], float], *, floor: float, baseline: float
          ) -> dict[str, float | bool]:
    """``c``'s ``relevance`` and ``weak`` (see the module contract); ``coverage``:
    ``fts.coverage_of`` the query's terms."""
    lexical = coverage(c.content)
    semantic = rescaled(c.similarity, baseline)
    relevance = max(lexical, semantic)
    weak = relevance < floor + NOISE_MARGIN or (lexical == 0.0 and semantic < NOISE_SIMILARITY)
    return {"relevance": relevance, "weak": weak}


def noise(segments: Iterable[Segment]) -> dict[str, float | int]:
    """The noise of a compiled envelope: ``noise_tokens`` (admitted segments the floor judged
    ``weak``) over ``retrieved_tokens`` (every admitted segment the floor judged), as
    ``noise_ratio`` (0 when nothing judged was admitted)."""
    judged_ = [s for s in segments if s.candidate.relevance is not None]
    total = sum(s.tokens for s in judged_)
    weak = sum(s.tokens for s in judged_ if s.candidate.weak)
    return {"retrieved_tokens": total, "noise_tokens": weak,
            "noise_ratio": round(weak / total, 4) if total else 0.0}


def relevance_guard(
    candidates: Iterable[Candidate],
    *,
    limits: Mapping[Layer, int],
    floor: float,
    rrf_k: int = 60,
    query: str = "",
    similarity_baseline: float = 0.75,
) -> tuple[list[Candidate], list[Drop]]:
    coverage = fts.coverage_of(fts.query_terms(query))
    merged = merge_by_ref(candidates)
    out = [_scored(c, rrf_k, judge(c, coverage, floor=floor, baseline=similarity_baseline)
                   if c.layer in FLOORED else {})
           if c.scores else dataclasses.replace(c, score=0.0) for c in merged]
    dropped: list[Drop] = []
    over: set[str] = set()
    ranked = sorted((c for c in out if c.scores), key=lambda c: (-c.score, c.ref))
    taken: dict[Layer, int] = {}
    for c in ranked:
        if c.relevance is not None and c.relevance < floor:
            dropped.append(_drop(c, "below_floor",
                                 f"relevance {c.relevance:.4f} < floor {floor}", floor=floor))
            over.add(c.ref)
            continue
        limit = limits.get(c.layer)
        if limit is not None and taken.get(c.layer, 0) >= limit:
            dropped.append(_drop(c, "layer_limit", f"{c.layer.value} limit {limit} reached"))
            over.add(c.ref)
            continue
        taken[c.layer] = taken.get(c.layer, 0) + 1
    return [c for c in out if c.ref not in over], dropped
