"""The workers' canary registry over an in-memory store: refreshed by revision within its
interval, at once after its own writes, and never failing a turn when the store does."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.core.errors import NotFound
from app.ports import CanaryInfo
from app.service.canaries import CanaryRegistry

TEXT = "NIGHTJAR-7731"


class FakeStore:
    def __init__(self) -> None:
        self.rows: dict[str, CanaryInfo] = {}
        self.rev = 0
        self.lists = 0
        self.fail = False

    async def create(self, *, tenant_id: str, user_id: str | None, label: str, text: str,
                     created_by: str) -> CanaryInfo:
        info = CanaryInfo(canary_id=f"c{len(self.rows)}", tenant_id=tenant_id, user_id=user_id,
                          label=label, text=text, created_by=created_by,
                          created_at=datetime(2026, 12, 5, tzinfo=UTC))
        self.rows[info.canary_id] = info
        self.rev += 1
        return info

    async def list_canaries(self, *, tenant_id: str | None) -> list[CanaryInfo]:
        self.lists += 1
        return [r for r in self.rows.values() if tenant_id in (None, r.tenant_id)]

    async def delete(self, *, canary_id: str) -> bool:
        self.rev += 1
        return self.rows.pop(canary_id, None) is not None

    async def revision(self) -> int:
        if self.fail:
            raise ConnectionError("postgres is down")
        return self.rev


class Clock:
    t = 100.0

    def __call__(self) -> float:
        return self.t


async def test_another_workers_canary_is_active_after_the_interval() -> None:
    store, clock = FakeStore(), Clock()
    worker = CanaryRegistry(store, refresh_s=5, clock=clock)
    other = CanaryRegistry(store, refresh_s=5, clock=clock)
    assert len(await worker.matcher()) == 0
    await other.create(tenant_id="a", user_id=None, label="", text=TEXT, created_by="platform")
    clock.t += 4.9
    assert len(await worker.matcher()) == 0  # within the interval: the matcher it has
    clock.t += 0.2
    assert len(await worker.matcher()) == 1
    lists = store.lists
    clock.t += 10
    await worker.matcher()
    assert store.lists == lists  # the revision did not move: no reload


async def test_own_writes_take_effect_at_once() -> None:
    store = FakeStore()
    registry = CanaryRegistry(store, refresh_s=3600, clock=Clock())
    await registry.matcher()
    info = await registry.create(tenant_id="a", user_id=None, label="", text=TEXT,
                                 created_by="platform")
    assert len(await registry.matcher()) == 1
    await registry.delete(info.canary_id)
    assert len(await registry.matcher()) == 0
    with pytest.raises(NotFound):
        await registry.delete(info.canary_id)


async def test_a_failed_refresh_keeps_the_previous_matcher() -> None:
    store, clock = FakeStore(), Clock()
    registry = CanaryRegistry(store, refresh_s=5, clock=clock)
    await store.create(tenant_id="a", user_id=None, label="", text=TEXT, created_by="x")
    assert len(await registry.matcher()) == 1
    store.fail = True
    clock.t += 6
    assert len(await registry.matcher()) == 1
