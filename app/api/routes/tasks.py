"""Task checkpoints: versioned structured state (PUT), any revision readable (GET)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import AssertionDep, ContainerDep, ReaderDep, RuntimeDep, check_tenant_claim
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    INT32_MAX,
    CheckpointIn,
    CheckpointOut,
    CheckpointSaved,
    Id,
    Problem,
)
from app.core.errors import InvalidRequest
from app.core.model import Role
from app.service.identity import bind_user

router = APIRouter(tags=["tasks"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422)}
TaskId = Annotated[Id, Path()]


@router.put("/v1/tasks/{task_id:path}/checkpoint", response_model=CheckpointSaved,
            responses=ERRORS)  # type: ignore[arg-type]
async def put_checkpoint(task_id: TaskId, body: CheckpointIn, principal: RuntimeDep,
                         container: ContainerDep, assertion: AssertionDep = None
                         ) -> CheckpointSaved:
    check_tenant_claim(principal, body.tenant_id)
    bind_user(principal, assertion, user_id=body.user_id)
    revision = await container.tasks.put(
        principal=principal, checkpoint=body.to_domain(task_id),
        expected_revision=body.expected_revision)
    return CheckpointSaved(task_id=task_id, revision=revision)


@router.get("/v1/tasks/{task_id:path}/checkpoint", response_model=CheckpointOut,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_checkpoint(
    task_id: TaskId, principal: ReaderDep, container: ContainerDep,
    revision: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    user_id: Annotated[Id | None, Query()] = None,
    assertion: AssertionDep = None,
) -> CheckpointOut:
    if principal.role is Role.RUNTIME and user_id is None:
        # A runtime key acts for one user at a time: it must say which (ops and admin read
        # any task of the tenant).
        raise InvalidRequest("user_id is required with a runtime key")
    if user_id is not None or assertion is not None:
        bind_user(principal, assertion, user_id=user_id or "")
    cp = await container.tasks.get(tenant_id=principal.tenant_id, task_id=task_id,
                                   user_id=user_id, revision=revision)
    return CheckpointOut(
        task_id=cp.task_id, revision=cp.revision, user_id=cp.user_id, session_id=cp.session_id,
        parent_task_id=cp.parent_task_id, goal=cp.goal,
        accepted_decisions=list(cp.accepted_decisions),
        verified_evidence=list(cp.verified_evidence), open_questions=list(cp.open_questions),
        constraints=[asdict(c) for c in cp.constraints],
        pending_approvals=list(cp.pending_approvals),
        tool_effects=[asdict(t) for t in cp.tool_effects],
        next_safe_action=cp.next_safe_action, created_at=cp.created_at)
