"""Ingest off the request path, on the real stores and the real e5 embedder: a text beyond
the synchronous bound is a durable job (202, ``Location``) that a background worker chunks,
embeds in batches and writes in one transaction; small texts, client chunks and batches stay
201; bad input stays a synchronous 422 and never becomes a job; a job left ``running`` by a
killed worker is resumed by a new one; while a new version is being embedded, turns see the
old version whole, then the new one whole; a failing embedder means retries with backoff,
then ``failed``, never a 500; another tenant's job id is the same 404 as a missing one, and
so is a job of a document the key could not read; an erasure removes the user from jobs
not yet written.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import httpx
import pytest

from app.adapters.postgres.db import Sql
from app.adapters.postgres.knowledge_jobs import PgIngestJobStore
from app.core.model import Acl, DataLevel, Principal, Role, Trust
from app.main import Container
from app.ports import NewDocument
from app.service.ingest import IngestService, IngestWorker
from app.service.knowledge import KnowledgeService
from app.service.pacing import DutyCycle
from tests.api.conftest import KeyMaker, bearer
from tests.api.seed import turn

DOCS = "/v1/knowledge/documents"
PARA = ("Refund calls time out after 30 seconds because RetryConfig caps the retries at "
        "three; the payments gateway answers slowly under load and the client gives up. ")
BIG = "\n\n".join(f"Section {i} of the refund runbook. {PARA * 3}" for i in range(40))
CURRENT = Sql("SELECT version, count(*) AS n FROM knowledge_chunks WHERE tenant_id = :t "
              "AND doc_id = :d AND is_current GROUP BY version ORDER BY version")
JOBS = Sql("SELECT count(*) FROM knowledge_jobs WHERE tenant_id = :t")
HELD = Sql("SELECT count(*) FROM knowledge_jobs WHERE tenant_id = :t AND document IS NOT NULL")
LEFT_RUNNING = Sql("UPDATE knowledge_jobs SET status = 'running', attempts = 1, "
                   "not_before = now() - interval '1 second' WHERE tenant_id = :t "
                   "AND job_id = :id")


def doc(doc_id: str = "runbook", version: str = "v1", text: str = BIG,
        **extra: Any) -> dict[str, Any]:
    return {"doc_id": doc_id, "version": version, "text": text, "sensitivity": "internal",
            "trust": "reviewed", "acl": None, "domain": "payments", **extra}


@pytest.fixture
async def worker(container: Container) -> AsyncIterator[None]:
    container.ingest_worker.start()  # ASGITransport runs no lifespan
    yield
    await container.ingest_worker.stop()


async def rows(container: Container, tenant: str, sql: Sql, **params: Any) -> list[Any]:
    async with container.db.tenant_tx(tenant) as conn:
        return list(await conn.fetch(sql, {"t": tenant, **params}))


async def settled(client: httpx.AsyncClient, key: str, location: str,
                  timeout_s: float = 120.0) -> dict[str, Any]:
    for _ in range(int(timeout_s / 0.1)):
        r = await client.get(location, headers=bearer(key))
        assert r.status_code == 200, r.text
        if r.json()["status"] in ("done", "failed"):
            return dict(r.json())
        await asyncio.sleep(0.1)
    raise AssertionError(f"job at {location} did not end")


async def test_a_large_text_is_a_job_that_ends_searchable(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, container: Container,
        worker: None) -> None:
    key = await make_key(tenant)
    r = await client.post(DOCS, headers=bearer(key), json=doc())
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert r.headers["location"] == f"/v1/knowledge/jobs/{accepted['job_id']}"
    assert (accepted["doc_id"], accepted["version"]) == ("runbook", "v1")
    assert accepted["status"] == "pending" and accepted["chunks"] is None

    job = await settled(client, key, r.headers["location"])
    assert job["status"] == "done" and job["error"] is None and job["attempts"] == 1
    assert job["chunks"] > 4
    assert job["progress"] == {"embedded": job["chunks"], "total": job["chunks"]}
    got = await client.get(f"{DOCS}/runbook", headers=bearer(key))
    assert got.json()["chunks"] == job["chunks"]
    # The submitted text is dropped once the job ends: user content only lives on in the
    # knowledge tables.
    assert (await rows(container, tenant, HELD))[0][0] == 0

    answer = await client.post("/v1/context", headers=bearer(key),
                               json=turn(query="why do refund calls time out?"))
    assert answer.status_code == 200, answer.text
    found = [s["ref"] for s in answer.json()["manifest"]["segments"]]
    assert any("runbook" in ref for ref in found), found


async def test_small_texts_client_chunks_and_batches_stay_synchronous(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    small = await client.post(DOCS, headers=bearer(key), json=doc("small", text=PARA))
    assert small.status_code == 201, small.text
    assert small.json() == {"doc_id": "small", "version": "v1", "chunks": 1}
    unit = [1.0] + [0.0] * 383
    chunks = [{"text": f"{PARA} part {i}", "embedding": unit} for i in range(12)]
    pre = await client.post(DOCS, headers=bearer(key),
                            json={**doc("pre"), "text": None, "chunks": chunks})
    assert pre.status_code == 201, pre.text
    assert pre.json()["chunks"] == 12
    batch = await client.post(DOCS, headers=bearer(key), json={"items": [doc("b1")]})
    assert batch.status_code == 201, batch.text
    assert batch.json()["items"][0]["chunks"] > 4
    assert (await rows(container, tenant, JOBS))[0][0] == 0


async def test_bad_input_is_refused_before_any_job(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    both = await client.post(DOCS, headers=bearer(key),
                             json={**doc(), "chunks": [{"text": "x", "embedding": [0.0]}]})
    assert both.status_code == 422, both.text
    nul = await client.post(DOCS, headers=bearer(key), json=doc(text=BIG + "\x00"))
    assert nul.status_code == 422, nul.text
    too_high = await client.post(DOCS, headers=bearer(key), json=doc(sensitivity="secret"))
    assert too_high.status_code == 403, too_high.text
    assert (await rows(container, tenant, JOBS))[0][0] == 0


async def test_another_tenants_job_is_the_same_404_as_a_missing_one(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str, other_tenant: str
) -> None:
    mine, theirs = await make_key(tenant), await make_key(other_tenant)
    reader = await make_key(tenant, role="ops")
    r = await client.post(DOCS, headers=bearer(mine), json=doc())
    assert r.status_code == 202, r.text
    location = r.headers["location"]
    assert (await client.get(location, headers=bearer(reader))).status_code == 200
    other = await client.get(location, headers=bearer(theirs))
    missing = await client.get("/v1/knowledge/jobs/" + "0" * 32, headers=bearer(theirs))
    assert other.status_code == missing.status_code == 404
    assert other.json()["type"] == missing.json()["type"]
    assert (await client.get("/v1/knowledge/jobs/no%20such", headers=bearer(mine))
            ).status_code == 422
    # A key that could not read the document does not see its job either.
    public = await make_key(tenant, role="ops", max_data_level="public")
    elsewhere = await make_key(tenant, role="ops", domains=["billing"])
    for key in (public, elsewhere):
        hidden = await client.get(location, headers=bearer(key))
        assert hidden.status_code == 404 and hidden.json()["type"] == missing.json()["type"]


def _document(doc_id: str, version: str) -> NewDocument:
    return NewDocument(doc_id=doc_id, version=version, title=None, domain="payments",
                       sensitivity=DataLevel.INTERNAL, trust=Trust.REVIEWED,
                       acl=Acl(whole_tenant=True), observed_at=None, expires_at=None,
                       source=None, chunks=())


def _service(container: Container, embedder: Any = None, **extra: Any) -> IngestService:
    k = container.knowledge
    knowledge = k if embedder is None else KnowledgeService(
        k._store, embedder, k._count, k._scan)  # same stores, another embedder
    return IngestService(PgIngestJobStore(container.db), knowledge, batch=8,
                         pace=DutyCycle(duty=1.0, min_pause_s=0.0), **extra)


async def test_a_job_left_running_by_a_killed_worker_is_resumed(
        container: Container, tenant: str) -> None:
    store = PgIngestJobStore(container.db)
    job = await store.create(tenant_id=tenant, document=_document("resumed", "v1"), text=BIG)
    async with container.db.tenant_tx(tenant) as conn:
        await conn.execute(LEFT_RUNNING, {"t": tenant, "id": job.job_id})
    service = _service(container)  # a new process: nothing of the old worker remains
    worker = IngestWorker(service, interval_s=0.05)
    worker.start()
    try:
        for _ in range(1200):
            got = await store.get(tenant_id=tenant, job_id=job.job_id)
            assert got is not None
            if got.status == "done":
                break
            await asyncio.sleep(0.1)
    finally:
        await worker.stop()
        await service.aclose()
    assert got is not None and got.status == "done" and got.attempts == 2
    assert got.chunks is not None
    assert [(r.version, r.n) for r in await rows(container, tenant, CURRENT,
                                                 d="resumed")] == [("v1", got.chunks)]


async def test_a_live_lease_is_not_taken_and_a_lost_one_writes_nothing(
        container: Container, tenant: str) -> None:
    store = PgIngestJobStore(container.db)
    job = await store.create(tenant_id=tenant, document=_document("leased", "v1"), text=BIG)
    first = await store.claim(tenant_id=tenant, job_id=job.job_id, lease_s=60)
    assert first is not None and first.job.attempts == 1 and first.text == BIG
    assert await store.claim(tenant_id=tenant, job_id=job.job_id, lease_s=60) is None
    assert (tenant, job.job_id) not in await store.open_jobs(limit=100)
    async with container.db.tenant_tx(tenant) as conn:  # the lease lapses: the worker died
        await conn.execute(LEFT_RUNNING, {"t": tenant, "id": job.job_id})
    second = await store.claim(tenant_id=tenant, job_id=job.job_id, lease_s=60)
    assert second is not None and second.job.attempts == 2
    # The first worker wakes up: every write of its attempt is fenced off.
    assert not await store.progress(job=first.job, done=1, total=2, lease_s=60)
    await store.end(job=first.job, chunks=3, error=None)
    now = await store.get(tenant_id=tenant, job_id=job.job_id)
    assert now is not None and now.status == "running" and now.attempts == 2


class Gated:
    """The real embedder, held before every call after the first until ``go`` is set."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.model, self.dim = real.model, real.dim
        self.calls = 0
        self.go = asyncio.Event()
        self.waiting = asyncio.Event()

    async def embed_query(self, text: str) -> list[float]:
        return list(await self._real.embed_query(text))

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls > 1:
            self.waiting.set()
            await self.go.wait()
        return list(await self._real.embed_passages(texts))


