"""Knowledge full text on the real server: English stems beside the CJK bigrams, function
words never match, the similarity a vector hit carries, and the per-ranker pool bound."""

from __future__ import annotations

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.knowledge import PgKnowledgeStore
from app.core.retrieval import POOL_MAX
from tests.contract.test_pg_knowledge import db, doc, query, unit

__all__ = ["db"]  # the fixture, shared with the store's main contract tests


async def test_stemming_finds_research_from_researching(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("notes", ["Research notes on refunds"]))
    await store.upsert(tenant_id=tenant, document=doc("zh", ["退款服务的接口调用超时了"]))
    for text in ("researching", "researched refund", "RESEARCHES"):
        hits = await store.search_text(query=query(tenant, text=text))
        assert [h.doc_id for h in hits] == ["notes"], text
    # the CJK bigrams still match exactly, beside the stems
    zh = await store.search_text(query=query(tenant, text="为什么 researching 接口超时"))
    assert {h.doc_id for h in zh} == {"notes", "zh"}


async def test_function_words_match_nothing(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("chatter", [
        "Did you see the game? What a match, how did they do that?"]))
    await store.upsert(tenant_id=tenant, document=doc("runbook", [
        "Refund calls time out when the gateway is slow"]))
    assert await store.search_text(query=query(tenant, text="did")) == []
    assert await store.search_text(query=query(tenant, text="what did the how")) == []
    hits = await store.search_text(query=query(tenant, text="why did the refund time out?"))
    assert [h.doc_id for h in hits] == ["runbook"]  # "did" no longer ties the chatter in


async def test_vector_hits_carry_their_cosine_similarity(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc("d", ["refund a", "refund b"]))
    hits = await store.search_vector(query=query(tenant, embedding=unit(0)))
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)  # chunk 0 is unit(0) itself
    assert hits[1].similarity is not None and hits[1].similarity < 0.5
    # a full-text hit carries its cosine too (test_pg_knowledge), none without a vector
    assert all(h.similarity is None for h in await store.search_text(
        query=query(tenant, embedding=None)))


async def test_a_ranker_returns_at_most_the_pool(db: Database, tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    await store.upsert(tenant_id=tenant, document=doc(
        "big", [f"refund note {i}" for i in range(POOL_MAX + 20)]))
    deep = query(tenant, k=POOL_MAX * 5)
    assert len(await store.search_text(query=deep)) == POOL_MAX
    assert len(await store.search_vector(query=deep)) == POOL_MAX
    assert len(await store.search_text(query=query(tenant, k=40))) == 40
