"""Stage 4 — the relevance guard: fuse the rankers, cut below the floor and per layer.

Contract: ``relevance_guard(candidates, limits=..., floor=..., rrf_k=60, query="",
similarity_baseline=0.75)``

* Candidates sharing a ``ref`` are ONE candidate: they are merged first (the first one's
  labels are kept) and their ``(ranker, rank)`` pairs unioned; a ranker listed twice counts once,
  with its best rank, so a duplicate delivery cannot inflate the score.
* A judged candidate (knowledge, transcript: ``FLOORED``) gets ``score =
  SEMANTIC_WEIGHT * semantic + (1 - SEMANTIC_WEIGHT) * distinctive`` — a convex combination
  of two normalized signals, not of their ranks (Bruch
  et al. 2022, "An Analysis of Fusion Functions for Hybrid Retrieval": a convex combination
  of theoretically normalized scores beats reciprocal rank fusion, which throws away how far
  apart two hits are). Meaning dominates; words add evidence and break near-ties.
  ``distinctive`` is the mean distinctiveness of the query terms its text holds, among the
  judged candidates (``fts.rarity``, ``fts.weighted_share``): a word every candidate holds
  cannot tell them apart, a rare one can, and a text of common words stays weak. A hit without a
  cosine (a full-text hit of a query without a vector) has 0 there (CombSUM's rule).
  Both signals are
  absolute for one query and one embedder, so a chunk and an earlier session's event compete
  on one scale whichever store found them.
* Any other candidate with scores (memories) gets ``score = Σ 1 / (rrf_k + rank)`` (reciprocal
  rank fusion: its rankers' ranks carry the staleness penalty).
* A ranked knowledge or transcript candidate (the layers the budget sizes) gets a
  ``relevance`` in 0..1,
  the better of two signals: lexical, the share of the query's terms its text holds
  (``fts.share``, stemmed, function words left out), and semantic, its cosine similarity
  rescaled so that ``similarity_baseline`` (what unrelated texts score with the embedder:
  ~0.75 for E5) is 0 and 1 is 1.
  ``relevance < floor``                    → ``dropped.relevance.below_floor`` (the Drop
  carries ``score`` = relevance and ``floor``)
* It is ``weak`` (noise, see ``noise``) when the floor barely passed it (``relevance <
  floor + NOISE_MARGIN``) or it shares no query term and its rescaled similarity is below
  ``NOISE_SIMILARITY``.
* beyond ``limits[layer]`` candidates of its layer, ranked by score desc, then reciprocal rank
  fusion of its own ranks (the stores' order, for equal scores), then ref
                                           → ``dropped.relevance.layer_limit``
  A layer absent from ``limits`` is not limited.
* Candidates without scores (session history, task state, instructions, the query) are not
  ranked: they pass with ``score = 0`` and do not count against any limit.

Survivors keep their input order; the compiler and the budget do their own ordering.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from app.core import fts
from app.core.model import Candidate, Drop, DropLayer, Layer, Segment

# Layers whose ranked candidates face the floor: knowledge, and other sessions' events (whose
# vector ranker always returns the nearest, related or not). Memories are few and curated.
FLOORED = frozenset({Layer.KNOWLEDGE, Layer.SESSION})
NOISE_MARGIN = 0.1
NOISE_SIMILARITY = 0.3
# A judged candidate's score: meaning four parts, words one (module contract). Not tuned on
# any benchmark: meaning is what a paraphrase shares with its evidence, and words, a
# handful of query terms, move a score by a fifth of their coverage at most — enough to
# order near-equal meanings, never enough for a text that shares a word or two and little
# meaning to pass a close paraphrase.
SEMANTIC_WEIGHT = 0.8


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


def fused(semantic: float, lexical: float) -> float:
    """A judged candidate's score from its two normalized signals (module contract)."""
    return SEMANTIC_WEIGHT * semantic + (1.0 - SEMANTIC_WEIGHT) * lexical


