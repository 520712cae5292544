"""Liveness, readiness (stores reachable, migrations current) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import JSONResponse, Response

from app.api.deps import ContainerDep
from app.api.routing import OrjsonRoute

router = APIRouter(tags=["health"], route_class=OrjsonRoute)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "a store is unreachable"}})
async def readyz(container: ContainerDep) -> Response:
    checks = await container.readiness()
    ok = all(checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks},
                        status_code=200 if ok else 503)


@router.get("/metrics")
async def metrics(container: ContainerDep) -> Response:
    payload, content_type = container.metrics.render()
    return Response(payload, media_type=content_type)
