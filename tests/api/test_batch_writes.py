"""Batch writes: POST /v1/memories and /v1/knowledge/documents with {"items": [...]}.

On the real stores and the real e5 embedder, whose ``embed_passages`` is wrapped to count
its calls: one per batch, and only for what the write gate could store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from app.adapters.postgres.db import Sql
from app.main import Container
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

DOCS = Sql("SELECT count(*) FROM knowledge_documents WHERE tenant_id = :t")
MEMS = Sql("SELECT count(*) FROM memories WHERE tenant_id = :t")


def mem(statement: str, **extra: Any) -> dict[str, Any]:
    return {"statement": statement, "scope": {"level": "user", "user_id": "alice"},
            "origin": "user_stated", "source_session": "sess_1", "owner": "alice", **extra}


def doc(doc_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"doc_id": doc_id, "version": 1, "text": text, "domain": "payments",
            "sensitivity": "internal", "trust": "reviewed", "acl": None, **extra}


@pytest.fixture
def embed_calls(container: Container, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts of every ``embed_passages`` call on the container's (real) embedder."""
    calls: list[list[str]] = []
    real = container.embedder.embed_passages

    async def counting(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return await real(texts)

    monkeypatch.setattr(container.embedder, "embed_passages", counting)
    return calls


async def count(container: Container, tenant: str, sql: Sql) -> int:
    async with container.db.tenant_tx(tenant) as conn:
        return int(await conn.fetchval(sql, {"t": tenant}))


async def test_a_memory_batch_is_one_embedding_call_and_per_item_decisions(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    items = [
        mem("I prefer answers in German"),
        mem("my github token is ghp_" + "a1B2" * 9),  # refused before any embedding
        mem("I prefer answers in German."),  # the first item, again: a duplicate
        mem("the timeout is probably the retry storm", origin="model_inference",
            task_id="task_1"),
        mem("the refund service runs on Redis 7",
            scope={"level": "user", "user_id": "bob"}, owner="bob"),
    ]
    r = await client.post("/v1/memories", headers=bearer(key), json={"items": items})
    assert r.status_code == 201, r.text
    got = r.json()["items"]
    assert [(i["decision"], i["type"]) for i in got] == [
        ("accepted", "memory.accepted"), ("rejected", "memory.secret"),
        ("duplicate", "memory.duplicate"), ("hypothesis", "memory.hypothesis"),
        ("accepted", "memory.accepted")]
    assert got[2]["memory"]["memory_id"] == got[0]["memory"]["memory_id"]
    assert got[1]["memory"] is None
    assert len(embed_calls) == 1
    assert len(embed_calls[0]) == 4 and not any("ghp_" in t for t in embed_calls[0])
    assert await count(container, tenant, MEMS) == 3
    # Recalled like any memory.
    t = await client.post("/v1/context", headers=bearer(key),
                          json=turn(query="which language do I prefer for answers?"))
    refs = [s["ref"] for s in t.json()["manifest"]["segments"]]
    assert f"mem://{got[0]['memory']['memory_id']}@v2" in refs, refs


async def test_a_batch_the_gate_refuses_whole_is_200_and_embeds_nothing(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/memories", headers=bearer(key), json={"items": [
        mem("the build artefact is in /tmp/build-4711/out.jar"),
        mem("我的身份证号是 11010519491231002X")]})
    assert r.status_code == 200, r.text
    assert [i["type"] for i in r.json()["items"]] == ["memory.temporary",
                                                      "memory.personal_data"]
    assert embed_calls == []


@pytest.mark.parametrize("path", ["/v1/memories", "/v1/knowledge/documents"])
async def test_a_bad_batch_is_refused_whole(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]], path: str) -> None:
    key = await make_key(tenant)
    one = mem if path == "/v1/memories" else (lambda s, **kw: doc(f"d{len(s)}", s, **kw))
    good = [one(f"refund note number {i} " + "x" * i) for i in range(5)]

    async def post(body: Any) -> httpx.Response:
        return await client.post(path, headers=bearer(key), json=body)

    too_many = await post({"items": good * 21})
    assert too_many.status_code == 422, too_many.text
    assert (await post({"items": []})).status_code == 422
    bad = [*good[:3], {**good[3], "sensitivity": "top"}, good[4]]
    invalid = await post({"items": bad})
    assert invalid.status_code == 422
    assert [e["loc"] for e in invalid.json()["errors"]] == \
        [["body", "items", 3, "sensitivity"]]
    alone = await post({**good[3], "sensitivity": "top"})  # the single form's loc, as before
    assert [e["loc"] for e in alone.json()["errors"]] == [["body", "sensitivity"]]
    foreign = await post({"items": [*good[:2], {**good[2], "tenant_id": "someone-else"}]})
    assert foreign.status_code == 403
    assert foreign.json()["detail"].startswith("items[2]: ")
    assert embed_calls == []
    assert await count(container, tenant, MEMS) == 0
    assert await count(container, tenant, DOCS) == 0


async def test_a_document_batch_is_one_embedding_call_and_one_write(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        embed_calls: list[list[str]]) -> None:
    key = await make_key(tenant)
    long_text = " ".join(f"Section {i}: the refund webhook retries with backoff {i} s."
                         for i in range(120))
    items = [doc("runbook.refund.md", "Refunds time out after 31 seconds at the gateway."),
             doc("runbook.long.md", long_text),
             doc("runbook.refund.md", "Refunds time out after 45 seconds at the gateway.",
                 version=2)]
    r = await client.post("/v1/knowledge/documents", headers=bearer(key),
                          json={"items": items})
    assert r.status_code == 201, r.text
    got = r.json()["items"]
    assert (got[0]["doc_id"], got[0]["chunks"]) == ("runbook.refund.md", 1)
    assert got[1]["chunks"] > 1
    assert len(embed_calls) == 1
    assert len(embed_calls[0]) == sum(i["chunks"] for i in got)
    assert await count(container, tenant, DOCS) == 3
    t = await client.post("/v1/context", headers=bearer(key),
                          json=turn(query="after how many seconds do refunds time out?"))
    contents = " ".join(s["content"] for s in t.json()["envelope"]["segments"])
    assert "45 seconds" in contents and "31 seconds" not in contents
    # The single form answers as before.
    one = await client.post("/v1/knowledge/documents", headers=bearer(key),
                            json=doc("runbook.one.md", "One document alone."))
    assert one.status_code == 201 and set(one.json()) == {"doc_id", "version", "chunks"}