def _scored(c: Candidate, rrf_k: int, judged: Judged | None) -> Candidate:
    """``c`` with its score and, when the floor ``judged`` it, its ``relevance`` and
    ``weak``: one copy of the candidate for both (a copy of a ~25-field frozen dataclass is
    the guard's dearest step at 100+ candidates)."""
    ranks = ", ".join(f"{ranker}#{rank}" for ranker, rank in c.scores)
    if judged is None:
        score = rrf(c.scores, rrf_k)
        reason = f"rrf {score:.4f} ({ranks})"
        return dataclasses.replace(c, score=score, reason=_because(c, reason))
    reason = (f"cc {judged.score:.4f} (meaning {judged.signals[0]:.2f}, words "
              f"{judged.signals[1]:.2f}; {ranks})")
    return dataclasses.replace(c, score=judged.score, reason=_because(c, reason),
                               relevance=judged.relevance, weak=judged.weak)


def _because(c: Candidate, reason: str) -> str:
    return f"{c.reason}; {reason}" if c.reason else reason


def _drop(c: Candidate, rule: str, reason: str, *, score: float | None = None,
          floor: float | None = None) -> Drop:
    return Drop(ref=c.ref, kind=c.kind, layer=DropLayer.RELEVANCE,
                type=f"dropped.relevance.{rule}", reason=reason, score=score, floor=floor)


def rescaled(similarity: float | None, baseline: float) -> float:
    """Cosine similarity mapped so ``baseline`` is 0 and 1 is 1, clamped to 0..1."""
    if similarity is None or baseline >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (similarity - baseline) / (1.0 - baseline)))


@dataclasses.dataclass(frozen=True, slots=True)
class Judged:
    """What the floor made of a candidate: the ``(semantic, words)`` signals its ``score``
    fuses (``words``: the rarity-weighted share of the query's terms), its ``relevance`` (the
    better of semantic and the plain share) and ``weak`` (noise)."""

    signals: tuple[float, float]
    relevance: float
    weak: bool
    score: float


def judge(c: Candidate, lexical: float, distinctive: float, *, floor: float, baseline: float
          ) -> Judged:
    """``c``'s signals, relevance, weakness and score (see the module contract);
    ``lexical``: the share of the query's terms it holds (``fts.share``), what the floor
    reads; ``distinctive``: its terms weighed by rarity (``fts.weighted_share``), what the
    score reads."""
    semantic = rescaled(c.similarity, baseline)
    relevance = max(lexical, semantic)
    weak = relevance < floor + NOISE_MARGIN or (lexical == 0.0 and semantic < NOISE_SIMILARITY)
    return Judged((semantic, distinctive), relevance, weak, fused(semantic, distinctive))


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
    terms = fts.query_terms(query)
    held_of = fts.held_of(terms)
    merged = merge_by_ref(candidates)
    held = {c.ref: held_of(c.content) for c in merged if c.scores and c.layer in FLOORED}
    weights = fts.rarity(held.values())
    judged = {c.ref: judge(c, fts.share(held[c.ref], terms),
                           fts.weighted_share(held[c.ref], weights), floor=floor,
                           baseline=similarity_baseline)
              for c in merged if c.ref in held}
    dropped: list[Drop] = []
    over: set[str] = set()

    def order(c: Candidate) -> tuple[float, float, str]:
        own = rrf(c.scores, rrf_k)
        return (-(judged[c.ref].score if c.ref in judged else own), -own, c.ref)

    taken: dict[Layer, int] = {}
    for c in sorted((c for c in merged if c.scores), key=order):
        j = judged.get(c.ref)
        if j is not None and j.relevance < floor:
            dropped.append(_drop(c, "below_floor", f"relevance {j.relevance:.4f} < floor {floor}",
                                 score=j.relevance, floor=floor))
            over.add(c.ref)
            continue
        limit = limits.get(c.layer)
        if limit is not None and taken.get(c.layer, 0) >= limit:
            dropped.append(_drop(c, "layer_limit", f"{c.layer.value} limit {limit} reached"))
            over.add(c.ref)
            continue
        taken[c.layer] = taken.get(c.layer, 0) + 1
    return [_scored(c, rrf_k, judged.get(c.ref)) if c.scores
            else c if c.score == 0.0 else dataclasses.replace(c, score=0.0)
            for c in merged if c.ref not in over], dropped
