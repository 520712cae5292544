"""RedisSessionTail, RedisReplayCache and the client helpers, against a real Redis.

Each test has its own key prefix (from ``uid``) and deletes its keys afterwards, so tests
never see each other's data and never depend on order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from app.adapters.redis.client import RedisClient, open_redis, ping
from app.adapters.redis.replay import RedisReplayCache
from app.adapters.redis.session_tail import (
    Derived,
    RedisSessionTail,
    encode_event,
)
from app.core.ids import escape_segment
from app.core.model import Finding, SessionEvent
from app.core.tail import is_complete

TTL = 3600
DERIVED = {"tokenizer": "o200k_base", "detectors": "fp1"}


@pytest.fixture
def prefix(uid: str) -> str:
    return f"ctxgate-test-{uid}"


@pytest.fixture
async def client(any_redis_url: str, prefix: str) -> AsyncIterator[RedisClient]:
    r = open_redis(any_redis_url)
    try:
        yield r
    finally:
        for key in [k async for k in r.scan_iter(match=f"{prefix}:*")]:
            await r.delete(key)  # one key per command: a cluster refuses cross-slot ones
        await r.aclose()


@pytest.fixture
def tail(client: RedisClient, prefix: str) -> RedisSessionTail:
    return RedisSessionTail(client, prefix=prefix, max_len=5, ttl_s=TTL, **DERIVED)


def ev(seq: int, **kw: object) -> SessionEvent:
    return SessionEvent(seq=seq, type="message", role="user", content=f"m{seq}", **kw)  # type: ignore[arg-type]


def events(first: int, last: int) -> list[SessionEvent]:
    return [ev(i) for i in range(first, last + 1)]


async def test_append_read_round_trip_keeps_every_field(
    tail: RedisSessionTail, tenant: str
) -> None:
    when = datetime(2026, 12, 1, 9, 30, 15, 123456, tzinfo=UTC)
    full = [
        SessionEvent(seq=1, type="message", role="user", content="重启 ✅ <|endoftext|>",
                     created_at=when),
        SessionEvent(seq=2, type="tool_call", role="assistant", call_id="c1", name="restart",
                     arguments={"svc": "ingest", "force": False, "n": [1, 2.5, None]}),
        SessionEvent(seq=3, type="tool_result", role="tool", call_id="c1", content="failed",
                     is_error=True, created_at=datetime(2026, 12, 1, 9, 31),  # naive stays naive
                     tokens=2, findings=(Finding(type="pii.email", action="mask", start=1,
                                                 end=4),)),
    ]
    await tail.append(tenant_id=tenant, session_id="s1", events=full[:1])
    await tail.append(tenant_id=tenant, session_id="s1", events=full[1:])
    assert await tail.read(tenant_id=tenant, session_id="s1") == full


async def test_derived_fields_are_read_back_only_under_what_made_them(
    tail: RedisSessionTail, client: RedisClient, prefix: str, tenant: str
) -> None:
    found = (Finding(type="secret.aws", action="drop", start=0, end=3),)
    await tail.append(tenant_id=tenant, session_id="s1",
                      events=[ev(1, tokens=7, findings=found), ev(2, findings=()), ev(3)])
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert [(e.tokens, e.findings) for e in got] == [(7, found), (None, ()), (None, None)]
    for other, expected in (
            ({"tokenizer": "cl100k_base", "detectors": "fp1"}, [(None, found), (None, ())]),
            ({"tokenizer": "o200k_base", "detectors": "fp2"}, [(7, None), (None, None)])):
        read = await RedisSessionTail(client, prefix=prefix, max_len=5, ttl_s=TTL,
                                      **other).read(tenant_id=tenant, session_id="s1")
        assert [(e.tokens, e.findings) for e in read] == [*expected, (None, None)]
    key = tail.key(tenant_id=tenant, session_id="s2")
    for tokens, findings in (
            (b'"x"', b'"x"'), (b'["o200k_base"]', b'["fp1"]'), (b'["o200k_base", -1]',
             b'["fp1", [["t", "mask", 3, 1]]]'), (b'["o200k_base", true]',
             b'["fp1", [["t", "explode", 0, 1]]]'), (b'["o200k_base", 1.5]',
             b'["fp1", [["t", "mask", 0]]]'), (b'{"n": 3}', b'["fp1", [[1, "mask", 0, 1]]]')):
        await client.rpush(key, b'{"seq":1,"type":"message","tokens":' + tokens
                           + b',"findings":' + findings + b"}")
    got = await tail.read(tenant_id=tenant, session_id="s2")
    assert len(got) == 6 and {(e.tokens, e.findings) for e in got} == {(None, None)}


async def test_missing_tail_reads_empty(tail: RedisSessionTail, tenant: str) -> None:
    assert await tail.read(tenant_id=tenant, session_id="nope") == []


async def test_append_trims_to_max_len_and_sets_ttl(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 3))
    await tail.append(tenant_id=tenant, session_id="s1", events=events(4, 8))
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert [e.seq for e in got] == [4, 5, 6, 7, 8]
    assert is_complete(got, last_seq=8, max_len=5)
    ttl = await client.ttl(tail.key(tenant_id=tenant, session_id="s1"))
    assert 0 < ttl <= TTL


async def test_one_append_larger_than_max_len_keeps_the_last(
    tail: RedisSessionTail, tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 12))
    assert [e.seq for e in await tail.read(tenant_id=tenant, session_id="s1")] == list(
        range(8, 13))


async def test_append_refreshes_ttl(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    key = tail.key(tenant_id=tenant, session_id="s1")
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 1))
    await client.expire(key, 10)
    await tail.append(tenant_id=tenant, session_id="s1", events=events(2, 2))
    assert await client.ttl(key) > 10


async def test_replace_overwrites_and_trims(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=[ev(1), ev(7), ev(3)])
    await tail.replace(tenant_id=tenant, session_id="s1", events=events(1, 9))
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert [e.seq for e in got] == [5, 6, 7, 8, 9]
    assert await client.ttl(tail.key(tenant_id=tenant, session_id="s1")) > 0
    await tail.replace(tenant_id=tenant, session_id="s1", events=[])
    assert await tail.read(tenant_id=tenant, session_id="s1") == []


async def test_drop_forgets_the_tail(tail: RedisSessionTail, tenant: str) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 2))
    await tail.drop(tenant_id=tenant, session_id="s1")
    assert await tail.read(tenant_id=tenant, session_id="s1") == []


async def test_tenants_are_namespaced(
    tail: RedisSessionTail, tenant: str, other_tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="shared", events=[ev(1)])
    await tail.append(tenant_id=other_tenant, session_id="shared",
                      events=[SessionEvent(seq=1, type="message", content="secret of B")])
    mine = await tail.read(tenant_id=tenant, session_id="shared")
    assert [e.content for e in mine] == ["m1"]
    assert tail.key(tenant_id=tenant, session_id="shared") != tail.key(
        tenant_id=other_tenant, session_id="shared")
    assert f":t:{tenant}:" in tail.key(tenant_id=tenant, session_id="shared")


async def test_flushed_key_reads_empty_and_is_incomplete(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 4))
    assert is_complete(await tail.read(tenant_id=tenant, session_id="s1"), last_seq=4,
                       max_len=5)
    await client.delete(tail.key(tenant_id=tenant, session_id="s1"))  # flush / expiry / restart
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert got == []
    assert not is_complete(got, last_seq=4, max_len=5)


async def test_append_after_expiry_leaves_a_partial_tail(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    await tail.append(tenant_id=tenant, session_id="s1", events=events(1, 3))
    await client.delete(tail.key(tenant_id=tenant, session_id="s1"))
    await tail.append(tenant_id=tenant, session_id="s1", events=events(4, 4))
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert [e.seq for e in got] == [4]
    assert not is_complete(got, last_seq=4, max_len=5)


async def test_corrupt_entry_is_skipped_and_detected(
    tail: RedisSessionTail, client: RedisClient, tenant: str
) -> None:
    key = tail.key(tenant_id=tenant, session_id="s1")
    derived = Derived(**DERIVED)
    await client.rpush(key, encode_event(ev(1), derived), b"{not json",
                       encode_event(ev(3), derived))
    got = await tail.read(tenant_id=tenant, session_id="s1")
    assert [e.seq for e in got] == [1, 3]
    assert not is_complete(got, last_seq=3, max_len=5)


@pytest.mark.parametrize(
    ("seqs", "last_seq", "max_len", "expected"),
    [
        ([], 0, 5, True),  # a session with no events yet
        ([1, 2, 3], 3, 5, True),
        ([4, 5, 6, 7, 8], 8, 5, True),
        ([], 3, 5, False),  # flushed
        ([2, 3], 3, 5, False),  # short: missing the head
        ([1, 2], 3, 5, False),  # behind the archive
        ([1, 2, 3, 4], 3, 5, False),  # ahead of the archive
        ([1, 3, 2], 3, 5, False),  # out of order (racing appends)
        ([1, 2, 2], 3, 5, False),  # duplicate
        ([3, 4, 5, 6, 7], 8, 5, False),  # right length, wrong window
        ([5, 6, 7, 8], 8, 5, False),  # partial window
        ([1], 1, 0, False),  # nonsense max_len
    ],
)
def test_is_complete(seqs: list[int], last_seq: int, max_len: int, expected: bool) -> None:
    assert is_complete([ev(s) for s in seqs], last_seq=last_seq, max_len=max_len) is expected


def test_key_builder_rejects_empty_ids(tail: RedisSessionTail, tenant: str) -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        tail.key(tenant_id="", session_id="s1")
    with pytest.raises(ValueError, match="must not be empty"):
        tail.key(tenant_id=tenant, session_id="")


@pytest.mark.parametrize("odd", ["a:b", "a{b", "b}", "a b", "a*", "a:tail", "x" * 256])
def test_key_builder_escapes_ids(tail: RedisSessionTail, tenant: str, odd: str) -> None:
    # An id is one segment, whatever it holds (the escaping itself: tests/unit/test_ids.py).
    for key in (tail.key(tenant_id=odd, session_id="s1"), tail.key(tenant_id=tenant,
                                                                    session_id=odd)):
        assert len(key.split(":")) == len(tail.key(tenant_id=tenant, session_id="s1")
                                          .split(":"))
        assert not set(key) & set("*?[] ")
        # The one hash tag is the session's own, whatever the ids hold: {s:<escaped id>}.
        assert key.count("{") == key.count("}") == 1
        assert key[key.index("{"):key.index("}") + 1] in ("{s:s1}", "{s:" + escape_segment(
            odd) + "}")


def test_constructor_rejects_bad_config(client: RedisClient) -> None:
    with pytest.raises(ValueError, match="positive"):
        RedisSessionTail(client, prefix="p", max_len=0, ttl_s=1, **DERIVED)
    with pytest.raises(ValueError, match="prefix"):
        RedisSessionTail(client, prefix="p {x}", max_len=1, ttl_s=1, **DERIVED)


async def test_replay_round_trip_is_byte_identical(
    client: RedisClient, prefix: str, tenant: str, other_tenant: str
) -> None:
    cache = RedisReplayCache(client, prefix=prefix, ttl_s=TTL)
    body = '{"segments":["重启 ✅"],"n":1}'.encode() + b"\x00\xff"
    assert await cache.get(tenant, "turn_1") is None
    await cache.put(tenant, "turn_1", body)
    assert await cache.get(tenant, "turn_1") == body
    assert await cache.get(other_tenant, "turn_1") is None
    assert 0 < await client.ttl(cache.key(tenant, "turn_1")) <= TTL
    await cache.delete(tenant, "turn_1")
    assert await cache.get(tenant, "turn_1") is None


async def test_ping(client: RedisClient) -> None:
    assert await ping(client)
    dead = open_redis("redis://127.0.0.1:9/0")  # nothing listens on the discard port
    try:
        assert not await ping(dead)
    finally:
        await dead.aclose()
