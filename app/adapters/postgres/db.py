"""The service's PostgreSQL connection: one asyncpg pool, connected as the app role.

Contract:
- ``await Database.open(service_url(settings), pool_size=...)`` builds the pool (lazy: no
  connection is made until first use) for the *app role*, not the owner, so Row-Level Security
  applies to every statement the service runs. ``service_url`` is ``CTXGATE_APP_DATABASE_URL``
  (its own host and port: PgBouncer or a proxy may sit in front), else the owner URL with the
  user and password replaced (``app_url``); ``open(owner_url, role=..., password=...)`` derives
  the same way (tests, benchmarks).
- ``tenant_tx(tenant_id)`` yields a ``Tx`` inside a transaction whose first statement is
  ``set_config('app.tenant_id', tenant_id, true)``: transaction-local, so a pooled
  connection never carries a tenant into the next checkout. Every adapter query runs here.
- ``read_tx(tenant_id)`` is the same for reads, ``READ ONLY``; inside ``shared_reads(tenant_id)``
  every ``read_tx`` of that tenant — in that task and the tasks it starts — joins one of the
  block's read-only transactions instead, queued on its connection: a turn's seven layer
  reads cost one BEGIN and one COMMIT, not seven of each. A process with no other block open
  spreads them over up to ``read_lanes`` connections (latency when idle, throughput when
  busy).
- ``connection()`` is a ``Tx`` without a transaction: single statements (a key lookup, a
  ping). Nothing here holds session state across transactions (background jobs hold leases,
  ``leases``), so any pooler may sit in front.
- ``unscoped_tx()`` is for the SECURITY DEFINER key functions and ``alembic_version``: the
  app role has no privilege on tenant tables that RLS would not filter to zero rows anyway.
- A connection that does not come free within ``pool_timeout`` raises ``StoreBusy``.
- ``ping()`` and ``migrations_current()`` back ``/readyz``.

Statements are ``Sql``: written with ``:name`` parameters, compiled once to asyncpg's ``$n``,
prepared once per connection by asyncpg's statement cache; rows are ``Row`` records read by
attribute. SQLAlchemy Core sat here before: its execution context cost ~0.35 ms of CPU per
transaction, about 4 ms of a turn's ~11 (docs/benchmarks.md); alembic still uses it.
Each new connection registers pgvector's binary codec (see ``codec`` for when it is used) and
a jsonb codec (parameters are serialized text, columns are parsed with orjson), so the
``vector`` extension must exist before the service connects: migrate first.

Behind PgBouncer in transaction pooling (``open(..., pgbouncer=True)``, setting
``database_pgbouncer``) a client keeps its server connection only while a transaction is
open. So asyncpg's statement cache is off: a statement prepared once on one server connection
would later be executed on another (PgBouncer < 1.21 tracks none). With no cache, asyncpg
sends each statement's Parse with its Bind/Execute and one Sync, so even a statement outside
a transaction (``connection()``) runs whole on one server connection. ``jit=off`` is set in
every transaction instead of as a startup parameter, which PgBouncer refuses ("unsupported
startup parameter") unless told to ignore it. A ``shared_reads`` block keeps to one
connection there (``read_lanes`` is 1). docs/scaling.md.

With a read replica (``replica.ReplicaReads``), a turn's ``shared_reads`` block may be opened
on the replica's ``Database``: the block's lanes then come from that pool, and every
``read_tx`` of the tenant inside it, whichever ``Database`` it is called on, joins them.
The primary's ``fenced`` hook records the WAL position of each write for read-your-writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
from pgvector.asyncpg import register_vector
from sqlalchemy.engine import make_url

from app.adapters.postgres.migrate import head
from app.settings import Settings

# ``:name`` (the whole word), not a ``::type`` cast; ``:name::type`` is the parameter, then
# its cast. As in SQLAlchemy's text(), a ``:word`` inside a string literal would be read as a
# parameter: statements here never hold one.
_PARAM = re.compile(r"(?<![:\w\\]):(\w+)")
NO_PARAMS: Mapping[str, Any] = {}
NO_SETTINGS: Mapping[str, str] = {}
# JIT compilation costs more than it saves on these short, indexed queries. A startup
# parameter when connected to PostgreSQL itself; set in every transaction behind PgBouncer.
PER_SESSION: Mapping[str, str] = {"jit": "off"}
# After a commit that wrote (it was given a transaction id): the primary's WAL position past
# the commit record, for read-your-writes on a replica (``Database.fenced``).
WROTE = "SELECT pg_current_xact_id_if_assigned() IS NOT NULL"
WAL_END = "SELECT pg_current_wal_insert_lsn() - '0/0'"
# (tenant_id, WAL byte position past the write, or None: committed, position unknown)
Fence = Callable[[str, int | None], Awaitable[None]]
# How long a shared_reads block waits for a spare connection it saw idle before it queues.
SPARE_WAIT_S = 0.05


class StoreBusy(Exception):
    """No database connection came free within the pool timeout."""

    type = "store-busy"


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStats:
    """The pool now (``ctxgate_db_pool_*``): its ceiling, the connections it holds open and
    how many of those are checked out, the callers waiting for one, and how many waits so far
    ended in ``StoreBusy``."""

    max_size: int
    open: int
    in_use: int
    waiting: int
    timeouts: int


class Sql:
    """A statement with ``:name`` parameters, compiled once to ``$n`` placeholders."""

    __slots__ = ("names", "source", "text")

    def __init__(self, sql: str) -> None:
        self.source = sql
        names: list[str] = []

        def number(m: re.Match[str]) -> str:
            if m.group(1) not in names:
                names.append(m.group(1))
            return f"${names.index(m.group(1)) + 1}"

        self.text = _PARAM.sub(number, sql)
        self.names = tuple(names)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[n] for n in self.names]


_item = asyncpg.Record.__getitem__


def _discard(raw: asyncpg.Connection) -> None:
    """Close a connection that must not go back to the pool. One the server already dropped
    has been detached by the pool meanwhile (terminate() then raises): nothing left to do,
    and the original error, not this one, is what the caller must see."""
    with contextlib.suppress(asyncpg.InterfaceError):
        raw.terminate()


class Row(asyncpg.Record):  # type: ignore[misc]  # asyncpg ships no type information
    """A result row whose columns read as attributes (``row.doc_id``) or items; a column
    named like a Record method (``keys``, ``get``) hides it (``Row.keys(row)`` still works).

    Columns are looked up first: ``__getattr__`` runs only after the normal lookup has failed
    and raised, ~0.95 us per read against ~0.2 us here, and a turn reads ~500 columns."""

    def __getattribute__(self, name: str) -> Any:
        try:
            return _item(self, name)
        except KeyError:
            return object.__getattribute__(self, name)


class Tx:
    """One pooled connection, in a transaction or not; every call is one round trip."""

    __slots__ = ("raw",)

    def __init__(self, raw: asyncpg.Connection) -> None:
        self.raw = raw

    async def fetch(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Row]:
        rows: list[Row] = await self.raw.fetch(sql.text, *sql.args(params))
        return rows

    async def fetchrow(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Row | None:
        row: Row | None = await self.raw.fetchrow(sql.text, *sql.args(params))
        return row

    async def one(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Row:
        """The row ``sql`` must return (an INSERT … RETURNING, a row known to exist)."""
        row = await self.fetchrow(sql, params)
        if row is None:
            raise LookupError(f"no row from {sql.text.split(None, 3)[:3]}")
        return row

    async def fetchcol(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> list[Any]:
        """The first column of every row."""
        return [r[0] for r in await self.fetch(sql, params)]

    async def fetchval(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> Any:
        return await self.raw.fetchval(sql.text, *sql.args(params))

    async def execute(self, sql: Sql, params: Mapping[str, Any] = NO_PARAMS) -> int:
        """Run ``sql`` for its effect; the number of rows it touched."""
        status: str = await self.raw.execute(sql.text, *sql.args(params))
        last = status.rpartition(" ")[2]
        return int(last) if last.isdigit() else 0


SELECT_VERSION = Sql("SELECT version_num FROM alembic_version")
SELECT_ONE = Sql("SELECT 1")


def _literal(value: str) -> str:
    """A PostgreSQL escape-string literal: safe whatever standard_conforming_strings says."""
    return "E'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _opening(begin: str, tenant_id: str, settings: Mapping[str, str]) -> str:
    """One simple query that opens a transaction and scopes it: BEGIN, a prepared set_config
    and the statement as separate round trips cost two more."""
    if not tenant_id or "\x00" in tenant_id:
        raise ValueError("tenant_id must be non-empty text")
    return f"{begin}; SELECT {_set_configs({**settings, 'app.tenant_id': tenant_id})}"


def _set_configs(settings: Mapping[str, str]) -> str:
    return ", ".join(f"set_config({_literal(k)}, {_literal(v)}, true)"
                     for k, v in settings.items())


@dataclass(slots=True)
class _Lane:
    """One connection of a ``shared_reads`` block: its transaction, the settings it has, and
    the reads holding or awaiting it."""

    tx: Tx
    settings: dict[str, str]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    queued: int = 0


@dataclass(slots=True)
class _Shared:
    """The read-only transactions that ``read_tx`` calls inside ``shared_reads`` join."""

    tenant_id: str
    db: Database  # whose pool the lanes come from: a replica's, for a turn served there
    lanes: list[_Lane]
    extra: AsyncExitStack  # the transactions of every lane past the first
    grow: asyncio.Lock = field(default_factory=asyncio.Lock)  # held while a lane opens
    open: bool = True


_SHARED: ContextVar[_Shared | None] = ContextVar("ctxgate_shared_reads", default=None)


def app_url(owner_url: str, role: str, password: str | None) -> str:
    """The owner URL with the user replaced by ``role`` and the owner's password by
    ``password`` (none if None): never the owner's credentials."""
    # URL.set() leaves a field alone when given None: it kept the owner's password, which the
    # app role then sent when it had none of its own.
    url = make_url(owner_url).set(username=role)._replace(password=password)
    return url.render_as_string(hide_password=False)


