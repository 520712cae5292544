"""PgKnowledgeStore against the real server: versions, permission pushdown, CJK full text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.knowledge import PgKnowledgeStore
from app.core.model import Acl, DataLevel, Finding, Trust
from app.ports import KnowledgeQuery, NewChunk, NewDocument
from bench.ingest import owner_connection

DIM = 384
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RNG = np.random.default_rng(7)
WHOLE = Acl(whole_tenant=True)


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield database
    await database.close()


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


async def stored_row(owner_url: str, table: str, where: str, *args: object
                     ) -> tuple[int, object]:
    """A row's stored size, and the TOAST chunk of its embedding (None: kept in the row)."""
    conn = await owner_connection(owner_url)
    try:
        row = await conn.fetchrow(
            f"SELECT pg_column_size(t.*) AS size, pg_column_toast_chunk_id(embedding) AS toast "
            f"FROM {table} t WHERE {where}", *args)
    finally:
        await conn.close()
    assert row is not None
    return int(row["size"]), row["toast"]


def doc(doc_id: str, texts: list[str], *, version: str = "1", acl: Acl = WHOLE,
        domain: str | None = None, level: DataLevel = DataLevel.INTERNAL,
        expires_at: datetime | None = None) -> NewDocument:
    return NewDocument(
        doc_id=doc_id, version=version, title=doc_id, domain=domain, sensitivity=level,
        trust=Trust.REVIEWED, acl=acl, observed_at=NOW - timedelta(days=1),
        expires_at=expires_at, source="test",
        chunks=tuple(NewChunk(chunk_no=i, text=t, tokens=len(t.split()), embedding=unit(i))
                     for i, t in enumerate(texts)),
    )


def query(tenant: str, text: str = "refund", **kw: object) -> KnowledgeQuery:
    base = KnowledgeQuery(tenant_id=tenant, user_id="alice", groups=("oncall",), domain=None,
                          max_level=DataLevel.INTERNAL, now=NOW, embedding=unit(0), text=text,
                          k=10)
    return replace(base, **kw)  # type: ignore[arg-type]


async def refs(store: PgKnowledgeStore, q: KnowledgeQuery) -> set[str]:
    vector = {h.doc_id for h in await store.search_vector(query=q)}
    text = {h.doc_id for h in await store.search_text(query=q)}
    assert vector == text, "both rankers must apply the same permission filter"
    return vector


async def test_upsert_and_hit_shape(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    assert await store.upsert(tenant_id=tenant, document=doc("d1", ["refund a", "refund b"])) == 2
    hits = await store.search_vector(query=query(tenant))
    assert [h.rank for h in hits] == [1, 2]
    top = hits[0]
    assert (top.chunk_ref, top.ranker, top.text) == ("kb://d1#v1:c0", "vector", "refund a")
    assert (top.tenant_id, top.trust, top.sensitivity, top.acl) == (
        tenant, Trust.REVIEWED, DataLevel.INTERNAL, WHOLE)
    assert top.observed_at == NOW - timedelta(days=1)
    fts_hits = await store.search_text(query=query(tenant))
    assert {h.ranker for h in fts_hits} == {"fts"} and len(fts_hits) == 2


async def test_stored_token_counts_reach_only_the_same_tokenizer(db: Database, tenant: str
                                                                 ) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("d1", ["refund a b", "refund"]))
    counted = {h.chunk_ref: h.tokens for h in await store.search_vector(query=query(tenant))}
    assert counted == {"kb://d1#v1:c0": 3, "kb://d1#v1:c1": 1}  # doc() counts words
    assert {h.tokens for h in await store.search_text(query=query(tenant))} == {1, 3}
    # counted again by the turn
    other = PgKnowledgeStore(db, tokenizer="cl100k_base", detectors="fp1")
    assert {h.tokens for h in await other.search_vector(query=query(tenant))} == {None}
    assert {h.tokens for h in await other.search_text(query=query(tenant))} == {None}


async def test_stored_findings_reach_only_the_same_detector_code(db: Database, tenant: str
                                                                 ) -> None:
    found = (Finding(type="pii.email", action="mask", start=7, end=9),)
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    chunks = (NewChunk(chunk_no=0, text="refund a@b", tokens=2, embedding=unit(0),
                       findings=found),
              NewChunk(chunk_no=1, text="refund", tokens=1, embedding=unit(1), findings=()),
              NewChunk(chunk_no=2, text="refund c", tokens=2, embedding=unit(2)))
    await store.upsert(tenant_id=tenant, document=replace(doc("d1", []), chunks=chunks))
    got = {h.chunk_no: h.findings for h in await store.search_vector(query=query(tenant))}
    assert got == {0: found, 1: (), 2: None}  # None: never scanned, the turn scans it
    assert {h.chunk_no: h.findings for h in await store.search_text(query=query(tenant))} == got
    other = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp2")  # detectors changed
    assert {h.findings for h in await other.search_vector(query=query(tenant))} == {None}


async def test_reingest_same_version_is_idempotent(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("d1", ["refund a", "refund b", "c"]))
    assert await store.upsert(tenant_id=tenant, document=doc("d1", ["refund new"])) == 1
    hits = await store.search_vector(query=query(tenant))
    assert [(h.chunk_ref, h.text) for h in hits] == [("kb://d1#v1:c0", "refund new")]


