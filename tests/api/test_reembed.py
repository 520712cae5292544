"""Switching embedders on the real stores: a database written with embedder A is opened with
embedder B (same dimension; both deterministic fakes of the ``Embedder`` port, which is a
model, not a store). Vector search skips A's vectors until the background job has re-embedded
them; full-text still finds them; a client's vectors are reported stale and never touched;
a turn during the job answers; a restart mid-job carries on from the rows; the admin report
says all of it; and the HNSW index still drives a filtered search.

Runs in a database of its own: switching the embedder is a database-wide event that would
otherwise re-embed every other test's rows.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.adapters.postgres import migrate
from app.adapters.postgres.db import Sql
from app.adapters.postgres.knowledge import SEARCH_ANN_SQL, PgKnowledgeStore, visible_params
from app.core.model import DataLevel
from app.main import Container, create_app
from app.ports import KnowledgeQuery
from app.settings import Settings
from tests.api.conftest import bearer
from tests.api.seed import turn
from tests.api.test_batch_writes import doc, mem

DIM = 384
CHUNK_ROWS = Sql("SELECT text, embedder, embedding::text AS embedding FROM knowledge_chunks "
                 "WHERE tenant_id = :t ORDER BY doc_id, chunk_no")
DOCS = {
    "refunds.md": "Refund calls time out after thirty seconds when the ledger lock is held.",
    "deploys.md": "Deploys to the payments cluster happen on Tuesdays after the freeze.",
    "oncall.md": "The on-call engineer owns the refund queue during the weekend rotation.",
    "limits.md": "Card limits reset at midnight in the merchant's own timezone.",
    "ledger.md": "The ledger service retries a failed posting three times with backoff.",
}


class HashEmbedder:
    """Bag of words hashed into ``DIM`` buckets, salted by the model name: the same text
    gets unrelated vectors from two models, as two real embedders would."""

    dim = DIM

    def __init__(self, model: str, *, delay_s: float = 0.0) -> None:
        self.model = model
        self.delay_s = delay_s
        self.passages = 0

    def vector(self, value: str) -> list[float]:
        v = [0.0] * DIM
        for word in re.findall(r"\w+", value.lower()) or ["empty"]:
            h = hashlib.blake2b(f"{self.model}/{word}".encode(), digest_size=8).digest()
            v[int.from_bytes(h[:4], "big") % DIM] += 1.0 if h[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v] if any(v) else [1.0] + [0.0] * (DIM - 1)

    async def embed_query(self, value: str) -> list[float]:
        return self.vector(value)

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        await asyncio.sleep(self.delay_s)
        self.passages += len(texts)
        return [self.vector(t) for t in texts]


async def _admin(owner_url: str, sql: str) -> None:
    engine = create_async_engine(owner_url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@pytest.fixture
async def own_db(pg_owner_url: str, uid: str) -> AsyncIterator[str]:
    name = f"ctxgate_reembed_{uid}"
    await _admin(pg_owner_url, f'CREATE DATABASE "{name}"')
    url = make_url(pg_owner_url).set(database=name).render_as_string(hide_password=False)
    await asyncio.to_thread(migrate.upgrade, url, app_role="ctxgate_app", app_password=None)
    yield url
    await _admin(pg_owner_url, f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def db_settings(own_db: str, redis_url: str, uid: str) -> Settings:
    return Settings(database_url=own_db, redis_url=redis_url,
                    redis_prefix=f"ctxgate-test-{uid}", admin_token="test-admin-token-" + uid,
                    reembed_batch=2, reembed_pause_ms=0)


class App:
    """A container over the test database with ``embedder``, and an HTTP client on it."""

    def __init__(self, container: Container, client: httpx.AsyncClient) -> None:
        self.c = container
        self.http = client
        token = container.settings.admin_token
        assert token is not None
        self.admin = bearer(token.get_secret_value())

    async def report(self, tenant_id: str | None = None) -> dict[str, Any]:
        r = await self.http.get("/v1/admin/embeddings", headers=self.admin,
                                params={"tenant_id": tenant_id} if tenant_id else None)
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def vector_hits(self, tenant: str, query: str) -> list[str]:
        store = PgKnowledgeStore(self.c.db, tokenizer="o200k_base", detectors="x",
                                 space=self.c.reembedder.space)
        hits = await store.search_vector(query=_query(
            tenant, await self.c.embedder.embed_query(query)))
        return [h.doc_id for h in hits]


def _query(tenant: str, embedding: list[float] | None, words: str = "") -> KnowledgeQuery:
    return KnowledgeQuery(tenant_id=tenant, user_id="alice", groups=("payments-oncall",),
                          domain="payments", max_level=DataLevel.CONFIDENTIAL,
                          now=datetime.now(UTC), embedding=embedding, text=words, k=10)


async def _open(settings: Settings, embedder: HashEmbedder) -> tuple[Container, App]:
    container = await Container.open(settings, embedder=embedder)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(container=container)),
                             base_url="http://test")
    return container, App(container, http)


async def _close(app: App) -> None:
    await app.http.aclose()
    await app.c.close()


async def _seed(app: App, tenant: str) -> str:
    """Five documents, a memory and two session events embedded by the server, one document
    and one memory with the client's vectors; the runtime key."""
    r = await app.http.post("/v1/admin/keys", headers=app.admin, json={
        "tenant_id": tenant, "role": "runtime", "max_data_level": "confidential"})
    assert r.status_code == 201, r.text
    key = str(r.json()["api_key"])
    own = HashEmbedder("the-clients-model")
    items = [doc(d, t) for d, t in DOCS.items()]
    items.append({**doc("client.md", ""), "text": None, "chunks": [
        {"text": "Chargebacks are filed by the client team.",
         "embedding": own.vector("Chargebacks are filed by the client team.")}]})
    r = await app.http.post("/v1/knowledge/documents", headers=bearer(key),
                            json={"items": items})
    assert r.status_code in (200, 201), r.text
    r = await app.http.post("/v1/memories", headers=bearer(key), json={"items": [
        mem("I prefer answers about refunds in German"),
        mem("I work on the ledger team", embedding=own.vector("ledger team"))]})
    assert r.status_code in (200, 201), r.text
    r = await app.http.post("/v1/sessions/s1/events", headers=bearer(key), json={
        "user_id": "alice", "events": [
            {"type": "message", "role": "user", "content": "The refund queue was slow today."},
            {"type": "message", "role": "assistant", "content": "Noted."}]})
    assert r.status_code == 201, r.text
    await app.c.recall.idle()  # the events are embedded in the background
    return key


