"""Instruction bundles: an immutable registry with release channels and revocation, and the
release gate's records (reviews, evaluations) and shadow cohorts (docs/bundles.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from app.api.deps import AdminDep, ContainerDep, OpsDep, ReaderDep
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    BundleDiff,
    BundleIn,
    BundleOut,
    BundleRevisionOut,
    ChannelOut,
    EvaluationIn,
    EvaluationOut,
    Id,
    Problem,
    PromoteIn,
    RelPath,
    ReviewIn,
    ReviewOut,
    RevokeIn,
    SessionType,
    ShadowIn,
)
from app.core.model import Role
from app.core.registry import BundleRevision, Channel
from app.core.release_gate import Decision, GateRecord

router = APIRouter(tags=["bundles"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 403, 404, 409, 413, 422)}
BundleId = Annotated[Id, Path()]
Revision = Annotated[Id, Path()]


def _out(rev: BundleRevision, *, record: GateRecord | None = None, excerpts: bool = True
         ) -> BundleRevisionOut:
    """A revision; with its ``record`` (the revision GET): its files, review, evaluations.
    Without ``excerpts`` its lint records lose the line of rule text they quote."""
    files = record is not None
    return BundleRevisionOut(
        bundle_id=rev.bundle_id, revision=rev.revision, runtime=rev.runtime, sha256=rev.sha256,
        revoked=rev.revoked, created_at=rev.created_at, source=dict(rev.source),
        declared_scope=list(rev.declared_scope), approval=dict(rev.approval),
        compatibility=dict(rev.compatibility),
        lint=[{k: v for k, v in x.items() if excerpts or k != "excerpt"} for x in rev.lint],
        registered_by=rev.registered_by,
        files=[{"path": f.path, "sha256": f.sha256, "content": f.content} for f in rev.files]
        if files else None,
        review=ReviewOut.of(record.review) if record and record.review else None,
        evaluations=[EvaluationOut.of(e) for e in record.evaluations] if record else None)


def _channel(c: Channel | None) -> ChannelOut | None:
    if c is None:
        return None
    return ChannelOut(stable=c.stable, canary=c.canary, canary_share=c.canary_share,
                      canary_agents=list(c.canary_agents), shadow=c.shadow,
                      shadow_share=c.shadow_share, shadow_agents=list(c.shadow_agents))


@router.post("/v1/bundles", status_code=201, response_model=BundleRevisionOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def register_bundle(body: BundleIn, principal: AdminDep, container: ContainerDep
                          ) -> BundleRevisionOut:
    rev = await container.bundles.register(tenant_id=principal.tenant_id,
                                           revision=body.to_domain(), actor=principal.key_id)
    return _out(rev)


@router.get("/v1/bundles/{bundle_id:path}/revisions/{revision:path}",
            response_model=BundleRevisionOut, responses=ERRORS)  # type: ignore[arg-type]
async def get_revision(bundle_id: BundleId, revision: Revision, principal: OpsDep,
                       container: ContainerDep) -> BundleRevisionOut:
    """A revision with its files: admin and ops keys only, since a runtime key reads a
    revision's text only by being served it (docs/bundles.md)."""
    rev = await container.bundles.revision(tenant_id=principal.tenant_id, bundle_id=bundle_id,
                                           revision=revision)
    record = await container.bundle_releases.record(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=revision)
    return _out(rev, record=record)


async def _review(decision: Decision, bundle_id: str, revision: str, body: ReviewIn | None,
                  principal: OpsDep, container: ContainerDep) -> ReviewOut:
    review = await container.bundle_releases.review(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=revision,
        decision=decision, reviewer=principal.key_id, note=body.note if body else None)
    return ReviewOut.of(review)


@router.post("/v1/bundles/{bundle_id:path}/revisions/{revision:path}/approve",
             response_model=ReviewOut, responses=ERRORS)  # type: ignore[arg-type]
async def approve_revision(bundle_id: BundleId, revision: Revision, principal: OpsDep,
                           container: ContainerDep, body: ReviewIn | None = None) -> ReviewOut:
    """Approve for the release gate: an admin or ops key other than the one that registered
    the revision (403 bundle-four-eyes otherwise). The newest review counts."""
    return await _review("approved", bundle_id, revision, body, principal, container)


@router.post("/v1/bundles/{bundle_id:path}/revisions/{revision:path}/reject",
             response_model=ReviewOut, responses=ERRORS)  # type: ignore[arg-type]
async def reject_revision(bundle_id: BundleId, revision: Revision, principal: OpsDep,
                          container: ContainerDep, body: ReviewIn | None = None) -> ReviewOut:
    """Reject: under the full gate the revision is not promoted until a later approval."""
    return await _review("rejected", bundle_id, revision, body, principal, container)


@router.post("/v1/bundles/{bundle_id:path}/revisions/{revision:path}/evaluations",
             status_code=201, response_model=EvaluationOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def record_evaluation(bundle_id: BundleId, revision: Revision, body: EvaluationIn,
                            principal: OpsDep, container: ContainerDep) -> EvaluationOut:
    """Record a suite's result for the revision (the full gate needs every suite run
    against the live revision to pass)."""
    evaluation = await container.bundle_releases.evaluate(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=revision,
        evaluation=body.to_domain(principal.key_id))
    return EvaluationOut.of(evaluation)


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
    channel = await container.bundle_releases.promote(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=body.revision,
        share=body.cohort.share if body.cohort else None,
        agents=body.cohort.agents if body.cohort else (), actor=principal.key_id,
        override_reason=body.override_reason)
    out = _channel(channel)
    assert out is not None
    return out


@router.post("/v1/bundles/{bundle_id:path}/shadow", response_model=ChannelOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def shadow(bundle_id: BundleId, body: ShadowIn, principal: AdminDep,
                 container: ContainerDep) -> ChannelOut:
    """Resolve a revision beside the served one on a cohort's turns, recorded in their
    manifests (``bundle.shadow``) and never served; ``revision: null`` ends it."""
    channel = await container.bundle_releases.shadow(
        tenant_id=principal.tenant_id, bundle_id=bundle_id, revision=body.revision,
        share=body.cohort.share, agents=body.cohort.agents)
    out = _channel(channel)
    assert out is not None
    return out


@router.get("/v1/bundles/{bundle_id:path}/diff", response_model=BundleDiff,
            responses=ERRORS)  # type: ignore[arg-type]
async def diff(bundle_id: BundleId, principal: OpsDep, container: ContainerDep,
               from_: Annotated[Id, Query(alias="from")],
               to: Annotated[Id, Query()], cwd: RelPath = "",
               session_type: SessionType = "main") -> BundleDiff:
    """What changed in the resolved text and its token footprint between two revisions
    (admin and ops keys: it shows their text)."""
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
    # A runtime key reads a revision's text only by being served it (docs/bundles.md).
    excerpts = principal.role is not Role.RUNTIME
    return BundleOut(bundle_id=bundle_id, revisions=[_out(r, excerpts=excerpts)
                                                     for r in revisions],
                     channel=_channel(channel))