async def test_a_new_version_is_switched_whole(
        client: httpx.AsyncClient, make_key: KeyMaker, tenant: str,
        container: Container) -> None:
    key = await make_key(tenant)
    old = "\n\n".join(f"Old section {i}. {PARA * 3}" for i in range(12))
    v1 = await container.knowledge.ingest(tenant_id=tenant, document=_document("doc", "v1"),
                                          content=old)
    gated = Gated(container.embedder)
    service = _service(container, gated)
    job = await service.submit(tenant_id=tenant, document=_document("doc", "v2"), content=BIG)
    assert not isinstance(job, int)
    running = asyncio.create_task(service.run(tenant_id=tenant, job_id=job.job_id))
    try:
        await asyncio.wait_for(gated.waiting.wait(), 60)  # one batch of v2 embedded
        assert [(r.version, r.n) for r in await rows(container, tenant, CURRENT, d="doc")
                ] == [("v1", v1)]
        answer = await client.post("/v1/context", headers=bearer(key), json=turn())
        assert answer.status_code == 200, answer.text
        versions = {s["ref"].split("#v")[1].rsplit(":c", 1)[0]
                    for s in answer.json()["manifest"]["segments"]
                    if s["ref"].startswith("kb://doc#")}
        assert versions == {"v1"}, versions
        mid = await service.get(principal=_principal(tenant), job_id=job.job_id)
        assert mid.status == "running" and 0 < mid.progress < mid.total
        gated.go.set()
        assert await asyncio.wait_for(running, 300)
    finally:
        gated.go.set()
        await running
    done = await service.get(principal=_principal(tenant), job_id=job.job_id)
    assert done.status == "done"
    assert [(r.version, r.n) for r in await rows(container, tenant, CURRENT, d="doc")
            ] == [("v2", done.chunks)]


