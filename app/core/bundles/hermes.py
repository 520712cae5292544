"""Hermes Agent (NousResearch/hermes-agent, ``agent/prompt_builder.py``
``build_context_files_prompt``): project context files.

Contract: exactly one project-context type per session, the first that yields text wins;
files of the later types are skipped ``lower precedence``. The git root is the nearest
ancestor of ``cwd`` (inclusive) holding a root marker (``options.root_markers``).

1. ``.hermes.md`` / ``HERMES.md``: the nearest directory from ``cwd`` up to the git root
   (``cwd`` alone without one) holding either file; ``.hermes.md`` first. Only that file is
   read: when it is blank the type yields nothing (the other name is ``shadowed``, no
   fallback). YAML front matter is stripped (``strip_front_matter``). Section label: the
   file name.
2. The AGENTS chain, from the git root down to ``cwd`` (``cwd`` alone without a root): per
   directory the first non-blank of ``AGENTS.override.md``, ``AGENTS.md``, ``agents.md``;
   a text equal to an earlier one is skipped ``duplicate content``. Label: the name in
   ``cwd``, else the path relative to ``cwd`` (``../AGENTS.md``). Each section is capped
   on its own; two or more are joined with a blank line and capped again under the label
   ``AGENTS.md (directory chain)``.
3. ``CLAUDE.md`` or ``claude.md`` in ``cwd``: the first non-blank.
4. ``.cursorrules`` then ``.cursor/rules/*.mdc`` (direct children, by name) in ``cwd``,
   every non-blank one, each as a section followed by a blank line, capped together
   under ``.cursorrules``.

A file is read without a leading BOM and trimmed; blank files are skipped ``empty``.
Every file's text is scanned first (``hermes_scan``): one with findings is replaced by
Hermes's ``[BLOCKED: ...]`` placeholder (its entry is ``blocked``, ``bytes_used`` 0).
A section is ``## <label>``, a blank line, the text; it is capped at ``options.max_chars``
characters: over it, the first 70% and last 20% of the cap (floored, and with Python's
``s[-0:]`` when the tail is 0) around Hermes's marker (``truncation_marker``), whose read
path is the bundle path. Text: ``# Project Context``, Hermes's loaded-files sentence, then
the winning type's text; nothing found: empty text. The user-level ``SOUL.md`` of
``HERMES_HOME`` is Hermes's identity slot, not project context, and is not part of a
bundle. ``session_type`` does not change loading.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from app.core.bundles.common import (
    Bundle,
    Trace,
    ancestors,
    chain_down,
    find_root,
    head_tail_sizes,
    join,
)
from app.core.bundles.hermes_scan import blocked, findings
from app.core.bundles.model import Resolution, ResolveOptions

HERMES_NAMES = (".hermes.md", "HERMES.md")
AGENTS_NAMES = ("AGENTS.override.md", "AGENTS.md", "agents.md")
CLAUDE_NAMES = ("CLAUDE.md", "claude.md")
CHAIN_LABEL = "AGENTS.md (directory chain)"
PREAMBLE = ("# Project Context\n\nThe following project context files have been loaded and "
            "should be followed:\n\n")


def truncation_marker(label: str, head: int, tail_n: int, total: int, read_path: str) -> str:
    return (f"\n\n[...truncated {label}: kept {head}+{tail_n} of {total} chars. The middle is "
            "omitted — if you need the full instructions, read the complete file with the "
            f"read_file tool: {read_path}]\n\n")


Pieces = list[tuple[str, str | None]]  # (text, the bundle path whose content it is)


def _head(pieces: Pieces, n: int) -> Pieces:
    out: Pieces = []
    for piece, owner in pieces:
        if n <= 0:
            break
        out.append((piece[:n], owner))
        n -= len(piece)
    return out


def _tail(pieces: Pieces, n: int) -> Pieces:
    out: Pieces = []
    for piece, owner in reversed(pieces):
        if n <= 0:
            break
        out.append((piece[max(0, len(piece) - n) :], owner))
        n -= len(piece)
    return out[::-1]


def cap(pieces: Pieces, label: str, max_chars: int, read_path: str) -> Pieces:
    """Hermes's ``_truncate_content`` over pieces, so each kept character keeps its owner."""
    total = sum(len(piece) for piece, _ in pieces)
    if total <= max_chars:
        return pieces
    head, tail_n = head_tail_sizes(max_chars)
    marker = truncation_marker(label, head, tail_n, total, read_path)
    return [*_head(pieces, head), (marker, None), *_tail(pieces, tail_n or total)]


def strip_front_matter(text: str) -> str:
    """Hermes's ``_strip_yaml_frontmatter``: text starting with ``---`` loses everything
    through the next ``\\n---`` and the newlines after it, unless nothing would remain."""
    text = text.lstrip("\ufeff")
    end = text.find("\n---", 3) if text.startswith("---") else -1
    return (text[end + 4 :].lstrip("\n") or text) if end != -1 else text