def _counts(report: dict[str, Any], table: str) -> dict[str, int]:
    return {k: v for k, v in report["tables"][table].items() if v}


async def test_a_switch_re_embeds_in_the_background_and_never_mixes_spaces(
        db_settings: Settings, uid: str) -> None:
    tenant = f"t{uid}a"
    a, b = HashEmbedder("test-hash-a"), HashEmbedder("test-hash-b", delay_s=0.2)

    _, first = await _open(db_settings, a)
    try:
        key = await _seed(first, tenant)
        before = await first.report()
        assert before["embedder"] == before["legacy_embedder"] == "test-hash-a"
        assert _counts(before, "knowledge_chunks") == {"current": 5, "client": 1}
        assert _counts(before, "memories") == {"current": 1, "client": 1}
        assert _counts(before, "session_events") == {"current": 2}
        assert "refunds.md" in await first.vector_hits(tenant, "refund calls time out")
        async with first.c.db.read_tx(tenant) as conn:
            written = {r.text: r for r in await conn.fetch(CHUNK_ROWS, {"t": tenant})}
    finally:
        await _close(first)

    # B opens the same data; its job is not started yet (no lifespan under ASGITransport).
    _, second = await _open(db_settings, b)
    try:
        stale = await second.report()
        assert (stale["embedder"], stale["legacy_embedder"]) == ("test-hash-b", "test-hash-a")
        assert _counts(stale, "knowledge_chunks") == {"stale": 5, "client_stale": 1}
        assert _counts(stale, "memories") == {"stale": 1, "client_stale": 1}
        assert _counts(stale, "session_events") == {"stale": 2}
        assert stale["running"] is False
        # A's vectors are not compared with B's query; words still find them.
        assert await second.vector_hits(tenant, "refund calls time out") == []
        words = await PgKnowledgeStore(second.c.db, tokenizer="o200k_base", detectors="x",
                                       space=second.c.reembedder.space).search_text(
            query=_query(tenant, None, "refund ledger lock"))
        assert "refunds.md" in [h.doc_id for h in words]

        # The job runs in batches of two, 200 ms of "model" each: a turn meanwhile answers.
        second.c.reembedder.start()
        for _ in range(100):
            await asyncio.sleep(0.02)
            middle = await second.report()
            if _counts(middle, "knowledge_chunks")["stale"] < 5:
                break
        assert middle["running"] is True
        r = await second.http.post("/v1/context", headers=bearer(key),
                                   json=turn(query="why does the refund call time out?"))
        assert r.status_code == 200, r.text
        assert second.c.reembedder.running
        # Stop mid-job (a restart): what is done stays done.
        await second.c.reembedder.aclose()
        middle = await second.report()
        assert 0 < _counts(middle, "knowledge_chunks")["stale"] < 5
    finally:
        await _close(second)

    container, third = await _open(db_settings, b)
    try:
        container.reembedder.start()
        await container.reembedder.idle()
        done = await third.report()
        assert _counts(done, "knowledge_chunks") == {"current": 5, "client_stale": 1}
        assert _counts(done, "memories") == {"current": 1, "client_stale": 1}
        assert _counts(done, "session_events") == {"current": 2}
        assert done["running"] is False
        assert "refunds.md" in await third.vector_hits(tenant, "refund calls time out")
        async with container.db.read_tx(tenant) as conn:
            now = {r.text: r for r in await conn.fetch(CHUNK_ROWS, {"t": tenant})}
        client_text = "Chargebacks are filed by the client team."
        assert now[client_text].embedding == written[client_text].embedding  # untouched
        assert now[client_text].embedder == "client:test-hash-a"
        assert {r.embedder for t, r in now.items() if t != client_text} == {"test-hash-b"}
        metrics = (await third.http.get("/metrics")).text
        assert 'ctxgate_reembedded_rows_total{table="knowledge_chunks"}' in metrics
    finally:
        await _close(third)