async def test_new_version_supersedes_old_chunks(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("d1", ["refund old", "refund old 2"]))
    await store.upsert(tenant_id=tenant, document=doc("d1", ["refund new"], version="2"))
    for hits in (await store.search_vector(query=query(tenant)),
                 await store.search_text(query=query(tenant))):
        assert [h.chunk_ref for h in hits] == ["kb://d1#v2:c0"]
    # A late re-ingest of an older version is stored but does not become current.
    await store.upsert(tenant_id=tenant, document=doc("d1", ["refund older"], version="1"))
    hits = await store.search_text(query=query(tenant))
    assert [h.chunk_ref for h in hits] == ["kb://d1#v2:c0"]


async def test_acl_pushdown(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("all", ["refund"]))
    await store.upsert(tenant_id=tenant, document=doc(
        "alice", ["refund"], acl=Acl(whole_tenant=False, users=("alice",))))
    await store.upsert(tenant_id=tenant, document=doc(
        "oncall", ["refund"], acl=Acl(whole_tenant=False, groups=("oncall", "x"))))
    await store.upsert(tenant_id=tenant, document=doc(
        "nobody", ["refund"], acl=Acl(whole_tenant=False)))
    assert await refs(store, query(tenant)) == {"all", "alice", "oncall"}
    assert await refs(store, query(tenant, user_id="bob", groups=())) == {"all"}
    assert await refs(store, query(tenant, user_id="bob", groups=("x",))) == {"all", "oncall"}


async def test_domain_level_and_expiry_pushdown(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("general", ["refund"]))
    await store.upsert(tenant_id=tenant, document=doc("pay", ["refund"], domain="payments"))
    await store.upsert(tenant_id=tenant, document=doc("hr", ["refund"], domain="hr"))
    await store.upsert(tenant_id=tenant, document=doc(
        "secret", ["refund"], level=DataLevel.SECRET))
    await store.upsert(tenant_id=tenant, document=doc(
        "public", ["refund"], level=DataLevel.PUBLIC))
    await store.upsert(tenant_id=tenant, document=doc(
        "expired", ["refund"], expires_at=NOW - timedelta(seconds=1)))
    await store.upsert(tenant_id=tenant, document=doc(
        "fresh", ["refund"], expires_at=NOW + timedelta(days=1)))
    assert await refs(store, query(tenant)) == {"general", "public", "fresh"}
    assert await refs(store, query(tenant, domain="payments")) == {
        "general", "public", "fresh", "pay"}
    assert await refs(store, query(tenant, max_level=DataLevel.PUBLIC)) == {"public"}
    assert await refs(store, query(tenant, max_level=DataLevel.SECRET)) == {
        "general", "public", "fresh", "secret"}
    assert await refs(store, query(tenant, now=NOW + timedelta(days=2))) == {"general", "public"}


async def test_tenants_never_see_each_other(db: Database, tenant: str, other_tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=other_tenant, document=doc("theirs", ["refund"]))
    assert await refs(store, query(tenant)) == set()


async def test_chinese_full_text(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("zh", ["退款服务的接口调用超时了"]))
    await store.upsert(tenant_id=tenant, document=doc("other", ["用户登录页面的样式"]))
    hits = await store.search_text(query=query(tenant, text="退款接口超时"))
    assert [h.doc_id for h in hits] == ["zh"]
    mixed = await store.search_text(query=query(tenant, text="为什么 refund 接口超时?"))
    assert [h.doc_id for h in mixed] == ["zh"]


async def test_full_text_ranks_better_coverage_first(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("one", ["the refund"]))
    await store.upsert(tenant_id=tenant, document=doc("three", ["refund call timeout here"]))
    hits = await store.search_text(query=query(tenant, text="refund call timeout"))
    assert [(h.doc_id, h.rank) for h in hits] == [("three", 1), ("one", 2)]


async def test_empty_queries(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    assert await store.search_vector(query=query(tenant, embedding=None)) == []
    assert await store.search_text(query=query(tenant, text="the ?!")) == []
    assert await store.search_text(query=query(tenant, k=0)) == []


async def test_lexical_ranking_prefers_more_terms_within_its_bounded_pool(
        db: Database, tenant: str) -> None:
    """The lexical leg ranks at most FTS_RANK_MAX matches (a bound on its cost), and within
    them a chunk holding every term ranks first."""
    from app.adapters.postgres.knowledge import FTS_RANK_MAX

    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    crowd = [f"refund note {i}" for i in range(FTS_RANK_MAX - 50)]
    await store.upsert(tenant_id=tenant, document=doc("crowd", crowd))
    await store.upsert(tenant_id=tenant, document=doc("exact", ["refund webhook timeout"]))
    hits = await store.search_text(query=query(tenant, text="refund webhook timeout", k=3))
    assert [h.doc_id for h in hits] == ["exact", "crowd", "crowd"]


async def test_a_text_hit_carries_its_cosine(db: Database, tenant: str) -> None:
    """A full-text hit is judged by meaning too: it carries the cosine to the query vector
    (none without one)."""
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("d", ["refund a", "refund b"]))
    hits = await store.search_text(query=query(tenant, embedding=unit(1)))
    by_chunk = {h.chunk_no: h.similarity for h in hits}
    assert by_chunk[1] == pytest.approx(1.0)
    assert by_chunk[0] == pytest.approx(float(np.dot(unit(0), unit(1))), abs=1e-5)
    assert {h.similarity for h in await store.search_text(
        query=query(tenant, embedding=None))} == {None}