class Down:
    model, dim = "e5-down", 384

    async def embed_query(self, text: str) -> list[float]:
        raise ConnectionError("embedder down")

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise ConnectionError("embedder down")


async def test_an_embedder_failure_is_retried_with_backoff_then_failed(
        container: Container, tenant: str) -> None:
    service = _service(container, Down(), attempts_max=2)
    job = await service.submit(tenant_id=tenant, document=_document("down", "v1"),
                               content=BIG)
    assert not isinstance(job, int)
    assert await service.run(tenant_id=tenant, job_id=job.job_id)
    first = await service.get(principal=_principal(tenant), job_id=job.job_id)
    assert first.status == "pending" and first.retry_at is not None
    assert first.error == "attempt 1 failed: ConnectionError; retrying"
    # Not due before its retry time.
    assert not await service.run(tenant_id=tenant, job_id=job.job_id)
    async with container.db.tenant_tx(tenant) as conn:
        await conn.execute(Sql("UPDATE knowledge_jobs SET not_before = now() "
                               "WHERE tenant_id = :t AND job_id = :id"),
                           {"t": tenant, "id": job.job_id})
    assert await service.run(tenant_id=tenant, job_id=job.job_id)
    last = await service.get(principal=_principal(tenant), job_id=job.job_id)
    assert (last.status, last.attempts, last.error) == (
        "failed", 2, "attempt 2 failed: ConnectionError")
    assert (await rows(container, tenant, HELD))[0][0] == 0
    assert await rows(container, tenant, CURRENT, d="down") == []


