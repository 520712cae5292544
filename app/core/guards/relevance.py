"""Stage 4 — the relevance guard: fuse the rankers, cut below the floor and per layer.

Contract: ``relevance_guard(candidates, limits=..., floor=..., rrf_k=60, query="",
similarity_baseline=0.75)``

* Candidates sharing a ``ref`` are ONE candidate: they are merged first (the first one's
  labels are kept) and their ``(ranker, rank)`` pairs unioned; a ranker listed twice counts once,
  with its best rank, so a duplicate delivery cannot inflate the score.
* A candidate with scores gets ``score = Σ 1 / (rrf_k + rank)`` (reciprocal rank fusion).
  The ranks of a judged candidate (knowledge, transcript: ``FLOORED``) are its ranks **across
  layers** (``across_layers``): each signal's per-layer lists (meaning: ``vector`` and
  ``transcript_vector``; words: ``fts`` and ``transcript``) are merged into one list, so a
  chunk and an earlier session's event compete on one relevance scale, not on which store
  found them. With one layer the ranks are the layer's own.
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
* beyond ``limits[layer]`` candidates of its layer, ranked by the fusion of its layer's own
  ranks desc then ref (a layer's depth is decided within the layer)
                                           → ``dropped.relevance.layer_limit``
  A layer absent from ``limits`` is not limited.
* Candidates without scores (session history, task state, instructions, the query) are not
  ranked: they pass with ``score = 0`` and do not count against any limit.

Survivors keep their input order; the compiler and the budget do their own ordering.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Mapping, Sequence

from app.core import fts
from app.core.model import Candidate, Drop, DropLayer, Layer, Segment

# Layers whose ranked candidates face the floor: knowledge, and other sessions' events (whose
# vector ranker always returns the nearest, related or not). Memories are few and curated.
FLOORED = frozenset({Layer.KNOWLEDGE, Layer.SESSION})
NOISE_MARGIN = 0.1
NOISE_SIMILARITY = 0.3
# What a floored layer's ranker measures. Rankers of one signal are merged across layers by
# a measure that means the same in every layer (``across_layers``).
SIGNAL = {"vector": "meaning", "transcript_vector": "meaning",
          "fts": "words", "transcript": "words"}


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


def _scored(c: Candidate, rrf_k: int, fused: tuple[tuple[str, int], ...],
            judged: tuple[float, bool] | None) -> Candidate:
    """``c`` with the score of its ``fused`` ranks (its own, or across layers) and, when the
    floor ``judged`` it, its ``(relevance, weak)``: one copy of the candidate for both (a
    copy of a ~25-field frozen dataclass is the guard's dearest step at 100+ candidates)."""
    score = rrf(fused, rrf_k)
    ranks = ", ".join(f"{ranker}#{rank}" for ranker, rank in c.scores)
    moved = [f"{ranker}#{rank}" for ranker, rank in fused if (ranker, rank) not in c.scores]
    reason = f"rrf {score:.4f} ({ranks}" + (
        f"; across layers {', '.join(moved)})" if moved else ")")
    reason = f"{c.reason}; {reason}" if c.reason else reason
    if judged is None:
        return dataclasses.replace(c, score=score, reason=reason)
    return dataclasses.replace(c, score=score, reason=reason, relevance=judged[0],
                               weak=judged[1])


def across_layers(candidates: Sequence[Candidate], lexical: Mapping[str, float]
                  ) -> dict[str, tuple[tuple[str, int], ...]]:
    """Each judged candidate's ``(ranker, rank)`` pairs with the ranks of ONE list per signal
    over every layer (by ref; rankers outside ``SIGNAL`` keep their rank).

    A signal's per-layer lists are merged keeping each list's own order (its store ranked it
    best); between layers the heads are compared on a measure that means the same in every
    layer, for one query and one embedder: cosine similarity for meaning, ``lexical`` (the
    share of the query's terms held) for words; ties go to the better in-layer rank, then the
    layer. A rank across layers is the in-layer rank plus the candidates of other layers
    merged ahead of it, so a single layer's ranks are unchanged.
    """
    out = {c.ref: dict(c.scores) for c in candidates}
    for signal in ("meaning", "words"):
        # per layer: (in-layer rank, ref, ranker, the head's measure), in the store's order
        lists: dict[Layer, list[tuple[int, str, str, float]]] = {}
        for c in candidates:
            for ranker, rank in c.scores:
                if SIGNAL.get(ranker) == signal:
                    measure = ((c.similarity or 0.0) if signal == "meaning"
                               else lexical.get(c.ref, 0.0))
                    lists.setdefault(c.layer, []).append((rank, c.ref, ranker, measure))
        if len(lists) < 2:
            continue
        queues = [sorted(items) for _, items in sorted(lists.items())]
        at = [0] * len(queues)
        heads = [(-q[0][3], q[0][0], n) for n, q in enumerate(queues)]
        heapq.heapify(heads)
        merged = 0
        while heads:
            *_, n = heapq.heappop(heads)
            rank, ref, ranker, _ = queues[n][at[n]]
            out[ref][ranker] = rank + merged - at[n]  # + the other layers' merged so far
            at[n] += 1
            merged += 1
            if at[n] < len(queues[n]):
                nxt = queues[n][at[n]]
                heapq.heappush(heads, (-nxt[3], nxt[0], n))
    return {ref: tuple(sorted(ranks.items())) for ref, ranks in out.items()}


def _drop(c: Candidate, rule: str, reason: str, *, score: float | None = None,
          floor: float | None = None) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.RELEVANCE,
                type=f"dropped.relevance.{rule}", reason=reason, score=score, floor=floor)


