"""OpenClaw: workspace bootstrap files (``loadWorkspaceBootstrapFiles`` and
``buildBootstrapContextFiles``).

Contract:

* Workspace root: the repo root. OpenClaw reads its agent workspace, not the shell's
  working directory, so ``cwd`` is validated and otherwise ignored.
* Files, in this fixed order: ``AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER.md,
  HEARTBEAT.md, BOOTSTRAP.md, MEMORY.md``. Session filter: ``subagent`` gets only
  ``AGENTS.md`` and ``TOOLS.md``; ``group`` never gets ``MEMORY.md``; ``main`` and ``cron``
  get all (a filtered file that exists is skipped ``session filter``).
* A missing file becomes the line ``[MISSING] <name>`` (a ``missing`` entry). A file is read
  with trailing whitespace removed; a blank one is skipped ``empty``.
* Per-file cap ``options.per_file_max_chars`` (and never more than what the total budget
  has left): an over-long file keeps its first 70% and last 20% of the cap (floored) around
  OpenClaw's two-line marker (``truncation_marker``), joined by newlines.
* Total cap ``options.total_max_chars``, spent by every injected character (markers and
  ``[MISSING]`` lines included): each piece is hard-cut to what is left; once nothing is
  left, or fewer than ``MIN_FILE_BUDGET`` characters are left for an existing file, that
  file and all later ones are skipped ``budget exhausted``.
* Text: the pieces joined with ``"\\n\\n"``. No ``## <path>`` headers are emitted.
"""

from __future__ import annotations

from app.core.bundles.common import Bundle, Trace, head_tail_sizes, tail
from app.core.bundles.model import Resolution, ResolveOptions

FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md",
         "BOOTSTRAP.md", "MEMORY.md")
SUBAGENT_FILES = ("AGENTS.md", "TOOLS.md")
GROUP_EXCLUDED = ("MEMORY.md",)
MIN_FILE_BUDGET = 64
Pieces = list[tuple[str, bool]]  # (text, is file content)


def allowed(name: str, session_type: str) -> bool:
    if session_type == "subagent":
        return name in SUBAGENT_FILES
    if session_type == "group":
        return name not in GROUP_EXCLUDED
    return True


def truncation_marker(name: str, head: int, tail_n: int, total: int) -> str:
    return (f"\n[...truncated, read {name} for full content...]\n"
            f"…(truncated {name}: kept {head}+{tail_n} chars of {total})…\n")


def trim(text: str, name: str, cap: int) -> Pieces:
    """``text`` (already right-stripped) within ``cap`` characters, as OpenClaw trims."""
    if len(text) <= cap:
        return [(text, True)]
    head, tail_n = head_tail_sizes(cap)
    marker = "\n" + truncation_marker(name, head, tail_n, len(text)) + "\n"
    return [(text[:head], True), (marker, False), (tail(text, tail_n), True)]


def clamp(pieces: Pieces, budget: int) -> tuple[str, str]:
    """(injected text, the file-content part of it) after a hard cut at ``budget``."""
    out: list[str] = []
    used: list[str] = []
    for piece, is_content in pieces:
        cut = piece[: max(0, budget)]
        budget -= len(cut)
        out.append(cut)
        if is_content:
            used.append(cut)
    return "".join(out), "".join(used)


def _one(bundle: Bundle, name: str, remaining: int, per_file: int,
         trace: Trace) -> str | None:
    """The injected text of one allowed file, or None when it is skipped."""
    if not bundle.is_file(name):
        text, _ = clamp([(f"[MISSING] {name}", False)], remaining)
        trace.add(name, "workspace", None, "")
        return text
    content = bundle.text(name)
    body = content.rstrip()
    if not body:
        trace.skip(name, "empty")
        return None
    text, used = clamp(trim(body, name, min(per_file, remaining)), remaining)
    trace.add(name, "workspace", content, used, truncated=len(used) < len(body))
    return text


def resolve(bundle: Bundle, session_type: str, options: ResolveOptions) -> Resolution:
    trace = Trace()
    parts: list[str] = []
    remaining = options.total_max_chars
    exhausted = False
    for name in FILES:
        if not allowed(name, session_type):
            if bundle.is_file(name):
                trace.skip(name, "session filter")
            continue
        low = bundle.is_file(name) and remaining < MIN_FILE_BUDGET
        exhausted = exhausted or remaining <= 0 or low
        if exhausted:
            trace.skip(name, "budget exhausted")
            continue
        text = _one(bundle, name, remaining, options.per_file_max_chars, trace)
        if text is not None:
            parts.append(text)
            remaining -= len(text)
    return trace.resolution("\n\n".join(parts))
