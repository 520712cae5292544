"""Manifests and audit: what each turn saw, and what the permission guard kept out."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import ContainerDep, OpsDep, ReaderDep
from app.api.routing import OrjsonRoute
from app.api.schemas import AuditList, Id, ManifestList, ManifestOut, Problem
from app.core import paging
from app.core.errors import NotFound
from app.core.model import Principal, Role
from app.ports import ManifestFilter, StoredManifest

router = APIRouter(tags=["manifests"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (401, 403, 404, 422)}
IdQuery = Annotated[Id | None, Query()]


def _only_key(principal: Principal) -> str | None:
    # A runtime key sees only the manifests it made; ops and admin see the tenant's.
    return principal.key_id if principal.role == Role.RUNTIME else None


def _visible(principal: Principal, m: StoredManifest) -> bool:
    key = _only_key(principal)
    return key is None or m.key_id == key


@router.get("/v1/manifests/{turn_id:path}", response_model=ManifestOut,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_manifest(turn_id: Annotated[Id, Path()], principal: ReaderDep,
                       container: ContainerDep) -> ManifestOut:
    found = await container.manifests.get(tenant_id=principal.tenant_id, turn_id=turn_id)
    if found is None or not _visible(principal, found):
        raise NotFound(f"no manifest {turn_id!r}")
    return ManifestOut.model_validate(found.body)


@router.get("/v1/manifests", response_model=ManifestList,
            responses=ERRORS)  # type: ignore[arg-type]
async def list_manifests(
    principal: ReaderDep, container: ContainerDep, session_id: IdQuery = None,
    task_id: IdQuery = None, limit: Annotated[int, Query(ge=1, le=200)] = 50,
    before: Annotated[str | None, Query(max_length=64)] = None,
    cursor: Annotated[str | None, Query()] = None,  # its length is checked by decode
) -> ManifestList:
    """Newest first; ``before`` keeps only older turns, ``cursor`` (a page's ``next_cursor``)
    resumes a listing; a cursor this service did not issue is a 422 ``invalid-cursor``."""
    page = await container.manifests.list(
        tenant_id=principal.tenant_id,
        filt=ManifestFilter(session_id=session_id, task_id=task_id, limit=limit, before=before,
                            key_id=_only_key(principal),
                            after=paging.decode(cursor) if cursor is not None else None))
    return ManifestList(
        manifests=[ManifestOut.model_validate(m.body) for m in page.manifests],
        next_cursor=paging.encode(page.next) if page.next is not None else None)


@router.get("/v1/audit", response_model=AuditList, responses=ERRORS)  # type: ignore[arg-type]
async def list_audit(principal: OpsDep, container: ContainerDep, turn_id: IdQuery = None,
                     limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> AuditList:
    records = await container.audit.list(tenant_id=principal.tenant_id, turn_id=turn_id,
                                         limit=limit)
    return AuditList(records=records)
