"""API fixtures: the real ASGI app over the real stores, driven by httpx in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.main import Container, create_app

KeyMaker = Callable[..., Awaitable[str]]


@pytest.fixture
async def client(container: Container) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(container=container)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


@pytest.fixture
def admin_headers(container: Container) -> dict[str, str]:
    assert container.settings.admin_token is not None
    return {"Authorization": f"Bearer {container.settings.admin_token.get_secret_value()}"}


@pytest.fixture
def make_key(client: httpx.AsyncClient, admin_headers: dict[str, str]) -> KeyMaker:
    async def make(tenant: str, role: str = "runtime", **extra: Any) -> str:
        body = {"tenant_id": tenant, "role": role, "max_data_level": "confidential", **extra}
        r = await client.post("/v1/admin/keys", headers=admin_headers, json=body)
        assert r.status_code == 201, r.text
        return str(r.json()["api_key"])

    return make


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
