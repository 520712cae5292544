"""Migrations in a fresh database: upgrade -> downgrade -> upgrade, and what each leaves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.adapters.postgres import migrate
from app.adapters.postgres.db import Database

BUNDLE_TABLES = {"bundle_revisions", "bundle_channels", "bundle_denylist", "session_bundles",
                 "bundle_reviews", "bundle_evaluations"}
MEMORY_TABLES = {"memories", "memory_history"}
COMPACTION_TABLES = {"session_compactions", "session_states"}
TURN_TABLES = {"turn_appends"}
LATER_TABLES = (BUNDLE_TABLES | MEMORY_TABLES | COMPACTION_TABLES | TURN_TABLES
                | {"erasures", "knowledge_jobs"})
TENANT_TABLES = {"sessions", "session_events", "task_checkpoints", "knowledge_documents",
                 "knowledge_chunks", "manifests", "audit_log"}


async def _admin(owner_url: str, sql: str) -> None:
    engine = create_async_engine(owner_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@pytest.fixture
async def fresh_db(pg_owner_url: str, uid: str) -> AsyncIterator[str]:
    name = f"ctxgate_mig_{uid}"
    await _admin(pg_owner_url, f'CREATE DATABASE "{name}"')
    yield make_url(pg_owner_url).set(database=name).render_as_string(hide_password=False)
    await _admin(pg_owner_url, f'DROP DATABASE "{name}" WITH (FORCE)')


async def _state(url: str, role: str) -> dict[str, object]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            async def scalar_set(sql: str) -> set[str]:
                return {r[0] for r in await conn.execute(text(sql), {"role": role})}

            return {
                "tables": await scalar_set(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"),
                "policies": await scalar_set("SELECT tablename FROM pg_policies"),
                "forced": await scalar_set(
                    "SELECT relname FROM pg_class WHERE relforcerowsecurity"),
                "functions": await scalar_set(
                    "SELECT proname FROM pg_proc WHERE proname LIKE 'ctxgate_%'"),
                "role": await scalar_set(
                    "SELECT rolname FROM pg_roles WHERE rolname = :role "
                    "AND NOT rolsuper AND NOT rolbypassrls AND rolcanlogin"),
                "password": await scalar_set(
                    "SELECT rolname FROM pg_authid WHERE rolname = :role "
                    "AND rolpassword IS NOT NULL"),
            }
    finally:
        await engine.dispose()


async def test_upgrade_downgrade_upgrade(fresh_db: str, uid: str) -> None:
    role = f"ctxgate_mig_{uid}"
    assert await asyncio.to_thread(migrate.current, fresh_db) is None

    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role=role, app_password="p'w")
    assert await asyncio.to_thread(migrate.current, fresh_db) == migrate.head()
    up = await _state(fresh_db, role)
    assert up["tables"] == TENANT_TABLES | LATER_TABLES | {
        "api_keys", "tenant_identity", "tenant_settings", "embedding_state", "leases",
        "leakage_canaries", "alembic_version"}
    # leakage_canaries: RLS enabled with no policy at all (only its definer functions read it)
    assert up["policies"] == TENANT_TABLES | LATER_TABLES | {"api_keys"}
    # api_keys, tenant_identity, tenant_settings, erasures, knowledge_jobs: RLS enabled, not
    # forced (see the migrations)
    assert up["forced"] == (TENANT_TABLES | BUNDLE_TABLES | MEMORY_TABLES | COMPACTION_TABLES
                            | TURN_TABLES)
    assert up["functions"] == {"ctxgate_key_principal", "ctxgate_key_create",
                               "ctxgate_key_revoke", "ctxgate_tenant_identity_set",
                               "ctxgate_open_erasures", "ctxgate_key_list",
                               "ctxgate_tenant_settings_set", "ctxgate_tenant_settings_get",
                               "ctxgate_embedding_census", "ctxgate_open_knowledge_jobs",
                               "ctxgate_purge_knowledge_jobs", "ctxgate_retention_tenants",
                               "ctxgate_prune_audit_log", "ctxgate_canary_create",
                               "ctxgate_canary_list", "ctxgate_canary_delete",
                               "ctxgate_canary_revision"}
    assert up["role"] == up["password"] == {role}

    db = await Database.open(fresh_db, role=role, password="p'w", pool_size=1)
    try:
        assert await db.migrations_current()
    finally:
        await db.close()

    # Step down one revision and back: each revision's downgrade restores the one before.
    await asyncio.to_thread(migrate.downgrade, fresh_db, "0001", app_role=role)
    one = await _state(fresh_db, role)
    assert one["tables"] == TENANT_TABLES | {"api_keys", "alembic_version"}
    assert one["functions"] == {"ctxgate_key_principal", "ctxgate_key_create",
                                "ctxgate_key_revoke"}
    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role=role, app_password="p'w")
    assert await _state(fresh_db, role) == up

    await asyncio.to_thread(migrate.downgrade, fresh_db, "base", app_role=role)
    assert await asyncio.to_thread(migrate.current, fresh_db) is None
    down = await _state(fresh_db, role)
    assert down["tables"] == {"alembic_version"}
    assert down["policies"] == down["functions"] == down["role"] == set()

    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role=role, app_password=None)
    again = await _state(fresh_db, role)
    assert again["tables"] == up["tables"] and again["role"] == {role}
    await asyncio.to_thread(migrate.downgrade, fresh_db, "base", app_role=role)


async def test_shared_role_survives_downgrade(fresh_db: str) -> None:
    # ctxgate_app also serves the session's main test database: dropping it must not fail.
    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role="ctxgate_app", app_password=None)
    await asyncio.to_thread(migrate.downgrade, fresh_db, "base")
    state = await _state(fresh_db, "ctxgate_app")
    assert state["tables"] == {"alembic_version"}
    assert state["role"] == {"ctxgate_app"}


async def test_refuses_privileged_or_invalid_roles(fresh_db: str) -> None:
    with pytest.raises(Exception, match="plain role"):
        await asyncio.to_thread(migrate.upgrade, fresh_db, app_role="postgres", app_password=None)
    assert await asyncio.to_thread(migrate.current, fresh_db) is None  # rolled back
    with pytest.raises(ValueError, match="invalid app role"):
        migrate.upgrade(fresh_db, app_role='x"; DROP', app_password=None)


async def test_refuses_to_block_a_running_loop(fresh_db: str) -> None:
    with pytest.raises(RuntimeError, match="to_thread"):
        migrate.upgrade(fresh_db, app_role="ctxgate_app", app_password=None)


async def test_app_database_reports_current(pg_owner_url: str) -> None:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=1)
    try:
        assert await db.ping()
        assert await db.migrations_current()
    finally:
        await db.close()


DOC_ROWS = """
SELECT d.doc_id, d.version, d.is_current, {revision} AS revision,
       array_agg(c.version ORDER BY c.chunk_no) AS chunk_versions
