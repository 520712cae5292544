"""The bench's ``small`` data in fresh stores, and the service opened in this process.

Shared by the in-process measurements (``bench.profile_turns``, ``bench.replay_fidelity``):
the same corpus as ``ctxgate bench --scale small``, bulk-loaded, a runtime key per tenant, and
an ASGI client on the service (no HTTP server, no second process), with quotas off as in the
bench. ``first_turns`` serves every session's first turn, as the bench does before it times.
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import numpy as np

from app.main import Container, create_app
from app.settings import Settings
from bench import ingest
from bench.generate import SCALES, Dataset, generate
from bench.run import NO_QUOTAS, _body


@dataclass(frozen=True, slots=True)
class InProcess:
    ds: Dataset
    keys: dict[str, str]  # a runtime key per tenant
    client: httpx.AsyncClient
    admin_token: str

    async def turn(self, key: str, body: bytes) -> None:
        r = await self.client.post("/v1/context", content=body, headers={
            "Authorization": f"Bearer {key}", "content-type": "application/json"})
        assert r.status_code == 200, r.text[:500]

    async def first_turns(self, *, client_emb: bool) -> None:
        sessions = [(t, s) for t in self.ds.tenants for s in self.ds.tenant_sessions.get(t, [])]
        for i, (t, sess) in enumerate(sessions):
            await self.turn(self.keys[t], _body(
                self.ds, t, sess, random.Random(i), np.random.Generator(np.random.PCG64(i)),
                client_emb=client_emb))


@asynccontextmanager
async def small_service(owner_url: str, redis_url: str, name: str
                        ) -> AsyncIterator[InProcess]:
    ds = generate(42, SCALES["small"], name, progress=False)
    await ingest.bulk_load(ds, owner_url, progress=False)
    await ingest.write_tails(ds, redis_url, f"ctxgate-{name}")
    keys = await ingest.create_keys(ds, owner_url)
    for var, value in NO_QUOTAS.items():
        os.environ[var] = value
    token = secrets.token_urlsafe()
    container = await Container.open(Settings(
        database_url=owner_url, redis_url=redis_url, redis_prefix=f"ctxgate-{name}",
        admin_token=token))
    try:
        transport = httpx.ASGITransport(app=create_app(container=container))
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{name}",
                                     timeout=600) as client:
            yield InProcess(ds=ds, keys=keys, client=client, admin_token=token)
    finally:
        await container.close()