def service_url(settings: Settings) -> str:
    """The URL the service connects with, as the app role: ``app_database_url`` as given (with
    ``app_db_password`` when the URL holds no password, so the URL itself need not be a
    secret), else derived from the owner's ``database_url`` by ``app_url``."""
    password = settings.app_db_password.get_secret_value() if settings.app_db_password \
        else None
    if settings.app_database_url is not None:
        return _with_password(settings.app_database_url, password)
    if settings.database_url is None:
        raise ValueError("no database URL: set CTXGATE_APP_DATABASE_URL (the app role's) or "
                         "CTXGATE_DATABASE_URL (the owner's, from which it is derived)")
    return app_url(settings.database_url, settings.app_db_role, password)


def replica_url(settings: Settings) -> str | None:
    """``replica_database_url`` (the app role's, on the replica) with ``app_db_password``
    when it holds none; None without a replica."""
    if settings.replica_database_url is None:
        return None
    return _with_password(settings.replica_database_url,
                          settings.app_db_password.get_secret_value()
                          if settings.app_db_password else None)


def _with_password(raw: str, password: str | None) -> str:
    url = make_url(raw)
    if url.password is None and password is not None:
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def _jsonb_param(value: Any) -> str:
    # Adapters serialize JSON themselves (codec.dumps), so a str here is already JSON text;
    # anything else is a bug that would otherwise store a Python repr.
    if not isinstance(value, str):
        raise TypeError(f"jsonb parameters are JSON text (codec.dumps), got {type(value)}")
    return value


