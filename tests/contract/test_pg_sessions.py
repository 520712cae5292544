"""PgSessionArchive against the real server: owner fixing, ordering, concurrent appends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.sessions import PgSessionArchive
from app.core.errors import NotFound
from app.ports import NewEvent, SessionOwner


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=8)
    yield database
    await database.close()


ALICE = SessionOwner(user_id="alice", agent_id="agent-1", parent_session_id="parent-0")


def msg(content: str) -> NewEvent:
    return NewEvent(type="message", role="user", content=content)


async def test_append_then_read_back(db: Database, tenant: str) -> None:
    store = PgSessionArchive(db)
    events = [
        msg("hello"),
        NewEvent(type="tool_call", call_id="c1", name="lookup", arguments={"q": ["退款", 1]}),
        NewEvent(type="tool_result", call_id="c1", content="boom", is_error=True),
    ]
    info, stored = await store.append(
        tenant_id=tenant, session_id="s1", owner=ALICE, events=events)
    assert info.last_seq == 3
    assert (info.user_id, info.agent_id, info.parent_session_id) == ("alice", "agent-1", "parent-0")
    assert [e.seq for e in stored] == [1, 2, 3]
    assert all(e.created_at is not None for e in stored)

    read = await store.events(tenant_id=tenant, session_id="s1", after_seq=0, limit=10)
    assert read == stored
    assert read[1].arguments == {"q": ["退款", 1]}
    assert read[2].is_error

    assert await store.info(tenant_id=tenant, session_id="s1") == info
    assert await store.info(tenant_id=tenant, session_id="nope") is None


async def test_first_write_fixes_owner(db: Database, tenant: str) -> None:
    store = PgSessionArchive(db)
    await store.append(tenant_id=tenant, session_id="s1", owner=ALICE, events=[msg("a")])
    mallory = SessionOwner(user_id="mallory", agent_id=None, parent_session_id=None)
    with pytest.raises(NotFound):
        await store.append(tenant_id=tenant, session_id="s1", owner=mallory, events=[msg("x")])
    # A later write by the owner with other agent/parent does not change the owner row.
    other = SessionOwner(user_id="alice", agent_id="agent-2", parent_session_id=None)
    info, _ = await store.append(tenant_id=tenant, session_id="s1", owner=other, events=[msg("b")])
    assert (info.agent_id, info.parent_session_id, info.last_seq) == ("agent-1", "parent-0", 2)


async def test_tail_and_paging(db: Database, tenant: str) -> None:
    store = PgSessionArchive(db)
    await store.append(tenant_id=tenant, session_id="s1", owner=ALICE,
                       events=[msg(f"m{i}") for i in range(1, 8)])
    tail = await store.tail(tenant_id=tenant, session_id="s1", n=3)
    assert [e.content for e in tail] == ["m5", "m6", "m7"]
    page = await store.events(tenant_id=tenant, session_id="s1", after_seq=2, limit=2)
    assert [e.seq for e in page] == [3, 4]
    assert await store.events(tenant_id=tenant, session_id="s1", after_seq=7, limit=5) == []


async def test_empty_append_creates_session(db: Database, tenant: str) -> None:
    store = PgSessionArchive(db)
    info, stored = await store.append(tenant_id=tenant, session_id="s1", owner=ALICE, events=[])
    assert (info.last_seq, stored) == (0, [])


async def test_concurrent_appends_get_unique_contiguous_seqs(db: Database, tenant: str) -> None:
    store = PgSessionArchive(db)

    async def writer(w: int) -> list[int]:
        seqs: list[int] = []
        for i in range(5):
            _, stored = await store.append(tenant_id=tenant, session_id="busy", owner=ALICE,
                                           events=[msg(f"w{w}-{i}-a"), msg(f"w{w}-{i}-b")])
            assert stored[1].seq == stored[0].seq + 1  # one call's events stay adjacent
            seqs += [e.seq for e in stored]
        return seqs

    results = await asyncio.gather(*(writer(w) for w in range(6)))
    all_seqs = sorted(s for r in results for s in r)
    assert all_seqs == list(range(1, 61))
    events = await store.events(tenant_id=tenant, session_id="busy", after_seq=0, limit=100)
    assert [e.seq for e in events] == all_seqs


async def test_other_tenant_sees_nothing(db: Database, tenant: str, other_tenant: str) -> None:
    store = PgSessionArchive(db)
    await store.append(tenant_id=tenant, session_id="s1", owner=ALICE, events=[msg("secret")])
    assert await store.info(tenant_id=other_tenant, session_id="s1") is None
    assert await store.tail(tenant_id=other_tenant, session_id="s1", n=10) == []
    # The same session id in another tenant is a different session with its own owner.
    bob = SessionOwner(user_id="bob", agent_id=None, parent_session_id=None)
    info, stored = await store.append(
        tenant_id=other_tenant, session_id="s1", owner=bob, events=[msg("b")])
    assert (info.user_id, stored[0].seq) == ("bob", 1)
