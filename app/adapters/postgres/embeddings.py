"""Stored vectors by provenance, across the embedded tables (``EmbeddingStore``).

An embedded table is one entry of ``TABLES``: its name, the columns that key a row, the
column whose text was embedded, and what a NULL ``embedder`` means there (legacy: made before
migration 0018; or pending: not embedded yet, another job's queue). Every statement is built
from the entry, so a new table (its ``embedder`` column and ``embedding_census`` policy made
by a migration) joins by adding one line.

- ``claim``/``configured``: the one ``embedding_state`` row (no tenant: ``unscoped_tx``).
- ``census``: rows per (tenant, provenance), through the ``ctxgate_embedding_census`` definer
  function, the only path across tenants (it counts; no text or vector leaves it).
- ``stale``/``replace``: one tenant's rows in that tenant's RLS-scoped transaction, as every
  other adapter. ``replace`` is optimistic: it stores a vector only where the row still has
  the text that was embedded and is still stale, so a concurrent rewrite (a re-ingested
  chunk, an edited memory, a worker of the new embedder that got there first) wins.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from app.adapters.postgres.codec import vector_literal
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.leases import PgLeases
from app.core.embedding_space import CLIENT, EmbeddingSpace, Provenance
from app.ports import EmbeddingClaim, EmbeddingCount, StaleRow, Vector


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbeddedTable:
    name: str
    keys: tuple[tuple[str, str], ...]  # (column, SQL type) that identify a row in a tenant
    text: str  # the column whose text was embedded (as a passage)
    null_is_legacy: bool = True  # False: NULL is "not embedded yet"

    def statements(self) -> tuple[Sql, Sql]:
        """The stale rows' select and the optimistic vector update, for this table."""
        cols = ", ".join(c for c, _ in self.keys)
        # A NULL is the legacy model's (or, where it means "pending", never stale); a client's
        # vector is never re-embedded.
        stale = (f"coalesce(t.embedder, :null_as) <> :current AND "
                 f"left(coalesce(t.embedder, :null_as), {len(CLIENT)}) <> '{CLIENT}'")
        select = Sql(f"""
SELECT {cols}, t.{self.text} AS text FROM {self.name} t
WHERE t.tenant_id = :tenant_id AND {stale} ORDER BY {cols} LIMIT :limit""")  # noqa: S608 - names from TABLES, values bound
        arrays = ", ".join(f"CAST(:k{i} AS {typ}[])" for i, (_, typ) in enumerate(self.keys))
        names = ", ".join(f"k{i}" for i in range(len(self.keys)))
        match = " AND ".join(f"t.{c} = v.k{i}" for i, (c, _) in enumerate(self.keys))
        update = Sql(f"""
UPDATE {self.name} t SET embedding = CAST(v.embedding AS vector), embedder = :current
FROM unnest({arrays}, CAST(:texts AS text[]), CAST(:embeddings AS text[]))
     AS v({names}, text, embedding)
WHERE t.tenant_id = :tenant_id AND {match} AND t.{self.text} = v.text AND {stale}""")  # noqa: S608 - names from TABLES, values bound
        return select, update


TABLES = (
    EmbeddedTable(name="knowledge_chunks", keys=(("id", "bigint"),), text="text"),
    EmbeddedTable(name="memories", keys=(("memory_id", "text"),), text="statement"),
    EmbeddedTable(name="session_events", keys=(("session_id", "text"), ("seq", "integer")),
                  text="content", null_is_legacy=False),
)
_STATEMENTS = {t.name: t.statements() for t in TABLES}
_NULL_IS_LEGACY = {t.name: t.null_is_legacy for t in TABLES}

STATE_SQL = Sql("SELECT legacy_embedder, embedder FROM embedding_state FOR UPDATE")
INSERT_STATE_SQL = Sql("INSERT INTO embedding_state (legacy_embedder, embedder) "
                       "VALUES (:embedder, :embedder) ON CONFLICT (id) DO NOTHING")
MOVE_STATE_SQL = Sql("UPDATE embedding_state SET embedder = :embedder, changed_at = now() "
                     "WHERE embedder <> :embedder")
CONFIGURED_SQL = Sql("SELECT embedder FROM embedding_state")
CENSUS_SQL = Sql("SELECT tenant_id, embedder, n FROM ctxgate_embedding_census(:table)")


class PgEmbeddingStore:
    tables = tuple(t.name for t in TABLES)

    def __init__(self, db: Database, leases: PgLeases | None = None) -> None:
        self._db = db
        self._leases = leases or PgLeases(db)

    async def claim(self, *, embedder: str) -> EmbeddingClaim:
        async with self._db.unscoped_tx() as conn:
            await conn.execute(INSERT_STATE_SQL, {"embedder": embedder})
            row = await conn.one(STATE_SQL)  # locked: two workers starting claim in turn
            await conn.execute(MOVE_STATE_SQL, {"embedder": embedder})
        return EmbeddingClaim(legacy=row.legacy_embedder, previous=row.embedder)

    async def configured(self) -> str | None:
        async with self._db.unscoped_tx() as conn:
            value: str | None = await conn.fetchval(CONFIGURED_SQL)
        return value

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        # A lease, not a lock held on a connection: the pass spans many short transactions
        # (behind PgBouncer each may run on another server connection), and a worker that
        # dies lets it lapse.
        async with self._leases.hold("reembed") as mine:
            yield mine

    async def census(self, *, space: EmbeddingSpace) -> list[EmbeddingCount]:
        out: dict[tuple[str, str, Provenance], int] = {}
        async with self._db.unscoped_tx() as conn:
            for table in self.tables:
                for r in await conn.fetch(CENSUS_SQL, {"table": table}):
                    key = (table, r.tenant_id, space.provenance(
                        r.embedder, null_is_legacy=_NULL_IS_LEGACY[table]))
                    out[key] = out.get(key, 0) + r.n
        return [EmbeddingCount(table=t, tenant_id=tenant, provenance=p, rows=n)
                for (t, tenant, p), n in out.items()]

    async def stale(self, *, table: str, tenant_id: str, space: EmbeddingSpace, limit: int
                    ) -> list[StaleRow]:
        select, _ = _STATEMENTS[table]
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(select, {**_space_params(table, space),
                                             "tenant_id": tenant_id, "limit": limit})
        return [StaleRow(key=tuple(r)[:-1], text=r.text) for r in rows]

    async def replace(self, *, table: str, tenant_id: str, space: EmbeddingSpace,
                      rows: Sequence[tuple[StaleRow, Vector]]) -> int:
        if not rows:
            return 0
        _, update = _STATEMENTS[table]
        keys: dict[str, Any] = {f"k{i}": [row.key[i] for row, _ in rows]
                                for i in range(len(rows[0][0].key))}
        async with self._db.tenant_tx(tenant_id) as conn:
            return await conn.execute(update, {
                **_space_params(table, space), **keys, "tenant_id": tenant_id,
                "texts": [row.text for row, _ in rows],
                "embeddings": [vector_literal(v) for _, v in rows]})


def _space_params(table: str, space: EmbeddingSpace) -> dict[str, str]:
    return {"current": space.current,
            "null_as": space.legacy if _NULL_IS_LEGACY[table] else space.current}
