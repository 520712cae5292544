"""The filtered-HNSW trap: a small tenant beside a big one still gets its exact top k."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pytest

from app.adapters.postgres import knowledge
from app.adapters.postgres.db import Database
from app.adapters.postgres.knowledge import PgKnowledgeStore
from app.core.model import Acl, DataLevel, Trust
from app.ports import KnowledgeQuery, NewChunk, NewDocument
from tests.contract.test_pg_knowledge import stored_row

DIM = 384
Vectors = npt.NDArray[np.float32]
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield database
    await database.close()


def unit_vectors(rng: np.random.Generator, n: int) -> Vectors:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    out: Vectors = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def documents(vectors: Vectors, per_doc: int) -> list[NewDocument]:
    return [
        NewDocument(
            doc_id=f"doc{start // per_doc}", version="1", title=None, domain=None,
            sensitivity=DataLevel.PUBLIC, trust=Trust.EVIDENCE, acl=Acl(whole_tenant=True),
            observed_at=None, expires_at=None, source=None,
            chunks=tuple(
                NewChunk(chunk_no=i, text=f"chunk {start + i}", tokens=2,
                         embedding=[float(x) for x in vectors[start + i]])
                for i in range(min(per_doc, len(vectors) - start))),
        )
        for start in range(0, len(vectors), per_doc)
    ]


async def ingest(store: PgKnowledgeStore, tenant: str, vectors: Vectors, per_doc: int) -> None:
    # Two writers: HNSW inserts are CPU-bound in the server and the machine has two cores.
    docs = documents(vectors, per_doc)

    async def writer(part: list[NewDocument]) -> None:
        for d in part:
            await store.upsert(tenant_id=tenant, document=d)

    await asyncio.gather(writer(docs[0::2]), writer(docs[1::2]))


def exact_top(vectors: Vectors, q: Vectors, k: int, per_doc: int) -> list[str]:
    order = np.argsort(1.0 - vectors @ q, kind="stable")[:k]
    return [f"kb://doc{i // per_doc}#v1:c{i % per_doc}" for i in order]


def knn(tenant: str, q: Vectors, k: int = 10) -> KnowledgeQuery:
    return KnowledgeQuery(tenant_id=tenant, user_id="u", groups=(), domain=None,
                          max_level=DataLevel.PUBLIC, now=NOW,
                          embedding=[float(x) for x in q], text="", k=k)


@dataclass(frozen=True)
class Trap:
    small_tenant: str
    big_tenant: str
    small: Vectors
    big: Vectors


@pytest.fixture(scope="module")
async def trap(db: Database) -> Trap:
    """Ingested once per module (HNSW inserts dominate): 3,000 big-tenant chunks, 20 small."""
    suffix = uuid.uuid4().hex[:10]
    rng = np.random.default_rng(20261201)
    t = Trap(small_tenant=f"small{suffix}", big_tenant=f"big{suffix}",
             small=unit_vectors(rng, 20), big=unit_vectors(rng, 3000))
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await ingest(store, t.big_tenant, t.big, per_doc=100)
    await ingest(store, t.small_tenant, t.small, per_doc=5)
    return t


async def test_small_tenant_gets_full_exact_k(db: Database, trap: Trap) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    rng = np.random.default_rng(1)
    for q in unit_vectors(rng, 5):
        hits = await store.search_vector(query=knn(trap.small_tenant, q))
        assert len(hits) == 10
        assert [h.chunk_ref for h in hits] == exact_top(trap.small, q, 10, 5)  # recall 1.0
        assert {h.tenant_id for h in hits} == {trap.small_tenant}


async def test_big_tenant_uses_hnsw_with_good_recall(db: Database, trap: Trap) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    rng = np.random.default_rng(2)
    recalls = []
    for q in unit_vectors(rng, 5):
        hits = await store.search_vector(query=knn(trap.big_tenant, q))
        assert len(hits) == 10
        assert [h.rank for h in hits] == list(range(1, 11))
        recalls.append(len({h.chunk_ref for h in hits} & set(exact_top(trap.big, q, 10, 100))) / 10)
    assert np.mean(recalls) >= 0.8


async def test_iterative_scan_fills_k_for_a_filtered_tenant(
    db: Database, trap: Trap, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Force the HNSW path for the small tenant: without iterative scan this returns ~0 rows.
    monkeypatch.setattr(knowledge, "EXACT_MAX_ROWS", 5)
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    q = unit_vectors(np.random.default_rng(3), 1)[0]
    hits = await store.search_vector(query=knn(trap.small_tenant, q))
    assert len(hits) == 10
    assert {h.tenant_id for h in hits} == {trap.small_tenant}


async def test_the_capped_exact_scan_finds_a_grown_set_and_a_large_one_is_remembered(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the cap the capped exact scan is the answer; a set that grew past it (another
    process's ingest) is found by the next search, remembered, and HNSW answers it."""
    monkeypatch.setattr(knowledge, "EXACT_MAX_ROWS", 8)
    rng = np.random.default_rng(4)
    tenant, vectors = f"grow{uuid.uuid4().hex[:10]}", unit_vectors(rng, 60)
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await ingest(store, tenant, vectors[:5], per_doc=5)  # 5 visible: the exact path
    q = unit_vectors(rng, 1)[0]
    first = await store.search_vector(query=knn(tenant, q, k=3))
    assert [h.chunk_ref for h in first] == exact_top(vectors[:5], q, 3, 5)
    assert not store._large  # a small filter is not remembered: its scan is its answer
    other = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")  # another process
    await ingest(other, tenant, vectors, per_doc=5)  # 60 chunks now
    grown = await store.search_vector(query=knn(tenant, q, k=3))
    assert [h.chunk_ref for h in grown] == exact_top(vectors, q, 3, 5)  # 60 rows: HNSW is exact
    assert [k for k in store._large if k[0] == tenant]  # at the cap: remembered
    again = await store.search_vector(query=knn(tenant, q, k=3))  # straight to HNSW
    assert [h.chunk_ref for h in again] == [h.chunk_ref for h in grown]
    await ingest(store, tenant, vectors[:1], per_doc=5)  # this store's ingest forgets them
    assert not [k for k in store._large if k[0] == tenant]


async def test_a_chunk_row_keeps_its_embedding_inline(db: Database, pg_owner_url: str) -> None:
    """A chunk of runbook size (row ~3.5 kB) is not toasted: a distance reads one heap page,
    not a TOAST index probe and a second page per row (migration 0009)."""
    tenant = f"inline{uuid.uuid4().hex[:10]}"
    vector = unit_vectors(np.random.default_rng(5), 1)
    text = " ".join(f"step {i}: restart the refund worker and check its queue" for i in range(24))
    doc = documents(vector, 1)[0]
    chunk = dataclasses.replace(doc.chunks[0], text=text)
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=dataclasses.replace(doc, chunks=(chunk,)))
    size, toast = await stored_row(pg_owner_url, "knowledge_chunks", "tenant_id = $1", tenant)
    assert size > 2500 and toast is None
