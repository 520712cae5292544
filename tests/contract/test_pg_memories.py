"""PgMemoryStore against the real server: write under the gate, recall pushdown rules."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.memories import PgMemoryStore
from app.core.memory_gate import GateDecision, MemoryWrite
from app.core.model import DataLevel, MemoryStatus
from app.ports import MemoryProbe, MemoryQuery
from tests.contract.test_pg_knowledge import stored_row, unit

NOW = datetime.now(UTC)


@pytest.fixture
async def store(pg_owner_url: str) -> AsyncIterator[PgMemoryStore]:
    db = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield PgMemoryStore(db)
    await db.close()


def w(statement: str, **kw: object) -> MemoryWrite:
    base = MemoryWrite(statement=statement, scope_level="user", user_id="alice", domain=None,
                       origin="user_stated", evidence_ref=None, source_session="s1",
                       owner="alice", confidence=0.9, sensitivity=DataLevel.INTERNAL, key=None,
                       expires_at=None, task_id=None)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


async def put(store: PgMemoryStore, tenant: str, mid: str, write: MemoryWrite,
              status: MemoryStatus = MemoryStatus.ACTIVE) -> None:
    d = GateDecision(decision="accepted", type="memory.accepted", reason="", status=status)
    probe = MemoryProbe(write=write, memory_id=mid, embedding=unit(1), actor="k", now=NOW)
    _, rec = await store.write(tenant_id=tenant, probe=probe, gate=lambda _: d)
    assert rec is not None


async def test_recall_pushdown(store: PgMemoryStore, tenant: str, other_tenant: str) -> None:
    text = "refund redis"
    await put(store, tenant, "mine", w(f"{text} mine"))
    await put(store, tenant, "bob", w(f"{text} bob", user_id="bob"))
    await put(store, tenant, "team_all", w(f"{text} team", scope_level="team", user_id=None,
                                           tenant_wide=True))
    await put(store, tenant, "team_bare", w(f"{text} bare", scope_level="team", user_id=None))
    await put(store, tenant, "team_pay", w(f"{text} pay", scope_level="team", user_id=None,
                                           domain="payments"))
    await put(store, tenant, "team_hr", w(f"{text} hr", scope_level="team", user_id=None,
                                          domain="hr"))
    await put(store, tenant, "expired", w(f"{text} old", expires_at=NOW - timedelta(days=1)))
    await put(store, tenant, "high", w(f"{text} conf", sensitivity=DataLevel.CONFIDENTIAL))
    await put(store, tenant, "pending", w(f"{text} p"), MemoryStatus.PENDING)
    await put(store, tenant, "gone", w(f"{text} s"), MemoryStatus.SUPERSEDED)
    await put(store, tenant, "hyp1", w(f"{text} h1", task_id="t1"), MemoryStatus.HYPOTHESIS)
    await put(store, tenant, "hyp2", w(f"{text} h2", task_id="t2"), MemoryStatus.HYPOTHESIS)
    await put(store, other_tenant, "elsewhere", w(f"{text} other"))
    q = MemoryQuery(tenant_id=tenant, user_id="alice", domain="payments", task_id="t1",
                    max_level=DataLevel.INTERNAL, now=NOW, embedding=unit(1), text=text, k=50)
    expected = {"mine", "team_all", "team_pay", "hyp1"}
    hits = await store.recall(query=q)
    vector = {h.record.memory_id for h in hits if h.ranker == "memory_vector"}
    fts = {h.record.memory_id for h in hits if h.ranker == "memory_fts"}
    assert vector == fts == expected
    for ranker in ("memory_vector", "memory_fts"):
        assert [h.rank for h in hits if h.ranker == ranker] == list(range(1, 5))
    only_text = await store.recall(query=dataclasses.replace(q, embedding=None))
    assert {h.ranker for h in only_text} == {"memory_fts"}
    only_vector = await store.recall(query=dataclasses.replace(q, text="the"))  # no terms
    assert {h.ranker for h in only_vector} == {"memory_vector"}


async def test_review_and_delete(store: PgMemoryStore, tenant: str) -> None:
    await put(store, tenant, "old", w("deploys on tuesday", scope_level="team", user_id=None))
    d = GateDecision(decision="pending", type="memory.pending_approval", reason="",
                     status=MemoryStatus.PENDING,
                     target=await store.get(tenant_id=tenant, memory_id="old"))
    probe = MemoryProbe(write=w("deploys on thursday", scope_level="team", user_id=None),
                        memory_id="new", embedding=None, actor="k", now=NOW)
    await store.write(tenant_id=tenant, probe=probe, gate=lambda _: d)
    done = await store.review(tenant_id=tenant, memory_id="new", approve=True, actor="a",
                              now=NOW)
    assert done is not None
    assert done.status is MemoryStatus.ACTIVE
    old = await store.get(tenant_id=tenant, memory_id="old")
    assert old is not None
    assert old.status is MemoryStatus.SUPERSEDED
    assert await store.review(tenant_id=tenant, memory_id="new", approve=True, actor="a",
                              now=NOW) is None
    assert await store.delete(tenant_id=tenant, memory_id="old")
    assert await store.history(tenant_id=tenant, memory_id="old") == []


async def test_a_memory_row_keeps_its_embedding_inline(
        store: PgMemoryStore, tenant: str, pg_owner_url: str) -> None:
    """Recall's distances read the row's own page, not TOAST (migration 0009)."""
    await put(store, tenant, "inline", w("the refund worker restarts after deploys " * 12))
    size, toast = await stored_row(pg_owner_url, "memories",
                                   "tenant_id = $1 AND memory_id = 'inline'", tenant)
    assert size > 2000 and toast is None


async def test_team_memory_without_domain_stays_out_of_other_domains(
        store: PgMemoryStore, tenant: str) -> None:
    text = "deploy freeze"
    await put(store, tenant, "bare", w(f"{text} bare", scope_level="team", user_id=None))
    await put(store, tenant, "wide", w(f"{text} wide", scope_level="team", user_id=None,
                                       tenant_wide=True))
    await put(store, tenant, "pay", w(f"{text} pay", scope_level="team", user_id=None,
                                      domain="payments"))
    await put(store, tenant, "mine", w(f"{text} mine"))  # a user's own: every domain
    q = MemoryQuery(tenant_id=tenant, user_id="alice", domain="payments", task_id=None,
                    max_level=DataLevel.INTERNAL, now=NOW, embedding=None, text=text, k=50)
    assert {h.record.memory_id for h in await store.recall(query=q)} == {"wide", "pay", "mine"}
    hr = await store.recall(query=dataclasses.replace(q, domain="hr"))
    assert {h.record.memory_id for h in hr} == {"wide", "mine"}
    none = await store.recall(query=dataclasses.replace(q, domain=None))
    assert {h.record.memory_id for h in none} == {"bare", "wide", "mine"}
    wide = await store.get(tenant_id=tenant, memory_id="wide")
    assert wide is not None and wide.tenant_wide


async def test_recall_honours_purpose(store: PgMemoryStore, tenant: str) -> None:
    text = "refund escalation"
    await put(store, tenant, "any", w(f"{text} any"))
    for purpose in ("support", "analysis", "execution"):
        await put(store, tenant, purpose, w(f"{text} {purpose}", purpose=purpose))
    q = MemoryQuery(tenant_id=tenant, user_id="alice", domain=None, task_id=None,
                    max_level=DataLevel.INTERNAL, now=NOW, embedding=unit(1), text=text, k=50)
    for purpose in ("support", "analysis", "execution"):
        hits = await store.recall(query=dataclasses.replace(q, purpose=purpose))
        assert {h.record.memory_id for h in hits} == {"any", purpose}
    assert {h.record.memory_id for h in await store.recall(query=q)} == {"any"}