def _principal(tenant: str) -> Principal:
    return Principal(key_id="k", tenant_id=tenant, role=Role.RUNTIME,
                     max_data_level=DataLevel.CONFIDENTIAL, domains=None)


async def test_an_erasure_reaches_the_jobs_not_yet_written(
        container: Container, tenant: str) -> None:
    store = PgIngestJobStore(container.db)
    alone = replace(_document("alice-only", "v1"), acl=Acl(whole_tenant=False,
                                                           users=("alice",)))
    shared = replace(_document("shared", "v1"), acl=Acl(whole_tenant=False,
                                                         users=("alice", "bob")))
    gone = await store.create(tenant_id=tenant, document=alone, text=BIG)
    kept = await store.create(tenant_id=tenant, document=shared, text=BIG)
    admin = replace(_principal(tenant), role=Role.ADMIN)
    erasure = await container.erasures.request(principal=admin, user_id="alice")
    await container.erasures.run(tenant_id=tenant, erasure_id=erasure.erasure_id)
    done = await container.erasures.get(principal=admin, erasure_id=erasure.erasure_id)
    assert done.status == "done" and done.receipt["verified"]
    assert done.receipt["layers"]["knowledge"]["tables"]["knowledge_jobs"] == 1
    assert await store.get(tenant_id=tenant, job_id=gone.job_id) is None
    left = await store.claim(tenant_id=tenant, job_id=kept.job_id, lease_s=60)
    assert left is not None and left.document.acl.users == ("bob",)
