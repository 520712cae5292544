"""Bad input: every case is a clear 4xx problem+json, never a 500, never half-written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import Container
from app.service.admission import Admission
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import checkpoint, session, turn

PROBLEM = "application/problem+json"


def assert_problem(r: httpx.Response, status: int, type_: str) -> dict[str, object]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    body = r.json()
    assert body["type"] == type_ and body["status"] == status
    assert body["title"] and body["detail"]
    return dict(body)


async def test_no_key_unknown_key_and_revoked_key_are_401(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        admin_headers: dict[str, str]) -> None:
    assert_problem(await client.post("/v1/context", json=turn()), 401, "unauthorized")
    assert_problem(await client.post("/v1/context", headers=bearer("cgk_nope"), json=turn()),
                   401, "unauthorized")
    r = await client.post("/v1/admin/keys", headers=admin_headers,
                          json={"tenant_id": tenant, "role": "runtime"})
    key_id, key = r.json()["key_id"], r.json()["api_key"]
    assert (await client.post("/v1/context", headers=bearer(key), json=turn())).status_code == 200
    assert (await client.delete(f"/v1/admin/keys/{key_id}", headers=admin_headers)
            ).status_code == 204
    assert_problem(await client.post("/v1/context", headers=bearer(key), json=turn()),
                   401, "unauthorized")


async def test_admin_endpoints_need_the_platform_token(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    tenant_admin = await make_key(tenant, "admin")
    r = await client.post("/v1/admin/keys", headers=bearer(tenant_admin),
                          json={"tenant_id": tenant, "role": "admin"})
    assert_problem(r, 401, "unauthorized")


async def test_scope_above_the_key_or_another_tenant_is_403(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, other_tenant: str) -> None:
    key = await make_key(tenant, max_data_level="internal", domains=["payments"])
    assert_problem(await client.post("/v1/context", headers=bearer(key),
                                     json=turn(data_level="confidential")), 403, "forbidden-scope")
    assert_problem(await client.post("/v1/context", headers=bearer(key),
                                     json=turn(domain="hr")), 403, "forbidden-scope")
    assert_problem(await client.post("/v1/context", headers=bearer(key),
                                     json=turn(tenant_id=other_tenant)), 403, "forbidden-scope")
    ops = await make_key(tenant, "ops")
    assert_problem(await client.post("/v1/context", headers=bearer(ops), json=turn()),
                   403, "forbidden-scope")
    runtime = await make_key(tenant)
    assert_problem(await client.get("/v1/audit", headers=bearer(runtime)), 403,
                   "forbidden-scope")


@pytest.mark.parametrize(("patch", "field"), [
    ({"budget": {"max_tokens": -5}}, "max_tokens"),
    ({"budget": {"max_tokens": 10**12}}, "max_tokens"),
    ({"budget": {"max_tokens": 1000, "reserve_output": 1000}}, "budget"),
    ({"data_level": "top-secret"}, "data_level"),
    ({"query": 42}, "query"),
    # Ids are opaque printable Unicode (a:b, look-alikes are ids; tests/api/test_ids.py):
    ({"session_id": "a\u0007b"}, "session_id"),  # a control character
    ({"session_id": "a\u200eb"}, "session_id"),  # an invisible format character
    ({"session_id": " sess"}, "session_id"),  # leading whitespace
    ({"session_id": ""}, "session_id"),
    ({"user_id": "u" * 257}, "user_id"),
    ({"query_embedding": [0.1, 0.2]}, "query_embedding"),
    ({"surprise": True}, "surprise"),
])
async def test_invalid_turn_bodies_are_422_with_the_field(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        patch: dict[str, object], field: str) -> None:
    key = await make_key(tenant)
    body = assert_problem(await client.post("/v1/context", headers=bearer(key),
                                            json=turn(**patch)), 422, "invalid-request")
    assert any(field in map(str, e["loc"]) for e in body["errors"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("raw", [
    b'{"user_id": ',
    b'{"user_id": "u1", "query": "q", "budget": {"max_tokens": NaN}}',  # not JSON (orjson)
    b'{"user_id": "\\ud800", "query": "q"}',  # a lone surrogate
])
async def test_malformed_json_is_400(client: httpx.AsyncClient, make_key: KeyMaker,
                                     tenant: str, raw: bytes) -> None:
    key = await make_key(tenant)
    r = await client.post("/v1/context", headers={**bearer(key), "content-type":
                                                  "application/json"}, content=raw)
    assert_problem(r, 400, "malformed-json")


async def test_oversized_body_is_413_and_nothing_is_written(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    huge = [{"type": "message", "role": "user", "content": "x" * 190_000} for _ in range(8)]
    r = await client.post("/v1/sessions/s_big/events", headers=bearer(key),
                          json={"user_id": "alice", "events": huge})
    assert_problem(r, 413, "payload-too-large")
    assert_problem(await client.get("/v1/sessions/s_big/events?user_id=alice",
                                    headers=bearer(key)), 404, "not-found")


async def test_session_of_another_user_is_404(client: httpx.AsyncClient, make_key: KeyMaker,
                                              tenant: str) -> None:
    key = await make_key(tenant)
    await session(client, key, "s_alice")
    r = await client.post("/v1/sessions/s_alice/events", headers=bearer(key), json={
        "user_id": "bob", "events": [{"type": "message", "role": "user", "content": "hi"}]})
    missing = await client.get("/v1/sessions/s_nobody/events?user_id=bob", headers=bearer(key))
    foreign = await client.get("/v1/sessions/s_alice/events?user_id=bob", headers=bearer(key))
    assert_problem(r, 404, "not-found")
    assert_problem(missing, 404, "not-found")
    assert_problem(foreign, 404, "not-found")
    page = await client.get("/v1/sessions/s_alice/events?user_id=alice", headers=bearer(key))
    assert [e["seq"] for e in page.json()["events"]] == [1, 2]


async def test_foreign_tenant_manifest_is_the_same_404_as_a_missing_one(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, other_tenant: str) -> None:
    mine, theirs = await make_key(tenant), await make_key(other_tenant)
    assert (await client.post("/v1/context", headers=bearer(theirs),
                              json=turn(turn_id="turn_x"))).status_code == 200
    foreign = await client.get("/v1/manifests/turn_x", headers=bearer(mine))
    missing = await client.get("/v1/manifests/turn_y", headers=bearer(mine))
    a = assert_problem(foreign, 404, "not-found")
    b = assert_problem(missing, 404, "not-found")
    assert a["title"] == b["title"]
    assert str(a["detail"]).replace("turn_x", "ID") == str(b["detail"]).replace("turn_y", "ID")


async def test_stale_checkpoint_revision_is_409(client: httpx.AsyncClient, make_key: KeyMaker,
                                                tenant: str) -> None:
    key = await make_key(tenant)
    assert await checkpoint(client, key, "t1") == 1
    assert await checkpoint(client, key, "t1", expected_revision=1) == 2
    r = await client.put("/v1/tasks/t1/checkpoint", headers=bearer(key), json={
        "user_id": "alice", "goal": "g", "expected_revision": 1})
    assert_problem(r, 409, "stale-revision")
    first = await client.get("/v1/tasks/t1/checkpoint?revision=1&user_id=alice",
                             headers=bearer(key))
    assert first.json()["revision"] == 1
    bad_kind = await client.put("/v1/tasks/t1/checkpoint", headers=bearer(key), json={
        "user_id": "alice", "goal": "g", "constraints": [{"text": "x", "kind": "maybe"}]})
    assert_problem(bad_kind, 422, "invalid-request")


async def test_unknown_route_and_method_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/nothing"), 404, "not-found")
    r = await client.get("/v1/context")
    assert_problem(r, 405, "method-not-allowed")
    assert r.headers["allow"] == "POST"  # RFC 9110: a 405 says what is allowed


async def test_a_chunked_body_over_the_limit_is_413_and_nothing_is_written(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit must count
        yield b'{"user_id": "alice", "events": [{"type": "message", "role": "user", '
        yield b'"content": "'
        for _ in range(40):
            yield b"x" * 50_000
        yield b'"}]}'

    r = await client.post("/v1/sessions/s_chunked/events", content=chunks(),
                          headers={**bearer(key), "Content-Type": "application/json"})
    assert_problem(r, 413, "payload-too-large")
    assert_problem(await client.get("/v1/sessions/s_chunked/events?user_id=alice",
                                    headers=bearer(key)), 404, "not-found")


async def test_a_key_writes_only_what_it_could_read(client: httpx.AsyncClient,
                                                    make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant, max_data_level="internal", domains=["payments"])
    base = {"doc_id": "d", "version": 1, "text": "x", "trust": "reviewed", "acl": None}
    above = await client.post("/v1/knowledge/documents", headers=bearer(key),
                              json={**base, "sensitivity": "secret", "domain": "payments"})
    outside = await client.post("/v1/knowledge/documents", headers=bearer(key),
                                json={**base, "sensitivity": "internal", "domain": "hr"})
    assert_problem(above, 403, "forbidden-scope")
    assert_problem(outside, 403, "forbidden-scope")


async def test_a_runtime_key_must_name_the_user_of_a_checkpoint(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str) -> None:
    key = await make_key(tenant)
    await checkpoint(client, key, "t_owned")
    assert_problem(await client.get("/v1/tasks/t_owned/checkpoint", headers=bearer(key)),
                   422, "invalid-request")
    assert_problem(await client.get("/v1/tasks/t_owned/checkpoint?user_id=bob",
                                    headers=bearer(key)), 404, "not-found")
    ops = await make_key(tenant, "ops")
    assert (await client.get("/v1/tasks/t_owned/checkpoint", headers=bearer(ops))
            ).status_code == 200


DEEP = '{"n": ' * 950 + "1" + "}" * 950  # past any JSON encoder's recursion: written by hand


@pytest.mark.parametrize(("arguments", "type_"), [
    (DEEP, "json_too_deep"),
    ('{"order": 10000000000000000000000000}', "int_out_of_range"),
    ('{"note": "a\\u0000b"}', "string_nul"),
])
async def test_bodies_past_the_parse_limits_are_422_and_write_nothing(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        arguments: str, type_: str) -> None:
    key = await make_key(tenant)
    headers = {**bearer(key), "Content-Type": "application/json"}
    event = ('{"type": "tool_call", "call_id": "c1", "name": "lookup", "arguments": '
             + arguments + "}")
    context = json.dumps(turn(session_id="limits", append_events=["EVENT"]))
    r = await client.post("/v1/context", headers=headers,
                          content=context.replace('"EVENT"', event))
    body = assert_problem(r, 422, "invalid-request")
    errors = body["errors"]
    assert isinstance(errors, list) and [e["type"] for e in errors] == [type_]
    r = await client.post("/v1/sessions/limits/events", headers=headers,
                          content='{"user_id": "alice", "events": [' + event + "]}")
    assert_problem(r, 422, "invalid-request")
    events = await client.get("/v1/sessions/limits/events?user_id=alice", headers=bearer(key))
    assert events.status_code == 404  # nothing was written: the session does not exist


async def test_a_full_worker_sheds_a_turn_with_503_and_retry_after(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container
        ) -> None:
    key = await make_key(tenant)
    container.admission = Admission(limit=1, wait_s=0.01, metrics=container.metrics)
    async with container.admission.slot():  # another turn holds the only slot
        r = await client.post("/v1/context", headers=bearer(key), json=turn())
    body = assert_problem(r, 503, "overloaded")
    assert r.headers["Retry-After"] == "1" and "in flight" in str(body["detail"])
    assert (await client.post("/v1/context", headers=bearer(key), json=turn())).status_code \
        == 200
