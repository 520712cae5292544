"""PgExplainReader on the real server, and the one source of truth for permission: the SQL
that searches push down (``knowledge.VISIBLE``) keeps exactly what the core predicate
(``app.core.explain.denial``: the permission guard's rules and the data level) allows."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from itertools import product

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.explain import PgExplainReader
from app.adapters.postgres.knowledge import PgKnowledgeStore
from app.core.explain import denial
from app.core.model import Acl, DataLevel, Scope
from app.core.retrieval import knowledge_candidates
from app.ports import KnowledgeQuery
from app.ports_explain import SourceKey
from tests.contract.test_pg_knowledge import NOW, db, doc, query, refs

__all__ = ["db"]  # the fixture, shared with the knowledge store's contract tests

ACLS = {"all": Acl(whole_tenant=True), "alice": Acl(whole_tenant=False, users=("alice",)),
        "oncall": Acl(whole_tenant=False, groups=("oncall",)),
        "nobody": Acl(whole_tenant=False)}
DOMAINS = {"nodomain": None, "payments": "payments", "hr": "hr"}
LEVELS = {"public": DataLevel.PUBLIC, "confidential": DataLevel.CONFIDENTIAL}
EXPIRY = {"fresh": None, "expired": NOW - timedelta(seconds=1)}
SCOPES = [query("", user_id="alice", groups=()),
          query("", user_id="bob", groups=("oncall",), domain="payments"),
          query("", user_id="carol", groups=(), domain="hr", max_level=DataLevel.SECRET)]


def scope_of(q: KnowledgeQuery) -> Scope:
    return Scope(tenant_id=q.tenant_id, key_id="k", user_id=q.user_id, groups=q.groups,
                 domain=q.domain, data_level=q.max_level, session_id=None, task_id=None)


@pytest.fixture
async def grid(db: Database, tenant: str) -> PgExplainReader:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    for (a, acl), (d, domain), (lv, level), (e, expires) in product(
            ACLS.items(), DOMAINS.items(), LEVELS.items(), EXPIRY.items()):
        await store.upsert(tenant_id=tenant, document=doc(
            f"{a}-{d}-{lv}-{e}", ["refund"], acl=acl, domain=domain, level=level,
            expires_at=expires))
    return PgExplainReader(db)


@pytest.mark.parametrize("q", SCOPES, ids=["alice", "bob-payments", "carol-hr-secret"])
async def test_sql_visibility_is_the_core_predicate(
        db: Database, grid: PgExplainReader, tenant: str, q: KnowledgeQuery) -> None:
    q = replace(q, tenant_id=tenant, k=100)
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    visible = await refs(store, q)
    allowed: set[str] = set()
    denied: set[str] = set()
    for doc_id in (f"{a}-{d}-{lv}-{e}" for a, d, lv, e in product(ACLS, DOMAINS, LEVELS,
                                                                   EXPIRY)):
        labels = await grid.labels(tenant_id=tenant, source=SourceKey(doc_id=doc_id))
        assert labels is not None and labels.current
        candidates = knowledge_candidates(labels.chunks, count_tokens=len)
        verdicts = {denial(scope_of(q), c, q.now) for c in candidates}
        (denied if None not in verdicts else allowed).add(doc_id)
    assert visible == allowed
    withheld = {h.doc_id for h in await grid.withheld(query=q)}
    assert withheld == denied  # the k best include every row: all that was kept out


async def test_labels_stay_in_the_tenant_and_ranks_follow_the_query(
        db: Database, tenant: str, other_tenant: str) -> None:
    store = PgKnowledgeStore(db, tokenizer="o200k_base", detectors="fp1")
    reader = PgExplainReader(db)
    await store.upsert(tenant_id=other_tenant, document=doc("theirs", ["refund"]))
    await store.upsert(tenant_id=tenant, document=doc("best", ["refund timeout retry"]))
    await store.upsert(tenant_id=tenant, document=doc("mid", ["refund timeout", "other"]))
    assert await reader.labels(tenant_id=tenant, source=SourceKey(doc_id="theirs")) is None
    chunk = SourceKey(doc_id="mid", version="1", chunk_no=1)
    found = await reader.labels(tenant_id=tenant, source=chunk)
    assert found is not None and found.current
    assert [h.chunk_ref for h in found.chunks] == ["kb://mid#v1:c1"]
    q = query(tenant, text="refund timeout retry")
    assert (await reader.ranks(query=q, source=SourceKey(doc_id="best")))["fts"] == 1
    assert (await reader.ranks(query=q, source=SourceKey(doc_id="mid")))["fts"] == 2
    ranked = await reader.ranks(query=q, source=chunk)  # "other": no query word
    assert "fts" not in ranked and ranked["vector"] >= 1
    await store.upsert(tenant_id=tenant, document=doc("mid", ["refund"], version="2"))
    old = await reader.labels(tenant_id=tenant, source=chunk)
    assert old is not None and not old.current
