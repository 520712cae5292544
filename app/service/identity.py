"""End-user identity: which ``user_id`` and ``groups`` a call may act for.

A runtime key is trusted to name users of its tenant unless the tenant requires signed
assertions; then ``user_id`` and ``groups`` must come from a JWT the tenant signs (HS256
secret or RS256 public key), sent as ``X-Ctxgate-User-Assertion``, so a leaked runtime key
alone cannot impersonate any user. A present assertion is always verified, required or not.
"""

from __future__ import annotations

from collections.abc import Sequence

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from app.core.errors import ForbiddenScope, InvalidRequest, Unauthorized
from app.core.ids import normalize_id
from app.core.model import AssertionPolicy, Principal

MAX_TOKEN_BYTES = 8192
LEEWAY_S = 30


def check_policy(policy: AssertionPolicy) -> None:
    """Refuse key material that could never verify anything (422 at configuration time)."""
    if policy.algorithm == "HS256":
        if len(policy.key_material.encode()) < 32:
            raise InvalidRequest("an HS256 secret must be at least 32 bytes")
        return
    try:
        load_pem_public_key(policy.key_material.encode())
    except ValueError as exc:
        raise InvalidRequest("the RS256 key must be a PEM public key") from exc


def _claims(policy: AssertionPolicy, token: str) -> dict[str, object]:
    if len(token) > MAX_TOKEN_BYTES:
        raise Unauthorized("the user assertion is too large")
    try:
        claims: dict[str, object] = jwt.decode(
            token, policy.key_material, algorithms=[policy.algorithm],
            audience=policy.audience, issuer=policy.issuer, leeway=LEEWAY_S,
            options={"require": ["sub", "exp"], "verify_aud": policy.audience is not None})
    except jwt.PyJWTError as exc:
        # The class name says what failed (expired, bad signature, malformed) without
        # echoing any of the token back.
        raise Unauthorized(f"invalid user assertion ({type(exc).__name__})") from exc
    return claims


def _id(value: object) -> str | None:
    """A claim as an external id (NFC, as the request's ids are), None if it is not one."""
    try:
        return normalize_id(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _groups(claims: dict[str, object]) -> tuple[str, ...]:
    raw = claims.get("groups", [])
    ids = [_id(g) for g in raw] if isinstance(raw, list) else [None]
    if None in ids:
        raise Unauthorized("invalid user assertion (groups must be a list of ids)")
    return tuple(sorted({g for g in ids if g is not None}))


def bind_user(principal: Principal, token: str | None, *, user_id: str,
              groups: Sequence[str] = ()) -> tuple[str, tuple[str, ...]]:
    """The (user_id, groups) this call acts for, or Unauthorized/ForbiddenScope."""
    policy = principal.assertion
    if policy is None or (token is None and not policy.require):
        if token is not None:
            raise Unauthorized("this tenant has no user-assertion key configured")
        return user_id, tuple(sorted(set(groups)))
    if token is None:
        raise Unauthorized("this tenant requires a signed user assertion")
    claims = _claims(policy, token)
    if _id(claims.get("sub")) != user_id:
        raise ForbiddenScope("user_id differs from the signed assertion")
    asserted = _groups(claims)
    if not set(groups) <= set(asserted):
        raise ForbiddenScope("groups outside the signed assertion")
    return user_id, asserted
