"""Hermes Agent (NousResearch/hermes-agent, ``agent/prompt_builder.py``): project context.

Contract: exactly one project-context type per session — the first of these that yields
non-blank text wins; files of the other types are skipped ``lower precedence``:

1. ``.hermes.md`` or ``HERMES.md`` (that order within a directory): the nearest one walking
   from ``cwd`` up to the git root (nearest ancestor holding a root marker,
   ``options.root_markers``); without a git root only ``cwd`` is searched.
2. The AGENTS chain from the git root (else ``cwd`` alone) down to ``cwd``: per directory
   the first non-blank of ``AGENTS.override.md``, ``AGENTS.md``, ``agents.md``; a file whose
   trimmed text equals an earlier one's (sha256) is skipped ``duplicate content``.
3. ``CLAUDE.md`` or ``claude.md`` in ``cwd`` only.
4. ``.cursorrules`` then ``.cursor/rules/*.mdc`` (direct children, by name) in ``cwd`` only.

Every file is read trimmed (as Hermes does); blank files are skipped ``empty`` and the next
candidate is tried; later present candidates of a directory are ``shadowed``. The winning
files are joined with ``"\\n\\n"``. When that text exceeds ``options.max_chars`` it keeps the
first 70% and the last 20% of ``max_chars`` characters (floored) with Hermes's marker
between them (``truncation_marker``), labelled with the first winning file's name; a file
that lost any character is ``truncated``. No headers are emitted. ``session_type`` does
not change loading.
"""

from __future__ import annotations

import posixpath

from app.core.bundles.common import (
    Bundle,
    Trace,
    ancestors,
    chain_down,
    find_root,
    head_tail_sizes,
    join,
    kept_part,
    sha256,
    tail,
)
from app.core.bundles.model import Resolution, ResolveOptions

HERMES_NAMES = (".hermes.md", "HERMES.md")
AGENTS_NAMES = ("AGENTS.override.md", "AGENTS.md", "agents.md")
CLAUDE_NAMES = ("CLAUDE.md", "claude.md")
Picked = list[tuple[str, str]]  # (path, trimmed text)


def truncation_marker(label: str, head: int, tail_n: int, total: int) -> str:
    return (f"\n\n[...truncated {label}: kept {head}+{tail_n} of {total} chars. "
            "Use file tools to read the full file.]\n\n")


def _first_nonblank(bundle: Bundle, paths: list[str], trace: Trace) -> tuple[str, str] | None:
    present = [p for p in paths if bundle.is_file(p)]
    for idx, path in enumerate(present):
        text = bundle.text(path).strip()
        if text:
            for later in present[idx + 1 :]:
                trace.skip(later, "shadowed")
            return path, text
        trace.skip(path, "empty")
    return None


def _hermes_md(bundle: Bundle, cwd: str, root: str | None, trace: Trace) -> Picked:
    up = ancestors(cwd)
    dirs = up[: up.index(root) + 1] if root is not None else [cwd]
    for directory in dirs:
        hit = _first_nonblank(bundle, [join(directory, n) for n in HERMES_NAMES], trace)
        if hit:
            return [hit]
    return []


def _agents_chain(bundle: Bundle, cwd: str, root: str | None, trace: Trace) -> Picked:
    seen: set[str] = set()
    out: Picked = []
    for directory in chain_down(root, cwd) if root is not None else [cwd]:
        hit = _first_nonblank(bundle, [join(directory, n) for n in AGENTS_NAMES], trace)
        if hit is None:
            continue
        digest = sha256(hit[1])
        if digest in seen:
            trace.skip(hit[0], "duplicate content")
            continue
        seen.add(digest)
        out.append(hit)
    return out


def _claude_md(bundle: Bundle, cwd: str, trace: Trace) -> Picked:
    hit = _first_nonblank(bundle, [join(cwd, n) for n in CLAUDE_NAMES], trace)
    return [hit] if hit else []


def _cursor(bundle: Bundle, cwd: str, trace: Trace) -> Picked:
    rules_dir = join(cwd, ".cursor/rules")
    paths = [join(cwd, ".cursorrules")]
    paths += [p for p in bundle.under(rules_dir)
              if posixpath.dirname(p) == rules_dir and p.endswith(".mdc")]
    hits = (_first_nonblank(bundle, [p], trace) for p in paths)
    return [hit for hit in hits if hit]


def _cap(picked: Picked, bundle: Bundle, max_chars: int, trace: Trace) -> str:
    joined = "\n\n".join(text for _, text in picked)
    total = len(joined)
    over = total > max_chars
    head, tail_n = head_tail_sizes(max_chars)
    offset = 0
    for path, text in picked:
        kept = kept_part(text, offset, total, head, tail_n) if over else text
        trace.add(path, "project", bundle.text(path), kept, truncated=len(kept) < len(text))
        offset += len(text) + 2
    if not over:
        return joined
    label = posixpath.basename(picked[0][0])
    return joined[:head] + truncation_marker(label, head, tail_n, total) + tail(joined, tail_n)


def resolve(bundle: Bundle, cwd: str, options: ResolveOptions) -> Resolution:
    trace = Trace()
    root = find_root(bundle, cwd, options.root_markers)
    levels = [_hermes_md(bundle, cwd, root, trace), _agents_chain(bundle, cwd, root, trace),
              _claude_md(bundle, cwd, trace), _cursor(bundle, cwd, trace)]
    winner = next((level for level in levels if level), [])
    for level in levels:
        if level is not winner:
            for path, _ in level:
                trace.skip(path, "lower precedence")
    return trace.resolution(_cap(winner, bundle, options.max_chars, trace) if winner else "")
