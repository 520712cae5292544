"""Explain: why one source did or did not reach a turn's envelope (``app.service.explain``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from app.api.deps import ContainerDep, ReaderDep
from app.api.routing import OrjsonRoute
from app.api.schemas import Id, Problem

router = APIRouter(tags=["manifests"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (401, 403, 404, 409, 422)}
MAX_REF_LEN = 1100  # kb://{doc}#v{version}:c{n}: two escaped ids and a number


class ExplainOut(BaseModel):
    turn_id: str
    ref: str
    outcome: Literal["included", "dropped", "not_a_candidate"]
    stage: Literal["permission", "safety", "relevance", "dedupe", "budget"] | None
    reason: str = Field(description="human readable; names rules, labels and ranks, never "
                                    "content")
    detail: dict[str, Any] = Field(description="the stage's own fields (docs/manifest.md)")
    evaluated_at: str = Field(description="RFC 3339")


# Registered before the manifest route, whose ``{turn_id:path}`` would take ``/explain`` in.
@router.get("/v1/manifests/{turn_id:path}/explain", response_model=ExplainOut,
            responses=ERRORS)  # type: ignore[arg-type]
async def explain(turn_id: Annotated[Id, Path()],
                  ref: Annotated[str, Query(min_length=1, max_length=MAX_REF_LEN)],
                  principal: ReaderDep, container: ContainerDep) -> ExplainOut:
    """Ops and admin keys: which stage kept ``ref`` out of the turn, or that it was included
    or never a candidate. A runtime key gets 404 for another key's turn, 403 for its own."""
    got = await container.explain.explain(principal, turn_id, ref)
    e = got.explanation
    return ExplainOut(turn_id=got.turn_id, ref=got.ref, outcome=e.outcome,
                      stage=e.stage.value if e.stage is not None else None, reason=e.reason,
                      detail=dict(e.detail), evaluated_at=got.evaluated_at.isoformat())