async def test_rows_from_before_provenance_are_the_first_claimants(
        db_settings: Settings, uid: str) -> None:
    """A NULL provenance (a row stored before migration 0018) is the embedder of the first
    worker that started after it: current for it, stale for the next one."""
    tenant = f"t{uid}a"
    a, b = HashEmbedder("test-hash-a"), HashEmbedder("test-hash-b")
    _, first = await _open(db_settings, a)
    try:
        await _seed(first, tenant)
        async with first.c.db.tenant_tx(tenant) as conn:
            await conn.execute(Sql("UPDATE knowledge_chunks SET embedder = NULL "
                                   "WHERE tenant_id = :t AND embedder = 'test-hash-a'"),
                               {"t": tenant})
        assert _counts(await first.report(), "knowledge_chunks") == {"current": 5, "client": 1}
        assert "refunds.md" in await first.vector_hits(tenant, "refund calls time out")
    finally:
        await _close(first)
    container, second = await _open(db_settings, b)
    try:
        assert _counts(await second.report(), "knowledge_chunks") == {
            "stale": 5, "client_stale": 1}
        container.reembedder.start()
        await container.reembedder.idle()
        assert _counts(await second.report(), "knowledge_chunks") == {
            "current": 5, "client_stale": 1}
    finally:
        await _close(second)


