"""``ctxgate keys create|list|revoke``: API keys in the database, through ``KeyService``.

For the platform operator, with the stores of ``ctxgate serve`` (``CTXGATE_DATABASE_URL`` or
the embedded default); the server's ``/v1/admin/keys`` does the same with the admin token.
A listing shows what a key may do and when it was made or revoked, never its secret (shown
once, by ``create``) or the secret's hash. Revoking takes effect on the key's next call
(401); revoking twice is revoking once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

from app.adapters.postgres.db import Database, service_url
from app.adapters.postgres.keys import PgKeyStore
from app.ports import KeyInfo
from app.service.keys import KeyService
from app.settings import Settings

COLUMNS = ("key_id", "tenant", "role", "max_level", "domains", "name", "created", "revoked")


@asynccontextmanager
async def key_service(settings: Settings) -> AsyncIterator[KeyService]:
    """A ``KeyService`` on one pooled connection as the app role, closed on exit."""
    db = await Database.open(service_url(settings), pool_size=1,
                             pgbouncer=settings.database_pgbouncer)
    try:
        yield KeyService(PgKeyStore(db))
    finally:
        await db.close()


def _when(at: datetime | None) -> str:
    return at.astimezone().isoformat(timespec="seconds") if at is not None else "-"


def _row(k: KeyInfo) -> tuple[str, ...]:
    domains = ",".join(k.domains) if k.domains is not None else "*"
    return (k.key_id, k.tenant_id, k.role.value, k.max_data_level.label, domains,
            k.name or "-", _when(k.created_at), _when(k.revoked_at))


def render_table(keys: Sequence[KeyInfo]) -> str:
    """Aligned columns with a header (``*``: every domain, ``-``: not revoked)."""
    rows = [COLUMNS, *(_row(k) for k in keys)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def render_json(keys: Sequence[KeyInfo]) -> str:
    """One JSON object per line, the fields of ``GET /v1/admin/keys``."""
    return "\n".join(json.dumps({
        "key_id": k.key_id, "tenant_id": k.tenant_id, "name": k.name, "role": k.role.value,
        "max_data_level": k.max_data_level.label,
        "domains": list(k.domains) if k.domains is not None else None,
        "max_session_visibility": k.max_session_visibility.label,
        "created_at": k.created_at.isoformat(),
        "revoked_at": k.revoked_at.isoformat() if k.revoked_at else None}) for k in keys)
