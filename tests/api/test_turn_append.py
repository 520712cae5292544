"""One call per turn: ``append_events`` on POST /v1/context, appended once per turn_id.

On the real stores: the archive count (PostgreSQL) and the hot tail (Redis) are read after
each retry shape — a lost response, an assembly that failed after the append, two attempts
at once — and stay at one append.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from app.adapters.embedders.errors import EmbedderError
from app.adapters.postgres.db import Sql
from app.adapters.redis.keys import replay_key
from app.adapters.redis.session_tail import RedisSessionTail
from app.main import Container
from app.service.detector_cache import fingerprint
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import session, turn
from tests.api.test_erasures import wait_finished

EMBEDDING = [0.05] * 384
NEW = [{"type": "message", "role": "user",
        "content": "The refund webhook now answers HTTP 504 after exactly 31 seconds"},
       {"type": "tool_call", "call_id": "c1", "name": "grep", "arguments": {"q": "504"}},
       {"type": "tool_result", "call_id": "c1", "content": "gateway.yaml: timeout 31s"}]
COUNT = Sql("SELECT count(*) FROM session_events WHERE tenant_id = :t AND session_id = :s")
RECORDED = Sql("SELECT count(*) FROM turn_appends WHERE tenant_id = :t")


def body(**extra: Any) -> dict[str, Any]:
    return turn(**{"session_id": "s_one", "turn_id": "turn_one", "append_events": NEW,
                   "query_embedding": EMBEDDING, **extra})


async def archived(container: Container, tenant: str, session_id: str = "s_one") -> int:
    async with container.db.tenant_tx(tenant) as conn:
        return int(await conn.fetchval(COUNT, {"t": tenant, "s": session_id}))


async def recorded(container: Container, tenant: str) -> int:
    async with container.db.tenant_tx(tenant) as conn:
        return int(await conn.fetchval(RECORDED, {"t": tenant}))


async def tail_seqs(container: Container, tenant: str, session_id: str = "s_one") -> list[int]:
    s = container.settings
    tail = RedisSessionTail(container.redis, prefix=s.redis_prefix,  # type: ignore[arg-type]
                            max_len=s.session_tail_len, ttl_s=60, tokenizer=s.tokenizer,
                            detectors=fingerprint())
    return [e.seq for e in await tail.read(tenant_id=tenant, session_id=session_id)]


async def forget_replay(container: Container, tenant: str, turn_id: str) -> None:
    await container.redis.delete(  # type: ignore[attr-defined]
        replay_key(container.settings.redis_prefix, tenant, turn_id))


async def test_appended_events_are_in_the_turn_they_came_with(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    await session(client, key, "s_one", n=2)
    r = await client.post("/v1/context", headers=bearer(key), json=body())
    assert r.status_code == 200, r.text
    assert r.json()["appended"] == {"seqs": [3, 4, 5]}
    contents = [s["content"] for s in r.json()["envelope"]["segments"]]
    assert any("answers HTTP 504 after exactly 31 seconds" in c for c in contents)
    assert any("gateway.yaml: timeout 31s" in c for c in contents)
    page = await client.get("/v1/sessions/s_one/events", headers=bearer(key),
                            params={"user_id": "alice"})
    assert [(e["seq"], e["type"]) for e in page.json()["events"][2:]] == \
        [(3, "message"), (4, "tool_call"), (5, "tool_result")]
    assert await tail_seqs(container, tenant) == [1, 2, 3, 4, 5]
    # A turn without append_events answers as before: no "appended" field.
    plain = await client.post("/v1/context", headers=bearer(key),
                              json=turn(session_id="s_one", query_embedding=EMBEDDING))
    assert plain.status_code == 200 and "appended" not in plain.json()


async def test_a_retried_turn_id_appends_once(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    first = await client.post("/v1/context", headers=bearer(key), json=body())
    assert first.status_code == 200, first.text
    # Lost response, replay entry there: the same bytes, nothing appended.
    again = await client.post("/v1/context", headers=bearer(key), json=body())
    assert again.content == first.content
    # Replay entry gone from Redis (evicted, Redis down, or the process killed between the
    # manifest's commit and the Redis write): the response stored with the manifest answers.
    await forget_replay(container, tenant, "turn_one")
    late = await client.post("/v1/context", headers=bearer(key), json=body())
    assert late.status_code == 200 and late.content == first.content
    # A different request under the used turn_id: 409 before anything is appended.
    other = await client.post("/v1/context", headers=bearer(key), json=body(
        append_events=[{"type": "message", "role": "user", "content": "something else"}]))
    assert other.status_code == 409
    assert await archived(container, tenant) == 3
    assert await tail_seqs(container, tenant) == [1, 2, 3]
    assert await recorded(container, tenant) == 1


async def test_a_retry_after_a_failed_assembly_reuses_the_append(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container, monkeypatch: pytest.MonkeyPatch) -> None:
    """The append committed, then the turn failed (the query embedder was down: 503); the
    retry assembles over the same events and reports their seqs."""
    key = await make_key(tenant)
    real = container.embedder.embed_query

    async def down(text: str) -> list[float]:
        raise EmbedderError("down for the test")

    monkeypatch.setattr(container.embedder, "embed_query", down)
    req = turn(session_id="s_one", turn_id="turn_fail", append_events=NEW)
    failed = await client.post("/v1/context", headers=bearer(key), json=req)
    assert failed.status_code == 503, failed.text
    assert await archived(container, tenant) == 3
    monkeypatch.setattr(container.embedder, "embed_query", real)
    retry = await client.post("/v1/context", headers=bearer(key), json=req)
    assert retry.status_code == 200, retry.text
    assert retry.json()["appended"] == {"seqs": [1, 2, 3]}
    assert any("exactly 31 seconds" in s["content"]
               for s in retry.json()["envelope"]["segments"])
    assert await archived(container, tenant) == 3
    assert await tail_seqs(container, tenant) == [1, 2, 3]


async def test_concurrent_attempts_of_one_turn_append_once(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    answers = await asyncio.gather(*(
        client.post("/v1/context", headers=bearer(key), json=body()) for _ in range(4)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
    assert len({a.content for a in answers}) == 1
    assert answers[0].json()["appended"] == {"seqs": [1, 2, 3]}
    assert await archived(container, tenant) == 3
    assert await recorded(container, tenant) == 1
    assert sorted(await tail_seqs(container, tenant)) == [1, 2, 3]


async def test_server_made_turn_ids_append_every_time(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    """Without a turn_id nobody can retry the turn, so two calls are two turns."""
    key = await make_key(tenant)
    req = turn(session_id="s_one", append_events=NEW[:1], query_embedding=EMBEDDING)
    seqs = [(await client.post("/v1/context", headers=bearer(key), json=req)).json()
            ["appended"]["seqs"] for _ in range(2)]
    assert seqs == [[1], [2]]
    assert await recorded(container, tenant) == 0


async def test_append_events_needs_a_session_id(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/context", headers=bearer(key),
                          json=turn(append_events=NEW, query_embedding=EMBEDDING))
    assert r.status_code == 422, r.text
    assert "append_events needs a session_id" in r.json()["errors"][0]["msg"]
    bad = await client.post("/v1/context", headers=bearer(key), json=body(
        append_events=[{"type": "message", "role": "robot", "content": "x"}]))
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["loc"][:3] == ["body", "append_events", 0]
    empty = await client.post("/v1/context", headers=bearer(key), json=body(append_events=[]))
    assert empty.status_code == 422


async def test_another_users_session_is_404_and_nothing_is_appended(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    await session(client, key, "s_one", user="bob", n=2)
    r = await client.post("/v1/context", headers=bearer(key), json=body())
    assert r.status_code == 404, r.text
    assert await archived(container, tenant) == 2
    assert await recorded(container, tenant) == 0
    assert await tail_seqs(container, tenant) == [1, 2]


async def test_erasing_the_user_takes_the_turn_records_with_the_sessions(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key, ops, admin = (await make_key(tenant), await make_key(tenant, "ops"),
                       await make_key(tenant, "admin"))
    assert (await client.post("/v1/context", headers=bearer(key), json=body())).status_code \
        == 200
    assert await recorded(container, tenant) == 1
    container.erasure_worker.start()  # ASGITransport runs no lifespan
    try:
        r = await client.post("/v1/erasures", headers=bearer(admin), json={"user_id": "alice"})
        assert r.status_code == 202, r.text
        done = await wait_finished(client, ops, r.json()["erasure_id"])
    finally:
        await container.erasure_worker.stop()
    assert done["status"] == "done", done
    assert await recorded(container, tenant) == 0
    async with container.db.tenant_tx(tenant) as conn:  # the stored response went too
        assert await conn.fetchval(Sql(
            "SELECT count(*) FROM manifests WHERE tenant_id = :t AND replay IS NOT NULL"),
            {"t": tenant}) == 0


async def test_an_append_with_an_idempotency_key_is_applied_once(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    """The events endpoint's own retry: the response of the first attempt was lost, the
    client sends the same request again (sequentially and concurrently)."""
    key = await make_key(tenant)
    body = {"user_id": "alice", "events": NEW}
    headers = {**bearer(key), "Idempotency-Key": "append-1"}
    first = await client.post("/v1/sessions/idem/events", headers=headers, json=body)
    again = await asyncio.gather(*(client.post("/v1/sessions/idem/events", headers=headers,
                                               json=body) for _ in range(4)))
    assert first.status_code == 201, first.text
    assert {r.status_code for r in again} == {201}
    assert {tuple(r.json()["seqs"]) for r in again} == {tuple(first.json()["seqs"])}
    other = await client.post("/v1/sessions/idem/events", headers=headers,
                              json={**body, "events": NEW[:1]})
    assert other.status_code == 409 and other.json()["type"] == "conflict"
    # A new key is a new append; no key is always a new append.
    assert (await client.post("/v1/sessions/idem/events", json=body, headers={
        **bearer(key), "Idempotency-Key": "append-2"})).json()["seqs"] == [4, 5, 6]
    events = await client.get("/v1/sessions/idem/events?user_id=alice", headers=bearer(key))
    assert [e["seq"] for e in events.json()["events"]] == [1, 2, 3, 4, 5, 6]
