"""POST /v1/context retrieval sized by the budget, per-request limits and the relevance floor,
end to end on the real stores (E5 embeddings, PostgreSQL, Redis)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import ingest, turn

NOTES = 60


async def corpus(client: httpx.AsyncClient, key: str) -> None:
    """NOTES short, distinct refund-timeout notes, in one batch."""
    items = [{"doc_id": f"note{i}", "version": 1, "domain": "payments",
              "sensitivity": "internal", "trust": "reviewed", "acl": None,
              "text": f"Refund timeout note {i}: the refund call to gateway shard {i} times "
                      f"out after {i + 5} seconds under load."} for i in range(NOTES)]
    r = await client.post("/v1/knowledge/documents", headers=bearer(key), json={"items": items})
    assert r.status_code == 201, r.text


def retrieved(body: dict[str, Any]) -> list[str]:
    return [s["ref"] for s in body["manifest"]["segments"] if s["ref"].startswith("kb://")]


async def ask(client: httpx.AsyncClient, key: str, **extra: Any) -> dict[str, Any]:
    r = await client.post("/v1/context", headers=bearer(key), json=turn(**extra))
    assert r.status_code == 200, r.text
    return dict(r.json())


async def test_a_larger_budget_retrieves_proportionally_more_knowledge(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await corpus(client, key)
    small = await ask(client, key, budget={"max_tokens": 2000, "reserve_output": 500})
    large = await ask(client, key, budget={"max_tokens": 40_000, "reserve_output": 1000})
    few, many = retrieved(small), retrieved(large)
    assert 1 <= len(few) <= 20
    assert len(many) == NOTES  # every note fits 40k: far beyond the old fixed 8
    assert small["manifest"]["retrieval"]["knowledge"] < large["manifest"]["retrieval"][
        "knowledge"] == 100
    assert sum(s["tokens"] for s in large["manifest"]["segments"]
               if s["ref"].startswith("kb://")) > 1000


async def test_per_layer_limit_and_min_score_are_honoured(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await corpus(client, key)
    limited = await ask(client, key, budget={"max_tokens": 40_000, "reserve_output": 1000},
                        retrieval={"knowledge_limit": 5, "memory_limit": 2,
                                   "session_limit": 0})
    assert len(retrieved(limited)) == 5
    assert {k: limited["manifest"]["retrieval"][k] for k in ("knowledge", "memory", "session")
            } == {"knowledge": 5, "memory": 2, "session": 0}
    strict = await ask(client, key, budget={"max_tokens": 40_000, "reserve_output": 1000},
                       retrieval={"min_score": 1.0}, query="refund shard latency budget")
    # the notes hold "refund" and "shard", not "latency" nor "budget": coverage 0.5 < 1.0
    assert retrieved(strict) == []
    floored = [d for d in strict["manifest"]["dropped"]
               if d["type"] == "dropped.relevance.below_floor"]
    assert len(floored) >= 10 and all(d["floor"] == 1.0 and d["score"] < 1.0 for d in floored)


@pytest.mark.parametrize("retrieval", [
    {"knowledge_limit": 101}, {"memory_limit": 1000}, {"session_limit": -1},
    {"min_score": -0.1}, {"min_score": 1.5}, {"knowledge_limit": "many"}, {"depth": 3},
])
async def test_bad_retrieval_settings_are_422(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        retrieval: dict[str, Any]) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/context", headers=bearer(key), json=turn(retrieval=retrieval))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")


CAFETERIA = "Cafeteria menu: Monday lasagna, Tuesday tacos, Wednesday soup of the day."
RUNBOOK = "Refund calls time out when the gateway is slow."


async def test_a_cafeteria_menu_is_dropped_from_a_refund_timeout_turn(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await ingest(client, key, "runbook", RUNBOOK)
    await ingest(client, key, "menu", CAFETERIA)
    body = await ask(client, key)
    assert [r.split("#")[0] for r in retrieved(body)] == ["kb://runbook"]
    (drop,) = [d for d in body["manifest"]["dropped"] if d["ref"].startswith("kb://menu")]
    assert drop["type"] == "dropped.relevance.below_floor"
    assert drop["layer"] == "relevance"
    assert drop["floor"] == 0.15 and 0 <= drop["score"] < 0.15
    assert all(CAFETERIA not in s["content"] for s in body["envelope"]["segments"])


async def test_noise_ratio_counts_admitted_termless_dissimilar_tokens(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await ingest(client, key, "runbook", RUNBOOK)
    await ingest(client, key, "menu", CAFETERIA)
    body = await ask(client, key, retrieval={"min_score": 0.0})  # no floor: the menu is in
    tokens = {s["ref"].split("#")[0]: s["tokens"] for s in body["manifest"]["segments"]
              if s["ref"].startswith("kb://")}
    assert set(tokens) == {"kb://runbook", "kb://menu"}
    noise = body["manifest"]["retrieval"]
    assert noise["retrieved_tokens"] == tokens["kb://runbook"] + tokens["kb://menu"]
    assert noise["noise_tokens"] == tokens["kb://menu"]  # no query term, similarity ~0
    assert noise["noise_ratio"] == pytest.approx(
        tokens["kb://menu"] / noise["retrieved_tokens"], abs=1e-4)
    clean = await ask(client, key)  # the default floor drops the menu: no noise left
    assert clean["manifest"]["retrieval"]["noise_ratio"] == 0.0
    assert clean["manifest"]["retrieval"]["retrieved_tokens"] == tokens["kb://runbook"]
