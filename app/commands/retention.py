"""``ctxgate retention run [--dry-run] [--tenant T] [--json]``: one retention pass, now.

For the platform operator, with the stores of ``ctxgate serve`` (``CTXGATE_DATABASE_URL`` and
``CTXGATE_REDIS_URL``, or the embedded default) and the same settings
(``CTXGATE_*_RETENTION_DAYS``, ``CTXGATE_RETENTION_BATCH``). It connects as the app role, like
the server: the job needs no owner privilege (migration 0021). Prints rows per table, deleted
or, with ``--dry-run``, that a run would delete now.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict

from app.adapters.postgres.db import Database, service_url
from app.adapters.postgres.retention import PgRetentionStore
from app.adapters.redis.client import open_redis
from app.adapters.redis.session_keys import RedisSessionKeys
from app.service.retention import RetentionPolicy, RetentionReport, RetentionService
from app.settings import Settings


def policy(settings: Settings) -> RetentionPolicy:
    return RetentionPolicy(
        manifests_days=settings.manifest_retention_days,
        audit_days=settings.audit_retention_days,
        sessions_days=settings.session_retention_days,
        knowledge_days=settings.knowledge_superseded_retention_days,
        batch=settings.retention_batch)


@asynccontextmanager
async def retention_service(settings: Settings) -> AsyncIterator[RetentionService]:
    """A ``RetentionService`` on the app role's pool and Redis, closed on exit."""
    assert settings.redis_url is not None
    # Two: a batch and the run's lease renewal may overlap.
    db = await Database.open(service_url(settings), pool_size=2,
                             pgbouncer=settings.database_pgbouncer)
    redis = open_redis(settings.redis_url)
    try:
        yield RetentionService(PgRetentionStore(db),
                               RedisSessionKeys(redis, prefix=settings.redis_prefix),
                               policy(settings))
    finally:
        await redis.aclose()
        await db.close()


def render(report: RetentionReport, *, as_json: bool) -> str:
    if as_json:
        return json.dumps(asdict(report), indent=2)
    what = "what a run would delete now (dry run)" if report.dry_run else "deleted"
    width = max(len(t) for t in report.rows)
    lines = [f"{table:<{width}}  {n}" for table, n in report.rows.items()]
    lines.append(f"{report.tenants} tenant(s), {report.batches} batch(es), "
                 f"{report.duration_s:.2f} s; rows above: {what}")
    if report.skipped:
        return "skipped: another retention run is in progress"
    if report.failed_tenants:
        lines.append("failed (retried next run): " + ", ".join(report.failed_tenants))
    return "\n".join(lines)
