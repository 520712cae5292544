"""The service's PostgreSQL connection: one async engine, connected as the app role.

Contract:
- ``await Database.open(owner_url, role=..., password=..., pool_size=...)`` builds the engine
  (lazy: no connection is made until first use) for the *app role*, not the owner, so Row-Level
  Security applies to every statement the service runs. ``app_url()`` derives that URL.
- ``tenant_tx(tenant_id)`` yields a connection inside a transaction whose first statement is
  ``set_config('app.tenant_id', tenant_id, true)``: transaction-local, so a pooled
  connection never carries a tenant into the next checkout. Every adapter query runs here.
- ``unscoped_statement()`` is a connection without a transaction, for single statements.
- ``unscoped_tx()`` is for the SECURITY DEFINER key functions and ``alembic_version``: the
  app role has no privilege on tenant tables that RLS would not filter to zero rows anyway.
- ``ping()`` and ``migrations_current()`` back ``/readyz``.

Statements are SQLAlchemy Core ``text()`` with bind parameters: asyncpg prepares each one
once per connection (SQLAlchemy's statement cache), and results are read as plain rows.
Each new connection registers pgvector's binary codec (see ``codec`` for when it is used), so
the ``vector`` extension must exist before the service connects: migrate first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from pgvector.asyncpg import register_vector
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from app.adapters.postgres.migrate import head

SELECT_VERSION = text("SELECT version_num FROM alembic_version")


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _literal(value: str) -> str:
    """A PostgreSQL escape-string literal: safe whatever standard_conforming_strings says."""
    return "E'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def app_url(owner_url: str, role: str, password: str | None) -> str:
    """The owner URL with the user replaced by ``role`` (and its password, if any)."""
    url = make_url(owner_url).set(username=role, password=password)
    return url.render_as_string(hide_password=False)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Binary codec for pgvector's type: query vectors go as float4 arrays, not text literals.
    dbapi_connection.run_async(register_vector)


class Database:
    """Owns the app-role engine; adapters borrow transactions from it."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    @classmethod
    async def open(
        cls, owner_url: str, *, role: str, password: str | None, pool_size: int = 10,
        pool_timeout: float = 10.0,
    ) -> Database:
        """Build the pool (lazily: no connection is made here; ``ping()`` checks one)."""
        head()  # read the scripts directory now, not on the first /readyz
        engine = create_async_engine(
            app_url(owner_url, role, password),
            pool_size=pool_size,
            # No overflow: a connection opened past the pool is closed on return, and a turn
            # fans out to ~10 at once, so under load overflow meant a new backend (fork,
            # auth, codec introspection, re-prepares) per query. Waiting for one is cheaper.
            max_overflow=0,
            pool_timeout=pool_timeout,  # then sqlalchemy.exc.TimeoutError: a 503 store-busy
            pool_recycle=1800,
            json_deserializer=orjson.loads,
            json_serializer=_json_text,  # the manifest body on every turn: stdlib json was ~2%
            connect_args={
                # JIT compilation costs more than it saves on these short, indexed queries.
                "server_settings": {"jit": "off", "application_name": "ctxgate"},
            },
        )
        event.listen(engine.sync_engine, "connect", _on_connect)
        return cls(engine)

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def tenant_tx(self, tenant_id: str) -> AsyncIterator[AsyncConnection]:
        """A transaction scoped to ``tenant_id`` by RLS; commits on success, rolls back on
        an exception, and discards the connection if even that fails (it must never go back
        to the pool inside a transaction that carries a tenant)."""
        if not tenant_id or "\x00" in tenant_id:
            raise ValueError("tenant_id must be non-empty text")
        # SQLAlchemy's BEGIN, a prepared set_config and COMMIT were three round trips and most
        # of a turn's driver CPU (docs/benchmarks.md). On an autocommit connection one simple
        # query opens the transaction and scopes it; SQLAlchemy then runs inside it.
        async with self._autocommit.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            await raw.execute(f"BEGIN; SELECT set_config('app.tenant_id', {_literal(tenant_id)},"
                              " true)")
            try:
                yield conn
            except BaseException:
                try:
                    await raw.execute("ROLLBACK")
                except BaseException:
                    await conn.invalidate()
                    raise
                raise
            try:
                await raw.execute("COMMIT")
            except BaseException:
                await conn.invalidate()
                raise

    @asynccontextmanager
    async def unscoped_tx(self) -> AsyncIterator[AsyncConnection]:
        """A transaction with no tenant set: tenant tables read as empty here."""
        async with self.engine.begin() as conn:
            yield conn

    @asynccontextmanager
    async def unscoped_statement(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one statement that needs no transaction (a key lookup)."""
        async with self._autocommit.connect() as conn:
            yield conn

    async def ping(self) -> bool:
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            return False
        return True

    async def migrations_current(self) -> bool:
        """True when the database is at the newest migration this code knows."""
        try:
            async with self.unscoped_tx() as conn:
                version = (await conn.execute(SELECT_VERSION)).scalar_one_or_none()
        except Exception:
            return False
        return version == head()
