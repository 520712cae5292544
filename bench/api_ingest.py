"""``ctxgate bench --api-ingest``: items/s of memories and documents written through the API.

What an agent runtime importing history sees: ``POST /v1/memories`` and ``POST
/v1/knowledge/documents`` against a running server (``bench.run._server``, its workers, the
e5 embedder warmed by its lifespan), one item per request (closed loop at c = 1 and c = 8)
against ``{"items": [...]}`` batches of ``BATCH`` (c = 1 and c = 2). Every scenario writes
into a tenant of its own, so none sees another's rows.

``--embedder e5`` measures the default offline model; ``--embedder instant`` points the
server's OpenAI-compatible embedder at ``_Instant``, a loopback endpoint that answers at once
(a unit vector seeded by each text's hash, so no two statements look alike to the write
gate): what the API and the stores sustain when the server's embedding costs nothing here.
``--embedder client`` sends the embeddings in the requests, as a runtime that has them
already would: a memory's ``embedding``, a document as ``chunks`` of one ``{text,
embedding}`` (its ~120 words are one chunk either way), each vector the same hash-seeded one
written at float32 precision (shortest round-trip decimals, ~4.6 KB a vector, so a batch of
100 stays under the 1 MiB body limit). The vectors are made before the clock starts. The
server runs with the instant endpoint, and each scenario reports how many texts that endpoint
was asked to embed (``server_embedded``): 0 when the client-supplied path is taken.

Items are generated deterministically from the seed: a memory is a user's preference of
8-16 runbook words (``bench.generate.runbook_text``), a document ~120 of them (one chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import orjson

from app.core.model import DataLevel, Role
from bench.generate import runbook_text

BATCH = 100
USERS = 10
DIM = 384
EMBEDDERS = {
    "e5": "the server's default offline e5 model",
    "instant": "an OpenAI-compatible loopback endpoint answering at once: the rate "
               "embeddings made elsewhere would allow",
    "client": "the requests carry the embeddings (memory embedding, document chunks); the "
              "server's embedder (the instant endpoint) is not called for them",
}


class _Instant(BaseHTTPRequestHandler):
    embedded = 0  # texts asked for, across the endpoint's threads
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            _Instant.embedded += len(body["input"])
        data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(body["input"])]
        out = orjson.dumps({"data": data, "model": body.get("model", "instant")})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a line per request would go to the bench's stderr."""


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    v = np.random.Generator(np.random.PCG64(seed)).standard_normal(DIM)
    out: list[float] = (v / np.linalg.norm(v)).tolist()
    return out


def client_vector(text: str) -> list[float]:
    """``_vector`` as a client would send it: float32 values, written as the shortest
    decimals that read back as the same float32 (what pgvector keeps)."""
    return [float(str(x)) for x in np.asarray(_vector(text), dtype=np.float32)]


@contextlib.contextmanager
def server_env(embedder: str) -> Iterator[dict[str, str]]:
    """The server's environment for ``embedder``; for ``instant``, with the endpoint up."""
    if embedder == "e5":
        yield {"CTXGATE_EMBEDDER": "e5"}
        return
    _Instant.embedded = 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        # The endpoint counts what the measured writes embedded: the server must not re-embed
        # the rest of the database (another model made it) on the side.
        yield {"CTXGATE_EMBEDDER": "openai", "CTXGATE_EMBEDDING_DIM": str(DIM),
               "CTXGATE_OPENAI_BASE_URL": f"http://127.0.0.1:{httpd.server_address[1]}/v1",
               "CTXGATE_OPENAI_EMBEDDING_MODEL": "instant", "CTXGATE_REEMBED_ENABLED": "false"}
    finally:
        httpd.shutdown()
        httpd.server_close()


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    path: str  # /v1/memories or /v1/knowledge/documents
    batch: int  # 1: the single form
    concurrency: int
    items: int


def scenarios(single_items: int, batch_items: int) -> list[Scenario]:
    out: list[Scenario] = []
    for kind, path in (("memories", "/v1/memories"), ("documents", "/v1/knowledge/documents")):
        out += [Scenario(f"{kind}_single_c1", path, 1, 1, single_items),
                Scenario(f"{kind}_single_c8", path, 1, 8, single_items),
                Scenario(f"{kind}_batch{BATCH}_c1", path, BATCH, 1, batch_items),
                Scenario(f"{kind}_batch{BATCH}_c2", path, BATCH, 2, batch_items)]
    return out


def memory_item(rng: random.Random, i: int) -> dict[str, Any]:
    user = f"u{i % USERS}"
    return {"statement": f"{user} prefers {runbook_text(rng, rng.randint(8, 16))} ({i})",
            "scope": {"level": "user", "user_id": user}, "origin": "user_stated",
            "source_session": "s-import", "owner": user}


def document_item(rng: random.Random, i: int) -> dict[str, Any]:
    return {"doc_id": f"runbook-{i:06d}", "version": 1, "title": f"Runbook {i}",
            "text": runbook_text(rng, 120), "domain": None, "sensitivity": "internal",
            "trust": "reviewed", "acl": None}


