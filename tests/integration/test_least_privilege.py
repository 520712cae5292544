"""Least privilege on the real embedded PostgreSQL: what the app role the service connects
as cannot do, how the service's URL is made, what ``ctxgate serve`` refuses, and that two
concurrent ``ctxgate migrate`` of one database apply the schema once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.adapters.postgres import migrate
from app.adapters.postgres.db import Database, app_url, service_url
from app.settings import Settings

APP_ROLE = "ctxgate_app"
OWNER = "postgres"  # the embedded cluster's superuser owns the test schema

# Each must fail for the app role with insufficient_privilege (42501).
FORBIDDEN = {
    "disable RLS": "ALTER TABLE sessions DISABLE ROW LEVEL SECURITY",
    "unforce RLS": "ALTER TABLE manifests NO FORCE ROW LEVEL SECURITY",
    "drop the policy": "DROP POLICY tenant_isolation ON session_events",
    "replace the policy": "ALTER POLICY tenant_isolation ON sessions USING (true)",
    "create a table": "CREATE TABLE app_made (i int)",
    "create a function": "CREATE FUNCTION app_made() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "create a view": "CREATE VIEW app_made AS SELECT 1 AS one",
    "create a schema": "CREATE SCHEMA app_made",
    "read api_keys": "SELECT key_hash FROM api_keys",
    "write api_keys": "UPDATE api_keys SET revoked_at = NULL",
    "alter a table": "ALTER TABLE sessions ADD COLUMN app_made int",
    "drop a table": "DROP TABLE audit_log",
    "truncate": "TRUNCATE manifests",
    "alter a definer function": "ALTER FUNCTION ctxgate_key_principal(bytea) SECURITY INVOKER",
    "drop a definer function": "DROP FUNCTION ctxgate_key_revoke(text)",
    "drop an index": "DROP INDEX api_keys_tenant",
    "move the schema version": "UPDATE alembic_version SET version_num = '0001'",
    "grant itself more": "GRANT SELECT ON api_keys TO ctxgate_app",
    "become the owner": f"SET ROLE {OWNER}",
    "become the owner for a session": f"SET SESSION AUTHORIZATION {OWNER}",
    "bypass RLS": "ALTER ROLE ctxgate_app BYPASSRLS",
    "create a role": "CREATE ROLE app_made LOGIN SUPERUSER",
}


@pytest.fixture
async def app_conn(pg_owner_url: str) -> AsyncIterator[Database]:
    db = await Database.open(pg_owner_url, role=APP_ROLE, password=None, pool_size=1)
    try:
        yield db
    finally:
        await db.close()


@pytest.mark.parametrize("sql", FORBIDDEN.values(), ids=FORBIDDEN.keys())
async def test_the_app_role_cannot(app_conn: Database, sql: str) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with app_conn.unscoped_tx() as tx:
            await tx.raw.execute(sql)


async def test_the_app_role_is_plain_and_rls_still_holds(app_conn: Database) -> None:
    async with app_conn.unscoped_tx() as tx:
        row = await tx.raw.fetchrow(
            "SELECT current_user AS who, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, "
            "pg_has_role(current_user, $1, 'MEMBER') AS owner_member "
            "FROM pg_roles WHERE rolname = current_user", OWNER)
        assert row is not None and row["who"] == APP_ROLE
        assert not any(row[k] for k in ("rolsuper", "rolbypassrls", "rolcreaterole",
                                        "rolcreatedb", "owner_member"))
        forced = await tx.raw.fetchval(
            "SELECT bool_and(relrowsecurity AND relforcerowsecurity) FROM pg_class "
            "WHERE relname IN ('sessions', 'session_events', 'manifests', 'audit_log')")
        assert forced is True


async def test_check_serving_accepts_only_the_app_role(pg_owner_url: str) -> None:
    derived = app_url(pg_owner_url, APP_ROLE, None)
    await asyncio.to_thread(migrate.check_serving, derived)
    with pytest.raises(migrate.NotServable, match="superuser"):
        await asyncio.to_thread(migrate.check_serving, pg_owner_url)
    with pytest.raises(migrate.NotServable, match="ctxgate migrate"):
        await asyncio.to_thread(migrate.check_serving,
                                app_url(pg_owner_url, "ctxgate_no_such_role", None))


def test_service_url_never_carries_the_owner_credentials() -> None:
    owner = "postgresql+asyncpg://owner:ownerpw@db:5432/ctxgate?ssl=require"
    derived = make_url(service_url(Settings(database_url=owner, app_db_password="apppw")))
    assert (derived.username, derived.password, derived.host) == (APP_ROLE, "apppw", "db")
    assert derived.query == {"ssl": "require"}
    bare = make_url(service_url(Settings(database_url=owner)))
    assert (bare.username, bare.password) == (APP_ROLE, None)
    # Its own host and port (PgBouncer); the password from the secret when the URL has none.
    own = "postgresql+asyncpg://ctxgate_app@pgbouncer:6432/ctxgate"
    url = make_url(service_url(Settings(app_database_url=own, database_url=owner,
                                        app_db_password="apppw")))
    assert (url.username, url.password, url.host, url.port) == (
        APP_ROLE, "apppw", "pgbouncer", 6432)
    given = "postgresql+asyncpg://ctxgate_app:inurl@pgbouncer:6432/ctxgate"
    assert make_url(service_url(Settings(app_database_url=given, app_db_password="x"))
                    ).password == "inurl"
    with pytest.raises(ValueError, match="CTXGATE_APP_DATABASE_URL"):
        service_url(Settings())


# --- the CLI ------------------------------------------------------------------------------

def ctxgate(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], env=base | env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def _admin(owner_url: str, sql: str) -> None:
    conn = await asyncpg.connect(_dsn(owner_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
async def empty_db(pg_owner_url: str, uid: str) -> AsyncIterator[str]:
    name = f"ctxgate_lp_{uid}"
    await _admin(pg_owner_url, f'CREATE DATABASE "{name}"')
    yield make_url(pg_owner_url).set(database=name).render_as_string(hide_password=False)
    await _admin(pg_owner_url, f'DROP DATABASE "{name}" WITH (FORCE)')


async def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = await asyncio.to_thread(proc.communicate, timeout=180)
    return proc.returncode, out, err


async def test_two_concurrent_migrates_apply_the_schema_once(empty_db: str) -> None:
    holder = await asyncpg.connect(_dsn(empty_db))
    try:
        # Hold the migration lock so that both start while the other runs, then let go.
        await holder.execute(f"SELECT pg_advisory_lock({migrate.MIGRATION_LOCK})")
        procs = [ctxgate({"CTXGATE_DATABASE_URL": empty_db}, "migrate") for _ in range(2)]
        deadline = time.monotonic() + 120
        waiting = 0
        while waiting < 2:
            assert time.monotonic() < deadline, "the migrators never queued on the lock"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            await asyncio.sleep(0.2)
            waiting = await holder.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND objid = $1 AND database = (SELECT oid FROM pg_database "
                "WHERE datname = current_database())", migrate.MIGRATION_LOCK)
        await holder.execute(f"SELECT pg_advisory_unlock({migrate.MIGRATION_LOCK})")
        results = [await _finish(p) for p in procs]
    finally:
        await holder.close()
    assert [code for code, _, _ in results] == [0, 0], results
    outs = sorted(out.strip() for _, out, _ in results)
    assert outs == sorted([f"migrations applied: empty database -> {migrate.head()}",
                           f"schema already at {migrate.head()}"]), results
    assert all("waiting for it" in err for _, _, err in results)  # both had queued
    assert await asyncio.to_thread(migrate.current, empty_db) == migrate.head()


async def test_serve_does_not_migrate_unless_told(empty_db: str, redis_url: str) -> None:
    env = {"CTXGATE_DATABASE_URL": empty_db, "CTXGATE_REDIS_URL": redis_url}
    code, _, err = await _finish(ctxgate(env, "serve", "--port", "1"))
    assert code != 0
    assert "schema is at nothing" in err and "ctxgate migrate" in err, err
    assert await asyncio.to_thread(migrate.current, empty_db) is None  # untouched


async def test_serve_refuses_the_owner_as_its_app_url(pg_owner_url: str, redis_url: str) -> None:
    env = {"CTXGATE_APP_DATABASE_URL": pg_owner_url, "CTXGATE_REDIS_URL": redis_url}
    code, _, err = await _finish(ctxgate(env, "serve", "--port", "1"))
    assert code != 0 and "superuser" in err and "never as the owner" in err, err


async def test_migrating_needs_the_owner_url(pg_owner_url: str) -> None:
    env = {"CTXGATE_APP_DATABASE_URL": app_url(pg_owner_url, APP_ROLE, None),
           "CTXGATE_MIGRATE_ON_START": "true"}
    for args in (("migrate",), ("keys", "list")):
        code, _, err = await _finish(ctxgate(env, *args))
        assert code != 0 and "owner's CTXGATE_DATABASE_URL" in err, (args, err)


async def test_keys_work_with_the_app_url_alone(pg_owner_url: str, uid: str) -> None:
    env = {"CTXGATE_APP_DATABASE_URL": app_url(pg_owner_url, APP_ROLE, None)}
    code, out, err = await _finish(ctxgate(env, "keys", "create", "--tenant", f"lp{uid}",
                                           "--role", "runtime", "--quiet"))
    assert code == 0, err
    assert out.strip()
