"""Isolation suite fixtures: one Container + app per guard mode, planted once per mode.

Modes (``MODES``):

- ``normal``           every guard on.
- ``no-query-filter``  the adapters' tenant predicates are rewritten to ``TRUE`` (RLS alone).
- ``no-rls``           the service connects as the owner superuser ``postgres`` (queries alone).
- ``control``          no RLS, no tenant predicates, no ACL predicates in the knowledge search
                       and a pass-through permission guard: the suite must find leaks here.

The planted data (``plant.Plant``) lives for the module; the SQL and guard patches are applied
per test (function-scoped ``armed``), so they can never outlive an isolation test and reach
another test module. Planting itself runs with the real, unpatched code.
"""

from __future__ import annotations

import json
import re
import types
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.adapters.postgres import audit, knowledge, manifests, sessions, tasks
from app.adapters.postgres.db import Sql
from app.core import pipeline
from app.core.model import Candidate, Drop, Scope
from app.main import Container, create_app
from app.settings import Settings
from tests.isolation.plant import Plant, plant_all

MODES = ("normal", "no-query-filter", "no-rls", "control")
GUARDED_MODES = frozenset({"normal", "no-query-filter", "no-rls"})
OWNER_ROLE = "postgres"  # the embedded server's superuser: bypasses RLS
ADAPTERS: tuple[types.ModuleType, ...] = (audit, knowledge, manifests, sessions, tasks)

TENANT_PREDICATE = re.compile(r"\b(?:[a-z]\.)?tenant_id\s*=\s*:tenant_id\b")
ACL_PREDICATE = re.compile(r"\(\s*c\.acl_all\s+OR\b[^\n]*")  # the ACL clause of VISIBLE
SUMMARY_KEY = pytest.StashKey[Path]()


def strip_tenant(sql: str) -> str:
    return TENANT_PREDICATE.sub("TRUE", sql)


def strip_tenant_and_acl(sql: str) -> str:
    return ACL_PREDICATE.sub("TRUE", strip_tenant(sql))


def _is_sql_name(name: str) -> bool:
    return name.endswith("_SQL") or name == "VISIBLE"


def sql_texts(module: types.ModuleType) -> Iterator[tuple[str, str]]:
    """Every SQL string of an adapter module: *_SQL constants and the Sql built from them."""
    for name, value in vars(module).items():
        if isinstance(value, str) and _is_sql_name(name):
            yield name, value
        elif isinstance(value, Sql):
            yield name, value.source
        elif isinstance(value, dict) and value and all(
                isinstance(v, Sql) for v in value.values()):
            for k, v in value.items():
                yield f"{name}[{k}]", v.source


def rewritten_globals(module: types.ModuleType, rewrite: Callable[[str], str]
                      ) -> dict[str, object]:
    """The module globals holding SQL that ``rewrite`` changes, with their new values."""
    out: dict[str, object] = {}
    for name, value in vars(module).items():
        new: object
        if isinstance(value, str) and _is_sql_name(name):
            new = rewrite(value)
            changed = new != value
        elif isinstance(value, Sql):
            new = Sql(rewrite(value.source))
            changed = rewrite(value.source) != value.source
        elif isinstance(value, dict) and value and all(
                isinstance(v, Sql) for v in value.values()):
            clauses: dict[Any, Sql] = value
            new = {k: Sql(rewrite(v.source)) for k, v in clauses.items()}
            changed = any(rewrite(v.source) != v.source for v in clauses.values())
        else:
            continue
        if changed:
            out[name] = new
    return out


def pass_through_permission(scope: Scope, candidates: Iterable[Candidate], *, now: Any
                            ) -> tuple[list[Candidate], list[Drop]]:
    del scope, now
    return list(candidates), []


def arm(mode: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Apply ``mode``'s patches; returns how many SQL globals were rewritten."""
    if mode not in ("no-query-filter", "control"):
        return 0
    rewrite = strip_tenant if mode == "no-query-filter" else strip_tenant_and_acl
    count = 0
    for module in ADAPTERS:  # the ACL clause exists only in knowledge.VISIBLE
        for name, value in rewritten_globals(module, rewrite).items():
            monkeypatch.setattr(module, name, value)
            count += 1
    if mode == "control":
        monkeypatch.setattr(pipeline, "permission_guard", pass_through_permission)
    return count


@dataclass
class Env:
    mode: str
    container: Container
    client: httpx.AsyncClient
    plant: Plant
    patched: int = 0


@dataclass
class Summary:
    modes: dict[str, dict[str, Any]] = field(default_factory=dict)


@pytest.fixture(scope="session")
def summary(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Summary]:
    s = Summary()
    yield s
    path = tmp_path_factory.getbasetemp() / "isolation-summary.json"
    path.write_text(json.dumps(s.modes, indent=2, sort_keys=True) + "\n")
    request.config.stash[SUMMARY_KEY] = path


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    path = config.stash.get(SUMMARY_KEY, None)
    if path is None or not path.exists():
        return
    terminalreporter.write_sep("-", f"isolation summary: {path}")
    terminalreporter.write_line(path.read_text().rstrip())


@pytest.fixture(scope="module", params=MODES)
async def env(request: pytest.FixtureRequest, pg_owner_url: str, redis_url: str
              ) -> AsyncIterator[Env]:
    mode: str = request.param
    uid = uuid.uuid4().hex[:10]
    settings = Settings(
        database_url=pg_owner_url, redis_url=redis_url, redis_prefix=f"ctxgate-iso-{uid}",
        admin_token=f"iso-admin-{uid}", db_pool_size=4,
        app_db_role=OWNER_ROLE if mode in ("no-rls", "control") else "ctxgate_app")
    container = await Container.open(settings)
    transport = httpx.ASGITransport(app=create_app(container=container),
                                    raise_app_exceptions=False)
    client = httpx.AsyncClient(transport=transport, base_url="http://test")
    try:
        plant = await plant_all(client, container, uid, admin_token=f"iso-admin-{uid}")
        yield Env(mode=mode, container=container, client=client, plant=plant)
    finally:
        await client.aclose()
        await container.close()


@pytest.fixture
def armed(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """``env`` with its mode's patches applied for this one test."""
    env.patched = arm(env.mode, monkeypatch)
    return env
