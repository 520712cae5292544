"""OpenClaw: workspace bootstrap files (``src/agents/workspace.ts``
``loadWorkspaceBootstrapFiles`` / ``filterBootstrapFilesForSession``, then
``src/agents/pi-embedded-helpers/bootstrap.ts`` ``buildBootstrapContextFiles`` and the
``# Project Context`` block of ``src/agents/system-prompt.ts``), as of the openclaw/openclaw
sources cited in ``tests/unit/test_bundles_openclaw.py``: the era whose cron allowlist is
AGENTS, TOOLS, SOUL, IDENTITY, USER. The npm release 2026.9.6 has since dropped TOOLS.md and
HEARTBEAT.md from the bootstrap set, narrowed the subagent and cron allowlists, skips an
absent USER.md too, and truncates differently (marker inside the cap, a policy digest for
AGENTS.md); that release is not modelled here.

Contract:

* Workspace root: the repo root. OpenClaw reads its agent workspace, not the shell's
  working directory, so ``cwd`` is validated and otherwise ignored. A file's path is its
  bundle path (OpenClaw prints the absolute path inside its workspace directory).
* Files, in this fixed order: ``AGENTS.md, SOUL.md, TOOLS.md, IDENTITY.md, USER.md,
  HEARTBEAT.md, BOOTSTRAP.md, MEMORY.md``. ``MEMORY.md`` is listed only when it exists;
  absent, it is skipped ``optional, absent`` and leaves no line.
* Session filter (an allowlist per session kind): ``subagent`` gets ``AGENTS.md,
  TOOLS.md``; ``cron`` gets ``AGENTS.md, TOOLS.md, SOUL.md, IDENTITY.md, USER.md``;
  ``group`` (a shared channel) gets every file but ``MEMORY.md``; ``main`` gets all. A
  filtered file that exists is skipped ``session filter``.
* Any other allowed file that is missing reads ``[MISSING] Expected at: <path>`` (a
  ``missing`` entry). A file is read with trailing whitespace removed; a blank one is
  skipped ``empty``.
* Per-file cap ``options.per_file_max_chars`` (never more than the total budget has
  left): an over-long file keeps its first 70% and last 20% of the cap (floored) around
  OpenClaw's two-line marker (``truncation_marker``), joined by newlines.
* Total cap ``options.total_max_chars``, spent by every injected body (``[MISSING]`` lines
  included, headers not): a body longer than what is left is cut to one character less
  than that and ends with ``…`` (a budget of 3 or less is a plain cut). Once nothing is
  left, or fewer than ``MIN_FILE_BUDGET`` characters are left for an existing file, that
  file and all later ones are skipped ``budget exhausted``. Lengths are counted in code
  points (OpenClaw counts UTF-16 units, which differ only for characters beyond U+FFFF).
* Text: ``# Project Context`` and OpenClaw's loaded-files line (plus its SOUL.md persona
  line when SOUL.md is among the files), then each file as ``## <path>`` followed by its
  body. OpenClaw drops empty lines from that list before joining it with ``\\n``, so no
  blank line separates the parts. Nothing loaded: empty text.
"""

from __future__ import annotations

from app.core.bundles.common import Bundle, Trace, head_tail_sizes, tail
from app.core.bundles.model import Resolution, ResolveOptions

FILES = ("AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md",
         "BOOTSTRAP.md", "MEMORY.md")
MEMORY = "MEMORY.md"
ALLOWLISTS: dict[str, frozenset[str]] = {
    "subagent": frozenset({"AGENTS.md", "TOOLS.md"}),
    "cron": frozenset({"AGENTS.md", "TOOLS.md", "SOUL.md", "IDENTITY.md", "USER.md"}),
    "group": frozenset(FILES) - {MEMORY},
    "main": frozenset(FILES),
}
MIN_FILE_BUDGET = 64
ELLIPSIS = "…"
HEADER = ("# Project Context\nThe following project context files have been loaded:")
SOUL_LINE = ("If SOUL.md is present, embody its persona and tone. Avoid stiff, generic replies; "
             "follow its guidance unless higher-priority instructions override it.")
Pieces = list[tuple[str, bool]]  # (text, is file content)


def missing_line(path: str) -> str:
    return f"[MISSING] Expected at: {path}"


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
    """(injected body, the file-content part of it) within ``budget`` characters: a body
    that does not fit keeps ``budget - 1`` characters and an ellipsis (a plain cut when
    ``budget`` is 3 or less)."""
    whole = "".join(piece for piece, _ in pieces)
    keep = len(whole) if len(whole) <= budget else budget if budget <= 3 else budget - 1
    suffix = ELLIPSIS if keep < len(whole) and budget > 3 else ""
    out: list[str] = []
    used: list[str] = []
    for piece, is_content in pieces:
        cut = piece[: max(0, keep)]
        keep -= len(cut)
        out.append(cut)
        if is_content:
            used.append(cut)
    return "".join(out) + suffix, "".join(used)


def _one(bundle: Bundle, name: str, remaining: int, per_file: int,
         trace: Trace) -> str | None:
    """The injected body of one allowed file, or None when it is skipped."""
    if not bundle.is_file(name):
        body, _ = clamp([(missing_line(name), False)], remaining)
        trace.add(name, "workspace", None, "")
        return body
    content = bundle.text(name)
    text = content.rstrip()
    if not text:
        trace.skip(name, "empty")
        return None
    body, used = clamp(trim(text, name, min(per_file, remaining)), remaining)
    trace.add(name, "workspace", content, used, truncated=len(used) < len(text))
    return body


def _candidates(bundle: Bundle, session_type: str, trace: Trace) -> list[str]:
    """The files OpenClaw lists for this session, in order."""
    allowed = ALLOWLISTS[session_type]
    out: list[str] = []
    for name in FILES:
        if name == MEMORY and not bundle.is_file(name):
            trace.skip(name, "optional, absent")
        elif name not in allowed:
            if bundle.is_file(name):
                trace.skip(name, "session filter")
        else:
            out.append(name)
    return out


def render(sections: list[tuple[str, str]]) -> str:
    """The ``# Project Context`` block for ``(path, body)`` sections ("" for none)."""
    if not sections:
        return ""
    lines = [HEADER]
    if any(path.rsplit("/", 1)[-1].lower() == "soul.md" for path, _ in sections):
        lines.append(SOUL_LINE)
    for path, body in sections:
        lines += [f"## {path}", body]
    return "\n".join(line for line in lines if line)


def resolve(bundle: Bundle, session_type: str, options: ResolveOptions) -> Resolution:
    trace = Trace()
    sections: list[tuple[str, str]] = []
    remaining = options.total_max_chars
    exhausted = False
    for name in _candidates(bundle, session_type, trace):
        low = bundle.is_file(name) and remaining < MIN_FILE_BUDGET
        exhausted = exhausted or remaining <= 0 or low
        if exhausted:
            trace.skip(name, "budget exhausted")
            continue
        body = _one(bundle, name, remaining, options.per_file_max_chars, trace)
        if body is not None:
            sections.append((name, body))
            remaining -= len(body)
    return trace.resolution(render(sections))
