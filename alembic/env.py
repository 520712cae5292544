"""Alembic environment: runs the migrations over an async (asyncpg) engine as the *owner*.

Inputs, in order of precedence:
- the owner URL: ``config.attributes["owner_url"]`` (set by app.adapters.postgres.migrate),
  else the ``CTXGATE_DATABASE_URL`` environment variable (for running ``alembic`` by hand);
- the service role: ``config.attributes["app_role"]``, else ``-x app_role=...``, else
  ``CTXGATE_APP_DB_ROLE``, else ``ctxgate_app``. It is validated here and stored back in
  ``config.attributes["app_role"]``, where the revisions read it to create the role and
  grant it exactly the DML it needs.

Offline (``--sql``) mode is not supported: the schema relies on DO blocks that inspect the
catalog, so a generated script would not be the same as an online run.
"""

from __future__ import annotations

import asyncio
import os
import re

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from alembic import context

ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def app_role() -> str:
    """The validated service role name (safe to interpolate as an identifier)."""
    cfg = context.config
    role = (
        cfg.attributes.get("app_role")
        or context.get_x_argument(as_dictionary=True).get("app_role")
        or os.environ.get("CTXGATE_APP_DB_ROLE")
        or "ctxgate_app"
    )
    if not ROLE_NAME.fullmatch(role):
        raise ValueError(f"invalid app role name {role!r}: use [a-z_][a-z0-9_]*")
    return str(role)


def _owner_url() -> str:
    url = context.config.attributes.get("owner_url") or os.environ.get("CTXGATE_DATABASE_URL")
    if not url:
        raise RuntimeError("no database URL: pass owner_url or set CTXGATE_DATABASE_URL")
    return str(url)


def _run(connection: Connection) -> None:
    context.config.attributes["app_role"] = app_role()
    context.configure(connection=connection, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    # NullPool: a migration is one connection for a few seconds; nothing to keep warm.
    engine = create_async_engine(_owner_url(), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
            await conn.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (--sql) migrations are not supported; run against a database")
asyncio.run(_run_async())