def rescaled(similarity: float | None, baseline: float) -> float:
    """Cosine similarity mapped so ``baseline`` is 0 and 1 is 1, clamped to 0..1."""
    if similarity is None or baseline >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (similarity - baseline) / (1.0 - baseline)))


def judge(c: Candidate, lexical: float, *, floor: float, baseline: float
          ) -> tuple[float, bool]:
    """``c``'s ``(relevance, weak)`` (see the module contract); ``lexical``: the share of the
    query's terms it holds (``fts.coverage``)."""
    semantic = rescaled(c.similarity, baseline)
    relevance = max(lexical, semantic)
    weak = relevance < floor + NOISE_MARGIN or (lexical == 0.0 and semantic < NOISE_SIMILARITY)
    return relevance, weak


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
    lexical = {c.ref: coverage(c.content) for c in merged if c.scores and c.layer in FLOORED}
    judged = {c.ref: judge(c, lexical[c.ref], floor=floor, baseline=similarity_baseline)
              for c in merged if c.ref in lexical}
    dropped: list[Drop] = []
    over: set[str] = set()
    ranked = sorted((c for c in merged if c.scores),
                    key=lambda c: (-rrf(c.scores, rrf_k), c.ref))
    taken: dict[Layer, int] = {}
    for c in ranked:
        relevance = judged[c.ref][0] if c.ref in judged else None
        if relevance is not None and relevance < floor:
            dropped.append(_drop(c, "below_floor", f"relevance {relevance:.4f} < floor {floor}",
                                 score=relevance, floor=floor))
            over.add(c.ref)
            continue
        limit = limits.get(c.layer)
        if limit is not None and taken.get(c.layer, 0) >= limit:
            dropped.append(_drop(c, "layer_limit", f"{c.layer.value} limit {limit} reached"))
            over.add(c.ref)
            continue
        taken[c.layer] = taken.get(c.layer, 0) + 1
    kept = [c for c in merged if c.ref not in over]
    # Across layers only what survived competes: a dropped chunk takes no event's place.
    fused = across_layers([c for c in kept if c.ref in lexical], lexical)
    return [_scored(c, rrf_k, fused.get(c.ref, c.scores), judged.get(c.ref)) if c.scores
            else c if c.score == 0.0 else dataclasses.replace(c, score=0.0)
            for c in kept], dropped