FROM knowledge_documents d JOIN knowledge_chunks c USING (tenant_id, doc_id, version)
GROUP BY d.doc_id, d.version, d.is_current{group} ORDER BY d.doc_id, d.version
"""


async def _doc_rows(url: str, *, revision: bool) -> list[tuple[object, ...]]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            sql = DOC_ROWS.format(revision="d.revision" if revision else "NULL",
                                  group=", d.revision" if revision else "")
            return [tuple(r) for r in await conn.execute(text(sql))]
    finally:
        await engine.dispose()


async def test_document_versions_become_labels_and_back(fresh_db: str, uid: str) -> None:
    """0012 turns integer versions into labels with revisions in integer order (what was
    current stays current); its downgrade turns each version back into its revision."""
    role = f"ctxgate_mig_{uid}"
    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role=role, app_password=None,
                            revision="0011")
    chunk = ("INSERT INTO knowledge_chunks (tenant_id, doc_id, version, chunk_no, text, tokens,"
             " embedding, search_text, sensitivity, trust, acl_all, acl_users, acl_groups,"
             " is_current) VALUES ('t', '{d}', {v}, 0, 'x', 1, array_fill(0.1, ARRAY[384])"
             "::vector, 'x', 1, 'reviewed', true, '{{}}', '{{}}', {cur})")
    doc = ("INSERT INTO knowledge_documents (tenant_id, doc_id, version, sensitivity, trust,"
           " acl_all, is_current{rev}) VALUES ('t', '{d}', {v}, 1, 'reviewed', true, {cur}"
           "{revision})")
    for doc_id, version, current in (("a", 10, True), ("a", 2, False), ("b", 1, True)):
        await _admin(fresh_db, doc.format(d=doc_id, v=version, cur=current, rev="",
                                          revision=""))
        await _admin(fresh_db, chunk.format(d=doc_id, v=version, cur=current))

    await asyncio.to_thread(migrate.upgrade, fresh_db, app_role=role, app_password=None)
    assert await _doc_rows(fresh_db, revision=True) == [
        ("a", "10", True, 2, ["10"]), ("a", "2", False, 1, ["2"]), ("b", "1", True, 1, ["1"])]

    # A label no integer reads: back to its revision. "10" -> 2 while "2" -> 1 is a swap.
    await _admin(fresh_db, doc.format(d="c", v="'v3'", cur=True, rev=", revision",
                                      revision=", 1"))
    await _admin(fresh_db, chunk.format(d="c", v="'v3'", cur=True))
    await asyncio.to_thread(migrate.downgrade, fresh_db, "0011", app_role=role)
    assert await _doc_rows(fresh_db, revision=False) == [
        ("a", 1, False, None, [1]), ("a", 2, True, None, [2]), ("b", 1, True, None, [1]),
        ("c", 1, True, None, [1])]
    await asyncio.to_thread(migrate.downgrade, fresh_db, "base", app_role=role)