@dataclass(slots=True)
class _Level:
    """What one context type yields: its pieces and, per file, (path, raw, used text)."""

    pieces: Pieces = field(default_factory=list)
    files: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(piece for piece, _ in self.pieces)


def _read(bundle: Bundle, path: str, trace: Trace) -> str:
    """The trimmed text Hermes reads ("" for a missing or blank file, recorded ``empty``)."""
    if not bundle.is_file(path):
        return ""
    text = bundle.text(path).removeprefix("\ufeff").strip()
    if not text:
        trace.skip(path, "empty")
    return text


def _section(level: _Level, path: str, raw: str, text: str, label: str) -> Pieces:
    """``## <label>``, a blank line and the scanned text of one file (Hermes's placeholder
    when the scan has findings), recorded on ``level``."""
    ids = findings(text.removeprefix("\ufeff"))
    level.files.append((path, raw, "" if ids else text))
    body: tuple[str, str | None] = (blocked(label, ids), None) if ids else (text, path)
    return [(f"## {label}\n\n", None), body]


def _hermes_md(bundle: Bundle, cwd: str, root: str | None, max_chars: int,
               trace: Trace) -> _Level:
    up = ancestors(cwd)
    level = _Level()
    for directory in up[: up.index(root) + 1] if root is not None else [cwd]:
        present = [join(directory, n) for n in HERMES_NAMES if bundle.is_file(join(directory, n))]
        if not present:
            continue
        path, shadowed = present[0], present[1:]
        for other in shadowed:
            trace.skip(other, "shadowed")
        text = _read(bundle, path, trace)
        if text:
            label = posixpath.basename(path)
            section = _section(level, path, bundle.text(path), strip_front_matter(text), label)
            level.pieces = cap(section, ".hermes.md", max_chars, path)
        return level
    return level


def _agents_chain(bundle: Bundle, cwd: str, root: str | None, max_chars: int,
                  trace: Trace) -> _Level:
    level = _Level()
    seen: set[str] = set()
    sections: list[Pieces] = []
    for directory in chain_down(root, cwd) if root is not None else [cwd]:
        for name in AGENTS_NAMES:
            path = join(directory, name)
            text = _read(bundle, path, trace)
            if not text:
                continue
            if text in seen:
                trace.skip(path, "duplicate content")
            else:
                seen.add(text)
                label = name if directory == cwd else posixpath.relpath(path, cwd or ".")
                section = _section(level, path, bundle.text(path), text, label)
                sections.append(cap(section, label, max_chars, path))
            break
    joined: Pieces = []
    for idx, section in enumerate(sections):
        joined += ([("\n\n", None)] if idx else []) + section
    level.pieces = cap(joined, CHAIN_LABEL, max_chars, join(cwd, "AGENTS.md")) \
        if len(sections) > 1 else joined
    return level


def _claude_md(bundle: Bundle, cwd: str, max_chars: int, trace: Trace) -> _Level:
    level = _Level()
    for name in CLAUDE_NAMES:
        path = join(cwd, name)
        text = _read(bundle, path, trace)
        if text:
            level.pieces = cap(_section(level, path, bundle.text(path), text, name),
                               "CLAUDE.md", max_chars, path)
            break
    return level


def _cursor(bundle: Bundle, cwd: str, max_chars: int, trace: Trace) -> _Level:
    level = _Level()
    rules_dir = join(cwd, ".cursor/rules")
    paths = [join(cwd, ".cursorrules")]
    paths += [p for p in bundle.under(rules_dir)
              if posixpath.dirname(p) == rules_dir and p.endswith(".mdc")]
    joined: Pieces = []
    for path in paths:
        text = _read(bundle, path, trace)
        if text:
            label = posixpath.relpath(path, cwd or ".")
            joined += [*_section(level, path, bundle.text(path), text, label), ("\n\n", None)]
    level.pieces = cap(joined, ".cursorrules", max_chars, join(cwd, ".cursorrules"))
    return level


def _record(level: _Level, trace: Trace) -> None:
    for path, raw, used in level.files:
        survived = "".join(piece for piece, owner in level.pieces if owner == path)
        trace.add(path, "project", raw, survived, truncated=len(survived) < len(used))
        if not used:
            trace.skip(path, "blocked")


def resolve(bundle: Bundle, cwd: str, options: ResolveOptions) -> Resolution:
    trace = Trace()
    root = find_root(bundle, cwd, options.root_markers)
    levels = [_hermes_md(bundle, cwd, root, options.max_chars, trace),
              _agents_chain(bundle, cwd, root, options.max_chars, trace),
              _claude_md(bundle, cwd, options.max_chars, trace),
              _cursor(bundle, cwd, options.max_chars, trace)]
    winner = next((level for level in levels if level.text), None)
    for level in levels:
        if level is winner:
            _record(level, trace)
        else:
            for path, _, _ in level.files:
                trace.skip(path, "lower precedence")
    return trace.resolution(PREAMBLE + winner.text if winner is not None else "")
