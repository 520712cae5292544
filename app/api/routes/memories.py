"""Long-term memory: the write gate, reads with history, admin review, delete.

A gate rejection is a normal answer (200, ``decision: "rejected"``): the write was understood
and refused by policy, not malformed. 201 means a row was created; 200 otherwise. A batch
(``{"items": [...]}``, ``app.api.batch``) answers ``{"items": [...]}`` in order, each with its
own decision; 201 when any item created a row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Response

from app.api.batch import check_each
from app.api.deps import (
    AdminDep,
    AssertionDep,
    ContainerDep,
    PrincipalDep,
    ReaderDep,
    RuntimeDep,
    check_tenant_claim,
)
from app.api.embeddings import check_dimensions
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    Id,
    MemoryBatchIn,
    MemoryBatchOut,
    MemoryDecisionOut,
    MemoryDetail,
    MemoryIn,
    MemoryList,
    MemoryOut,
    MemoryWriteIn,
    MintedId,
    Problem,
)
from app.core.errors import ForbiddenScope
from app.core.model import Role
from app.ports import MemoryFilter
from app.service.identity import bind_user

MemoryId = Annotated[MintedId, Path()]
UserQ = Annotated[Id | None, Query()]

router = APIRouter(tags=["memories"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422)}
CREATED = frozenset({"accepted", "superseded", "pending", "hypothesis"})


@router.post("/v1/memories", response_model=MemoryDecisionOut | MemoryBatchOut,
             status_code=200,
             responses={201: {"model": MemoryDecisionOut | MemoryBatchOut},
                        **ERRORS})  # type: ignore[dict-item]
async def write_memory(body: MemoryWriteIn, principal: RuntimeDep, container: ContainerDep,
                       response: Response, assertion: AssertionDep = None
                       ) -> MemoryDecisionOut | MemoryBatchOut:
    """Propose one memory, or a batch of up to 100 (``{"items": [...]}``: one embedder
    call, one transaction; any item that fails validation or the key's checks fails the
    batch and nothing is written). An item with an ``embedding`` is not sent to the
    embedder; the others of the batch go in one call."""
    items, batch = (body.items, True) if isinstance(body, MemoryBatchIn) else ([body], False)
    check_dimensions(items, dim=container.embedder.dim, batch=batch)

    def check(item: MemoryIn) -> None:
        check_tenant_claim(principal, item.tenant_id)
        if item.scope.user_id is not None:
            bind_user(principal, assertion, user_id=item.scope.user_id)

    check_each(items, check, batch=batch)
    now = datetime.now(UTC)
    done = await container.memories.write_many(
        principal=principal, writes=[item.to_domain(now) for item in items],
        embeddings=[item.embedding for item in items])
    if any(decision.decision in CREATED for decision, _ in done):
        response.status_code = 201
    out = [MemoryDecisionOut(decision=decision.decision, type=decision.type,
                             reason=decision.reason,
                             memory=MemoryOut.of(record) if record is not None else None)
           for decision, record in done]
    return MemoryBatchOut(items=out) if batch else out[0]


@router.get("/v1/memories", response_model=MemoryList, responses=ERRORS)  # type: ignore[arg-type]
async def list_memories(
    principal: ReaderDep, container: ContainerDep, user_id: UserQ = None,
    scope: Literal["user", "team"] | None = None,
    status: Literal["active", "pending", "superseded", "rejected", "hypothesis"] | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> MemoryList:
    rows = await container.memories.find(principal=principal, filt=MemoryFilter(
        user_id=user_id, scope_level=scope, status=status, limit=limit))
    return MemoryList(memories=[MemoryOut.of(r) for r in rows])


@router.get("/v1/memories/{memory_id}", response_model=MemoryDetail,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_memory(memory_id: MemoryId, principal: ReaderDep, container: ContainerDep,
                     user_id: UserQ = None) -> MemoryDetail:
    r, history = await container.memories.get(principal=principal, memory_id=memory_id,
                                              user_id=user_id)
    return MemoryDetail(**MemoryOut.of(r).model_dump(), history=history)


@router.delete("/v1/memories/{memory_id}", status_code=204,
               responses=ERRORS)  # type: ignore[arg-type]
async def delete_memory(memory_id: MemoryId, principal: PrincipalDep, container: ContainerDep,
                        user_id: UserQ = None) -> Response:
    if principal.role is Role.OPS:
        raise ForbiddenScope("an ops key may not delete memories")
    await container.memories.delete(principal=principal, memory_id=memory_id, user_id=user_id)
    return Response(status_code=204)


@router.post("/v1/memories/{memory_id}/approve", response_model=MemoryOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def approve_memory(memory_id: MemoryId, principal: AdminDep,
                         container: ContainerDep) -> MemoryOut:
    return MemoryOut.of(await container.memories.review(
        principal=principal, memory_id=memory_id, approve=True))


@router.post("/v1/memories/{memory_id}/reject", response_model=MemoryOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def reject_memory(memory_id: MemoryId, principal: AdminDep,
                        container: ContainerDep) -> MemoryOut:
    return MemoryOut.of(await container.memories.review(
        principal=principal, memory_id=memory_id, approve=False))
