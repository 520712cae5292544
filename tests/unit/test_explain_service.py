"""ExplainService on in-memory fakes: who may ask, what is missing, what needs no store."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from app.core.errors import ForbiddenScope, InvalidRequest, NotExplainable, NotFound
from app.core.model import DataLevel, Principal, Role
from app.ports import Embedder, KnowledgeStore, MemoryStore, SessionArchive, TaskStore
from app.ports_explain import KnowledgeProbe, RecordedTurn, SessionReach
from app.service.explain import ExplainService

NOW = datetime(2026, 12, 4, 22, 0, tzinfo=UTC)
BODY: dict[str, Any] = {
    "user_id": "alice", "session_id": None, "task_id": None,
    "created_at": NOW.isoformat(), "retrieval": {"knowledge": 8},
    "segments": [{"id": "seg_1", "ref": "kb://doc#v1:c0", "section": "dynamic", "tokens": 9}],
    "dropped": []}


class Turns:
    def __init__(self, recorded: dict[str, Any] | None) -> None:
        self.turns = {"t1": RecordedTurn(turn_id="t1", key_id="rt1", body=BODY,
                                         recorded=recorded)}

    async def turn(self, *, tenant_id: str, turn_id: str) -> RecordedTurn | None:
        return self.turns.get(turn_id) if tenant_id == "ten" else None


class Untouched:
    """Every other port: a test that reaches one fails."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no store read expected ({name})")


def service(recorded: dict[str, Any] | None = None) -> ExplainService:
    other = Untouched()
    return ExplainService(
        turns=Turns(recorded), knowledge=cast(KnowledgeProbe, other),
        documents=cast(KnowledgeStore, other),
        memories=cast(MemoryStore, other), sessions=cast(SessionArchive, other),
        reach=cast(SessionReach, other), tasks=cast(TaskStore, other),
        embedder=cast(Embedder, other), clock=lambda: NOW)


def key(role: Role, key_id: str = "k") -> Principal:
    return Principal(key_id=key_id, tenant_id="ten", role=role,
                     max_data_level=DataLevel.INTERNAL, domains=None)


async def test_the_manifest_answers_a_cited_ref_without_a_store() -> None:
    got = await service().explain(key(Role.OPS), "t1", "kb://doc")
    assert (got.explanation.outcome, got.explanation.detail["segment_id"]) == (
        "included", "seg_1")
    assert got.evaluated_at == NOW


@pytest.mark.parametrize(("principal", "turn_id", "error"), [
    (key(Role.OPS), "t-missing", NotFound),
    (key(Role.RUNTIME, "rt2"), "t1", NotFound),  # another runtime key's turn
    (key(Role.RUNTIME, "rt1"), "t1", ForbiddenScope),  # its own: explain is for ops
    (Principal(key_id="k", tenant_id="other", role=Role.ADMIN,
               max_data_level=DataLevel.SECRET, domains=None), "t1", NotFound),
])
async def test_who_may_ask(principal: Principal, turn_id: str,
                           error: type[Exception]) -> None:
    with pytest.raises(error):
        await service().explain(principal, turn_id, "kb://doc")


async def test_bad_refs_and_unrecorded_turns() -> None:
    with pytest.raises(InvalidRequest):
        await service().explain(key(Role.ADMIN), "t1", "no scheme")
    with pytest.raises(InvalidRequest):
        await service({"data_level": "internal"}).explain(key(Role.OPS), "t1", "kb://d#x")
    with pytest.raises(NotExplainable):  # not cited, and nothing recorded to re-evaluate
        await service(None).explain(key(Role.OPS), "t1", "kb://other")
    with pytest.raises(NotFound):  # a scheme explain does not look up
        await service({"data_level": "internal"}).explain(key(Role.OPS), "t1",
                                                          "bundle://b@1")