def with_embedding(item: dict[str, Any]) -> dict[str, Any]:
    """The item carrying its client-made embedding (a document: as its one chunk)."""
    if "statement" in item:
        return {**item, "embedding": client_vector(item["statement"])}
    rest = {k: v for k, v in item.items() if k != "text"}
    return {**rest, "chunks": [{"text": item["text"], "embedding": client_vector(item["text"])}]}


def bodies(s: Scenario, seed: int, *, client: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}/{s.name}")
    make = memory_item if s.path == "/v1/memories" else document_item
    items = [make(rng, i) for i in range(s.items)]
    if client:
        items = [with_embedding(item) for item in items]
    if s.batch == 1:
        return items
    return [{"items": items[i:i + s.batch]} for i in range(0, len(items), s.batch)]


async def _drive(base_url: str, key: str, s: Scenario, seed: int, vectors: bool = False
                 ) -> dict[str, Any]:
    queue = list(reversed(bodies(s, seed, client=vectors)))
    embedded_before = _Instant.embedded
    statuses: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            body = queue.pop()
            t0 = time.perf_counter()
            r = await client.post(s.path, json=body, headers=headers)
            latencies.append((time.perf_counter() - t0) * 1000)
            statuses[r.status_code] += 1
            if r.status_code < 300:
                doc = r.json()
                for item in doc.get("items", [doc]):
                    outcomes[str(item.get("decision", "ingested"))] += 1

    limits = httpx.Limits(max_connections=s.concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=300.0, limits=limits) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(s.concurrency)))
        wall = time.perf_counter() - t0
    latencies.sort()
    return {"items": s.items, "batch": s.batch, "concurrency": s.concurrency,
            "requests": len(latencies), "wall_s": round(wall, 2),
            "items_per_s": round(outcomes.total() / wall, 1) if wall else None,
            "request_p50_ms": round(latencies[len(latencies) // 2], 1) if latencies else None,
            "statuses": {str(k): v for k, v in sorted(statuses.items())},
            "outcomes": dict(sorted(outcomes.items())),
            "server_embedded": _Instant.embedded - embedded_before}


async def _keys(owner_url: str, tenants: list[str]) -> dict[str, str]:
    from app.adapters.postgres.db import Database
    from app.adapters.postgres.keys import PgKeyStore
    from app.ports import NewKey
    from app.service.keys import KeyService

    db = await Database.open(owner_url, role="ctxgate_app", password=None, pool_size=1)
    try:
        svc = KeyService(PgKeyStore(db))
        return {t: (await svc.create(NewKey(
            tenant_id=t, role=Role.RUNTIME, max_data_level=DataLevel.CONFIDENTIAL,
            domains=None, name="bench-api-ingest")))[1] for t in tenants}
    finally:
        await db.close()


def measure(base_url: str, owner_url: str, *, prefix: str, seed: int, single_items: int,
            batch_items: int, log: Any = None, client: bool = False) -> dict[str, Any]:
    """Run every scenario against the server at ``base_url``; one tenant each; with
    ``client``, every item carries its embedding."""
    plan = scenarios(single_items, batch_items)
    keys = asyncio.run(_keys(owner_url, [f"{prefix}-ing-warm",
                                         *(f"{prefix}-ing-{i}" for i in range(len(plan)))]))
    warm = Scenario("warm_up", "/v1/memories", 1, 2, 4)
    asyncio.run(_drive(base_url, keys[f"{prefix}-ing-warm"], warm, seed, client))
    warm_docs = Scenario("warm_up_docs", "/v1/knowledge/documents", 1, 2, 4)
    asyncio.run(_drive(base_url, keys[f"{prefix}-ing-warm"], warm_docs, seed, client))
    out: dict[str, Any] = {}
    for i, s in enumerate(plan):
        out[s.name] = asyncio.run(_drive(base_url, keys[f"{prefix}-ing-{i}"], s, seed,
                                         client))
        if log is not None:
            log(f"{s.name}: {out[s.name]['items_per_s']} items/s {out[s.name]['statuses']}")
    return _with_ratios(out)


def _with_ratios(out: dict[str, Any]) -> dict[str, Any]:
    for kind in ("memories", "documents"):
        single = out[f"{kind}_single_c1"]["items_per_s"]
        batch = out[f"{kind}_batch{BATCH}_c1"]["items_per_s"]
        out[f"{kind}_batch_vs_single_c1"] = round(batch / single, 1) if single else None
    return out


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' scenarios as one: per scenario the median rate, wall time and request
    p50 (each run's rate kept in ``items_per_s_runs``), statuses, outcomes and texts embedded
    summed over the runs; the batch/single ratios of the medians."""
    out: dict[str, Any] = {}
    for name, first in runs[0].items():
        if not isinstance(first, dict):
            continue
        each = [run[name] for run in runs]
        out[name] = {
            **first, "items": sum(r["items"] for r in each),
            "requests": sum(r["requests"] for r in each),
            **{k: statistics.median(r[k] for r in each)
               for k in ("wall_s", "items_per_s", "request_p50_ms")},
            "items_per_s_runs": [r["items_per_s"] for r in each],
            **{k: dict(sorted(sum((Counter(r[k]) for r in each), Counter()).items()))
               for k in ("statuses", "outcomes")},
            "server_embedded": sum(r["server_embedded"] for r in each)}
    return _with_ratios(out)
