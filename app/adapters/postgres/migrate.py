"""Schema migrations, driven programmatically through alembic.

- ``upgrade(owner_url, app_role=..., app_password=...)`` applies revisions as the *owner*
  (the migration user), creates the service role if missing and, when a password is given,
  sets it with a separate ``ALTER ROLE`` (alembic revisions take no arguments). It returns the
  revision it found, read under the lock (None: a fresh database).
- ``downgrade(owner_url, revision)`` reverts (``"base"`` drops every object; see the initial
  revision for what happens to the cluster-wide role).
- Both hold a session-level advisory lock (``MIGRATION_LOCK``, per database) on a connection
  of their own for the whole run: concurrent migrators of one database queue, and the later
  one finds the schema already at head and applies nothing. A session lock is right here,
  unlike in the service (whose background jobs hold leases): migrations connect with the
  owner's URL straight to PostgreSQL, never through PgBouncer (docs/scaling.md), so the
  lock and the statements share one server connection.
- ``current(owner_url)`` is the applied revision or None; ``head()`` the newest script.
- ``check_serving(app_url, pgbouncer=...)`` connects as the service will (through PgBouncer
  too: then with no prepared statement kept) and raises ``NotServable`` unless the schema is
  at head and the role is unprivileged (RLS binds it, it owns nothing, it cannot become the
  owner).

The alembic scripts live in the top-level ``alembic/`` directory of the repository (the
package is installed editable), found relative to this file; ``alembic.ini`` is not read.

These functions are synchronous and run their own event loop in a worker thread. Call them
from synchronous code only (CLI, a sync fixture); they refuse to block a running event loop
— from async code use ``await asyncio.to_thread(upgrade, ...)``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from alembic import command

ALEMBIC_DIR = Path(__file__).resolve().parents[3] / "alembic"
ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# The advisory lock key every ctxgate migrator of a database takes ("ctxg"); PostgreSQL keys
# advisory locks by database too, so databases of one cluster never wait on each other.
MIGRATION_LOCK = 0x63747867

log = logging.getLogger(__name__)

T = TypeVar("T")


def _config(owner_url: str | None = None, app_role: str | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    # Passed as attributes, not ini options: ConfigParser would interpolate the '%' of a
    # percent-encoded socket path in the URL.
    if owner_url is not None:
        cfg.attributes["owner_url"] = owner_url
    if app_role is not None:
        cfg.attributes["app_role"] = app_role
    return cfg


def _run_sync(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which may call ``asyncio.run``) in a fresh thread, away from any loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("migrate functions are synchronous; use asyncio.to_thread()")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxgate-migrate") as pool:
        return pool.submit(fn).result()


def _run_coro(make: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await make()

    return _run_sync(lambda: asyncio.run(main()))


@functools.cache
def head() -> str:
    """The newest revision in the scripts directory."""
    rev = ScriptDirectory.from_config(_config()).get_current_head()
    if rev is None:
        raise RuntimeError(f"no alembic revisions under {ALEMBIC_DIR}")
    return rev


def _quote_literal(value: str) -> str:
    if "\x00" in value:
        raise ValueError("password must not contain NUL")
    # standard_conforming_strings is on (the default since 9.1): only quotes need doubling.
    return "'" + value.replace("'", "''") + "'"


async def _locked(owner_url: str, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """``work`` on an autocommit owner connection holding ``MIGRATION_LOCK``. Autocommit: an
    open transaction here would hold a snapshot that CREATE INDEX CONCURRENTLY waits for."""
    engine = create_async_engine(owner_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            if not (await conn.exec_driver_sql(
                    f"SELECT pg_try_advisory_lock({MIGRATION_LOCK})")).scalar():
                log.warning("another migration of this database is running; waiting for it")
                await conn.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
            try:
                return await work(conn)
            finally:
                await conn.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
    finally:
        await engine.dispose()


def upgrade(
    owner_url: str, *, app_role: str, app_password: str | None, revision: str = "head"
) -> str | None:
    """Apply migrations up to ``revision`` and make sure ``app_role`` can log in; the
    revision found before (under the lock: what this call started from)."""
    if not ROLE_NAME.fullmatch(app_role):
        raise ValueError(f"invalid app role name {app_role!r}: use [a-z_][a-z0-9_]*")
    cfg = _config(owner_url, app_role)

    async def work(conn: AsyncConnection) -> str | None:
        before = await _revision_of(conn)
        # alembic's env runs its own event loop: a thread of its own, away from this one.
        await asyncio.to_thread(command.upgrade, cfg, revision)
        if app_password is not None:
            # Utility statements take no bind parameters; the literal is quoted above.
            await conn.exec_driver_sql(
                f'ALTER ROLE "{app_role}" PASSWORD {_quote_literal(app_password)}')
        return before

    return _run_coro(lambda: _locked(owner_url, work))


def downgrade(owner_url: str, revision: str, *, app_role: str = "ctxgate_app") -> None:
    """Revert to ``revision`` (``"base"`` removes the whole schema)."""
    cfg = _config(owner_url, app_role)

    async def work(_: AsyncConnection) -> None:
        await asyncio.to_thread(command.downgrade, cfg, revision)

    _run_coro(lambda: _locked(owner_url, work))


def _current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def _revision_of(conn: AsyncConnection) -> str | None:
    exists = (await conn.execute(text("SELECT to_regclass('alembic_version')"))).scalar()
    if exists is None:
        return None
    return await conn.run_sync(_current_revision)


async def _current(owner_url: str) -> str | None:
    engine = create_async_engine(owner_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return await _revision_of(conn)
    finally:
        await engine.dispose()


def current(owner_url: str) -> str | None:
    """The revision applied to the database, or None if it was never migrated."""
    return _run_coro(lambda: _current(owner_url))


class NotServable(Exception):
    """The service's connection cannot serve: unreachable, unmigrated, or privileged."""


