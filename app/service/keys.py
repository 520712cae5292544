"""API keys: minted once, stored only as a hash, resolved to a Principal on every call."""

from __future__ import annotations

import hashlib
import secrets

from app.core.errors import NotFound, Unauthorized
from app.core.model import AssertionPolicy, Principal
from app.ports import KeyInfo, KeyStore, NewKey, TenantSettings
from app.service.identity import check_policy

KEY_PREFIX = "cgk_"


def hash_key(api_key: str) -> bytes:
    # Keys are 256 random bits, so a fast unsalted hash is enough: there is nothing to
    # brute-force, and lookup by hash stays one index probe.
    return hashlib.sha256(api_key.encode()).digest()


class KeyService:
    def __init__(self, store: KeyStore) -> None:
        self._store = store

    async def create(self, key: NewKey) -> tuple[str, str]:
        api_key = KEY_PREFIX + secrets.token_urlsafe(32)
        key_id = await self._store.create(key=key, key_hash=hash_key(api_key))
        return key_id, api_key

    async def revoke(self, key_id: str) -> None:
        if not await self._store.revoke(key_id=key_id):
            raise NotFound(f"no key {key_id!r}")

    async def list_keys(self, tenant_id: str | None = None) -> list[KeyInfo]:
        """Every key of ``tenant_id`` (of all tenants: None), revoked ones included."""
        return await self._store.list_keys(tenant_id=tenant_id)

    async def authenticate(self, api_key: str | None) -> Principal:
        if not api_key:
            raise Unauthorized("missing bearer key")
        principal = await self._store.principal(key_hash=hash_key(api_key))
        if principal is None:
            raise Unauthorized("unknown or revoked key")
        return principal

    async def set_assertion_policy(self, tenant_id: str, policy: AssertionPolicy) -> None:
        check_policy(policy)
        await self._store.set_assertion_policy(tenant_id=tenant_id, policy=policy)

    async def tenant_settings(self, tenant_id: str) -> TenantSettings:
        return await self._store.tenant_settings(tenant_id=tenant_id)

    async def set_tenant_settings(self, tenant_id: str, settings: TenantSettings) -> None:
        await self._store.set_tenant_settings(tenant_id=tenant_id, settings=settings)
