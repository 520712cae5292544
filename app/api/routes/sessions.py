"""Session events: append (runtime), the archived transcript and transcript search (the
owning user only; search reaches other sessions only as far as the visibility allows), the
manual compaction trigger and the compaction breaker's reset (admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import (
    AdminDep,
    AssertionDep,
    ContainerDep,
    IdempotencyKeyDep,
    RuntimeDep,
    check_tenant_claim,
)
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    INT32_MAX,
    CompactionBreakerOut,
    CompactionOut,
    CompactRequest,
    EventOut,
    EventsAppend,
    EventsAppended,
    EventsPage,
    Id,
    Problem,
    TranscriptHitOut,
    TranscriptSearch,
    VisibilityName,
)
from app.core.errors import ForbiddenScope
from app.core.model import Visibility
from app.ports import SessionOwner
from app.service.assemble import request_sha256
from app.service.identity import bind_user

router = APIRouter(tags=["sessions"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 413, 422)}
# The explicit compaction also answers 409 (a concurrent checkpoint write) and 503 (the
# summarizer failed: dependency-unavailable, with Retry-After).
COMPACT_ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422, 503)}
SessionId = Annotated[Id, Path()]


@router.post("/v1/sessions/{session_id:path}/events", status_code=201,
             response_model=EventsAppended, responses=ERRORS)  # type: ignore[arg-type]
async def append_events(session_id: SessionId, body: EventsAppend, principal: RuntimeDep,
                        container: ContainerDep, assertion: AssertionDep = None,
                        idempotency_key: IdempotencyKeyDep = None) -> EventsAppended:
    """Append events in order. With ``Idempotency-Key`` at most once: a retry whose response
    was lost gets the first attempt's seqs and appends nothing."""
    check_tenant_claim(principal, body.tenant_id)
    bind_user(principal, assertion, user_id=body.user_id)
    seqs = await container.sessions.append_for_turn(
        tenant_id=principal.tenant_id, session_id=session_id,
        owner=SessionOwner(user_id=body.user_id, agent_id=body.agent_id,
                           parent_session_id=body.parent_session_id),
        events=body.to_domain(),
        # The turn's own at-most-once record, in a namespace of its own.
        turn_id=None if idempotency_key is None else f"idempotency-key:{idempotency_key}",
        request_sha256=request_sha256(
            {"session_id": session_id, **body.model_dump(mode="json", exclude_none=True)}))
    return EventsAppended(session_id=session_id, seqs=seqs)


@router.get("/v1/sessions/{session_id:path}/events", response_model=EventsPage,
            responses=ERRORS)  # type: ignore[arg-type]
async def read_events(
    session_id: SessionId, principal: RuntimeDep, container: ContainerDep,
    user_id: Annotated[Id, Query()],
    after_seq: Annotated[int, Query(ge=0, le=INT32_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    assertion: AssertionDep = None,
) -> EventsPage:
    bind_user(principal, assertion, user_id=user_id)
    events = await container.sessions.transcript(
        tenant_id=principal.tenant_id, session_id=session_id, user_id=user_id,
        after_seq=after_seq, limit=limit)
    out = [EventOut(seq=e.seq, type=e.type, role=e.role, content=e.content, call_id=e.call_id,
                    name=e.name, arguments=e.arguments, is_error=e.is_error,
                    created_at=e.created_at) for e in events]
    return EventsPage(session_id=session_id, events=out,
                      next_after_seq=out[-1].seq if len(out) == limit else None)


@router.get("/v1/sessions/{session_id:path}/search", response_model=TranscriptSearch,
            responses=ERRORS)  # type: ignore[arg-type]
async def search_transcripts(
    session_id: SessionId, principal: RuntimeDep, container: ContainerDep,
    user_id: Annotated[Id, Query()],
    q: Annotated[str, Query(min_length=1, max_length=1000)],
    visibility: VisibilityName = "tree",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    assertion: AssertionDep = None,
) -> TranscriptSearch:
    """Search the transcripts this session may see: ``self``, its spawned ``tree``, the same
    ``agent``'s sessions of this user, or ``all`` of this user's sessions (capped by the key)."""
    bind_user(principal, assertion, user_id=user_id)
    wanted = Visibility.parse(visibility)
    if wanted > principal.max_session_visibility:
        raise ForbiddenScope(f"visibility {visibility!r} exceeds the key's maximum "
                             f"{principal.max_session_visibility.label!r}")
    hits = await container.sessions.search(
        tenant_id=principal.tenant_id, session_id=session_id, user_id=user_id,
        visibility=wanted, query=q, limit=limit)
    return TranscriptSearch(hits=[TranscriptHitOut(
        session_id=h.session_id, seq=h.event.seq, type=h.event.type, role=h.event.role,
        content=h.event.content, rank=h.rank) for h in hits])


@router.post("/v1/sessions/{session_id:path}/compact", response_model=CompactionOut,
             responses=COMPACT_ERRORS)  # type: ignore[arg-type]
async def compact_session(session_id: SessionId, body: CompactRequest, principal: RuntimeDep,
                          container: ContainerDep, assertion: AssertionDep = None
                          ) -> CompactionOut:
    """Compact the session now: commit its facts into a new checkpoint revision of
    ``task_id`` (when given), then record the summary. Returns the recorded event; another
    user's session (or task) is a 404. A summarizer failure is a 503
    ``dependency-unavailable`` with ``Retry-After`` (it counts toward the breaker)."""
    check_tenant_claim(principal, body.tenant_id)
    bind_user(principal, assertion, user_id=body.user_id)
    done = await container.compactions.compact(
        principal=principal, session_id=session_id, user_id=body.user_id,
        task_id=body.task_id, budget_tokens=body.budget_tokens, manual=True)
    return CompactionOut(**done.record)


@router.post("/v1/sessions/{session_id:path}/compaction/reset",
             response_model=CompactionBreakerOut, responses=ERRORS)  # type: ignore[arg-type]
async def reset_compaction_breaker(session_id: SessionId, principal: AdminDep,
                                   container: ContainerDep) -> CompactionBreakerOut:
    """Close the session's compaction breaker now (admin key): the next compaction calls the
    model again. A session the tenant does not have is a 404."""
    done = await container.compactions.reset(tenant_id=principal.tenant_id,
                                             session_id=session_id)
    return CompactionBreakerOut(session_id=session_id, state="closed",
                                previous_state=done.previous.value,
                                previous_failures=done.failures, reset=done.reset)
