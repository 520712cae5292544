"""A runtime's instruction files as committed in a git checkout: what a bundle push sends.

Contract: ``read_checkout(path, runtime)`` finds the work tree holding ``path`` and returns
the ``Checkout`` of its ``HEAD`` commit:

* ``files``: the bundle — every file tracked at ``HEAD`` that the runtime may load
  (``app.core.bundles.checkout.loads``), plus every tracked file their imports reach
  (transitively), with its content *as committed*, so the revision is exactly the recorded
  commit; and ``ROOT_MARKER`` (empty), since the bundle root is the repository root.
  Untracked and ignored files never enter. A tracked symlink reads as the tracked file it
  points to (``CLAUDE.md -> AGENTS.md`` is common); submodules are not followed.
* ``skipped``: ``(path, why)`` for selected files that cannot be sent (not UTF-8 text, a
  NUL byte, a symlink out of the tree, a path the bundle reads as a global area).
* ``dirty``: selected paths whose index or work tree differs from ``HEAD`` (their changes
  are not in ``files``; the caller decides whether to go on).
* ``repo``: ``remote.origin.url`` without any user or password in it, else the work
  tree's directory name; ``commit``: the full ``HEAD`` commit id.

``NotACheckout`` (a message for the user) when ``path`` is not in a git work tree, the
repository has no commit yet, or git cannot be run. Only git's plumbing is used, with
``--literal-pathspecs``, so no path is read as a pattern.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from app.core.bundles.checkout import ROOT_MARKER, imports, loads, reserved

SYMLINK, GITLINK = "120000", "160000"


class NotACheckout(Exception):
    """``path`` cannot be read as a git checkout; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkout:
    root: Path
    repo: str
    commit: str
    files: dict[str, str]
    skipped: tuple[tuple[str, str], ...]
    dirty: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Entry:
    mode: str
    sha: str


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    # A clean environment for git's own variables: GIT_DIR or GIT_WORK_TREE inherited from a
    # hook would point it at another repository than the one named.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        # git from PATH as a user's shell finds it; a list argv, no shell.
        done = subprocess.run(  # noqa: S603
            ["git", "--literal-pathspecs", "-C", str(root), *args],  # noqa: S607
            input=stdin, capture_output=True, env=env, check=False)
    except OSError as exc:
        raise NotACheckout(f"cannot run git: {exc}") from exc
    if done.returncode != 0:
        raise NotACheckout(done.stderr.decode(errors="replace").strip() or
                           f"git {args[0]} failed ({done.returncode})")
    return done.stdout


def _tree(root: Path) -> dict[str, _Entry]:
    """Every entry tracked at HEAD: path → (mode, object id)."""
    out: dict[str, _Entry] = {}
    for record in _git(root, "ls-tree", "-r", "-z", "--full-tree", "HEAD").split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            mode, _, sha = meta.decode().split(" ")
            with contextlib.suppress(UnicodeDecodeError):  # no bundle path can name it
                out[path.decode()] = _Entry(mode, sha)
    return out


def _blobs(root: Path, shas: Iterable[str]) -> dict[str, bytes]:
    """The contents of ``shas`` in one ``git cat-file --batch`` call."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    raw = _git(root, "cat-file", "--batch", stdin="".join(f"{s}\n" for s in wanted).encode())
    out: dict[str, bytes] = {}
    pos = 0
    for sha in wanted:
        end = raw.index(b"\n", pos)
        size = int(raw[pos:end].split(b" ")[2])
        out[sha] = raw[end + 1 : end + 1 + size]
        pos = end + 1 + size + 1  # the content, then a newline
    return out


def _target(tree: dict[str, _Entry], path: str, link: bytes) -> str | None:
    """The tracked regular file a tracked symlink names, or None."""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(path),
                                               link.decode(errors="replace")))
    entry = tree.get(target)
    return target if entry is not None and entry.mode not in (SYMLINK, GITLINK) else None


def _text(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def _read(root: Path, tree: dict[str, _Entry], paths: list[str]
          ) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The text of ``paths`` (tracked), following symlinks within the tree."""
    real: dict[str, str] = {}
    skipped: list[tuple[str, str]] = []
    links = _blobs(root, (tree[p].sha for p in paths if tree[p].mode == SYMLINK))
    for path in paths:
        entry = tree[path]
        if entry.mode == SYMLINK:
            target = _target(tree, path, links[entry.sha])
            if target is None:
                skipped.append((path, "a symlink to no tracked file"))
                continue
            real[path] = target
        elif entry.mode != GITLINK:
            real[path] = path
    contents = _blobs(root, (tree[t].sha for t in real.values()))
    files: dict[str, str] = {}
    for path, target in real.items():
        text = _text(contents[tree[target].sha])
        if text is None:
            skipped.append((path, "not UTF-8 text"))
        else:
            files[path] = text
    return files, skipped


def _select(root: Path, tree: dict[str, _Entry], runtime: str
            ) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The runtime's files and, transitively, the tracked files they import."""
    # Named like an instruction file, yet where a bundle keeps a global area: say so.
    skipped = [(p, "a path the bundle reads as a global area") for p in tree
               if reserved(p) and loads(runtime, posixpath.basename(p))]
    files, bad = _read(root, tree, [p for p in tree if loads(runtime, p)])
    skipped += bad
    todo = list(files.items())
    while todo:
        wanted = [t for path, text in todo for t in imports(runtime, path, text)]
        seen = files.keys() | {p for p, _ in skipped}
        found, bad = _read(root, tree, [t for t in dict.fromkeys(wanted)
                                        if t in tree and t not in seen])
        files |= found
        skipped += bad
        todo = list(found.items())
    return files, skipped


def _repo(root: Path) -> str:
    try:
        url = _git(root, "config", "--get", "remote.origin.url").decode().strip()
    except NotACheckout:  # no origin: git config exits 1
        url = ""
    if not url:
        return root.name
    parts = urlsplit(url)
    if parts.scheme and parts.hostname:  # drop user:password@ — a token must not travel
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    return url


def read_checkout(path: Path, runtime: str) -> Checkout:
    if not path.is_dir():
        raise NotACheckout(f"{path} is not a directory")
    try:
        inside = _git(path, "rev-parse", "--is-inside-work-tree").strip() == b"true"
    except NotACheckout:
        inside = False
    if not inside:
        raise NotACheckout(f"{path} is not inside a git work tree")
    root = Path(_git(path, "rev-parse", "--show-toplevel").decode().strip())
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}").decode().strip()
    except NotACheckout:
        raise NotACheckout(f"{root} has no commit yet: commit the instruction files first"
                           ) from None
    tree = _tree(root)
    files, skipped = _select(root, tree, runtime)
    dirty = _git(root, "diff", "--name-only", "-z", "HEAD", "--", *files).split(b"\0") \
        if files else []
    return Checkout(root=root, repo=_repo(root), commit=commit,
                    files={**files, ROOT_MARKER: ""} if files else {},
                    skipped=tuple(skipped),
                    dirty=tuple(sorted(d.decode() for d in dirty if d)))
