"""Liveness, readiness (stores reachable, migrations current) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import JSONResponse, Response

from app.api.deps import ContainerDep
from app.api.routing import OrjsonRoute

router = APIRouter(tags=["health"], route_class=OrjsonRoute)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def mark_draining(app: FastAPI) -> None:
    """The server is stopping (app/serving.py): readiness fails from now on, so that
    balancers stop sending traffic while the requests in flight finish."""
    app.state.draining = True


@router.get("/readyz", responses={
    503: {"description": "a store is unreachable, or the server is shutting down"}})
async def readyz(container: ContainerDep, request: Request) -> Response:
    if getattr(request.app.state, "draining", False):
        return JSONResponse({"status": "draining"}, status_code=503)
    checks = await container.readiness()
    ok = all(checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks},
                        status_code=200 if ok else 503)


@router.get("/metrics")
async def metrics(container: ContainerDep) -> Response:
    payload, content_type = container.metrics.render()
    return Response(payload, media_type=content_type)
