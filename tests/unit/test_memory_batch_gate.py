"""``MemoryService.write_many`` with an in-memory store: the gate analyses each statement once
per batch however many writes meet it among their related records, and the embedder sees
only the statements that came without the client's embedding, in one call."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from app.core.memory_gate import Existing, GateDecision, MemoryWrite, Terms, statement_terms
from app.core.model import DataLevel, MemoryRecord, MemoryStatus, Principal, Role
from app.ports import Gate, MemoryProbe, MemoryStore
from app.service import memories
from app.service.memories import MemoryService

NOW = datetime(2026, 12, 1, tzinfo=UTC)
RELATED = 50


def write(statement: str) -> MemoryWrite:
    return MemoryWrite(statement=statement, scope_level="user", user_id="alice", domain=None,
                       origin="user_stated", evidence_ref=None, source_session="s",
                       owner="alice", confidence=0.5, sensitivity=DataLevel.INTERNAL, key=None,
                       expires_at=None, task_id=None)


def record(i: int) -> MemoryRecord:
    return MemoryRecord(
        tenant_id="t", memory_id=f"mem_{i}", version=1,
        statement=f"alice prefers runbook {i} on host {i}", origin="user_stated",
        evidence_ref=None, scope_level="user", user_id="alice", domain=None, owner="alice",
        source_session="s", task_id=None, confidence=0.5, sensitivity=DataLevel.INTERNAL,
        status=MemoryStatus.ACTIVE, supersedes=None, pinned=False, subject_key=None,
        observed_at=NOW, confirmed_at=NOW, expires_at=None)


class Store:
    """Every write meets the same ``RELATED`` records, as a batch of one scope does."""

    def __init__(self) -> None:
        self.embeddings: list[Sequence[float] | None] = []

    async def write_many(self, *, tenant_id: str, writes: Sequence[tuple[MemoryProbe, Gate]]
                         ) -> list[tuple[GateDecision, MemoryRecord | None]]:
        related = [Existing(record=record(i), similarity=0.8) for i in range(RELATED)]
        self.embeddings += [p.embedding for p, _ in writes]
        return [(gate(related), None) for _, gate in writes]


class Embedder:
    model, dim = "fake", 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[0.0, 1.0, 0.0] for _ in texts]


def service(store: Store, embedder: Embedder) -> MemoryService:
    return MemoryService(cast(MemoryStore, store), cast(Any, embedder), secret=(), pii=(),
                         pins=cast(Any, None), k=5, default_ttl_days=30, count_tokens=len)


PRINCIPAL = Principal(tenant_id="t", key_id="k", role=Role.RUNTIME,
                      max_data_level=DataLevel.CONFIDENTIAL, domains=None)


async def test_each_statement_is_analysed_once_per_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Counter[str] = Counter()

    def counting(statement: str) -> Terms:
        seen[statement] += 1
        return statement_terms(statement)

    monkeypatch.setattr(memories, "statement_terms", counting)
    writes = [write(f"alice prefers shell {i} version {i}") for i in range(20)]
    done = await service(Store(), Embedder()).write_many(principal=PRINCIPAL, writes=writes)
    assert {d.decision for d, _ in done} == {"accepted"}
    assert len(seen) == 20 + RELATED and set(seen.values()) == {1}
    # A second batch starts afresh: nothing outlives the batch.
    await service(Store(), Embedder()).write_many(principal=PRINCIPAL, writes=writes[:1])
    assert seen[writes[0].statement] == 2


async def test_only_statements_without_a_client_embedding_reach_the_embedder() -> None:
    store, embedder = Store(), Embedder()
    writes = [write(f"alice prefers editor {i}") for i in range(4)]
    given = [[1.0, 0.0, 0.0], None, [0.0, 0.0, 1.0], None]
    await service(store, embedder).write_many(principal=PRINCIPAL, writes=writes,
                                              embeddings=given)
    assert embedder.calls == [[writes[1].statement, writes[3].statement]]
    assert store.embeddings == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0],
                                [0.0, 1.0, 0.0]]
    await service(store, embedder).write_many(principal=PRINCIPAL, writes=writes[:1],
                                              embeddings=[[1.0, 0.0, 0.0]])
    assert len(embedder.calls) == 1  # all the client's: no call
