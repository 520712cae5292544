"""API keys through the SECURITY DEFINER functions of the initial migration.

The app role has no privilege on ``api_keys``: authentication happens before a tenant is
known, so it cannot run under RLS. ``ctxgate_key_principal`` returns only non-revoked keys;
``ctxgate_key_revoke`` is true when the key exists (revoking twice is still true);
``ctxgate_key_list`` lists keys without their hashes.
Only a hash of the secret is ever passed in; the caller owns hashing.
"""

from __future__ import annotations

import secrets

from app.adapters.postgres.db import Database, Row, Sql
from app.core.model import AssertionPolicy, DataLevel, Principal, Role, Visibility
from app.core.quotas import QuotaOverride
from app.core.release_gate import GATES, ReleaseGate
from app.ports import KeyInfo, NewKey, TenantSettings

CREATE_SQL = (
    "SELECT ctxgate_key_create(:key_id, :tenant_id, :name, :role, "
    "CAST(:max_data_level AS smallint), CAST(:domains AS text[]), :max_session_visibility, "
    ":key_hash)"
)
REVOKE_SQL = "SELECT ctxgate_key_revoke(:key_id)"
LIST_SQL = (
    "SELECT key_id, tenant_id, name, role, max_data_level, domains, max_session_visibility, "
    "created_at, revoked_at FROM ctxgate_key_list(:tenant_id)"
)
# A tenant's quota overrides (migration 0024) come with the key and with its settings.
PRINCIPAL_SQL = (
    "SELECT key_id, tenant_id, role, max_data_level, domains, max_session_visibility, "
    "require_assertion, algorithm, key_material, issuer, audience, default_session_visibility, "
    "quota_requests_per_s, quota_requests_burst, quota_key_requests_per_s, "
    "quota_turns_concurrent FROM ctxgate_key_principal(:key_hash)"
)

SETTINGS_SET_SQL = (
    "SELECT ctxgate_tenant_settings_set(:tenant_id, :default_session_visibility, "
    ":quota_requests_per_s, :quota_requests_burst, :quota_key_requests_per_s, "
    ":quota_turns_concurrent, :bundle_release_gate)")
SETTINGS_GET_SQL = (
    "SELECT default_session_visibility, quota_requests_per_s, quota_requests_burst, "
    "quota_key_requests_per_s, quota_turns_concurrent, bundle_release_gate "
    "FROM ctxgate_tenant_settings_get(:tenant_id)")
IDENTITY_SQL = (
    "SELECT ctxgate_tenant_identity_set(:tenant_id, :require, :algorithm, :key_material, "
    ":issuer, :audience)"
)

_CREATE, _REVOKE, _PRINCIPAL = Sql(CREATE_SQL), Sql(REVOKE_SQL), Sql(PRINCIPAL_SQL)
_IDENTITY, _LIST = Sql(IDENTITY_SQL), Sql(LIST_SQL)
_SETTINGS_SET, _SETTINGS_GET = Sql(SETTINGS_SET_SQL), Sql(SETTINGS_GET_SQL)


def new_key_id() -> str:
    return f"key_{secrets.token_hex(8)}"


class PgKeyStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, *, key: NewKey, key_hash: bytes) -> str:
        params = {
            "key_id": new_key_id(),
            "tenant_id": key.tenant_id,
            "name": key.name,
            "role": key.role.value,
            "max_data_level": int(key.max_data_level),
            "domains": list(key.domains) if key.domains is not None else None,
            "max_session_visibility": key.max_session_visibility.label,
            "key_hash": key_hash,
        }
        async with self._db.unscoped_tx() as conn:
            key_id = await conn.fetchval(_CREATE, params)
        return str(key_id)

    async def revoke(self, *, key_id: str) -> bool:
        async with self._db.unscoped_tx() as conn:
            return bool(await conn.fetchval(_REVOKE, {"key_id": key_id}))

    async def list_keys(self, *, tenant_id: str | None) -> list[KeyInfo]:
        async with self._db.unscoped_tx() as conn:
            rows = await conn.fetch(_LIST, {"tenant_id": tenant_id})
        return [KeyInfo(
            key_id=r.key_id, tenant_id=r.tenant_id, name=r.name, role=Role(r.role),
            max_data_level=DataLevel(r.max_data_level),
            domains=tuple(r.domains) if r.domains is not None else None,
            max_session_visibility=Visibility.parse(r.max_session_visibility),
            created_at=r.created_at, revoked_at=r.revoked_at) for r in rows]

    async def principal(self, *, key_hash: bytes) -> Principal | None:
        async with self._db.connection() as conn:
            row = await conn.fetchrow(_PRINCIPAL, {"key_hash": key_hash})
        if row is None:
            return None
        return Principal(
            key_id=row.key_id,
            tenant_id=row.tenant_id,
            role=Role(row.role),
            max_data_level=DataLevel(row.max_data_level),
            domains=tuple(row.domains) if row.domains is not None else None,
            max_session_visibility=Visibility.parse(row.max_session_visibility),
            default_session_visibility=Visibility.parse(
                row.default_session_visibility or Visibility.TREE.label),
            assertion=None if row.algorithm is None else AssertionPolicy(
                require=bool(row.require_assertion), algorithm=row.algorithm,
                key_material=row.key_material, issuer=row.issuer, audience=row.audience),
            quota=_quota(row),
        )

    async def set_assertion_policy(self, *, tenant_id: str, policy: AssertionPolicy) -> None:
        async with self._db.unscoped_tx() as conn:
            await conn.execute(_IDENTITY, {
                "tenant_id": tenant_id, "require": policy.require,
                "algorithm": policy.algorithm, "key_material": policy.key_material,
                "issuer": policy.issuer, "audience": policy.audience})

    async def tenant_settings(self, *, tenant_id: str) -> TenantSettings:
        async with self._db.unscoped_tx() as conn:
            # One row always: the defaults when the tenant never set any.
            row = await conn.one(_SETTINGS_GET, {"tenant_id": tenant_id})
        return TenantSettings(
            default_session_visibility=Visibility.parse(str(row.default_session_visibility)),
            quota=_quota(row), bundle_release_gate=_gate(row.bundle_release_gate))

    async def set_tenant_settings(self, *, tenant_id: str, settings: TenantSettings) -> None:
        q = settings.quota
        async with self._db.unscoped_tx() as conn:
            await conn.execute(_SETTINGS_SET, {
                "tenant_id": tenant_id,
                "default_session_visibility": settings.default_session_visibility.label,
                "quota_requests_per_s": q.requests_per_s,
                "quota_requests_burst": q.requests_burst,
                "quota_key_requests_per_s": q.key_requests_per_s,
                "quota_turns_concurrent": q.turns_concurrent,
                "bundle_release_gate": settings.bundle_release_gate})


def _gate(value: str) -> ReleaseGate:
    for gate in GATES:  # the column's CHECK holds it to these
        if gate == value:
            return gate
    raise ValueError(f"unknown bundle_release_gate {value!r}")


def _quota(row: Row) -> QuotaOverride:
    return QuotaOverride(requests_per_s=row.quota_requests_per_s,
                         requests_burst=row.quota_requests_burst,
                         key_requests_per_s=row.quota_key_requests_per_s,
                         turns_concurrent=row.quota_turns_concurrent)
