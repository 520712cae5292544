"""Leakage canaries through the SECURITY DEFINER functions of migration 0027.

The app role has no privilege on ``leakage_canaries``: every worker reads the whole registry
(all tenants) to check any turn, which no tenant-scoped RLS session may do, so these are
platform-level calls on an unscoped connection, like the key functions.
"""

from __future__ import annotations

import secrets

from app.adapters.postgres.db import Database, Row, Sql
from app.ports import CanaryInfo

_CREATE = Sql("SELECT ctxgate_canary_create(:canary_id, :tenant_id, :user_id, :label, :text, "
              ":created_by)")
_LIST = Sql("SELECT canary_id, tenant_id, user_id, label, text, created_by, created_at "
            "FROM ctxgate_canary_list(:tenant_id)")
_DELETE = Sql("SELECT ctxgate_canary_delete(:canary_id)")
_REVISION = Sql("SELECT ctxgate_canary_revision()")


def _info(r: Row) -> CanaryInfo:
    return CanaryInfo(canary_id=r.canary_id, tenant_id=r.tenant_id, user_id=r.user_id,
                      label=r.label, text=r.text, created_by=r.created_by,
                      created_at=r.created_at)


class PgCanaryStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, *, tenant_id: str, user_id: str | None, label: str, text: str,
                     created_by: str) -> CanaryInfo:
        canary_id = f"cnr_{secrets.token_hex(8)}"
        async with self._db.unscoped_tx() as conn:
            created_at = await conn.fetchval(_CREATE, {
                "canary_id": canary_id, "tenant_id": tenant_id, "user_id": user_id,
                "label": label, "text": text, "created_by": created_by})
        return CanaryInfo(canary_id=canary_id, tenant_id=tenant_id, user_id=user_id,
                          label=label, text=text, created_by=created_by, created_at=created_at)

    async def list_canaries(self, *, tenant_id: str | None) -> list[CanaryInfo]:
        async with self._db.unscoped_tx() as conn:
            return [_info(r) for r in await conn.fetch(_LIST, {"tenant_id": tenant_id})]

    async def delete(self, *, canary_id: str) -> bool:
        async with self._db.unscoped_tx() as conn:
            return bool(await conn.fetchval(_DELETE, {"canary_id": canary_id}))

    async def revision(self) -> int:
        async with self._db.connection() as conn:
            return int(await conn.fetchval(_REVISION, {}))
