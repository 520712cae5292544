from __future__ import annotations

import math

import pytest

from app.core.guards.relevance import SEMANTIC_WEIGHT, noise, relevance_guard, rescaled, rrf
from app.core.model import Candidate, DropLayer, Kind, Layer, Section, Segment
from tests.unit.builders import cand


def test_judged_layers_fuse_normalized_scores_convexly() -> None:
    c = cand(content="refund path", scores=(("fts", 1), ("vector", 3)), similarity=0.85)
    other = cand("kb://b", "refund timeout runbook", scores=(("fts", 2),))
    kept, _ = relevance_guard([c, other], limits={}, floor=0.0, query="refund timeout")
    # meaning (0.85 - 0.75) / 0.25 = 0.4; words: the mean distinctiveness of "refund" (held
    # by both candidates: ln 1.2 of the ceiling ln 6) and "timeout" (not held by this one)
    words = math.log(1.2) / math.log(6.0) / 2
    want = SEMANTIC_WEIGHT * 0.4 + (1 - SEMANTIC_WEIGHT) * words
    assert kept[0].score == pytest.approx(want)
    assert f"cc {want:.4f} (meaning 0.40, words {words:.2f}; fts#1, vector#3)" in kept[0].reason
    assert kept[0].relevance == pytest.approx(0.5)  # the floor reads the plain share


def test_a_rare_query_word_outranks_a_common_one() -> None:
    """Six candidates hold "keeping", one holds "stork": equal meaning, so the rare word
    decides (ts_rank-style counting would tie them)."""
    common = [cand(f"kb://c{i}", f"keeping records {i}", scores=(("fts", i + 1),),
                   similarity=0.8) for i in range(6)]
    rare = cand("kb://rare", "a stork nest", scores=(("fts", 7),), similarity=0.8)
    kept, _ = relevance_guard([*common, rare], limits={Layer.KNOWLEDGE: 1}, floor=0.0,
                              query="keeping a stork")
    assert [c.ref for c in kept] == ["kb://rare"]


def test_memories_fuse_ranks() -> None:
    team = cand("team://m", layer=Layer.TEAM, scores=(("fts", 1), ("vector", 3)))
    kept, _ = relevance_guard([team], limits={}, floor=0.0)
    assert kept[0].score == pytest.approx(1 / 61 + 1 / 63)
    assert "rrf 0.0323 (fts#1, vector#3)" in kept[0].reason


def test_same_ref_from_two_rankers_is_one_candidate() -> None:
    a = cand("kb://a", scores=(("vector", 2),), reason="retrieved")
    b = cand("kb://a", scores=(("fts", 1),))
    kept, dropped = relevance_guard([a, b], limits={}, floor=0.0)
    assert len(kept) == 1
    assert not dropped
    assert kept[0].scores == (("fts", 1), ("vector", 2))


def test_a_ranker_delivered_twice_counts_once_with_its_best_rank() -> None:
    a = cand("kb://a", scores=(("vector", 5),))
    b = cand("kb://a", scores=(("vector", 2),))
    kept, _ = relevance_guard([a, b], limits={}, floor=0.0)
    assert kept[0].scores == (("vector", 2),)
    assert rrf((("v", 2), ("v", 7)), 60) == pytest.approx(1 / 62)


def test_below_floor_is_dropped_with_its_relevance_and_the_floor() -> None:
    hi = cand("kb://hi", "Refund calls time out when the gateway is slow.", scores=(("fts", 1),))
    lo = cand("kb://lo", "Cafeteria menu: Monday lasagna, Tuesday tacos.",
              scores=(("vector", 2),), similarity=0.756)
    kept, dropped = relevance_guard([hi, lo], limits={}, floor=0.15,
                                    query="why does the refund call time out?")
    assert [c.ref for c in kept] == ["kb://hi"]
    assert kept[0].relevance == 1.0  # refund, call, time: every term, stemmed ("calls")
    d = dropped[0]
    assert (d.ref, d.type, d.layer) == ("kb://lo", "dropped.relevance.below_floor",
                                        DropLayer.RELEVANCE)
    assert d.floor == 0.15
    assert d.score == pytest.approx((0.756 - 0.75) / 0.25)
    assert "< floor 0.15" in d.reason


