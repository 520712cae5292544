"""Helpers shared by the resolvers: bundle paths, directory walks, truncation, digests.

Contract: a ``Bundle`` is built once per call from the caller's mapping; it normalizes
every key to a POSIX path relative to the repo root and refuses absolute paths, NUL and
``..`` escapes with ``ValueError``. A path is a *directory* when any file lives under it
(``.git/HEAD`` makes ``.git`` a directory); a path that is a directory is never a file,
even if the mapping also holds it as a key. Everything here is pure and deterministic.
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from app.core.bundles.model import Resolution, ResolvedFile, Skipped


def _normalize(path: str, *, what: str) -> str:
    if "\x00" in path:
        raise ValueError(f"{what} contains NUL: {path!r}")
    if path.startswith(("/", "\\")) or (len(path) > 1 and path[1] == ":"):
        raise ValueError(f"{what} must be relative to the repo root, got absolute {path!r}")
    norm = posixpath.normpath(path) if path else "."
    if norm == ".." or norm.startswith("../"):
        raise ValueError(f"{what} escapes the repo root: {path!r}")
    return "" if norm == "." else norm


def normalize_cwd(cwd: str) -> str:
    """``""``/``"."`` → ``""``; ``"a/./b/"`` → ``"a/b"``; absolute, NUL, ``..``-escape or a
    global-area prefix (``~``) → ``ValueError``."""
    norm = _normalize(cwd, what="cwd")
    if norm == "~" or norm.startswith("~/"):
        raise ValueError(f"cwd must be inside the repo, not a global area: {cwd!r}")
    return norm


def join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


def parent(directory: str) -> str | None:
    """The parent directory, or None at the repo root."""
    if not directory:
        return None
    return posixpath.dirname(directory)


def ancestors(cwd: str) -> list[str]:
    """``cwd`` then each parent, ending with the repo root ``""``."""
    out = [cwd]
    up = parent(cwd)
    while up is not None:
        out.append(up)
        up = parent(up)
    return out


def chain_down(root: str, cwd: str) -> list[str]:
    """Directories from ``root`` down to ``cwd`` inclusive (``root`` is an ancestor)."""
    up = ancestors(cwd)
    return list(reversed(up[: up.index(root) + 1]))


@dataclass(frozen=True, slots=True)
class Bundle:
    files: Mapping[str, str]
    dirs: frozenset[str]

    @classmethod
    def of(cls, files: Mapping[str, str]) -> Bundle:
        norm: dict[str, str] = {}
        for key in sorted(files):
            path = _normalize(key, what="bundle path")
            if not path:
                raise ValueError(f"bundle path names the repo root: {key!r}")
            if path in norm:
                raise ValueError(f"bundle path given twice after normalization: {key!r}")
            norm[path] = files[key]
        dirs = {up for p in norm for up in ancestors(posixpath.dirname(p))}
        return cls(norm, frozenset(dirs))

    def is_file(self, path: str) -> bool:
        return path in self.files and path not in self.dirs

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def text(self, path: str) -> str:
        return self.files[path]

    def under(self, directory: str) -> Iterator[str]:
        """Every file path below ``directory`` (recursively), sorted."""
        prefix = f"{directory}/" if directory else ""
        return (p for p in sorted(self.files) if p.startswith(prefix) and self.is_file(p))


def find_root(bundle: Bundle, cwd: str, markers: tuple[str, ...]) -> str | None:
    """Nearest ancestor of ``cwd`` (inclusive) holding a marker entry, file or directory."""
    for directory in ancestors(cwd):
        if any(bundle.exists(join(directory, m)) for m in markers if m):
            return directory
    return None


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def truncate_bytes(text: str, limit: int) -> str:
    """The first ``limit`` UTF-8 bytes of ``text``, decoded lossily: a character split by the
    cut becomes one U+FFFD, as Rust's ``String::from_utf8_lossy`` decodes a truncated
    sequence (Python's ``errors="replace"`` substitutes the same maximal subpart)."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="replace")


def head_tail_sizes(cap: int) -> tuple[int, int]:
    """70% head and 20% tail of ``cap`` characters, floored (integer math, no floats)."""
    return cap * 7 // 10, cap * 2 // 10


def tail(text: str, n: int) -> str:
    """The last ``n`` characters; ``text[-0:]`` would be the whole string."""
    return text[len(text) - n :] if n > 0 else ""


@dataclass(slots=True)
class Trace:
    """A resolver's local record of what it read and skipped, in order. Never shared."""

    order: list[ResolvedFile] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def skip(self, path: str, reason: str, source: str = "") -> None:
        self.skipped.append(Skipped(path=path, reason=reason, source=source))

    def add(self, path: str, layer: str, content: str | None, used: str, *,
            truncated: bool = False) -> None:
        """Record a file; ``content`` None means missing, ``used`` is what reached the text."""
        reason = "missing" if content is None else "truncated" if truncated else "loaded"
        self.order.append(ResolvedFile(
            path=path, layer=layer, bytes_in=nbytes(content or ""), bytes_used=nbytes(used),
            truncated=truncated, reason=reason, sha256=sha256(content) if content is not None
            else ""))

    def resolution(self, text: str) -> Resolution:
        return Resolution(text=text, resolved_order=tuple(self.order),
                          skipped=tuple(self.skipped))
