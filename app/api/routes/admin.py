"""Platform-operator key management, guarded by CTXGATE_ADMIN_TOKEN (not a tenant key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from starlette.responses import Response

from app.api.deps import ContainerDep, PlatformAdminDep
from app.api.routing import OrjsonRoute
from app.api.schemas import (
    CanaryCreate,
    CanaryList,
    CanaryOut,
    EmbeddingCounts,
    EmbeddingsReport,
    Id,
    KeyCreate,
    KeyCreated,
    KeyList,
    KeyOut,
    MintedId,
    Problem,
    TenantIdentityIn,
    TenantSettingsBody,
)
from app.core.model import DataLevel, Role, Visibility
from app.ports import NewKey

router = APIRouter(tags=["admin"], route_class=OrjsonRoute)
ERRORS = {s: {"model": Problem} for s in (400, 401, 404, 422)}


@router.post("/v1/admin/keys", status_code=201, response_model=KeyCreated,
             responses=ERRORS)  # type: ignore[arg-type]
async def create_key(body: KeyCreate, _: PlatformAdminDep, container: ContainerDep
                     ) -> KeyCreated:
    key_id, api_key = await container.keys.create(NewKey(
        tenant_id=body.tenant_id, role=Role(body.role),
        max_data_level=DataLevel.parse(body.max_data_level),
        domains=tuple(body.domains) if body.domains is not None else None, name=body.name,
        max_session_visibility=Visibility.parse(body.max_session_visibility)))
    return KeyCreated(key_id=key_id, api_key=api_key)


@router.get("/v1/admin/keys", response_model=KeyList,
            responses=ERRORS)  # type: ignore[arg-type]
async def list_keys(_: PlatformAdminDep, container: ContainerDep,
                    tenant_id: Annotated[Id | None, Query()] = None) -> KeyList:
    """Every key (of ``tenant_id`` when given), revoked ones too; never a secret or hash."""
    return KeyList(keys=[KeyOut(
        key_id=k.key_id, tenant_id=k.tenant_id, name=k.name, role=k.role.value,
        max_data_level=k.max_data_level.label, domains=list(k.domains) if k.domains is not None
        else None, max_session_visibility=k.max_session_visibility.label,
        created_at=k.created_at, revoked_at=k.revoked_at)
        for k in await container.keys.list_keys(tenant_id)])


@router.delete("/v1/admin/keys/{key_id}", status_code=204,
               responses=ERRORS)  # type: ignore[arg-type]
async def revoke_key(key_id: Annotated[MintedId, Path()], _: PlatformAdminDep,
                     container: ContainerDep) -> Response:
    await container.keys.revoke(key_id)
    return Response(status_code=204)


@router.post("/v1/admin/canaries", status_code=201, response_model=CanaryOut,
             responses=ERRORS)  # type: ignore[arg-type]
async def create_canary(body: CanaryCreate, _: PlatformAdminDep, container: ContainerDep
                        ) -> CanaryOut:
    """Register a leakage canary: a synthetic string the operator planted in a tenant's (or
    one user's) data. Every turn's envelope is checked for it (docs/observability.md)."""
    return CanaryOut.model_validate(await container.canaries.create(
        tenant_id=body.tenant_id, user_id=body.user_id, label=body.label, text=body.text,
        created_by="platform"))


@router.get("/v1/admin/canaries", response_model=CanaryList,
            responses=ERRORS)  # type: ignore[arg-type]
async def list_canaries(_: PlatformAdminDep, container: ContainerDep,
                        tenant_id: Annotated[Id | None, Query()] = None) -> CanaryList:
    """Every registered canary (of ``tenant_id`` when given), texts included."""
    return CanaryList(canaries=[
        CanaryOut.model_validate(c) for c in await container.canaries.list_canaries(tenant_id)])


@router.delete("/v1/admin/canaries/{canary_id}", status_code=204,
               responses=ERRORS)  # type: ignore[arg-type]
async def delete_canary(canary_id: Annotated[MintedId, Path()], _: PlatformAdminDep,
                        container: ContainerDep) -> Response:
    await container.canaries.delete(canary_id)
    return Response(status_code=204)


@router.put("/v1/admin/tenants/{tenant_id:path}/identity", status_code=204,
            responses=ERRORS)  # type: ignore[arg-type]
async def set_tenant_identity(tenant_id: Annotated[Id, Path()],
                              body: TenantIdentityIn, _: PlatformAdminDep,
                              container: ContainerDep) -> Response:
    """Require (or stop requiring) signed end-user assertions for a tenant."""
    await container.keys.set_assertion_policy(tenant_id, body.to_domain())
    return Response(status_code=204)


@router.get("/v1/admin/tenants/{tenant_id:path}/settings", response_model=TenantSettingsBody,
            responses=ERRORS)  # type: ignore[arg-type]
async def get_tenant_settings(tenant_id: Annotated[Id, Path()], _: PlatformAdminDep,
                              container: ContainerDep) -> TenantSettingsBody:
    """A tenant's settings (the defaults when it never set any)."""
    return TenantSettingsBody.of(await container.keys.tenant_settings(tenant_id))


@router.put("/v1/admin/tenants/{tenant_id:path}/settings", status_code=204,
            responses=ERRORS)  # type: ignore[arg-type]
async def set_tenant_settings(tenant_id: Annotated[Id, Path()], body: TenantSettingsBody,
                              _: PlatformAdminDep, container: ContainerDep) -> Response:
    """Set a tenant's defaults: its turns' session visibility, still capped by each key."""
    await container.keys.set_tenant_settings(tenant_id, body.to_domain())
    return Response(status_code=204)


@router.get("/v1/admin/embeddings", response_model=EmbeddingsReport,
            responses=ERRORS)  # type: ignore[arg-type]
async def embeddings(_: PlatformAdminDep, container: ContainerDep,
                     tenant_id: Annotated[Id | None, Query()] = None) -> EmbeddingsReport:
    """The configured embedder, how many stored vectors per table it made, how many another
    model made (stale: re-embedded in the background, or, a client's, never), and whether
    this worker's re-embedding job runs (docs/embeddings.md). ``tenant_id``: that tenant's
    rows only (a tenant with none reads all zeros, as a missing one)."""
    status = await container.reembedder.status(tenant_id)
    return EmbeddingsReport(
        embedder=status.embedder, legacy_embedder=status.legacy, running=status.running,
        tables={t: EmbeddingCounts(**counts) for t, counts in status.tables.items()})
