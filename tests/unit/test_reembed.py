"""The re-embedding job's rules on an in-memory ``EmbeddingStore`` (the real store's are in
tests/api/test_reembed.py), and what a stored provenance is to a space."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest

from app.core.embedding_space import EmbeddingSpace, Provenance, client_made
from app.ports import EmbeddingClaim, EmbeddingCount, StaleRow, Vector
from app.service.reembed import ReEmbedder

SPACE = EmbeddingSpace(current="b", legacy="a")


@pytest.mark.parametrize(("stored", "null_is_legacy", "expected"), [
    ("b", True, "current"), ("a", True, "stale"), (None, True, "stale"),
    (None, False, "pending"), ("client:b", True, "client"), ("client:a", True, "client_stale"),
])
def test_provenance(stored: str | None, null_is_legacy: bool, expected: str) -> None:
    assert SPACE.provenance(stored, null_is_legacy=null_is_legacy) == expected


def test_a_null_is_current_while_the_legacy_embedder_is_configured() -> None:
    assert EmbeddingSpace(current="a", legacy="a").provenance(None) == "current"
    assert SPACE.accepted == ("b", client_made("b"))


class FakeStore:
    """Rows: (table, tenant, key) -> (text, provenance)."""

    tables: tuple[str, ...] = ("chunks",)

    def __init__(self, rows: dict[tuple[str, str, int], tuple[str, str | None]]) -> None:
        self.rows = rows
        self.configured_as: str | None = "b"
        self.locked = False
        self.batches: list[int] = []
        self.fail_next = 0

    async def claim(self, *, embedder: str) -> EmbeddingClaim:
        return EmbeddingClaim(legacy="a", previous="a")

    async def configured(self) -> str | None:
        return self.configured_as

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        yield not self.locked

    async def census(self, *, space: EmbeddingSpace) -> list[EmbeddingCount]:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("database restarting")
        counts: dict[tuple[str, str, Provenance], int] = {}
        for (table, tenant, _), (_, stored) in self.rows.items():
            key = (table, tenant, space.provenance(stored))
            counts[key] = counts.get(key, 0) + 1
        return [EmbeddingCount(table=t, tenant_id=n, provenance=p, rows=c)
                for (t, n, p), c in counts.items()]

    async def stale(self, *, table: str, tenant_id: str, space: EmbeddingSpace, limit: int
                    ) -> list[StaleRow]:
        return [StaleRow(key=(k,), text=text) for (t, n, k), (text, stored)
                in sorted(self.rows.items())
                if (t, n) == (table, tenant_id) and space.provenance(stored) == "stale"][:limit]

    async def replace(self, *, table: str, tenant_id: str, space: EmbeddingSpace,
                      rows: Sequence[tuple[StaleRow, Vector]]) -> int:
        self.batches.append(len(rows))
        for row, _ in rows:
            self.rows[(table, tenant_id, row.key[0])] = (row.text, space.current)
        return len(rows)


class Model:
    model, dim = "b", 2

    def __init__(self, store: FakeStore | None = None) -> None:
        self.seen: list[str] = []
        self.store = store

    async def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen += texts
        if self.store is not None and len(self.seen) >= 4:
            self.store.configured_as = "c"  # a newer worker started meanwhile
        return [[1.0, 0.0] for _ in texts]


def rows(n: int, stored: str | None = "a") -> dict[tuple[str, str, int], tuple[str, str | None]]:
    return {("chunks", f"t{i % 2}", i): (f"text {i}", stored) for i in range(n)}


async def run(store: FakeStore, model: Model, retry_s: float = 60.0) -> ReEmbedder:
    job = ReEmbedder(store=store, embedder=model, space=SPACE, batch=3, pause_s=0,
                     retry_s=retry_s)
    job.start()
    await job.idle()
    return job


async def test_every_stale_row_is_re_embedded_in_bounded_batches_and_clients_never() -> None:
    store = FakeStore({**rows(7), ("chunks", "t0", 100): ("mine", "client:a"),
                       ("chunks", "t1", 101): ("legacy", None)})
    model = Model()
    job = await run(store, model)
    assert max(store.batches) <= 3
    assert "mine" not in model.seen
    assert sorted(model.seen) == sorted([*(f"text {i}" for i in range(7)), "legacy"])
    status = await job.status()
    assert status.tables["chunks"]["current"] == 8
    assert status.tables["chunks"]["client_stale"] == 1
    assert not status.running


async def test_the_job_leaves_the_work_to_a_worker_of_a_newer_embedder() -> None:
    store = FakeStore(rows(12))
    model = Model(store)
    await run(store, model)
    assert len(model.seen) < 12  # stopped after the batch in which "c" was configured


async def test_another_worker_holding_the_lock_does_the_work() -> None:
    store = FakeStore(rows(4))
    store.locked = True
    model = Model()
    await run(store, model)
    assert model.seen == []


async def test_a_failed_pass_is_retried() -> None:
    store = FakeStore(rows(4))
    store.fail_next = 1
    model = Model()
    await run(store, model, retry_s=0)
    assert len(model.seen) == 4
