"""Schema migrations, driven programmatically through alembic.

- ``upgrade(owner_url, app_role=..., app_password=...)`` applies revisions as the *owner*
  (the migration user), creates the service role if missing and, when a password is given,
  sets it with a separate ``ALTER ROLE`` (alembic revisions take no arguments).
- ``downgrade(owner_url, revision)`` reverts (``"base"`` drops every object; see the initial
  revision for what happens to the cluster-wide role).
- ``current(owner_url)`` is the applied revision or None; ``head()`` the newest script.

The alembic scripts live in the top-level ``alembic/`` directory of the repository (the
package is installed editable), found relative to this file; ``alembic.ini`` is not read.

These functions are synchronous and run their own event loop in a worker thread. Call them
from synchronous code only (CLI, a sync fixture); they refuse to block a running event loop
— from async code use ``await asyncio.to_thread(upgrade, ...)``.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from alembic import command

ALEMBIC_DIR = Path(__file__).resolve().parents[3] / "alembic"
ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

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


async def _set_password(owner_url: str, role: str, password: str) -> None:
    engine = create_async_engine(owner_url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            # Utility statements take no bind parameters; the literal is quoted above.
            await conn.exec_driver_sql(f'ALTER ROLE "{role}" PASSWORD {_quote_literal(password)}')
    finally:
        await engine.dispose()


def upgrade(
    owner_url: str, *, app_role: str, app_password: str | None, revision: str = "head"
) -> None:
    """Apply migrations up to ``revision`` and make sure ``app_role`` can log in."""
    if not ROLE_NAME.fullmatch(app_role):
        raise ValueError(f"invalid app role name {app_role!r}: use [a-z_][a-z0-9_]*")
    cfg = _config(owner_url, app_role)
    _run_sync(lambda: command.upgrade(cfg, revision))
    if app_password is not None:
        _run_coro(lambda: _set_password(owner_url, app_role, app_password))


def downgrade(owner_url: str, revision: str, *, app_role: str = "ctxgate_app") -> None:
    """Revert to ``revision`` (``"base"`` removes the whole schema)."""
    cfg = _config(owner_url, app_role)
    _run_sync(lambda: command.downgrade(cfg, revision))


def _current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def _current(owner_url: str) -> str | None:
    engine = create_async_engine(owner_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            exists = (await conn.execute(text("SELECT to_regclass('alembic_version')"))).scalar()
            if exists is None:
                return None
            return await conn.run_sync(_current_revision)
    finally:
        await engine.dispose()


def current(owner_url: str) -> str | None:
    """The revision applied to the database, or None if it was never migrated."""
    return _run_coro(lambda: _current(owner_url))