def test_relevance_is_the_better_of_coverage_and_rescaled_similarity() -> None:
    a = cand("kb://a", "nothing shared", scores=(("vector", 1),), similarity=0.9)
    b = cand("kb://b", "the refund path", scores=(("fts", 1),))
    kept, _ = relevance_guard([a, b], limits={}, floor=0.0, query="refund timeout",
                              similarity_baseline=0.8)
    got = {c.ref: c.relevance for c in kept}
    assert got["kb://a"] == pytest.approx(0.5)  # (0.9 - 0.8) / 0.2
    assert got["kb://b"] == pytest.approx(0.5)  # one of two terms


def test_only_the_knowledge_layer_faces_the_floor() -> None:
    team = cand("team://m", "unrelated", layer=Layer.TEAM, scores=(("vector", 1),))
    kept, dropped = relevance_guard([team], limits={}, floor=0.9, query="refund")
    assert [c.ref for c in kept] == ["team://m"] and not dropped
    assert kept[0].relevance is None


def test_weak_is_barely_above_the_floor_or_termless_and_dissimilar() -> None:
    query = "refund timeout gateway latency retries quota ledger invoice payout card bank fee"
    strong = cand("kb://s", "refund timeout", scores=(("fts", 1),))  # 2 of 12 terms
    barely = cand("kb://b", "a refund", scores=(("fts", 2),))  # 1 of 12: < 0 + NOISE_MARGIN
    termless = cand("kb://t", "nothing shared", scores=(("vector", 1),), similarity=0.8)
    close = cand("kb://c", "nothing shared", scores=(("vector", 2),), similarity=0.9)
    kept, _ = relevance_guard([strong, barely, termless, close], limits={}, floor=0.0,
                              query=query, similarity_baseline=0.75)
    weak = {c.ref: c.weak for c in kept}
    assert weak == {"kb://s": False, "kb://b": True, "kb://t": True, "kb://c": False}


def test_noise_ratio_is_weak_tokens_over_judged_tokens() -> None:
    def seg(c: Candidate, tokens: int) -> Segment:
        return Segment(id=c.ref, candidate=c, content=c.content, tokens=tokens,
                       content_sha256="")
    segments = [seg(cand("kb://a", relevance=0.9), 30),
                seg(cand("kb://b", relevance=0.2, weak=True), 10),
                seg(cand("session://s/events/1", kind=Kind.SESSION), 500)]  # not judged
    assert noise(segments) == {"retrieved_tokens": 40, "noise_tokens": 10,
                               "noise_ratio": 0.25}
    assert noise([])["noise_ratio"] == 0.0


def test_rescaled_similarity_is_clamped() -> None:
    assert rescaled(None, 0.75) == 0.0
    assert rescaled(0.5, 0.75) == 0.0
    assert rescaled(1.0, 0.75) == 1.0


def test_layer_limit_keeps_best_scores_ties_by_ref() -> None:
    cs = [cand("kb://c", scores=(("fts", 1),)), cand("kb://b", scores=(("fts", 1),)),
          cand("kb://a", scores=(("fts", 2),)), cand("team://m", layer=Layer.TEAM,
                                                     scores=(("fts", 9),))]
    kept, dropped = relevance_guard(cs, limits={Layer.KNOWLEDGE: 1}, floor=0.0)
    assert [c.ref for c in kept] == ["kb://b", "team://m"]  # TEAM has no limit
    assert [(d.ref, d.type) for d in dropped] == [
        ("kb://c", "dropped.relevance.layer_limit"), ("kb://a", "dropped.relevance.layer_limit")]


def test_unscored_pass_untouched_and_are_not_counted() -> None:
    session = cand("session://s/events/1", kind=Kind.SESSION, layer=Layer.KNOWLEDGE,
                   section=Section.SESSION, score=3.0)
    scored = cand("kb://a", scores=(("fts", 1),))
    kept, dropped = relevance_guard([session, scored], limits={Layer.KNOWLEDGE: 1}, floor=0.5)
    assert kept[0].ref == session.ref
    assert kept[0].score == 0.0
    assert kept[0].reason == session.reason
    assert [d.ref for d in dropped] == ["kb://a"]  # floor applies to scored only
