from __future__ import annotations

from datetime import timedelta

from app.core.dedupe import content_key, dedupe
from app.core.model import Candidate, DropLayer, Freshness, Section, Trust
from tests.unit.builders import NOW, cand


def kept_ref(*cs: Candidate) -> str:
    kept, dropped = dedupe(cs)
    assert len(kept) == 1
    assert len(dropped) == len(cs) - 1
    return kept[0].ref


def test_normalization_collapses_whitespace_and_case() -> None:
    assert content_key("Refund  API\n times OUT") == content_key("refund api times out")
    assert content_key("a b") != content_key("ab")


def test_best_trust_wins_and_drop_names_the_kept_ref() -> None:
    a = cand("kb://a", "Same  fact", trust=Trust.UNTRUSTED)
    b = cand("mem://b", "same fact", trust=Trust.REVIEWED)
    kept, dropped = dedupe([a, b])
    assert kept == [b]
    d = dropped[0]
    assert (d.ref, d.layer, d.type) == ("kb://a", DropLayer.DEDUPE, "dropped.dedupe.duplicate")
    assert d.reason == "same content as mem://b"


def test_then_newest_then_priority_then_ref() -> None:
    old = cand("kb://old", "x", freshness=Freshness(observed_at=NOW - timedelta(days=1)))
    new = cand("kb://new", "x", freshness=Freshness(observed_at=NOW))
    unknown = cand("kb://unknown", "x")
    assert kept_ref(old, unknown, new) == "kb://new"
    assert kept_ref(cand("kb://lo", "x", priority=10), cand("kb://hi", "x", priority=90)) \
        == "kb://hi"
    assert kept_ref(cand("kb://b", "x"), cand("kb://a", "x")) == "kb://a"


def test_never_compress_is_never_deduped_away_for_unpinned_content() -> None:
    pinned = cand("task://t#core", "x", trust=Trust.INFERRED, never_compress=True)
    assert kept_ref(cand("kb://a", "x", trust=Trust.SYSTEM), pinned) == "task://t#core"


def test_distinct_contents_and_order_are_kept() -> None:
    cs = [cand("a", "one"), cand("b", "two"), cand("c", "ONE")]
    kept, dropped = dedupe(cs)
    assert [c.ref for c in kept] == ["a", "b"]
    assert [d.ref for d in dropped] == ["c"]


def test_session_transcript_is_exempt() -> None:
    cs = [cand("s1", "yes", section=Section.SESSION), cand("s2", "yes", section=Section.SESSION),
          cand("kb://yes", "yes")]
    kept, dropped = dedupe(cs)
    assert kept == cs
    assert not dropped
