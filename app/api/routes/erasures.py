"""'Forget me': an admin key asks for a user's erasure (202), ops/admin read its receipt."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from app.api.deps import AdminDep, ContainerDep, OpsDep
from app.api.routing import OrjsonRoute
from app.api.schemas import ErasureAccepted, ErasureIn, ErasureOut, MintedId, Problem
from app.service.erasure import tombstone

router = APIRouter(tags=["erasures"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 413, 422)}


@router.post("/v1/erasures", status_code=202, response_model=ErasureAccepted,
             responses=ERRORS)  # type: ignore[arg-type]
async def request_erasure(body: ErasureIn, principal: AdminDep, container: ContainerDep
                          ) -> ErasureAccepted:
    """Erase one user of the key's tenant from every layer; the user's open job if any."""
    job = await container.erasures.request(principal=principal, user_id=body.user_id)
    return ErasureAccepted(erasure_id=job.erasure_id, status=job.status)


@router.get("/v1/erasures/{erasure_id}", response_model=ErasureOut,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_erasure(erasure_id: Annotated[MintedId, Path()], principal: OpsDep,
                      container: ContainerDep) -> ErasureOut:
    job = await container.erasures.get(principal=principal, erasure_id=erasure_id)
    finished = job.status in ("done", "failed")
    return ErasureOut(
        erasure_id=job.erasure_id, status=job.status,
        subject=job.user_id if finished else tombstone(job.tenant_id, job.user_id),
        requested_by=job.requested_by, requested_at=job.requested_at,
        started_at=job.started_at, finished_at=job.finished_at, attempts=job.attempts,
        # An open job shows its last attempt's checks (verified: false): what is known, no
        # more. The plan (the user's session and turn ids) is never shown.
        receipt={k: v for k, v in job.receipt.items() if k != "plan"}
        if finished or "layers" in job.receipt else None)
