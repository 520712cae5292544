"""``ctxgate retention run [--dry-run] [--tenant T] [--json]`` as an operator runs it (a
subprocess on the test stores): the dry run reports per table and deletes nothing, the run
deletes what it reported and keeps what is younger than the retention."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import asyncpg
from sqlalchemy.engine import make_url

INSERT = """
INSERT INTO manifests (tenant_id, turn_id, key_id, request_sha256, body, created_at)
SELECT $1, 'turn-' || i, 'k', 'sha', '{}'::jsonb, now() - make_interval(days => $2)
FROM generate_series($3::int, $4::int) AS i"""
COUNT = "SELECT count(*) FROM manifests WHERE tenant_id = $1"


def ctxgate(db_url: str, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "CTXGATE_DATABASE_URL": db_url, "CTXGATE_REDIS_URL": redis_url,
           "CTXGATE_RETENTION_BATCH": "2"}
    return subprocess.run([sys.executable, "-m", "app.cli", "retention", "run", *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


async def test_dry_run_then_run(pg_owner_url: str, redis_url: str) -> None:
    tenant = f"tr{uuid.uuid4().hex[:8]}"
    owner = await asyncpg.connect(make_url(pg_owner_url).set(
        drivername="postgresql").render_as_string(hide_password=False))
    try:
        await owner.execute(INSERT, tenant, 45, 1, 5)  # past the 30 days
        await owner.execute(INSERT, tenant, 2, 6, 7)  # young
        dry = ctxgate(pg_owner_url, redis_url, "--dry-run", "--tenant", tenant, "--json")
        assert dry.returncode == 0, dry.stderr
        report = json.loads(dry.stdout)
        assert report["dry_run"] is True and report["rows"]["manifests"] == 5
        assert report["rows"]["sessions"] == 0 and report["tenants"] == 1
        assert await owner.fetchval(COUNT, tenant) == 7

        done = ctxgate(pg_owner_url, redis_url, "--tenant", tenant)
        assert done.returncode == 0, done.stderr
        lines = dict(line.split(maxsplit=1) for line in done.stdout.splitlines()[:6])
        assert lines["manifests"] == "5" and lines["audit_log"] == "0"
        assert "rows above: deleted" in done.stdout
        assert await owner.fetchval(COUNT, tenant) == 2
    finally:
        await owner.close()