# The connected role and what would make it more than the app role: RLS does not bind a
# superuser or a BYPASSRLS role, an owner (without FORCE) or whoever can SET ROLE to one.
ROLE_FACTS = text("""
SELECT current_user AS role, r.rolsuper AS superuser, r.rolbypassrls AS bypassrls,
       EXISTS (SELECT 1 FROM pg_class c
               WHERE c.relnamespace = current_schema()::regnamespace
                 AND pg_has_role(current_user, c.relowner, 'MEMBER')) AS owner
FROM pg_roles r WHERE r.rolname = current_user
""")


def _through_pgbouncer() -> dict[str, Any]:
    """SQLAlchemy's asyncpg settings for a PgBouncer in transaction pooling: no statement
    cache (asyncpg's or SQLAlchemy's), and a fresh name per prepared statement, so a name
    left on a server connection by another client never collides with one of ours."""
    return {"statement_cache_size": 0, "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": lambda: f"__ctxgate_{uuid.uuid4().hex}__"}


async def _serving_problem(app_url: str, pgbouncer: bool) -> str | None:
    engine = create_async_engine(app_url, poolclass=NullPool,
                                 connect_args=_through_pgbouncer() if pgbouncer else {})
    try:
        async with engine.connect() as conn:
            facts = (await conn.execute(ROLE_FACTS)).one()
            powers = [word for word, has in (("a superuser", facts.superuser),
                                             ("BYPASSRLS", facts.bypassrls),
                                             ("an owner of the schema's tables", facts.owner))
                      if has]
            if powers:
                return (f"role {facts.role!r} is {' and '.join(powers)}: Row-Level Security "
                        "would not bind it. Serve as the app role (CTXGATE_APP_DATABASE_URL, "
                        "or CTXGATE_APP_DB_ROLE with the owner URL), never as the owner")
            found = await _revision_of(conn)
    except DBAPIError as exc:  # refused login (no such role, wrong password), no grants
        return (f"{type(exc.orig).__name__}: {exc.orig} — the app role is created, granted "
                "and given CTXGATE_APP_DB_PASSWORD by `ctxgate migrate` with the owner's "
                "CTXGATE_DATABASE_URL (and CTXGATE_APP_DB_ROLE naming it): run it first")
    except OSError as exc:
        return f"cannot reach PostgreSQL: {exc}"
    finally:
        await engine.dispose()
    if found != head():
        return (f"the schema is at {found or 'nothing'}, this code needs {head()}: run "
                "`ctxgate migrate` (the owner's CTXGATE_DATABASE_URL) first, or serve with "
                "--migrate")
    return None


def check_serving(app_url: str, *, pgbouncer: bool = False) -> None:
    """Raise ``NotServable`` unless ``app_url`` reaches a schema at head as an unprivileged
    role (the app role's grants include reading ``alembic_version``)."""
    problem = _run_coro(lambda: _serving_problem(app_url, pgbouncer))
    if problem is not None:
        raise NotServable(problem)
