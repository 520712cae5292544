"""Tenant isolation holds twice over: Row-Level Security alone, and the adapters' SQL alone.

(a) As the app role with ``app.tenant_id = A``, raw statements *without* a tenant predicate
    return none of B's rows, cannot write B's rows, and see nothing with no tenant set.
(b) As the owner (a superuser: RLS does not apply), the adapters' own statements, bound
    for tenant A, return none of B's rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.adapters.postgres import knowledge, manifests, sessions, tasks
from app.adapters.postgres.audit import LIST_SQL as AUDIT_LIST_SQL
from app.adapters.postgres.audit import PgAuditLog
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.knowledge import PgKnowledgeStore
from app.adapters.postgres.manifests import PgManifestStore
from app.adapters.postgres.sessions import PgSessionArchive
from app.adapters.postgres.tasks import PgTaskStore
from app.core.model import Acl, DataLevel, TaskCheckpoint, Trust
from app.ports import (
    AuditRecord,
    KnowledgeQuery,
    NewChunk,
    NewDocument,
    NewEvent,
    SessionOwner,
    StoredManifest,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
TABLES = ("sessions", "session_events", "task_checkpoints", "knowledge_documents",
          "knowledge_chunks", "manifests", "audit_log")


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield database
    await database.close()


@pytest.fixture
async def owner(pg_owner_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(pg_owner_url)
    yield engine
    await engine.dispose()


async def seed(db: Database, tenant: str) -> None:
    """The same ids in each tenant, so only tenant_id tells the rows apart."""
    await PgSessionArchive(db).append(
        tenant_id=tenant, session_id="s1",
        owner=SessionOwner(user_id="alice", agent_id=None, parent_session_id=None),
        events=[NewEvent(type="message", role="user", content=f"secret of {tenant}")])
    await PgTaskStore(db).put(tenant_id=tenant, expected_revision=None, checkpoint=TaskCheckpoint(
        task_id="task-1", revision=0, user_id="alice", session_id="s1", parent_task_id=None,
        goal=f"goal of {tenant}"))
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=NewDocument(
        doc_id="d1", version="1", title=None, domain=None, sensitivity=DataLevel.PUBLIC,
        trust=Trust.REVIEWED, acl=Acl(whole_tenant=True), observed_at=None, expires_at=None,
        source=None, chunks=(NewChunk(chunk_no=0, text="refund timeout", tokens=2,
                                      embedding=[1.0] + [0.0] * 383),)))
    record = AuditRecord(turn_id="turn-1", kind="k", principal="p", ref=None, rule=None,
                         detail={})
    await PgManifestStore(db).insert(tenant_id=tenant, audit=[record], manifest=StoredManifest(
        turn_id="turn-1", key_id="key_1", request_sha256="x",
        body={"session_id": "s1", "task_id": "task-1"}))
    await PgAuditLog(db).write(tenant_id=tenant, records=[record])


async def test_rls_alone_isolates_tenants(
    db: Database, owner: AsyncEngine, tenant: str, other_tenant: str
) -> None:
    await seed(db, tenant)
    await seed(db, other_tenant)
    async with owner.connect() as conn:  # B's rows exist: the filter below is what hides them
        for table in TABLES:
            count = f"SELECT count(*) FROM {table} WHERE tenant_id = :t"
            assert (await conn.execute(text(count), {"t": other_tenant})).scalar_one() >= 1

    async with db.tenant_tx(tenant) as conn:
        for table in TABLES:
            seen = await conn.fetch(Sql(f"SELECT DISTINCT tenant_id FROM {table}"))
            assert [r[0] for r in seen] == [tenant], table
        hits = await conn.fetch(Sql(
            "SELECT tenant_id FROM knowledge_chunks ORDER BY embedding <=> :v LIMIT 50"),
            {"v": [1.0] + [0.0] * 383})
        assert {r[0] for r in hits} == {tenant}

    for table, row in [
        ("sessions", "(tenant_id, session_id, user_id) VALUES (:t, 'x', 'u')"),
        ("manifests", "(tenant_id, turn_id, key_id, request_sha256, body) "
                      "VALUES (:t, 'x', 'k', 's', '{}')"),
        ("audit_log", "(tenant_id, kind, principal) VALUES (:t, 'k', 'p')"),
        ("task_checkpoints", "(tenant_id, task_id, revision, user_id, body) "
                             "VALUES (:t, 'x', 1, 'u', '{}')"),
    ]:
        with pytest.raises(asyncpg.PostgresError, match="row-level security"):
            async with db.tenant_tx(tenant) as conn:
                await conn.execute(Sql(f"INSERT INTO {table} {row}"), {"t": other_tenant})

    async with db.tenant_tx(tenant) as conn:  # updates of B's rows match nothing
        updated = await conn.execute(Sql("UPDATE sessions SET last_seq = 99 WHERE tenant_id = :t"),
                                     {"t": other_tenant})
        assert updated == 0

    async with db.unscoped_tx() as conn:
        for table in TABLES:
            assert await conn.fetchval(Sql(f"SELECT count(*) FROM {table}")) == 0


async def test_app_role_is_plain_and_cannot_read_keys(db: Database) -> None:
    async with db.unscoped_tx() as conn:
        row = await conn.one(Sql(
            "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles "
            "WHERE rolname = current_user"))
        assert tuple(row) == (False, False, False, False)
        owned = await conn.fetchval(Sql(
            "SELECT (SELECT count(*) FROM pg_class WHERE relowner = r.oid) "
            "     + (SELECT count(*) FROM pg_proc WHERE proowner = r.oid) "
            "FROM pg_roles r WHERE r.rolname = current_user"))
        assert owned == 0
    with pytest.raises(asyncpg.PostgresError, match="permission denied"):
        async with db.unscoped_tx() as conn:
            await conn.execute(Sql("SELECT * FROM api_keys"))
    # The audit log is append-only for the app role: retention prunes it through a definer
    # function with an age floor (migration 0021), never by a DELETE of its own.
    with pytest.raises(asyncpg.PostgresError, match="permission denied"):
        async with db.tenant_tx("t") as conn:
            await conn.execute(Sql("DELETE FROM audit_log"))


async def test_adapter_sql_alone_isolates_tenants(
    db: Database, owner: AsyncEngine, tenant: str, other_tenant: str
) -> None:
    await seed(db, tenant)
    await seed(db, other_tenant)
    q = KnowledgeQuery(tenant_id=tenant, user_id="alice", groups=(), domain=None,
                       max_level=DataLevel.SECRET, now=NOW, embedding=None, text="", k=50)
    # One embedding space for all (None): this test is about tenants, not embedders.
    visible = {**knowledge.visible_params(q), "k": 50, "spaces": None, "legacy": None}
    vector = "[" + ",".join(["1"] + ["0"] * 383) + "]"
    key = {"tenant_id": tenant, "session_id": "s1"}
    statements: list[tuple[str, dict[str, Any]]] = [
        (sessions.INFO_SQL, key),
        (sessions.EVENTS_SQL, {**key, "after_seq": 0, "limit": 50}),
        (sessions.TAIL_SQL, {**key, "n": 50}),
        (tasks.GET_LATEST_SQL, {"tenant_id": tenant, "task_id": "task-1"}),
        (tasks.GET_REVISION_SQL, {"tenant_id": tenant, "task_id": "task-1", "revision": 1}),
        (knowledge.SEARCH_EXACT_SQL, {**visible, "embedding": vector, "cap": None}),
        (knowledge.SEARCH_ANN_SQL, {**visible, "embedding": vector}),
        (knowledge.SEARCH_TEXT_SQL, {**visible, "tsquery": "refund | timeout",
                                     "embedding": vector}),
        (manifests.GET_SQL, {"tenant_id": tenant, "turn_id": "turn-1"}),
        (manifests.LIST_SQL, {"tenant_id": tenant, "session_id": None, "task_id": None,
                              "key_id": None, "before": None, "after_at": None,
                              "after_id": None, "limit": 50}),
        (AUDIT_LIST_SQL, {"tenant_id": tenant, "limit": 50}),
    ]
    async with owner.connect() as conn:
        bypass = (await conn.execute(text(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))).scalar_one()
        assert bypass, "the owner must bypass RLS for this test to mean anything"
        for sql, params in statements:
            rows = (await conn.execute(text(sql), params)).mappings().all()
            # Each tenant has exactly one of each thing (two audit records): B's would double.
            assert len(rows) == (2 if sql == AUDIT_LIST_SQL else 1), sql
            assert other_tenant not in str([dict(r) for r in rows]), sql
            if "tenant_id" in rows[0]:
                assert {r["tenant_id"] for r in rows} == {tenant}
            if "visible" in rows[0]:  # the exact scan's count of what it saw
                assert rows[0]["visible"] == 1


SETTING = Sql("SELECT current_setting('app.tenant_id', true)")


async def test_tenant_tx_settings_are_local_to_the_transaction(db: Database) -> None:
    ef = Sql("SELECT current_setting('hnsw.ef_search')")
    async with db.tenant_tx("t", {"hnsw.ef_search": "123"}) as conn:
        assert await conn.fetchval(ef) == "123"
        assert await conn.fetchval(SETTING) == "t"
    async with db.tenant_tx("t") as conn:
        assert await conn.fetchval(ef) != "123"  # gone with the transaction


@pytest.mark.parametrize("tenant", ["t'; DROP TABLE sessions; --", "a\\'b\\\\c", "租户-1"])
async def test_tenant_tx_scopes_any_tenant_text_exactly(db: Database, tenant: str) -> None:
    async with db.tenant_tx(tenant) as conn:
        assert await conn.fetchval(SETTING) == tenant
    async with db.unscoped_tx() as conn:
        assert await conn.fetchval(Sql("SELECT count(*) FROM sessions")) == 0


async def test_tenant_tx_commits_rolls_back_and_leaves_no_tenant_behind(db: Database) -> None:
    insert = Sql("INSERT INTO sessions (tenant_id, session_id, user_id) VALUES ('tx', :s, 'u')")
    async with db.tenant_tx("tx") as conn:
        await conn.execute(insert, {"s": "kept"})

    async def insert_then_fail() -> None:
        async with db.tenant_tx("tx") as conn:
            await conn.execute(insert, {"s": "undone"})
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await insert_then_fail()
    with pytest.raises(asyncpg.UniqueViolationError):
        async with db.tenant_tx("tx") as conn:
            await conn.execute(insert, {"s": "kept"})  # duplicate key: the tx aborts
    async with db.tenant_tx("tx") as conn:
        ids = await conn.fetchcol(Sql("SELECT session_id FROM sessions"))
        await conn.execute(Sql("DELETE FROM sessions"))
    assert ids == ["kept"]
    for _ in range(4):  # every pooled connection: out of a transaction, with no tenant set
        async with db.connection() as conn:
            assert await conn.fetchval(SETTING) in (None, "")
            assert not conn.raw.is_in_transaction()
    with pytest.raises(ValueError, match="tenant_id"):
        async with db.tenant_tx("") as conn:
            pass


PID = Sql("SELECT pg_backend_pid()")


async def test_read_tx_is_read_only_and_scoped(db: Database) -> None:
    async with db.read_tx("r") as conn:
        assert await conn.fetchval(SETTING) == "r"
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        async with db.read_tx("r") as conn:
            await conn.execute(Sql("INSERT INTO sessions (tenant_id, session_id, user_id) "
                                   "VALUES ('r', 's', 'u')"))


async def test_shared_reads_join_one_transaction_and_only_for_their_tenant(db: Database) -> None:
    ef = Sql("SELECT current_setting('hnsw.ef_search', true)")

    async def read(tenant: str, settings: dict[str, str] | None = None
                   ) -> tuple[int, str, str | None]:
        async with db.read_tx(tenant, settings or {}) as conn:
            return (await conn.fetchval(PID), await conn.fetchval(SETTING),
                    await conn.fetchval(ef))

    async with db.shared_reads("s", {"hnsw.ef_search": "77"}):
        joined = await asyncio.gather(read("s"), read("s"), read("s", {"hnsw.ef_search": "77"}))
        assert len({pid for pid, _, _ in joined}) == 1  # one connection, queued in turn
        assert {(t, e) for _, t, e in joined} == {("s", "77")}
        lacking = await read("s", {"hnsw.ef_search": "99"})  # a setting it lacks: set first
        assert lacking == (joined[0][0], "s", "99")
        # Another tenant's read never joins, and no write does: either would hold this
        # connection while waiting for a second one (a full pool deadlocks), so both raise.
        with pytest.raises(RuntimeError, match="second connection"):
            await read("other")
        with pytest.raises(RuntimeError, match="second connection"):
            async with db.tenant_tx("s"):
                pass
    after = await read("s")  # the block is over: a read opens its own again
    assert after[1] == "s" and after[2] != "99"
    for _ in range(2):  # and the shared connection went back clean
        async with db.connection() as conn:
            assert await conn.fetchval(SETTING) in (None, "")
            assert not conn.raw.is_in_transaction()


async def _pids_of_two_slow_reads(db: Database, tenant: str) -> tuple[set[int], list[str]]:
    """Two overlapping reads inside one block: the connections they ran on, and the tenant
    each saw."""
    async def slow() -> tuple[int, str]:
        async with db.read_tx(tenant) as conn:
            pid = await conn.fetchval(PID)
            await conn.fetchval(Sql("SELECT pg_sleep(0.05)"))
            return pid, await conn.fetchval(SETTING)

    async with db.shared_reads(tenant, {"hnsw.ef_search": "77"}):
        got = await asyncio.gather(slow(), slow())
    return {pid for pid, _ in got}, [t for _, t in got]


async def test_an_idle_process_spreads_shared_reads_over_its_lanes(pg_owner_url: str) -> None:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=3,
                             read_lanes=2)
    try:
        async with db.connection() as a, db.connection() as b:  # two idle connections
            assert a.raw is not b.raw
        pids, tenants = await _pids_of_two_slow_reads(db, "w")
        assert len(pids) == 2 and tenants == ["w", "w"]  # both lanes scoped alike

        # Another block open (a second turn in flight): the reads queue on one connection.
        hold, release = asyncio.Event(), asyncio.Event()

        async def other_turn() -> None:
            async with db.shared_reads("x"):
                hold.set()
                await release.wait()

        busy = asyncio.create_task(other_turn())
        await hold.wait()
        pids, _ = await _pids_of_two_slow_reads(db, "w")
        assert len(pids) == 1
        release.set()
        await busy
        for _ in range(3):  # every lane went back committed and clean
            async with db.connection() as conn:
                assert await conn.fetchval(SETTING) in (None, "")
                assert not conn.raw.is_in_transaction()
    finally:
        await db.close()


async def test_lanes_never_wait_on_a_full_pool(pg_owner_url: str) -> None:
    """With no connection idle, a read queues on the block's own: no hold-and-wait."""
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=1,
                             read_lanes=2)
    try:
        pids, _ = await asyncio.wait_for(_pids_of_two_slow_reads(db, "w"), 5)
        assert len(pids) == 1
    finally:
        await db.close()


async def test_a_failed_read_on_a_second_lane_aborts_the_block(pg_owner_url: str) -> None:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2,
                             read_lanes=2)

    async def read(sql: str) -> Any:
        async with db.read_tx("f") as conn:
            return await conn.fetchval(Sql(sql))

    try:
        async with db.connection(), db.connection():
            pass
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with db.shared_reads("f"):
                await asyncio.gather(read("SELECT pg_sleep(0.05)"), read("SELECT 1 / 0"))
        for _ in range(2):
            async with db.read_tx("f") as conn:
                assert await conn.fetchval(SETTING) == "f"
    finally:
        await db.close()


async def test_a_failed_shared_read_aborts_the_block(db: Database) -> None:
    async def bad() -> None:
        async with db.read_tx("f") as conn:
            await conn.fetchval(Sql("SELECT 1 / 0"))

    with pytest.raises(asyncpg.DivisionByZeroError):
        async with db.shared_reads("f"):
            await bad()
    async with db.read_tx("f") as conn:  # the pool is healthy afterwards
        assert await conn.fetchval(SETTING) == "f"
