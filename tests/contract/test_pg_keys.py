"""PgKeyStore against the real server: create, authenticate, revoke."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import pytest

from app.adapters.postgres.db import Database
from app.adapters.postgres.keys import PgKeyStore
from app.core.model import DataLevel, Principal, Role
from app.ports import NewKey


@pytest.fixture
async def db(pg_owner_url: str) -> AsyncIterator[Database]:
    database = await Database.open(pg_owner_url, role="ctxgate_app", password=None, pool_size=2)
    yield database
    await database.close()


async def test_create_principal_revoke(db: Database, tenant: str, uid: str) -> None:
    store = PgKeyStore(db)
    digest = hashlib.sha256(f"secret-{uid}".encode()).digest()
    new = NewKey(tenant_id=tenant, role=Role.RUNTIME, max_data_level=DataLevel.CONFIDENTIAL,
                 domains=("payments", "billing"), name="ci")
    key_id = await store.create(key=new, key_hash=digest)
    assert key_id.startswith("key_") and len(key_id) == 20

    assert await store.principal(key_hash=digest) == Principal(
        key_id=key_id, tenant_id=tenant, role=Role.RUNTIME,
        max_data_level=DataLevel.CONFIDENTIAL, domains=("payments", "billing"))
    assert await store.principal(key_hash=b"unknown") is None

    assert await store.revoke(key_id=key_id) is True
    assert await store.principal(key_hash=digest) is None
    assert await store.revoke(key_id=key_id) is True  # idempotent
    assert await store.revoke(key_id="key_missing") is False


async def test_all_domains_key(db: Database, tenant: str, uid: str) -> None:
    store = PgKeyStore(db)
    digest = hashlib.sha256(f"admin-{uid}".encode()).digest()
    await store.create(key=NewKey(tenant_id=tenant, role=Role.ADMIN,
                                  max_data_level=DataLevel.SECRET, domains=None, name="a"),
                       key_hash=digest)
    principal = await store.principal(key_hash=digest)
    assert principal is not None and principal.domains is None
