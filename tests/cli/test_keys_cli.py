"""``ctxgate keys create|list|revoke`` as an operator runs them (subprocesses on the test
database), and ``GET /v1/admin/keys``: a listing never shows a secret or its hash and keeps
to ``--tenant``; a revoked key's next call to the live server is 401; revoking twice is
fine, an unknown key id exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import httpx
import pytest
from ctxgate_client import AsyncCtxgateClient, UnauthorizedError

from tests.client.conftest import ADMIN_TOKEN


def ctxgate(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
           "CTXGATE_DATABASE_URL": db_url}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def create(db_url: str, tenant: str, *args: str) -> tuple[str, str]:
    done = ctxgate(db_url, "keys", "create", "--tenant", tenant, *args)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(maxsplit=1) for line in done.stdout.splitlines())
    return lines["key_id"], lines["api_key"]


async def test_list_then_revoke_and_the_key_gets_401(pg_owner_url: str, live_url: str) -> None:
    tenant, other = f"tk{uuid.uuid4().hex[:8]}", f"tk{uuid.uuid4().hex[:8]}"
    kid, secret = create(pg_owner_url, tenant, "--role", "runtime")
    bot_id, bot_secret = create(pg_owner_url, tenant, "--role", "admin", "--domain", "payments",
                                "--domain", "hr", "--max-data-level", "confidential",
                                "--name", "release-bot")
    other_id, _ = create(pg_owner_url, other, "--role", "ops")

    table = ctxgate(pg_owner_url, "keys", "list", "--tenant", tenant)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["key_id", "tenant", "role", "max_level", "domains", "name",
                              "created", "revoked"]
    assert [r.split()[:6] for r in rows] == [
        [kid, tenant, "runtime", "internal", "*", "cli"],
        [bot_id, tenant, "admin", "confidential", "payments,hr", "release-bot"]]
    assert all(r.split()[7] == "-" for r in rows)  # not revoked
    for shown in (table.stdout, ctxgate(pg_owner_url, "keys", "list").stdout):
        assert secret not in shown and bot_secret not in shown and "cgk_" not in shown
    assert other_id not in table.stdout
    assert other_id in ctxgate(pg_owner_url, "keys", "list").stdout  # no --tenant: all

    async with AsyncCtxgateClient(live_url, secret) as ctx:
        await ctx.list_documents()  # the key works
        revoked = ctxgate(pg_owner_url, "keys", "revoke", kid)
        assert revoked.returncode == 0, revoked.stderr
        assert f"revoked {kid}" in revoked.stdout
        with pytest.raises(UnauthorizedError):
            await ctx.list_documents()
    async with AsyncCtxgateClient(live_url, bot_secret) as ctx:
        await ctx.list_documents()  # its sibling still works

    assert ctxgate(pg_owner_url, "keys", "revoke", kid).returncode == 0  # twice: fine
    unknown = ctxgate(pg_owner_url, "keys", "revoke", "key_0000000000000000")
    assert unknown.returncode == 1 and "no key 'key_0000000000000000'" in unknown.stderr

    listed = ctxgate(pg_owner_url, "keys", "list", "--tenant", tenant, "--json")
    docs = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(d["key_id"], d["revoked_at"] is not None) for d in docs] == [
        (kid, True), (bot_id, False)]
    assert set(docs[1]) == {"key_id", "tenant_id", "name", "role", "max_data_level", "domains",
                            "max_session_visibility", "created_at", "revoked_at"}
    assert docs[1]["domains"] == ["payments", "hr"]

    none = ctxgate(pg_owner_url, "keys", "list", "--tenant", f"none-{uuid.uuid4().hex[:6]}")
    assert none.returncode == 0 and none.stdout == "" and "no keys" in none.stderr


async def test_admin_keys_endpoint(pg_owner_url: str, live_url: str) -> None:
    tenant = f"tk{uuid.uuid4().hex[:8]}"
    kid, secret = create(pg_owner_url, tenant, "--role", "admin")
    async with AsyncCtxgateClient(live_url, ADMIN_TOKEN) as platform:
        made = await platform.create_key(tenant_id=tenant, role="runtime", name="api-made")
        listed = (await platform.list_keys(tenant_id=tenant)).keys
        assert [(k.key_id, k.role, k.name, k.revoked_at) for k in listed] == [
            (kid, "admin", "cli", None), (made.key_id, "runtime", "api-made", None)]
        await platform.revoke_key(made.key_id)
        after = (await platform.list_keys(tenant_id=tenant)).keys[1]
        assert after.revoked_at is not None and after.revoked_at >= after.created_at
    async with httpx.AsyncClient(base_url=live_url) as http:
        every = await http.get("/v1/admin/keys",
                               headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert every.status_code == 200 and kid in every.text
        assert secret not in every.text and made.api_key not in every.text
        # A tenant's admin key is not the platform operator's token.
        for headers in ({"Authorization": f"Bearer {secret}"}, {}):
            refused = await http.get("/v1/admin/keys", headers=headers)
            assert refused.status_code == 401
            assert refused.headers["content-type"].startswith("application/problem+json")
