"""Client-supplied embeddings on the real stores and the real e5 embedder (its
``embed_passages`` wrapped to record every call): a memory's ``embedding``, a document's
``chunks`` and a turn's ``query_embedding`` are stored and searched as given and never reach
the model; in a mixed batch only the other items do, in one call. A vector the server could
not store as it was given (wrong dimension, beyond float32, no length) is a 422 naming the
field, and nothing is written. Also: ``parent_session_id`` for a session a turn's
``append_events`` create.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from app.adapters.postgres.db import Sql
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn
from tests.api.test_batch_writes import DOCS, MEMS, count, doc, embed_calls, mem

__all__ = ["embed_calls"]  # the fixture, used by name

DIM = 384
MEM_VECTOR = Sql("SELECT embedding::text FROM memories WHERE tenant_id = :t "
                 "AND memory_id = :m")
CHUNKS = Sql("SELECT chunk_no, text, embedding::text AS embedding FROM knowledge_chunks "
             "WHERE tenant_id = :t AND doc_id = :d ORDER BY chunk_no")
SESSION = Sql("SELECT agent_id, parent_session_id FROM sessions WHERE tenant_id = :t "
              "AND session_id = :s")
# Words no statement or chunk of these tests holds: a hit can only come from the vector.
UNRELATED = "zqxj vrrp kplo"


def vector(seed: int) -> list[float]:
    """A unit vector whose values are float32 exactly (what pgvector keeps)."""
    v = np.random.Generator(np.random.PCG64(seed)).standard_normal(DIM).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


def as_float32(text: str) -> list[float]:
    return [float(np.float32(x)) for x in text.strip("[]").split(",")]


def refs(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [s["ref"] for s in response.json()["manifest"]["segments"]]


def contents(response: httpx.Response) -> str:
    return " ".join(s["content"] for s in response.json()["envelope"]["segments"])


async def test_a_memory_with_its_embedding_is_stored_as_given_and_found_by_it(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    v = vector(1)
    r = await client.post("/v1/memories", headers=bearer(key),
                          json=mem("I prefer the staging cluster in Frankfurt", embedding=v))
    assert r.status_code == 201, r.text
    memory_id = r.json()["memory"]["memory_id"]
    async with container.db.tenant_tx(tenant) as conn:
        stored = await conn.fetchval(MEM_VECTOR, {"t": tenant, "m": memory_id})
    assert as_float32(stored) == v
    found = await client.post("/v1/context", headers=bearer(key),
                              json=turn(query=UNRELATED, query_embedding=v))
    assert any(ref.startswith(f"mem://{memory_id}@") for ref in refs(found))
    assert embed_calls == []


async def test_a_mixed_memory_batch_embeds_only_the_others_in_one_call(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    items = [mem("I prefer answers in German", embedding=vector(2)),
             mem("the refund service runs on Redis 7"),
             mem("deploys happen on Tuesdays", embedding=vector(3)),
             mem("my pager rotation starts on Mondays")]
    r = await client.post("/v1/memories", headers=bearer(key), json={"items": items})
    assert r.status_code == 201, r.text
    assert [i["decision"] for i in r.json()["items"]] == ["accepted"] * 4
    assert embed_calls == [["the refund service runs on Redis 7",
                            "my pager rotation starts on Mondays"]]
    assert await count(container, tenant, MEMS) == 4
    # All client-embedded: no call at all.
    again = await client.post("/v1/memories", headers=bearer(key), json={"items": [
        mem("I prefer dark mode", embedding=vector(4))]})
    assert again.status_code == 201 and len(embed_calls) == 1


def dims(n: int) -> list[float]:
    return [0.1] * n


@pytest.mark.parametrize(("bad", "why"), [
    (dims(DIM - 1), "embedding_dimension"),
    (dims(DIM + 1), "embedding_dimension"),
    ([*dims(DIM - 1), 1e39], "value_error"),  # beyond float32: it would be infinite
    ([*dims(DIM - 1), -1e39], "value_error"),
    ([0.0] * DIM, "value_error"),  # no length: cosine undefined
    ([*dims(DIM - 1), 3e38], "value_error"),  # each value fits, the squared length does not
    ([], "too_short"),
])
async def test_a_vector_the_server_cannot_keep_is_422_naming_the_field(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]], bad: list[float], why: str) -> None:
    key = await make_key(tenant)
    cases: list[tuple[str, Any, list[Any]]] = [
        ("/v1/memories", mem("I prefer tea", embedding=bad), ["body", "embedding"]),
        ("/v1/memories", {"items": [mem("I prefer tea"), mem("I like jazz", embedding=bad)]},
         ["body", "items", 1, "embedding"]),
        ("/v1/knowledge/documents",
         {"items": [doc("a.md", "Refunds time out."), {
             **doc("b.md", ""), "text": None,
             "chunks": [{"text": "one", "embedding": vector(5)},
                        {"text": "two", "embedding": bad}]}]},
         ["body", "items", 1, "chunks", 1, "embedding"]),
        ("/v1/context", turn(query_embedding=bad), ["body", "query_embedding"]),
    ]
    for path, body, loc in cases:
        r = await client.post(path, headers=bearer(key), json=body)
        assert r.status_code == 422, (path, r.text)
        problem = r.json()
        assert r.headers["content-type"] == "application/problem+json"
        assert problem["type"] == "invalid-request"
        errors = problem["errors"]
        assert [e["loc"][:len(loc)] for e in errors] == [loc], (path, errors)
        assert why in errors[0]["type"], errors
        if why == "embedding_dimension":
            assert f"expects {DIM}" in errors[0]["msg"] and str(len(bad)) in errors[0]["msg"]
    assert embed_calls == []
    assert await count(container, tenant, MEMS) == 0
    assert await count(container, tenant, DOCS) == 0


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
async def test_a_non_finite_number_is_not_json_400(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        literal: bytes) -> None:
    key = await make_key(tenant)
    raw = (b'{"statement": "I prefer tea", "scope": {"level": "user", "user_id": "alice"}, '
           b'"origin": "user_stated", "source_session": "s", "owner": "alice", '
           b'"embedding": [' + b"0.1, " * (DIM - 1) + literal + b"]}")
    r = await client.post("/v1/memories", content=raw,
                          headers={**bearer(key), "content-type": "application/json"})
    assert (r.status_code, r.json()["type"]) == (400, "malformed-json"), r.text
    assert await count(container, tenant, MEMS) == 0


async def test_a_document_in_chunks_round_trips_and_is_searched_like_any(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    chunks = [{"text": "Refunds above 500 EUR need a second approver.", "embedding": vector(6)},
              {"text": "The approver is paged through the finance rota.",
               "embedding": vector(7)}]
    body = {**doc("refund-approvals.md", ""), "text": None, "chunks": chunks}
    mixed = {"items": [body, doc("gateway.md", "The gateway times out after 31 seconds.")]}
    r = await client.post("/v1/knowledge/documents", headers=bearer(key), json=mixed)
    assert r.status_code == 201, r.text
    assert [i["chunks"] for i in r.json()["items"]] == [2, 1]
    assert embed_calls == [["The gateway times out after 31 seconds."]]
    async with container.db.tenant_tx(tenant) as conn:
        rows = await conn.fetch(CHUNKS, {"t": tenant, "d": "refund-approvals.md"})
    assert [(row.chunk_no, row.text) for row in rows] == [(0, chunks[0]["text"]),
                                                          (1, chunks[1]["text"])]
    assert [as_float32(row.embedding) for row in rows] == [c["embedding"] for c in chunks]
    meta = await client.get("/v1/knowledge/documents/refund-approvals.md", headers=bearer(key))
    assert meta.json()["chunks"] == 2
    by_vector = await client.post("/v1/context", headers=bearer(key),
                                  json=turn(query=UNRELATED, query_embedding=vector(7)))
    assert "finance rota" in contents(by_vector)
    by_text = await client.post("/v1/context", headers=bearer(key),
                                json=turn(query="who is the second approver for refunds?"))
    assert "second approver" in contents(by_text)
    assert len(embed_calls) == 1  # the turns embedded their queries, not passages


@pytest.mark.parametrize(("patch", "msg"), [
    ({"chunks": [{"text": "x", "embedding": vector(8)}]}, "exactly one"),  # and text
    ({"text": None}, "exactly one"),  # neither
    ({"text": None, "chunks": []}, "at least 1"),
    ({"text": None, "chunks": [{"text": "   ", "embedding": vector(8)}]}, "non-whitespace"),
    ({"text": None, "chunks": [{"text": "no vector"}]}, "Field required"),
])
async def test_a_document_gives_text_or_chunks(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]], patch: dict[str, Any], msg: str) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/knowledge/documents", headers=bearer(key),
                          json={**doc("both.md", "Some text."), **patch})
    assert r.status_code == 422, r.text
    assert any(msg in e["msg"] for e in r.json()["errors"]), r.json()["errors"]
    assert embed_calls == [] and await count(container, tenant, DOCS) == 0


async def test_a_session_a_turn_creates_gets_its_parent_and_agent(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    events = [{"type": "message", "role": "user", "content": "look into the refund timeout"}]
    first = await client.post("/v1/context", headers=bearer(key), json=turn(
        session_id="s_child", append_events=events, parent_session_id="s_parent",
        agent_id="agent:researcher"))
    assert first.status_code == 200, first.text
    # A later turn naming another parent changes nothing: it applies only at creation.
    later = await client.post("/v1/context", headers=bearer(key), json=turn(
        session_id="s_child", append_events=events, parent_session_id="s_other"))
    assert later.status_code == 200, later.text
    async with container.db.tenant_tx(tenant) as conn:
        row = await conn.one(SESSION, {"t": tenant, "s": "s_child"})
    assert (row.agent_id, row.parent_session_id) == ("agent:researcher", "s_parent")
    alone = await client.post("/v1/context", headers=bearer(key),
                              json=turn(session_id="s_x", parent_session_id="s_parent"))
    assert alone.status_code == 422
    assert "parent_session_id" in alone.json()["errors"][0]["msg"]
