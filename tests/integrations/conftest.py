"""Integration fixtures: the live server of tests/client (uvicorn on a loopback port, real
stores) with one tenant's knowledge and task state seeded through the client, and a second
tenant with nothing, for the isolation checks."""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass

import pytest
from ctxgate_client import AsyncCtxgateClient

from tests.client.conftest import ADMIN_TOKEN, live_url

__all__ = ["live_url"]

FACT = "Refund calls time out after 30 seconds; retry them with the idempotency key RFD-7731."
GOAL = "Fix the refund timeout for order 5521"
CONSTRAINT = "Only change RetryConfig, never the public refund API"


@dataclass(frozen=True, slots=True)
class Tenant:
    tenant_id: str
    key: str
    user: str
    task: str


@dataclass(frozen=True, slots=True)
class World:
    url: str
    a: Tenant  # seeded: a refund runbook, a task checkpoint
    b: Tenant  # empty

    def env(self, who: Tenant, **extra: str) -> dict[str, str]:
        """The environment `ctxgate mcp` and the hook run with, for ``who``."""
        return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp"),
                "CTXGATE_URL": self.url, "CTXGATE_API_KEY": who.key,
                "CTXGATE_USER_ID": who.user, "CTXGATE_DOMAIN": "payments",
                "CTXGATE_DATA_LEVEL": "internal", "CTXGATE_TASK_ID": who.task, **extra}


async def _tenant(url: str, name: str, user: str) -> Tenant:
    async with AsyncCtxgateClient(url, ADMIN_TOKEN) as admin:
        made = await admin.create_key(tenant_id=name, role="runtime",
                                      max_data_level="confidential")
    return Tenant(tenant_id=name, key=made.api_key, user=user,
                  task=f"task-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
async def world(live_url: str) -> World:
    uid = uuid.uuid4().hex[:8]
    # End users as runtimes name them: an e-mail, an OIDC subject.
    a = await _tenant(live_url, f"ti{uid}a", f"alice.{uid}@acme.com")
    b = await _tenant(live_url, f"ti{uid}b", f"auth0|{uid}")
    async with AsyncCtxgateClient(live_url, a.key) as ctx:
        await ctx.ingest_document(doc_id="refund-runbook", version="v1", text=FACT,
                                  sensitivity="internal", trust="reviewed", domain="payments")
        await ctx.put_checkpoint(a.task, user_id=a.user, goal=GOAL,
                                 constraints=[{"text": CONSTRAINT, "kind": "only"}],
                                 pending_approvals=["SRE sign-off"])
    return World(url=live_url, a=a, b=b)


PYTHON = sys.executable
