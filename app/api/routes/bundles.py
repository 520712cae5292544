"""Instruction bundles: an immutable registry with release channels and revocation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import AdminDep, ContainerDep, ReaderDep
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    BundleDiff,
    BundleIn,
    BundleOut,
    BundleRevisionOut,
    ChannelOut,
    Id,
    Problem,
    PromoteIn,
    RelPath,
    RevokeIn,
    SessionType,
)
from app.core.registry import BundleRevision, Channel

router = APIRouter(tags=["bundles"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422)}
BundleId = Annotated[Id, Path()]
Revision = Annotated[Id, Path()]


def _out(rev: BundleRevision, *, files: bool = False) -> BundleRevisionOut:
    return BundleRevisionOut(
        bundle_id=rev.bundle_id, revision=rev.revision, runtime=rev.runtime, sha256=rev.sha256,
        revoked=rev.revoked, created_at=rev.created_at, source=dict(rev.source),
        declared_scope=list(rev.declared_scope), approval=dict(rev.approval),
        compatibility=dict(rev.compatibility), lint=[dict(x) for x in rev.lint],
        files=[{"path": f.path, "sha256": f.sha256, "content": f.content} for f in rev.files]
        if files else None)


def _channel(c: Channel | None) -> ChannelOut | None:
    if c is None:
        return None
    return ChannelOut(stable=c.stable, canary=c.canary, canary_share=c.canary_share,
                      canary_agents=list(c.canary_agents))


@router.post("/v1/bundles", status_code=201, response_model=BundleRevisionOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def register_bundle(body: BundleIn, principal: AdminDep, container: ContainerDep
                          ) -> BundleRevisionOut:
    rev = await container.bundles.register(tenant_id=principal.tenant_id,
                                           revision=body.to_domain())
    return _out(rev)


@router.get("/v1/bundles/{bundle_id:path}/revisions/{revision:path}",
            response_model=BundleRevisionOut, responses=ERRORS)  # type: ignore[arg-type]
async def get_revision(bundle_id: BundleId, revision: Revision, principal: ReaderDep,
                       container: ContainerDep) -> BundleRevisionOut:
    rev = await container.bundles.revision(tenant_id=principal.tenant_id, bundle_id=bundle_id,
                                           revision=revision)
    return _out(rev, files=True)


@router.post("/v1/bundles/{bundle_id:path}/revisions/{revision:path}/revoke",
             response_model=BundleOut, responses=ERRORS)  # type: ignore[arg-type]
async def revoke_revision(bundle_id: BundleId, revision: Revision, body: RevokeIn,
                          principal: AdminDep, container: ContainerDep) -> BundleOut:
    await container.bundles.revoke(tenant_id=principal.tenant_id, bundle_id=bundle_id,
                                   revision=revision, reason=body.reason)
    return await get_bundle(bundle_id, principal, container)


@router.post("/v1/bundles/{bundle_id:path}/promote", response_model=ChannelOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def promote(bundle_id: BundleId, body: PromoteIn, principal: AdminDep,
                  container: ContainerDep) -> ChannelOut:
    channel = await container.bundles.promote(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=body.revision,
        share=body.cohort.share if body.cohort else None,
        agents=body.cohort.agents if body.cohort else (), actor=principal.key_id,
        override_reason=body.override_reason)
    out = _channel(channel)
    assert out is not None
    return out


@router.get("/v1/bundles/{bundle_id:path}/diff", response_model=BundleDiff,
            responses=ERRORS)  # type: ignore[arg-type]
async def diff(bundle_id: BundleId, principal: ReaderDep, container: ContainerDep,
               from_: Annotated[Id, Query(alias="from")],
               to: Annotated[Id, Query()], cwd: RelPath = "",
               session_type: SessionType = "main") -> BundleDiff:
    """What changed in the resolved text and its token footprint between two revisions."""
    result = await container.bundles.diff(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, old=from_, new=to,
        workspace_cwd=cwd, session_type=session_type)
    return BundleDiff.model_validate(result)


# Last: a bundle id may hold "/", so this route would also match the ones above.
@router.get("/v1/bundles/{bundle_id:path}", response_model=BundleOut,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_bundle(bundle_id: BundleId, principal: ReaderDep, container: ContainerDep
                     ) -> BundleOut:
    revisions, channel = await container.bundles.overview(tenant_id=principal.tenant_id,
                                                          bundle_id=bundle_id)
    return BundleOut(bundle_id=bundle_id, revisions=[_out(r) for r in revisions],
                     channel=_channel(channel))
