"""Request dependencies as ``Annotated`` aliases: the container, the caller, role checks."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Header, Request

from app.api import ratelimit
from app.core.errors import ForbiddenScope, Unauthorized
from app.core.model import Principal, Role
from app.logs import note_principal

if TYPE_CHECKING:
    from app.main import Container


def _container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


async def get_container(request: Request) -> Container:
    # async although it awaits nothing: FastAPI runs a plain function dependency in a worker
    # thread, and that hop cost every request ~2.5 % of a worker's CPU (py-spy).
    return _container(request)


ContainerDep = Annotated["Container", Depends(get_container)]


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def get_principal(request: Request) -> Principal:
    container = _container(request)
    principal = await container.keys.authenticate(_bearer(request))
    note_principal(principal.tenant_id, principal.key_id)  # for the request's access line
    # Past its tenant's or key's request rate: 429 here, before the route touches a store.
    decision = await container.quotas.admit(principal)
    if decision is not None:  # for the RateLimit headers (api.middleware.RateLimitHeaders)
        setattr(request.state, ratelimit.STATE, decision)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require(*roles: Role) -> object:
    async def check(principal: PrincipalDep) -> Principal:
        if principal.role not in roles:
            raise ForbiddenScope(f"role {principal.role.value!r} may not do this")
        return principal

    return Depends(check)


RuntimeDep = Annotated[Principal, require(Role.RUNTIME)]
OpsDep = Annotated[Principal, require(Role.OPS, Role.ADMIN)]
ReaderDep = Annotated[Principal, require(Role.RUNTIME, Role.OPS, Role.ADMIN)]
AdminDep = Annotated[Principal, require(Role.ADMIN)]


async def require_platform_admin(request: Request) -> None:
    expected = _container(request).settings.admin_token
    token = _bearer(request)
    if expected is None or token is None or not hmac.compare_digest(
            token.encode(), expected.get_secret_value().encode()):
        raise Unauthorized("the platform admin token is required")


PlatformAdminDep = Annotated[None, Depends(require_platform_admin)]


def check_tenant_claim(principal: Principal, claimed: str | None) -> None:
    """A body may name a tenant only to have it checked: any other tenant is 403."""
    if claimed is not None and claimed != principal.tenant_id:
        raise ForbiddenScope("the body names a tenant other than the key's")


# The signed end-user assertion (a JWT of the tenant's); see app.service.identity.
AssertionDep = Annotated[str | None, Header(
    alias="X-Ctxgate-User-Assertion", description="JWT naming the end user (sub, groups)")]

# A client's key for one logical write (IETF draft "The Idempotency-Key HTTP Header Field"):
# a retry with the same key and body is applied once and answered as the first attempt was.
IdempotencyKeyDep = Annotated[str | None, Header(
    alias="Idempotency-Key", min_length=1, max_length=256, pattern=r"^[\x21-\x7e]+$",
    description="printable ASCII, 1-256 characters: a retried append with the same key and "
                "body appends nothing and answers the first attempt's seqs; the same key "
                "with another body is 409")]
