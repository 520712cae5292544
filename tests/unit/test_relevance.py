from __future__ import annotations

import pytest

from app.core.guards.relevance import relevance_guard, rrf
from app.core.model import DropLayer, Kind, Layer, Section
from tests.unit.builders import cand


def test_rrf_fuses_rankers() -> None:
    kept, _ = relevance_guard([cand(scores=(("fts", 1), ("vector", 3)))], limits={}, floor=0.0)
    assert kept[0].score == pytest.approx(1 / 61 + 1 / 63)
    assert "rrf 0.0323 (fts#1, vector#3)" in kept[0].reason


def test_same_ref_from_two_rankers_is_one_candidate() -> None:
    a = cand("kb://a", scores=(("vector", 2),), reason="retrieved")
    b = cand("kb://a", scores=(("fts", 1),))
    kept, dropped = relevance_guard([a, b], limits={}, floor=0.0)
    assert len(kept) == 1
    assert not dropped
    assert kept[0].scores == (("fts", 1), ("vector", 2))
    assert kept[0].score == pytest.approx(1 / 61 + 1 / 62)


def test_a_ranker_delivered_twice_counts_once_with_its_best_rank() -> None:
    a = cand("kb://a", scores=(("vector", 5),))
    b = cand("kb://a", scores=(("vector", 2),))
    kept, _ = relevance_guard([a, b], limits={}, floor=0.0)
    assert kept[0].scores == (("vector", 2),)
    assert rrf((("v", 2), ("v", 7)), 60) == pytest.approx(1 / 62)


def test_below_floor_is_dropped() -> None:
    hi = cand("kb://hi", scores=(("fts", 1),))
    lo = cand("kb://lo", scores=(("fts", 50),))
    kept, dropped = relevance_guard([hi, lo], limits={}, floor=1 / 80)
    assert [c.ref for c in kept] == ["kb://hi"]
    assert (dropped[0].ref, dropped[0].type, dropped[0].layer) == (
        "kb://lo", "dropped.relevance.below_floor", DropLayer.RELEVANCE)


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