async def test_an_older_worker_stops_re_embedding_once_a_newer_embedder_is_configured(
        db_settings: Settings, uid: str) -> None:
    tenant = f"t{uid}a"
    _, first = await _open(db_settings, HashEmbedder("test-hash-a"))
    try:
        await _seed(first, tenant)
    finally:
        await _close(first)
    old_container, old = await _open(db_settings, HashEmbedder("test-hash-b"))
    new_container, new = await _open(db_settings, HashEmbedder("test-hash-c"))
    try:
        old_container.reembedder.start()  # b's worker, started before c's
        await old_container.reembedder.idle()
        assert _counts(await old.report(), "knowledge_chunks")["stale"] == 5  # left for c
        new_container.reembedder.start()
        await new_container.reembedder.idle()
        assert _counts(await new.report(), "knowledge_chunks") == {
            "current": 5, "client_stale": 1}
    finally:
        await _close(old)
        await _close(new)


async def test_the_filtered_vector_search_still_uses_the_hnsw_index(
        db_settings: Settings, uid: str) -> None:
    tenant = f"t{uid}a"
    container, app = await _open(db_settings, HashEmbedder("test-hash-a"))
    try:
        await _seed(app, tenant)
        q = _query(tenant, await container.embedder.embed_query("refund"))
        space = container.reembedder.space
        params = {**visible_params(q), "embedding": list(q.embedding or []), "k": 10,
                  "spaces": list(space.accepted), "legacy": space.legacy}
        explain = Sql("EXPLAIN " + SEARCH_ANN_SQL)
        async with container.db.tenant_tx(tenant) as conn:
            # A handful of rows: without these the planner rightly scans the tenant's rows.
            await conn.execute(Sql("SET LOCAL enable_seqscan = off"))
            await conn.execute(Sql("SET LOCAL enable_sort = off"))
            plan = "\n".join(r[0] for r in await conn.fetch(explain, params))
        assert "knowledge_chunks_embedding" in plan, plan
    finally:
        await _close(app)


@pytest.fixture
async def plain_owner_db(pg_owner_url: str, uid: str) -> AsyncIterator[str]:
    """A database whose owner is a plain role (not superuser), as in production: FORCE ROW
    LEVEL SECURITY binds it, so the census must go through its own policy."""
    name, owner = f"ctxgate_reembed_plain_{uid}", f"ctxgate_owner_{uid}"
    await _admin(pg_owner_url, f'CREATE ROLE "{owner}" LOGIN')
    await _admin(pg_owner_url, f'CREATE DATABASE "{name}" OWNER "{owner}"')
    su = make_url(pg_owner_url).set(database=name).render_as_string(hide_password=False)
    await _admin(su, "CREATE EXTENSION vector")  # the one step that needs a superuser
    url = make_url(su).set(username=owner).render_as_string(hide_password=False)
    await asyncio.to_thread(migrate.upgrade, url, app_role="ctxgate_app", app_password=None)
    yield url
    await _admin(pg_owner_url, f'DROP DATABASE "{name}" WITH (FORCE)')
    await _admin(pg_owner_url, f'DROP ROLE "{owner}"')


async def test_the_census_crosses_tenants_under_a_plain_owner_and_the_app_role_cannot(
        plain_owner_db: str, redis_url: str, uid: str) -> None:
    settings = Settings(database_url=plain_owner_db, redis_url=redis_url,
                        redis_prefix=f"ctxgate-test-{uid}",
                        admin_token="test-admin-token-" + uid)
    container, app = await _open(settings, HashEmbedder("test-hash-a"))
    try:
        await _seed(app, f"t{uid}a")
        await _seed(app, f"t{uid}b")
        report = await app.report()
        assert _counts(report, "knowledge_chunks") == {"current": 10, "client": 2}
        # One tenant's own rows (what a caller waiting for its writes reads); none: zeros.
        assert _counts(await app.report(f"t{uid}a"), "knowledge_chunks") == {
            "current": 5, "client": 1}
        assert _counts(await app.report("no-such-tenant"), "knowledge_chunks") == {}
        # The app role setting the census option still sees no tenant's rows but its own.
        async with container.db.unscoped_tx() as conn:
            await conn.execute(Sql("SET LOCAL ctxgate.embedding_census = 'on'"))
            assert await conn.fetchval(Sql("SELECT count(*) FROM knowledge_chunks")) == 0
    finally:
        await _close(app)
