"""Codex (openai/codex, ``codex-rs/core/src/agents_md.rs``, formerly ``project_doc.rs``):
AGENTS.md loading.

Contract:

* Global text: ``~/.codex/AGENTS.override.md``, else ``~/.codex/AGENTS.md`` — the first
  whose text is non-empty after trimming; the text is trimmed. An empty global override
  falls through to ``AGENTS.md`` (Codex's ``load_global_instructions``).
* Project root: the nearest ancestor of ``cwd`` (inclusive) holding a root marker entry
  (``options.root_markers``, default ``.git``, file or directory). No marker: only ``cwd``.
* From the root down to ``cwd``, one file per directory: the first candidate that *is a
  file* among ``AGENTS.override.md``, ``AGENTS.md``, then ``options.fallback_names``
  (deduplicated, empty names ignored). A directory named like a candidate is passed over.
  Codex picks the first existing file and only then drops it when its text is blank, so
  an empty or whitespace-only ``AGENTS.override.md`` hides that directory's ``AGENTS.md``
  (recorded ``shadowed``) and the directory contributes nothing.
* Budget: ``options.project_doc_max_bytes`` (0 disables project docs). Each picked file is
  read up to the remaining bytes (truncated at the byte level and decoded lossily, so a
  UTF-8 character split by the cut reads as one U+FFFD, and the budget is charged for the
  bytes kept, not for the replacement character), blank reads are dropped without
  spending budget, and once the budget reaches 0 every later file is skipped with
  ``budget exhausted``. Project docs are not trimmed.
* Text: global, then ``"\\n\\n--- project-doc ---\\n\\n"``, then the project docs joined
  with ``"\\n\\n"``; either part alone when the other is empty. No headers are emitted.
  ``session_type`` does not change Codex loading.
"""

from __future__ import annotations

from app.core.bundles.common import (
    Bundle,
    Trace,
    chain_down,
    find_root,
    join,
    truncate_bytes,
)
from app.core.bundles.model import Resolution, ResolveOptions

GLOBAL_DIR = "~/.codex"
OVERRIDE = "AGENTS.override.md"
DEFAULT = "AGENTS.md"
SEPARATOR = "\n\n--- project-doc ---\n\n"


def candidate_names(fallbacks: tuple[str, ...]) -> list[str]:
    names = [OVERRIDE, DEFAULT]
    names.extend(n for n in dict.fromkeys(fallbacks) if n and n not in names)
    return names


def _global(bundle: Bundle, trace: Trace) -> str:
    present = [join(GLOBAL_DIR, n) for n in (OVERRIDE, DEFAULT)
               if bundle.is_file(join(GLOBAL_DIR, n))]
    for idx, path in enumerate(present):
        content = bundle.text(path)
        trimmed = content.strip()
        if not trimmed:
            trace.skip(path, "empty")
            continue
        trace.add(path, "global", content, trimmed)
        for later in present[idx + 1 :]:
            trace.skip(later, "shadowed")
        return trimmed
    return ""


def discover(bundle: Bundle, cwd: str, options: ResolveOptions, trace: Trace) -> list[str]:
    """The picked file of each directory from the project root down to ``cwd``."""
    root = find_root(bundle, cwd, options.root_markers)
    dirs = chain_down(root, cwd) if root is not None else [cwd]
    names = candidate_names(options.fallback_names)
    found: list[str] = []
    for directory in dirs:
        present = [join(directory, n) for n in names if bundle.is_file(join(directory, n))]
        if present:
            found.append(present[0])
            for other in present[1:]:
                trace.skip(other, "shadowed")
    return found


def _project_docs(bundle: Bundle, paths: list[str], budget: int, trace: Trace) -> list[str]:
    if budget == 0:
        for path in paths:
            trace.skip(path, "budget disabled")
        return []
    remaining = budget
    parts: list[str] = []
    for path in paths:
        if remaining == 0:
            trace.skip(path, "budget exhausted")
            continue
        content = bundle.text(path)
        raw_len = len(content.encode("utf-8"))
        take = min(raw_len, remaining)
        text = truncate_bytes(content, take)
        if not text.strip():
            trace.skip(path, "empty")
            continue
        parts.append(text)
        remaining -= take
        trace.add(path, "project", content, text, truncated=raw_len > take)
    return parts


def resolve(bundle: Bundle, cwd: str, options: ResolveOptions) -> Resolution:
    trace = Trace()
    global_text = _global(bundle, trace)
    paths = discover(bundle, cwd, options, trace)
    docs = "\n\n".join(_project_docs(bundle, paths, options.project_doc_max_bytes, trace))
    return trace.resolution(SEPARATOR.join(p for p in (global_text, docs) if p))
