"""POST /v1/context — assemble one turn."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.deps import AssertionDep, ContainerDep, RuntimeDep, check_tenant_claim
from app.api.embeddings import check_dimensions
from app.api.routing import OrjsonRoute
from app.api.schemas import ContextRequest, ContextResponse, Problem
from app.service import degraded
from app.service.assemble import request_sha256
from app.service.identity import bind_user

router = APIRouter(tags=["context"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422, 429, 503)}


@router.post("/v1/context", response_model=ContextResponse, responses=ERRORS)  # type: ignore[arg-type]
async def assemble_context(body: ContextRequest, principal: RuntimeDep,
                           container: ContainerDep, request: Request,
                           assertion: AssertionDep = None) -> Response:
    check_dimensions([body], dim=container.embedder.dim, batch=False)
    check_tenant_claim(principal, body.tenant_id)
    _, groups = bind_user(principal, assertion, user_id=body.user_id, groups=body.groups)
    req = body.to_domain(groups=groups)
    raw = body.model_dump(mode="json", exclude_none=True)
    raw["turn_id"] = req.turn_id
    # The tenant's turn slot first (429 past its cap), then the worker's (503 when full): a
    # tenant at its cap never holds a worker slot another tenant's turn could have. Inside
    # the recording, a quota check that went without Redis reaches the turn's manifest.
    with degraded.recording():
        async with container.quotas.turn(principal), container.admission.slot():
            payload = await container.assembler.turn(principal, req, request_sha256(raw),
                                                     append=body.appended_events(),
                                                     parent_session_id=body.parent_session_id)
    return Response(payload, media_type="application/json")
