"""Embedders: E5 (offline model) and the OpenAI-compatible HTTP client against a local server."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest

from app.adapters.embedders.e5 import E5Embedder
from app.adapters.embedders.errors import EmbedderError
from app.adapters.embedders.factory import make_embedder
from app.adapters.embedders.openai_http import OpenAIEmbedder
from app.settings import Settings
from tests.local_http import JsonHandler, serve


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(a: list[float]) -> float:
    return math.sqrt(sum(x * x for x in a))


# ---------------------------------------------------------------- E5


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(query_cache_size=8)


async def test_e5_returns_384_dim_unit_vectors(e5: E5Embedder) -> None:
    await e5.warm()
    assert (e5.model, e5.dim) == ("multilingual-e5-small-q4", 384)
    q = await e5.embed_query("how do I restart the ingest worker")
    ps = await e5.embed_passages(["Restart the worker after rotating credentials.", "天气"])
    for v in [q, *ps]:
        assert len(v) == 384
        assert all(isinstance(x, float) for x in v)
        assert norm(v) == pytest.approx(1.0, abs=1e-3)


async def test_e5_chinese_query_prefers_the_same_topic(e5: E5Embedder) -> None:
    q = await e5.embed_query("如何重启数据摄取服务")
    on_topic, off_topic = await e5.embed_passages([
        "重启摄取服务之前，请先检查队列深度，然后轮换凭据并重启工作进程。",
        "这道红烧肉的做法需要五花肉、冰糖和酱油，小火慢炖一个小时。",
    ])
    assert cos(q, on_topic) > cos(q, off_topic) + 0.02


async def test_e5_query_cache_hits_and_is_bounded(e5: E5Embedder) -> None:
    before = e5.cache_info()
    a = await e5.embed_query("cache me")
    b = await e5.embed_query("cache me")
    info = e5.cache_info()
    assert a == b  # the cached float32 gives back exactly what the model made
    assert info["hits"] == before["hits"] + 1
    a.append(0.0)  # callers get copies: mutating one must not poison the cache
    b.append(0.0)
    assert len(await e5.embed_query("cache me")) == 384
    for i in range(20):
        await e5.embed_query(f"q{i}")
    assert e5.cache_info()["size"] == 8


async def test_e5_passages_keep_order_across_batches(e5: E5Embedder) -> None:
    texts = [f"passage {i}: the ingest worker number {i} restarted" for i in range(20)]
    many = await e5.embed_passages(texts)  # > PASSAGE_BATCH, so two engine calls
    assert len(many) == 20
    (last,) = await e5.embed_passages(texts[-1:])
    assert cos(many[-1], last) > 0.999
    assert await e5.embed_passages([]) == []


async def test_e5_concurrent_queries(e5: E5Embedder) -> None:
    got = await asyncio.gather(*(e5.embed_query(f"concurrent {i}") for i in range(4)))
    assert all(len(v) == 384 for v in got)


# ---------------------------------------------------------------- OpenAI-compatible HTTP


class FakeEmbeddings(JsonHandler):
    """``POST /v1/embeddings``; the model name picks a behaviour, vectors are deterministic."""

    dim = 8
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        model, inputs = body["model"], body["input"]
        if model == "boom":
            return self.send_json(500, {"error": {"message": "model overloaded"}})
        if model == "slow":
            threading.Event().wait(1.0)
        dim = 5 if model == "short" else self.dim
        data = [{"object": "embedding", "index": i,
                 "embedding": [float(len(t) + i + k) for k in range(dim)]}
                for i, t in enumerate(inputs)]
        if model == "reversed":
            data.reverse()
        if model == "missing":
            data = data[:-1]
        if model == "notjson":
            return self.send_json(200, None)
        return self.send_json(200, {"object": "list", "data": data, "model": model})


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with serve(FakeEmbeddings) as base:
        yield base


def openai(url: str, model: str = "ok", **kw: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(url, "sk-test", model, FakeEmbeddings.dim, **kw)


async def test_openai_embeds_in_order_with_auth(server_url: str) -> None:
    emb = openai(server_url + "/", batch_size=2)
    try:
        got = await emb.embed_passages(["a", "bb", "ccc"])
        q = await emb.embed_query("dddd")
    finally:
        await emb.aclose()
    assert got == [[1.0 + k for k in range(8)], [3.0 + k for k in range(8)],
                   [3.0 + k for k in range(8)]]  # 3rd is index 0 of the 2nd batch
    assert q == [4.0 + k for k in range(8)]
    last = FakeEmbeddings.seen[-1]
    assert last["path"] == "/v1/embeddings"
    assert last["auth"] == "Bearer sk-test"
    assert last["input"] == ["dddd"]
    assert last["dimensions"] == FakeEmbeddings.dim  # the server's one dimension, asked for


async def test_openai_reorders_by_index(server_url: str) -> None:
    emb = openai(server_url, "reversed")
    try:
        assert [v[0] for v in await emb.embed_passages(["a", "bb", "ccc"])] == [1.0, 3.0, 5.0]
    finally:
        await emb.aclose()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("boom", "HTTP 500: .*model overloaded"),
        ("short", "dimension 5, expected 8"),
        ("missing", "2 items for 3 inputs"),
        ("notjson", "not JSON"),
    ],
)
async def test_openai_errors_are_embedder_errors(server_url: str, model: str,
                                                 message: str) -> None:
    emb = openai(server_url, model)
    try:
        with pytest.raises(EmbedderError, match=message) as err:
            await emb.embed_passages(["a", "bb", "ccc"])
    finally:
        await emb.aclose()
    assert "sk-test" not in str(err.value)


async def test_openai_timeout(server_url: str) -> None:
    emb = openai(server_url, "slow", timeout_s=0.2)
    try:
        with pytest.raises(EmbedderError, match="timed out"):
            await emb.embed_query("a")
    finally:
        await emb.aclose()


async def test_openai_connection_refused() -> None:
    emb = openai("http://127.0.0.1:9/v1")
    try:
        with pytest.raises(EmbedderError, match="failed: ConnectError"):
            await emb.embed_query("a")
    finally:
        await emb.aclose()


async def test_openai_borrowed_client_is_not_closed(server_url: str) -> None:
    async with httpx.AsyncClient() as client:
        emb = openai(server_url, client=client)
        await emb.aclose()
        assert len(await emb.embed_query("a")) == 8


# ---------------------------------------------------------------- factory


async def test_factory_chooses_by_name() -> None:
    assert isinstance(make_embedder(Settings(embedder="e5")), E5Embedder)
    chosen = make_embedder(Settings(embedder="openai", embedding_dim=1536,
                                    openai_api_key="k"))
    assert isinstance(chosen, OpenAIEmbedder)
    assert chosen.dim == 1536
    await chosen.aclose()
    with pytest.raises(ValueError, match="unknown embedder"):
        make_embedder(Settings(embedder="word2vec"))
    with pytest.raises(ValueError, match="dim 384"):
        make_embedder(Settings(embedder="e5", embedding_dim=768))
