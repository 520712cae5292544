from __future__ import annotations

import itertools

import pytest

from app.core.budget import allocate, usable_tokens
from app.core.errors import BudgetTooSmall
from app.core.model import Candidate, DropLayer, Kind, Section
from tests.unit.builders import budget, cand

EVEN = {Section.STABLE: 1 / 3, Section.SESSION: 1 / 3, Section.DYNAMIC: 1 / 3}


def c(ref: str, tokens: int, section: Section = Section.DYNAMIC, **over: object) -> Candidate:
    return cand(ref, "x", tokens=tokens, section=section, **over)


def refs(cs: list[Candidate]) -> list[str]:
    return [x.ref for x in cs]


def test_reserve_that_leaves_nothing_is_too_small() -> None:
    with pytest.raises(BudgetTooSmall, match="reserve_output 100"):
        usable_tokens(budget(100, 100))
    assert usable_tokens(budget(100, 30)) == 70


def test_never_compress_that_cannot_fit_is_too_small() -> None:
    cs = [c("core", 60, never_compress=True), c("q", 20, never_compress=True)]
    with pytest.raises(BudgetTooSmall, match="needs 80 tokens but only 70") as err:
        allocate(cs, budget=budget(100, 30), shares=EVEN)
    assert err.value.type == "budget-too-small"


def test_never_compress_always_goes_in_even_beyond_its_share() -> None:
    cs = [c("core", 60, never_compress=True), c("other", 20)]
    kept, dropped = allocate(cs, budget=budget(70), shares=EVEN)
    assert refs(kept) == ["core"]
    assert dropped[0].type == "dropped.budget.over_total"
    assert dropped[0].layer is DropLayer.BUDGET


def test_fills_by_priority_then_score_then_ref() -> None:
    cs = [c("b", 10, priority=50), c("a", 10, priority=50), c("hi", 10, priority=90),
          c("scored", 10, priority=50, score=0.5)]
    kept, dropped = allocate(cs, budget=budget(30), shares={Section.DYNAMIC: 1.0})
    assert refs(kept) == ["a", "hi", "scored"]
    assert refs([c(d.ref, 0) for d in dropped]) == ["b"]


def test_unused_share_is_given_a_second_chance() -> None:
    # dynamic share is 10 tokens, stable's 90 are unused: dynamic may use the leftover.
    cs = [c("d1", 40), c("d2", 40), c("d3", 40)]
    shares = {Section.STABLE: 0.9, Section.DYNAMIC: 0.1}
    kept, dropped = allocate(cs, budget=budget(100), shares=shares)
    assert refs(kept) == ["d1", "d2"]
    assert [(d.ref, d.type) for d in dropped] == [("d3", "dropped.budget.section_full")]


def test_share_protects_a_section_in_the_first_pass() -> None:
    cs = [c("dyn", 60, priority=90), c("stable", 50, Section.STABLE, priority=10)]
    shares = {Section.STABLE: 0.5, Section.DYNAMIC: 0.5}
    kept, _ = allocate(cs, budget=budget(100), shares=shares)
    assert refs(kept) == ["stable"]  # dyn overflows its share; stable's share was its own


def test_item_larger_than_the_whole_budget_is_over_total() -> None:
    kept, dropped = allocate([c("huge", 500), c("small", 5)], budget=budget(100), shares=EVEN)
    assert refs(kept) == ["small"]
    assert dropped[0].type == "dropped.budget.over_total"


def test_session_history_keeps_newest_first() -> None:
    cs = [c(f"s{i}", 10, Section.SESSION, kind=Kind.SESSION, seq=i) for i in range(5)]
    kept, _ = allocate(cs, budget=budget(30), shares={Section.SESSION: 1.0})
    assert refs(kept) == ["s2", "s3", "s4"]


def pair(call_id: str, seq: int, tokens: int) -> list[Candidate]:
    meta = (("call_id", call_id),)
    return [c(f"call{seq}", tokens, Section.SESSION, kind=Kind.SESSION, seq=seq, meta=meta,
              role="assistant"),
            c(f"result{seq}", tokens, Section.SESSION, kind=Kind.TOOL_RESULT, seq=seq + 1,
              meta=meta, role="tool")]


def test_tool_pairs_are_kept_or_dropped_together() -> None:
    cs = [*pair("c1", 1, 10), *pair("c2", 3, 10), c("s5", 15, Section.SESSION, seq=5)]
    kept, dropped = allocate(cs, budget=budget(40), shares={Section.SESSION: 1.0})
    assert refs(kept) == ["call3", "result3", "s5"]
    assert sorted(d.ref for d in dropped) == ["call1", "result1"]
    assert all("with its pair, 20 tokens" in d.reason for d in dropped)


def test_pair_with_a_pinned_member_is_pinned_whole() -> None:
    cs = pair("c1", 1, 10)
    cs[1] = c("result2", 10, Section.SESSION, seq=2, meta=(("call_id", "c1"),),
              never_compress=True)
    kept, _ = allocate(cs, budget=budget(20), shares={Section.DYNAMIC: 1.0})
    assert refs(kept) == ["call1", "result2"]


@pytest.mark.parametrize(("max_tokens", "reserve"),
                         list(itertools.product([35, 60, 99, 150, 400], [0, 7, 30])))
def test_total_never_exceeds_usable(max_tokens: int, reserve: int) -> None:
    cs = [c("core", 5, never_compress=True),
          *pair("c1", 1, 7), *pair("c2", 3, 13),
          *(c(f"d{i}", 3 + 4 * i, priority=30 + i, score=i / 10) for i in range(8)),
          *(c(f"st{i}", 6 + i, Section.STABLE) for i in range(4)),
          *(c(f"s{i}", 4 + i, Section.SESSION, seq=10 + i) for i in range(6))]
    shares = {Section.STABLE: 0.5, Section.SESSION: 0.4, Section.DYNAMIC: 0.4}  # sums > 1
    kept, dropped = allocate(cs, budget=budget(max_tokens, reserve), shares=shares)
    assert sum(x.tokens for x in kept) <= max_tokens - reserve
    assert len(kept) + len(dropped) == len(cs)
    kept_refs = set(refs(kept))
    assert "core" in kept_refs
    for n in (1, 3):
        assert (f"call{n}" in kept_refs) == (f"result{n}" in kept_refs)
