"""The turn's retrieval depth follows its budget; a request's limits replace the defaults."""

from __future__ import annotations

from app.core.model import Budget, Layer, RetrievalLimits
from app.core.retrieval import POOL_MAX, RetrievalDefaults, budget_depth, retrieval_plan

DEFAULTS = RetrievalDefaults(knowledge_min=8, chunk_tokens=64, event_tokens=32, memory=5,
                             session=4, floor=0.15)


def test_depth_is_what_the_dynamic_share_holds_between_the_minimum_and_the_pool() -> None:
    def depth(max_tokens: int) -> int:
        return budget_depth(Budget(max_tokens=max_tokens, reserve_output=0), 0.5,
                               chunk_tokens=100, minimum=8)
    assert depth(1000) == 8  # 5 chunks fit: the minimum
    assert depth(4000) == 20
    assert depth(10_000) == 50
    assert depth(40_000) == POOL_MAX  # 200 would fit: the pool bounds the SQL


def test_depth_grows_with_the_budget() -> None:
    small = retrieval_plan(Budget(max_tokens=2000, reserve_output=0), 0.45, None, DEFAULTS)
    large = retrieval_plan(Budget(max_tokens=40_000, reserve_output=0), 0.45, None, DEFAULTS)
    assert small.knowledge == 15  # ceil(900 / 64)
    assert large.knowledge == POOL_MAX
    # Other sessions' events are read as deep as the same share holds in events, which are
    # messages, smaller than chunks (issue 17: not a constant 4); memories keep their bound.
    assert (small.session, large.session) == (29, POOL_MAX)  # ceil(900 / 32)
    assert (small.memory, small.floor) == (5, 0.15)


def test_a_request_sets_every_layer_and_the_floor() -> None:
    plan = retrieval_plan(Budget(max_tokens=40_000, reserve_output=0), 0.45,
                          RetrievalLimits(knowledge=40, memory=10, session=0, min_score=0.2),
                          DEFAULTS)
    assert (plan.knowledge, plan.memory, plan.session, plan.floor) == (40, 10, 0, 0.2)
    assert plan.limits() == {Layer.KNOWLEDGE: 40, Layer.SESSION: 0, Layer.USER: 10,
                             Layer.TEAM: 10}


def test_a_partial_request_keeps_the_other_defaults() -> None:
    plan = retrieval_plan(Budget(max_tokens=2000, reserve_output=0), 0.45,
                          RetrievalLimits(min_score=0.0), DEFAULTS)
    assert (plan.knowledge, plan.memory, plan.floor) == (15, 5, 0.0)