async def _init(conn: asyncpg.Connection) -> None:
    # Binary codec for pgvector's type: query vectors go as float4 arrays, not text literals.
    await register_vector(conn)
    await conn.set_type_codec("jsonb", schema="pg_catalog", encoder=_jsonb_param,
                              decoder=orjson.loads, format="text")


async def _keep(_conn: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query (RESET ALL, UNLISTEN, advisory unlocks: one
    round trip per checkout). Nothing here sets session state: the tenant and planner
    settings are transaction-local, no session-level lock is taken (background jobs hold
    leases), and an open transaction is still rolled back by the pool (asyncpg >= 0.30)
    before this runs. A session-level SET or lock would leak into the next checkout, and
    behind PgBouncer into another client's transaction: add none."""


class Database:
    """Owns the app-role pool; adapters borrow transactions from it."""

    def __init__(self, pool: asyncpg.Pool, pool_timeout: float, read_lanes: int = 1, *,
                 pgbouncer: bool = False) -> None:
        if read_lanes < 1:
            raise ValueError("read_lanes must be >= 1")
        self.pool = pool
        self._timeout = pool_timeout
        # Behind PgBouncer one lane: an idle pooled connection there is no idle server
        # connection, and blocks that each hold one while waiting for another deadlock once
        # PgBouncer's pool is taken (seen with two server connections and four turns).
        self._lanes = 1 if pgbouncer else read_lanes
        # Settings every transaction opens with: a server connection behind PgBouncer got
        # no startup parameters of ours.
        self._local: Mapping[str, str] = PER_SESSION if pgbouncer else NO_SETTINGS
        self._blocks = 0  # shared_reads blocks open in this process: the load signal
        # asyncpg counts neither its waiters nor their timeouts: _acquire does.
        self._waiting = 0
        self._timeouts = 0
        self._fence: Fence | None = None

    def fenced(self, fence: Fence) -> None:
        """After each ``tenant_tx`` that wrote, call ``fence(tenant_id, position)`` with the
        WAL position past its commit (None if the connection failed after the commit), the
        read-your-writes fence of a read replica (``replica``): two more round trips for a
        write, one for a ``tenant_tx`` that wrote nothing. ``fence`` runs after the commit
        and must not fail."""
        self._fence = fence

    @classmethod
    async def open(
        cls, url: str, *, role: str | None = None, password: str | None = None,
        pool_size: int = 10, pool_timeout: float = 10.0, read_lanes: int = 1,
        pgbouncer: bool = False,
    ) -> Database:
        """Build the pool (lazily: no connection is made here; ``ping()`` checks one) on
        ``url``, the app role's; with ``role``, ``url`` is the owner's and the app role's is
        derived from it (``app_url``). ``pgbouncer``: ``url`` is a PgBouncer in transaction
        pooling (see the module docstring)."""
        head()  # read the scripts directory now, not on the first /readyz
        dsn = make_url(url if role is None else app_url(url, role, password)).set(
            drivername="postgresql")
        if "ssl" in dsn.query:  # SQLAlchemy's asyncpg spelling; asyncpg's DSN says sslmode
            dsn = dsn.difference_update_query(["ssl"]).update_query_dict(
                {"sslmode": dsn.query["ssl"]})
        pool = asyncpg.create_pool(
            dsn.render_as_string(hide_password=False),
            min_size=0,
            # A fixed ceiling: under load a connection opened past the pool meant a new
            # backend (fork, auth, codec introspection, re-prepares) per query. Waiting for
            # one is cheaper.
            max_size=pool_size,
            max_inactive_connection_lifetime=1800,
            init=_init,
            reset=_keep,
            record_class=Row,
            # Behind PgBouncer a prepared statement does not outlive its transaction.
            statement_cache_size=0 if pgbouncer else 100,
            server_settings={"application_name": "ctxgate",
                             **({} if pgbouncer else PER_SESSION)},
        )
        await pool  # min_size=0: starts the pool without connecting
        return cls(pool, pool_timeout, read_lanes, pgbouncer=pgbouncer)

    async def close(self) -> None:
        await self.pool.close()

    @asynccontextmanager
    async def _acquire(self, *, spare: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection. Inside an open ``shared_reads`` block only a ``spare`` one,
        which must be idle now: its wait is bounded by ``SPARE_WAIT_S``, not the pool
        timeout, so a block holding one connection never waits on the rest of the pool."""
        shared = _SHARED.get()
        if shared is not None and shared.open and not spare:
            # This task's turn already holds a connection for its shared reads; waiting for a
            # second one while holding it deadlocks once every pooled connection is so held.
            raise RuntimeError("a second connection inside shared_reads: write, or read "
                               "another tenant, outside the block")
        self._waiting += 1
        try:
            raw = await self.pool.acquire(timeout=SPARE_WAIT_S if spare else self._timeout)
        except TimeoutError as exc:  # also a connect that hangs: the store is not answering
            if not spare:  # (a spare that is not idle is no shortage: the read queues)
                self._timeouts += 1
            raise StoreBusy(f"no connection within {self._timeout} s") from exc
        finally:
            self._waiting -= 1
        try:
            yield raw
        finally:
            await self.pool.release(raw)

    @asynccontextmanager
    async def tenant_tx(self, tenant_id: str, settings: Mapping[str, str] = NO_SETTINGS
                        ) -> AsyncIterator[Tx]:
        """A transaction scoped to ``tenant_id`` by RLS, with ``settings`` (planner GUCs)
        local to it; commits on success, rolls back on an exception, and discards the
        connection if even that fails (it must never go back to the pool inside a
        transaction that carries a tenant)."""
        wrote: list[int | None] = []
        async with self._transaction(_opening("BEGIN", tenant_id, {**self._local, **settings}),
                                     wrote=wrote if self._fence else None) as tx:
            yield tx
        if wrote and self._fence is not None:
            await self._fence(tenant_id, wrote[0])

    @asynccontextmanager
    async def read_tx(self, tenant_id: str, settings: Mapping[str, str] = NO_SETTINGS
                      ) -> AsyncIterator[Tx]:
        """``tenant_tx`` for reads: ``READ ONLY``, and inside ``shared_reads(tenant_id)`` one
        of the block's transactions (held for the read; ``settings`` it lacks are set in it
        first)."""
        shared = _SHARED.get()
        if shared is not None and shared.tenant_id == tenant_id and shared.open:
            lane = await shared.db._lane(shared)
            lane.queued += 1
            try:
                async with lane.lock:
                    if shared.open:  # (a task that outlived the block opens its own)
                        missing = {k: v for k, v in settings.items()
                                   if lane.settings.get(k) != v}
                        if missing:
                            await lane.tx.raw.execute(f"SELECT {_set_configs(missing)}")
                            lane.settings.update(missing)
                        yield lane.tx
                        return
            finally:
                lane.queued -= 1
        async with self._transaction(_opening("BEGIN READ ONLY", tenant_id,
                                              {**self._local, **settings})) as tx:
            yield tx

    @asynccontextmanager
    async def shared_reads(self, tenant_id: str, settings: Mapping[str, str] = NO_SETTINGS
                           ) -> AsyncIterator[None]:
        """Every ``read_tx(tenant_id)`` inside the block, in this task and the tasks it
        starts, joins one of the block's read-only transactions, opened with ``settings``:
        one BEGIN and one COMMIT per connection, the reads queued in turn (READ COMMITTED:
        each still sees what was committed before it started). Normally that is one
        connection. When this block is the only one open in the process and a read would
        queue, the block opens another transaction on an idle pooled connection, up to
        ``read_lanes``: an idle worker's turn runs its slowest reads side by side, a busy
        one's spend no PostgreSQL time on more transactions. A read that fails aborts its
        transaction, and the block raises. Nothing inside may take a connection of its own
        (a write, another tenant's read): holding one connection while waiting for another
        deadlocks a full pool, so it raises instead; start such work outside the block."""
        settings = {**self._local, **settings}
        async with self._transaction(_opening("BEGIN READ ONLY", tenant_id, settings)) as tx, \
                AsyncExitStack() as extra:
            shared = _Shared(tenant_id, self, [_Lane(tx, dict(settings))], extra)
            token = _SHARED.set(shared)
            self._blocks += 1
            try:
                yield
            finally:
                self._blocks -= 1
                _SHARED.reset(token)
                # A read still running (or a lane still opening) finishes first.
                async with shared.grow:
                    for lane in shared.lanes:
                        await lane.lock.acquire()
                    shared.open = False
                    for lane in shared.lanes:
                        lane.lock.release()

    async def _lane(self, shared: _Shared) -> _Lane:
        """A free lane, a new one (the process is otherwise idle), or the least queued."""
        for lane in shared.lanes:
            if not lane.queued:
                return lane
        if (len(shared.lanes) < self._lanes and self._blocks == 1 and not shared.grow.locked()
                and self.pool.get_idle_size() > 0):
            async with shared.grow:
                first = shared.lanes[0].settings
                try:
                    tx = await shared.extra.enter_async_context(self._transaction(
                        _opening("BEGIN READ ONLY", shared.tenant_id, first), spare=True))
                except StoreBusy:  # taken meanwhile: queue instead
                    pass
                else:
                    lane = _Lane(tx, dict(first))
                    shared.lanes.append(lane)
                    return lane
        return min(shared.lanes, key=lambda lane: lane.queued)

    @asynccontextmanager
    async def unscoped_tx(self) -> AsyncIterator[Tx]:
        """A transaction with no tenant set: tenant tables read as empty here."""
        begin = f"BEGIN; SELECT {_set_configs(self._local)}" if self._local else "BEGIN"
        async with self._transaction(begin) as tx:
            yield tx

    @asynccontextmanager
    async def _transaction(self, begin: str, *, spare: bool = False,
                           wrote: list[int | None] | None = None) -> AsyncIterator[Tx]:
        """``wrote``: when the transaction wrote, append the WAL position past its commit
        (None when the connection failed after the commit: the write stands)."""
        async with self._acquire(spare=spare) as raw:
            await raw.execute(begin)
            try:
                yield Tx(raw)
                writer = wrote is not None and bool(await raw.fetchval(WROTE))
            except BaseException:
                try:
                    await raw.execute("ROLLBACK")
                except Exception:
                    # The connection is broken (the server went away mid-statement): it is
                    # discarded, and the error the caller sees is the one that happened, not
                    # the ROLLBACK's ("another operation is in progress").
                    _discard(raw)
                raise
            try:
                status = await raw.execute("COMMIT")
            except BaseException:
                _discard(raw)
                raise
            if status != "COMMIT":  # an error inside was swallowed: PostgreSQL rolled back
                raise RuntimeError(f"transaction did not commit ({status})")
            if writer and wrote is not None:
                try:
                    wrote.append(int(await raw.fetchval(WAL_END)))
                except Exception:
                    _discard(raw)
                    wrote.append(None)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Tx]:
        """A connection outside any transaction: one statement that needs none (a key
        lookup, a ping). A failure inside discards the connection: whatever state it was
        left in stays out of the pool."""
        async with self._acquire() as raw:
            try:
                yield Tx(raw)
            except BaseException:
                _discard(raw)
                raise

    def pool_stats(self) -> PoolStats:
        size = self.pool.get_size()
        return PoolStats(max_size=self.pool.get_max_size(), open=size,
                         in_use=size - self.pool.get_idle_size(), waiting=self._waiting,
                         timeouts=self._timeouts)

    async def ping(self) -> bool:
        try:
            async with self.connection() as conn:
                await conn.fetchval(SELECT_ONE)
        except Exception:
            return False
        return True

    async def migrations_current(self) -> bool:
        """True when the database is at the newest migration this code knows."""
        try:
            async with self.unscoped_tx() as conn:
                version = await conn.fetchval(SELECT_VERSION)
        except Exception:
            return False
        return bool(version == head())
